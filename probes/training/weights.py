"""Trained weights on disk: safetensors only, and loading never runs code the caller did not
name.

``precision run SUITE`` keeps every trained job's final weights (the values of the training
dtype) in ``STORE.weights/<job id>.safetensors`` (``--save-weights DIR``: in ``DIR``) with the
job config and the training record in the file's metadata; :func:`load_trained_model`
rebuilds the model from that config and loads the weights (a later measurement of the job
reads them instead of training: :func:`probes.training.measure.trained_model`). A
safetensors file is a JSON header and raw tensor bytes: nothing in it is executed (a pickle,
or any other file, is refused with a one-line :class:`WeightsError`).

The metadata only describes the model. A built-in family (:data:`precision.models.MODELS`,
the project's own code) is rebuilt by name; a model of a user factory (``MODULE:FACTORY``)
is rebuilt only from the factory the caller passes (``factory=``): the module or ``.py`` file
the metadata names is compared with it, never imported. Malformed metadata or a header whose
tensors do not fit the model (a wrong name, shape or dtype, a size over
:data:`MAX_WEIGHTS_BYTES`) is a one-line :class:`WeightsError` before any tensor is read or
any model allocated: the model is first built on PyTorch's ``meta`` device, which allocates
nothing. Workers write the files (atomically: a temporary file, then a rename); the store
never holds weights.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from probes.store.atomic import expand_user

#: Largest tensor data a weights file may declare (a header asking for more is refused).
MAX_WEIGHTS_BYTES = 4 * 2**30
#: Largest JSON header read from a weights file.
MAX_HEADER_BYTES = 16 * 2**20
#: Largest width, task dim / n or test size a job config may hold.
MAX_JOB_SIZE = 1_000_000
#: Largest depth a job config may hold (the model is first built layer by layer on ``meta``).
MAX_JOB_DEPTH = 10_000

#: safetensors dtype names -> (torch dtype, bytes per element).
_DTYPES: dict[str, tuple[torch.dtype, int]] = {
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
    "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}

Factory = Callable[..., nn.Module]


class WeightsError(ValueError):
    """A weights file that cannot be read or does not fit its model (one line)."""


def save_weights(model: nn.Module, path: str | Path, job: dict[str, Any],
                 training: dict[str, Any] | None = None) -> Path:
    """Write ``model``'s parameters and buffers to ``path`` (safetensors, atomically) with
    ``job`` (the job config) and ``training`` (what the training measured: its curves, stop
    reason and convergence check, so that a later measurement of the job needs no training)
    as JSON metadata."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    meta = {"job": json.dumps(job, sort_keys=True)}
    if training is not None:
        meta["training"] = json.dumps(training, sort_keys=True)
    write_tensor_file(path, tensors, meta)
    return path


def write_tensor_file(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, str]
                      ) -> None:
    """``path`` holds ``tensors`` and ``meta`` as a safetensors file, written atomically
    (:func:`probes.store.atomic.atomic_write`: complete or untouched, a killed write's
    leftover removed by the next write of the same path). An ``OSError`` (a full disk, a
    read-only folder) propagates; safetensors' own errors of the tensors are ValueError."""
    from safetensors import SafetensorError
    from safetensors.torch import save

    from probes.store.atomic import atomic_write

    try:
        data = save(tensors, metadata=meta)
    except SafetensorError as exc:
        raise ValueError(f"cannot write {path}: {(str(exc).splitlines() or [''])[0]}") \
            from None
    with atomic_write(path, "wb") as fh:
        fh.write(data)


def read_header(path: str | Path) -> tuple[dict[str, tuple[str, tuple[int, ...]]],
                                           dict[str, str]]:
    """The tensors a safetensors file declares (name -> (dtype name, shape)) and its
    metadata, checked without reading any tensor: the header's JSON and every entry's dtype,
    shape and byte range (inside the file, consistent with the shape, in total at most
    :data:`MAX_WEIGHTS_BYTES`). WeightsError (one line) otherwise."""
    path = expand_user(path)
    if not path.is_file():
        raise WeightsError(f"no weights file at {path}")
    not_safetensors = f"{path} is not a safetensors weights file"
    never = "only safetensors is loaded, never pickle"
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            prefix = f.read(8)
            n = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
            if not 2 <= n <= min(MAX_HEADER_BYTES, size - 8):
                raise WeightsError(f"{not_safetensors} (no valid header length); {never}")
            text = f.read(n)
    except OSError as exc:
        raise WeightsError(f"cannot read weights file {path}: {exc.strerror or exc}") from None
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise WeightsError(f"{not_safetensors} (its header is not JSON); {never}") from None
    if not isinstance(header, dict):
        raise WeightsError(f"{not_safetensors} (its header is not a JSON object); {never}")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise WeightsError(f"{path}: malformed safetensors metadata (not a table of strings)")
    data = size - 8 - n
    specs: dict[str, tuple[str, tuple[int, ...]]] = {}
    total = 0
    for name, entry in header.items():
        bad = _entry_problem(entry, data)
        if bad:
            raise WeightsError(f"{path}: malformed safetensors header: tensor {name!r} {bad}")
        numel = 1
        for d in entry["shape"]:
            numel *= d
        total += numel * _DTYPES[entry["dtype"]][1]
        if total > MAX_WEIGHTS_BYTES:
            raise WeightsError(f"{path}: its tensors would take more than "
                               f"{MAX_WEIGHTS_BYTES / 2**30:.0f} GiB; refused before reading")
        specs[name] = (entry["dtype"], tuple(entry["shape"]))
    return specs, meta


def _entry_problem(entry: Any, data_bytes: int) -> str | None:
    """What is wrong with one tensor entry of a safetensors header, or None."""
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        return "lacks dtype, shape or data_offsets"
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        return f"has dtype {dtype!r} (known: {', '.join(_DTYPES)})"
    if not isinstance(shape, list) or not all(_nonneg_int(d) for d in shape):
        return f"has shape {shape!r}, not a list of non-negative integers"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_nonneg_int, offsets))
            and offsets[0] <= offsets[1] <= data_bytes):
        return f"has data_offsets {offsets!r} outside the file's {data_bytes} data bytes"
    numel = 1
    for d in shape:
        numel *= d
    if numel * _DTYPES[dtype][1] != offsets[1] - offsets[0]:
        return (f"declares shape {tuple(shape)} of {dtype} ({numel * _DTYPES[dtype][1]} "
                f"bytes) but holds {offsets[1] - offsets[0]} bytes")
    return None


def _nonneg_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def load_weights(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and job config of a safetensors weights file (``~`` and paths relative to
    the working directory are accepted); WeightsError (one line) otherwise."""
    from safetensors import SafetensorError, safe_open

    path = expand_user(path)
    _, meta = read_header(path)
    job = _job_config(path, meta)
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except (SafetensorError, OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise WeightsError(f"{path} is not a safetensors weights file ({first}); only "
                           "safetensors is loaded, never pickle") from None
    return tensors, job


#: Job config fields: name -> (required, check, what it must be).
_JOB_FIELDS: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "family": (True, lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "task": (True, lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "depth": (True, lambda v: _nonneg_int(v) and v <= MAX_JOB_DEPTH,
              f"an integer in [0, {MAX_JOB_DEPTH}]"),
    "width": (True, lambda v: _nonneg_int(v) and v <= MAX_JOB_SIZE,
              f"an integer in [0, {MAX_JOB_SIZE}]"),
    "seed": (False, _nonneg_int, "a non-negative integer"),
    "test_size": (False, lambda v: _nonneg_int(v) and v <= MAX_JOB_SIZE,
                  f"an integer in [0, {MAX_JOB_SIZE}]"),
    "iterate": (False, lambda v: _nonneg_int(v) and v <= MAX_JOB_SIZE,
                f"an integer in [0, {MAX_JOB_SIZE}]"),
    "train": (True, lambda v: isinstance(v, dict), "a table"),
    "task_options": (False, lambda v: isinstance(v, dict), "a table"),
    "model_options": (False, lambda v: isinstance(v, dict), "a table"),
    "entry": (False, lambda v: isinstance(v, str), "a string"),
    "solver": (False, lambda v: isinstance(v, str), "a string"),  # the entry, before v4
    "problem_label": (False, lambda v: isinstance(v, str), "a string"),
    "suite": (False, lambda v: isinstance(v, str), "a string"),
}


def _job_config(path: Path, meta: dict[str, str]) -> dict[str, Any]:
    """The job config in a weights file's metadata, checked field by field."""
    if "job" not in meta:
        raise WeightsError(f"{path} has no job config in its metadata (not written by "
                           "precision)")
    try:
        job = json.loads(meta["job"])
    except (json.JSONDecodeError, RecursionError):
        raise WeightsError(f"{path}: the job config in its metadata is not JSON") from None
    if not isinstance(job, dict):
        raise WeightsError(f"{path}: the job config in its metadata is not a JSON object")
    for name, (required, check, what) in _JOB_FIELDS.items():
        if name not in job:
            if required:
                raise WeightsError(f"{path}: the job config in its metadata lacks '{name}'")
            continue
        if not check(job[name]):
            raise WeightsError(f"{path}: job config field '{name}' is {job[name]!r:.60}, "
                               f"not {what}")
    for key in ("dim", "n"):
        value = job.get("task_options", {}).get(key)
        if value is not None and not (_nonneg_int(value) and value <= MAX_JOB_SIZE):
            raise WeightsError(f"{path}: job config task_options.{key} is {value!r:.60}, not "
                               f"an integer in [0, {MAX_JOB_SIZE}]")
    return job


def weights_job(path: str | Path) -> dict[str, Any]:
    """The job config a weights file was trained from, checked field by field (only the
    header is read: no tensor, no model, no code); WeightsError (one line) otherwise."""
    path = expand_user(path)
    _, meta = read_header(path)
    return _job_config(path, meta)


@contextlib.contextmanager
def training_lock(path: Path) -> Iterator[None]:
    """Held while a job's weights file ``path`` is read, trained or written: two workers (a
    job's trained run and its length run, two Dask workers, two sweeps on one store) that
    want the same job train it once, the second reading what the first kept. An exclusive
    ``flock`` on ``.<file name>.lock`` beside it (left there: removing it would race); a
    folder where no lock file can be made (read-only) goes on unlocked."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # releases the lock


def check_job(path: str | Path, job_config: dict[str, Any]) -> None:
    """WeightsError (one line) unless the weights file ``path`` holds the job whose stored
    config is ``job_config`` (the record that names the file): a file swapped for another
    job's, or renamed, is never used for this one. Only the header is read."""
    have = weights_job(path)
    if have != json.loads(json.dumps(job_config)):
        from probes.store.canonical import config_hash

        raise WeightsError(f"{path} holds the weights of another job (id "
                           f"{config_hash(have)}), not this record's (id "
                           f"{config_hash(job_config)}); it is not used")


def check_finite(path: str | Path, tensors: dict[str, torch.Tensor]) -> None:
    """WeightsError unless every float tensor of a weights file is finite: a run stores its
    weights only when its training ended finite (a diverged run keeps none), so a NaN or an
    Inf there is damage to the file, not a result."""
    for name, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise WeightsError(f"{path} is damaged: tensor {name!r} holds NaN or Inf, which "
                               "no stored training leaves; it is not used")


def load_trained_model(path: str | Path, factory: Factory | str | None = None,
                       ) -> tuple[nn.Module, dict[str, Any]]:
    """The trained model of a weights file (rebuilt from its job config, weights loaded,
    eval mode, the file's dtype) and that job config.

    A built-in family is rebuilt by name. A model trained from a user factory needs
    ``factory``: the callable (or a ``MODULE:FACTORY`` spec the caller writes, imported as
    ``precision probe`` would) -- the factory the file's metadata names is never imported,
    only compared with the one given (a different name is a warning). ``factory`` also
    replaces a built-in family when given. WeightsError (one line) for a file that is not
    safetensors, malformed metadata, a missing factory, or tensors that do not fit the
    model (checked on the ``meta`` device, before anything is allocated).
    """
    from precision.models import MODELS
    from precision.tasks import TaskError
    from probes.factory import FactoryError, load_factory
    from probes.training.job import Job

    path = expand_user(path)
    specs, meta = read_header(path)
    job = _job_config(path, meta)
    family = job["family"]
    if factory is None and family not in MODELS:
        raise WeightsError(
            f"{path} holds a model of the factory '{family}', which loading never imports: "
            "pass the factory yourself, load_trained_model(path, factory=...)")
    try:
        fn = load_factory(factory) if isinstance(factory, str) else factory
    except FactoryError as exc:
        raise WeightsError(str(exc)) from None
    if fn is not None and not callable(fn):
        raise WeightsError(f"factory must be callable, not {type(fn).__name__}")
    if fn is not None and ":" in family:
        named, given = family.rpartition(":")[2], getattr(fn, "__name__", repr(fn))
        if named != given:
            warnings.warn(f"{path} was trained with factory '{family}'; loading it with "
                          f"'{given}'", stacklevel=2)
    try:
        job_ = replace(Job.from_config(job), family=fn if fn is not None else family)
    except (TypeError, ValueError) as exc:
        raise WeightsError(f"{path}: malformed job config ({exc})") from None
    _check_fits(path, job_, specs)
    try:
        _, model = job_.build()
    except (FactoryError, TaskError, ValueError, TypeError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise WeightsError(f"{path}: cannot rebuild the model of its job config: {first}") \
            from None
    dtypes = {_DTYPES[d][0] for d, _ in specs.values() if _DTYPES[d][0].is_floating_point}
    if len(dtypes) == 1:
        model = model.to(dtypes.pop())
    tensors, _ = load_weights(path)
    check_finite(path, tensors)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise WeightsError(f"{path} does not fit the model of its job config: {first}") \
            from None
    return model.eval(), job


def _check_fits(path: Path, job: Any, specs: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """WeightsError unless the tensors the header declares are exactly the model's state
    (names and shapes), checked on a model built on the ``meta`` device (nothing
    allocated). A user factory that cannot build on ``meta`` is checked after loading."""
    from precision.tasks import TaskError, make_task
    from probes.factory import build_family

    try:
        task_opts = dict(job.task_options)
        if job.task == "read":
            task_opts.setdefault("causal", bool(job.model_options.get("causal", True)))
        task = make_task(job.task, seed=job.seed, **task_opts)
    except (TaskError, TypeError, ValueError) as exc:
        raise WeightsError(f"{path}: the task of its job config is invalid: {exc}") from None
    try:
        with torch.device("meta"):
            model = build_family(job.family, task.d_in, task.d_out, job.depth, job.width,
                                 task.n_tokens, job.model_options, check=False)
    except Exception as exc:  # noqa: BLE001 - rebuilt for real (and reported) below
        if not callable(job.family):
            first = (str(exc).splitlines() or [""])[0]
            raise WeightsError(f"{path}: cannot rebuild the model of its job config: "
                               f"{first}") from None
        return
    if not isinstance(model, nn.Module):
        return
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    have = {k: shape for k, (_, shape) in specs.items()}
    if want != have:
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        shapes = sorted(k for k in set(want) & set(have) if want[k] != have[k])
        what = (f"missing {missing[0]}" if missing else f"unexpected {extra[0]}" if extra
                else f"{shapes[0]} is {have[shapes[0]]}, the model's {want[shapes[0]]}")
        raise WeightsError(f"{path} does not fit the model of its job config: {what}")
