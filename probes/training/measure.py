"""One trained-model run: build, train, evaluate in every precision, decompose the error.

A *job* is (model family + options, depth, width, task, training recipe, seed). It trains
once (:mod:`probes.training.recipes`) and then measures the trained weights on a fixed seeded
test
set in each evaluation precision p:

  total         = f_p(x_p) - y*(x_p)       the test MSE in p
  approximation = f_mp100(x_p) - y*(x_p)   what the weights represent
  rounding      = f_p(x_p) - f_mp100(x_p)  what p's arithmetic loses

where x_p is the test input rounded into p and y* the task's exact target of x_p. For the
explicit-gradient task (001 Sec. 5.1.2) the trained model is also *iterated* in p,
w_{t+1} = w_t - eta Delta_t with Delta_t = model(context, w_t), and the MSE of w_t against
the OLS solution per iteration is a trace whose floor the detector measures.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from precision import deterministic
from precision.backends import backend_for
from precision.backends.interpreter import UnsupportedOpError
from precision.backends.mp_backend import exact_array
from precision.backends.torch_backend import round_to_dtype
from precision.evaluate import evaluate_exact, reference_digits
from precision.formats.simulate import round_tensor
from precision.invariants import NONFINITE
from precision.metrics import Floor, decompose, detect_floor, error_summary
from precision.precisions import Precision, seeded_by
from precision.reference import MODEL_REFERENCE
from precision.tasks import Task, gradient_query_row
from precision.truth import least_squares_truth, truth_bits
from probes.factory import is_factory_spec
from probes.store.canonical import config_hash
from probes.training.checkpoint import Checkpoint
from probes.training.convergence_check import Check, convergence_check
from probes.training.job import Job
from probes.training.recipes import TrainResult, train
from probes.training.warm_start import contained_start
from probes.training.weights import (
    WeightsError,
    check_job,
    load_trained_model,
    read_header,
    save_weights,
    training_lock,
)

#: The high precision the decomposition's f_mp is computed in.
REFERENCE_PRECISION = MODEL_REFERENCE
#: Offset between the training seed and the test-set seed (the test set never overlaps).
TEST_SEED_OFFSET = 1_000_003


def limit_label(converged: bool | None, log10_approximation: float, log10_rounding: float
                ) -> str:
    """What limits a trained cell: ``R`` when rounding dominates (the arithmetic is the
    limit whatever the training did), else ``T`` when training did not converge
    (``converged`` False: the held-out curve still falls or the convergence check lowers
    it), else ``A``. Runs stored before validation curves existed (``converged`` None) get
    A / R."""
    if log10_rounding > log10_approximation:
        return "R"
    return "T" if converged is False else "A"


@dataclass
class PrecisionOutcome:
    """What one evaluation precision measured. ``label``, ``converged``, ``check``: the
    cell's label (:func:`limit_label`: T / A / R; None when not ok), whether training
    converged, and the convergence check's evidence (gain, drift, curvature, power), as
    the tables print them (set by the Python API's :func:`probes.api.probe`)."""

    precision: str
    status: str                      # "ok" | "diverged" | "failed"
    error: str | None
    total: float | None = None       # MSE
    log10_total: float | None = None
    log10_approximation: float | None = None
    log10_rounding: float | None = None
    digits: float | None = None
    iterate_trace: list[float] = field(default_factory=list)   # log10 MSE per iteration
    floor: Floor | None = None
    truth_digits: float | None = None  # certain digits of the mp100 reference (mp200 check)
    label: str | None = None
    converged: bool | None = None
    check: Check | None = None


@dataclass
class TrainedOutcome:
    """The training result and one :class:`PrecisionOutcome` per evaluation precision."""

    training: TrainResult
    per_precision: list[PrecisionOutcome]
    n_params: int
    task: str
    wall_time: float
    #: Why the weights could not be saved (one line; None: saved, or not asked for).
    weights_error: str | None = None
    #: The convergence check of the trained weights (None: training failed).
    check: Check | None = None
    #: The training precision's gradient error by module (``Job.gradient_error``; None: not
    #: asked for, or training failed).
    gradient_error: dict[str, Any] | None = None


def _rounded_inputs(x: torch.Tensor, p: Precision) -> torch.Tensor:
    """x (float64) rounded into precision p, as exact float64 values: the inputs the model
    sees in p, from which its truth is computed. An mpN of fewer than 53 bits rounds too
    (its values still fit a float64 exactly); mpN of 53 bits or more holds x as it is."""
    if p.is_simulated:
        return round_tensor(x, p).to(torch.float64)
    if not p.is_mp:
        return round_to_dtype(x, p.torch_dtype).to(torch.float64)
    if p.bits >= 53:
        return x
    rounded = backend_for(p).to_exact(backend_for(p).asarray(x.numpy()))
    return torch.tensor([float(v) for v in rounded.reshape(-1)],
                        dtype=torch.float64).reshape(x.shape)


def log10_or_none(x: float | None) -> float | None:
    """A log10 error as stored: -inf (an exact zero: no error at all) is kept, so a
    decomposition whose rounding part is exactly 0 still says which part dominates; NaN and
    +inf become None."""
    return None if x is None or math.isnan(x) or x == math.inf else x


def measure_precision(model: nn.Module, task: Task, x: torch.Tensor,
                      p: Precision,
                      ref_cache: dict[bytes, tuple[np.ndarray, float] | None],
                      device: str = "cpu") -> PrecisionOutcome:
    """Test MSE of ``model`` in ``precision`` (a float precision on ``device``) and its
    decomposition (module docstring), with the reference's certain digits (mp100 against
    mp200 on one test sequence, :mod:`precision.reference`); a module the mp interpreter
    cannot run gets the total error without the decomposition. ``ref_cache``: the reference
    and its digits per rounded test input."""
    xp_ = _rounded_inputs(x, p)
    x_exact = exact_array(xp_.numpy())
    truth = task.evaluated(task.truth(x_exact, truth_bits(p)))
    f_p = task.evaluated(task.select(evaluate_exact(model, xp_, p, device)))
    key = xp_.numpy().tobytes()
    if key not in ref_cache:
        try:
            raw = evaluate_exact(model, xp_, REFERENCE_PRECISION)
            ref_cache[key] = (task.evaluated(task.select(raw)),
                              reference_digits(model, xp_, raw, REFERENCE_PRECISION))
        except UnsupportedOpError:  # no mp path (a user module's op): total error only
            ref_cache[key] = None
    cached = ref_cache[key]
    truth_digits = None if cached is None else cached[1]
    if cached is None:
        total, approx, rounding = error_summary(f_p, truth), None, None
    else:
        parts = decompose(f_p, cached[0], truth)
        total = parts["total"]
        approx, rounding = parts["approximation"].log10_mse, parts["rounding"].log10_mse
    if not math.isfinite(total.mse):
        return PrecisionOutcome(p.name, NONFINITE, f"model output not finite in {p.name} (an "
                                "overflow or NaN of the evaluation; training was fine)")
    return PrecisionOutcome(
        p.name, "ok", None, total=total.mse, log10_total=total.log10_mse,
        log10_approximation=log10_or_none(approx), log10_rounding=log10_or_none(rounding),
        digits=total.digits, truth_digits=truth_digits)


def iterate_gradient(model: nn.Module, task: Task, x: torch.Tensor, p: Precision,
                     iters: int, device: str = "cpu") -> list[float]:
    """001 Sec. 5.1.2 inference: w_{t+1} = w_t - eta Delta_t with the model's gradient
    Delta_t, all arithmetic in ``precision``; log10 MSE of w_t against OLS per iteration.

    x: the explicit-gradient test inputs (batch, N + 1, width); their last token's w_0 starts
    the iteration. eta = 2 / (lambda_min + lambda_max) of X^T X / N per sequence (the best
    fixed GD step; the paper does not state its eta), rounded to a power of two's multiple in
    float64 and applied in ``precision``.
    """
    xb = backend_for(p)
    n, d = task.options["n"], task.options["dim"]
    ctx = exact_array(_rounded_inputs(x[:, :n], p).numpy())          # context rows, rounded
    Xr = x[:, :n, :d].numpy()
    etas = []
    for X in Xr:      # no BLAS or LAPACK: the same step, so the same mpN trace, everywhere
        ev = deterministic.eigvalsh(deterministic.matmul(X.T, X) / n)
        etas.append(float(np.float32(2.0 / (ev[0] + ev[-1]))))     # exact in every precision
    bits = truth_bits(p)
    w_star = [least_squares_truth(c[:, :d], c[:, d], bits) for c in ctx]
    w = [xb.asarray(exact_array(_rounded_inputs(x[b:b + 1, n, :d], p).numpy()[0]))
         for b in range(x.shape[0])]
    steps = [xb.asarray(exact_array(np.array(eta))) for eta in etas]
    row = exact_array(gradient_query_row(torch.zeros(x.shape[0], d), x.shape[-1]).numpy())
    trace = []
    for _ in range(iters):
        row[:, 0, :d] = np.stack([xb.to_exact(wb) for wb in w])      # the last token: w_t
        delta = task.select(evaluate_exact(model, np.concatenate([ctx, row], axis=1), p, device))
        w = [w[b] - steps[b] * xb.asarray(delta[b]) for b in range(len(w))]
        est = np.stack([xb.to_exact(wb) for wb in w])
        trace.append(error_summary(est, np.stack(w_star)).log10_mse)
        if not math.isfinite(trace[-1]):
            break
    return trace


#: Trainings done in this process (a measurement of a job whose weights are stored trains
#: nothing: the tests and the bench read this).
TRAININGS = 0


@dataclass
class TrainedModel:
    """A job's trained model: its ``task``, the ``model`` (float64, eval mode), the training's
    ``result`` (its curves, stop reason and, when it trained ``ok``, the convergence check
    that labels it), why its weights could not be written (``weights_error``) and whether
    they were read from a weights file instead of trained (``loaded``)."""

    task: Task
    model: nn.Module
    result: TrainResult
    weights_error: str | None = None
    loaded: bool = False


def weights_path(folder: str | Path, job_config: dict[str, Any]) -> Path:
    """Where the weights of the job whose config is ``job_config`` live in ``folder``:
    ``<job id>.safetensors``, the job id being the hash of its config."""
    return Path(folder) / f"{config_hash(job_config)}.safetensors"


def trained_model(job: Job, device: str = "cpu", *, folder: str | Path | None = None,
                  job_config: dict[str, Any] | None = None,
                  checkpoint: Checkpoint | None = None, check: bool = True) -> TrainedModel:
    """The model of ``job``, trained once: read from ``folder``'s weights file of the job
    (``job_config``: its stored config, whose hash names the file) when one is there and
    holds this job, else trained on ``device`` (seeded: every training gives the same
    weights) and written there. With ``check``, its convergence check labels the result
    (run once, then kept in the file too; a length sweep needs no label and skips it). A
    file that cannot be written (a full disk) is ``weights_error``, and the measurement goes
    on. ``checkpoint``: the training's state (:func:`~probes.training.recipes.train`;
    raises :class:`~probes.training.checkpoint.Paused` at the end of its slice)."""
    path = weights_path(folder, job_config) if folder is not None and job_config else None
    if path is None:
        return _trained_model(job, device, None, folder, job_config, checkpoint, check)
    with training_lock(path):   # one worker trains a job; another reads what it kept
        return _trained_model(job, device, path, folder, job_config, checkpoint, check)


def _trained_model(job: Job, device: str, path: Path | None, folder: str | Path | None,
                   job_config: dict[str, Any] | None, checkpoint: Checkpoint | None,
                   check: bool) -> TrainedModel:
    """:func:`trained_model` with its weights file ``path`` (None: none) locked."""
    loaded = _load(job, path, job_config) if path is not None and path.is_file() else None
    if loaded is None:
        global TRAININGS
        TRAININGS += 1
        task, model, raw = train_job(job, device, checkpoint, folder=folder,
                                     job_config=job_config)
        kept = None
    else:
        task, model, raw, kept = loaded
    result, save = raw, loaded is None
    if check and raw.status == "ok":   # the label's evidence: converged only if it passes
        # a floor training stopped at was confirmed by the same check of the same weights
        found = kept or raw.check
        kept = found or convergence_check(model, task.sample, lambda m, x: task.select(m(x)),
                                          replace(job.train, seed=job.seed, device=device))
        save = save or found is None
        # converged: the held-out curve stopped falling (or has too few points to say) AND
        # the check cannot lower it: a plateau alone can be a saddle, and a check alone
        # missed a falling curve (a LayerNorm Transformer on AFFINE at 0.98 after 200 steps)
        result = replace(raw, check=kept, converged=kept.converged and raw.converged is not False)
    weights_error = None
    if save and path is not None and job_config is not None and raw.status == "ok":
        weights_error = _save(model, path, job_config, raw, kept)
    return TrainedModel(task, model.double().eval(), result, weights_error, loaded is not None)


def _load(job: Job, path: Path, job_config: dict[str, Any] | None
          ) -> tuple[Task, nn.Module, TrainResult, Check | None] | None:
    """The task, trained model (in its training dtype), training result and kept convergence
    check of ``job`` from its weights file, or None when the file does not hold this job's
    trained weights and training record (then the job trains again)."""
    try:
        check_job(path, job_config)   # the header alone: no tensor is read for another job
        _, meta = read_header(path)
        record = json.loads(meta["training"])
        raw = training_result(record["training"])
        check = None if record.get("check") is None else Check(**record["check"])
        model, _ = load_trained_model(
            path, factory=job.family if is_factory_spec(job.family) else None)
    except (WeightsError, ValueError, TypeError, KeyError, RecursionError):
        return None
    return job.build_task(), model, raw, check


def training_result(record: dict[str, Any]) -> TrainResult:
    """The :class:`TrainResult` whose JSON data (``dataclasses.asdict``) is ``record``."""
    pairs = ("curve", "lr_trace", "val_curve")
    fields = {k: ([tuple(x) for x in v] if k in pairs else v) for k, v in record.items()}
    check = fields.pop("check", None)
    return TrainResult(**fields, check=None if check is None else Check(**check))


def run_trained(job: Job, precisions: Sequence[Precision], *,
                save_as: dict[str, Any] | None = None, device: str = "cpu",
                weights_dir: str | Path | None = None,
                checkpoint: Checkpoint | None = None) -> TrainedOutcome:
    """Train ``job`` (or read its trained weights: :func:`trained_model`) and measure it in
    each of ``precisions``, training and float evaluation on ``device``
    (:mod:`precision.devices`; mpN on the CPU). With ``weights_dir``, a job of a suite
    (``save_as``: its config) keeps its weights in ``weights_dir/<hash of save_as>.safetensors``
    with ``save_as`` and the training record as the file's metadata. ``checkpoint``: see
    :func:`trained_model`."""
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: 1 thread beats 2 (see docs/architecture.md)
    try:
        trained = trained_model(job, device, folder=weights_dir, job_config=save_as,
                                checkpoint=checkpoint)
        return _measure(job, trained, list(precisions), t0, device)
    finally:
        torch.set_num_threads(threads)


def _save(model: nn.Module, path: Path, job_config: dict[str, Any], raw: TrainResult,
          check: Check | None) -> str | None:
    """Save the weights of a suite's job with its training record (the training's result as
    it ended, and its convergence check when run); None, or why it failed (one line; the
    partial temporary file removed)."""
    try:
        save_weights(model, path, job_config, {"training": asdict(raw),
                                               "check": None if check is None else asdict(check)})
    except (OSError, ValueError) as exc:   # a full disk: nothing half-written is left
        text = getattr(exc, "strerror", None) or (str(exc).splitlines() or [""])[0]
        return f"weights not saved to {path.parent}: {text or type(exc).__name__}"
    return None


def train_job(job: Job, device: str = "cpu", checkpoint: Checkpoint | None = None, *,
              folder: str | Path | None = None, job_config: dict[str, Any] | None = None
              ) -> tuple[Task, nn.Module, TrainResult]:
    """The task of ``job`` and its model trained on ``device`` (seeded: every call trains the
    same weights), with the training result; ``checkpoint``: see :func:`train`. With
    ``train.start = "contained"``, training starts from the trained job one layer shallower
    (:mod:`probes.training.warm_start`: read from ``folder`` when kept there, else trained
    and kept; ``job_config``: the job's stored config), and the result says which."""
    task, model = job.build()
    start = "fresh"
    if job.train.start == "contained":
        start = contained_start(job, model, device, folder, job_config, trained_model)
    result = train(model, task.sample, lambda m, x: task.select(m(x)),
                   replace(job.train, seed=job.seed, device=device), checkpoint)
    return task, model, replace(result, start=start)


def _measure(job: Job, trained: TrainedModel, precisions: list[Precision], t0: float,
             device: str) -> TrainedOutcome:
    """The trained model measured in each of ``precisions`` (module docstring)."""
    task, model, result = trained.task, trained.model, trained.result
    check = result.check if result.status == "ok" else None
    outcomes = []
    if result.status != "ok":
        outcomes = [PrecisionOutcome(p.name, result.status, result.message)
                    for p in precisions]
    else:
        gen = torch.Generator().manual_seed(job.seed + TEST_SEED_OFFSET)
        x_test, _ = task.sample(job.test_size, gen)
        refs: dict[bytes, tuple[np.ndarray, float] | None] = {}
        for p in precisions:
            q = seeded_by(p, job.seed)   # an unseeded ':sr' takes the job's seed
            try:
                out = measure_precision(model, task, x_test, q, refs, device)
                out.precision = p.name   # (stored under the name spelled)
            except Exception as exc:  # noqa: BLE001 - e.g. a user module's op with no mp
                first = (str(exc).splitlines() or [""])[0]   # implementation: a status
                out = PrecisionOutcome(p.name, "failed", f"{type(exc).__name__}: {first}")
            if out.status == "ok" and job.iterate and task.name == "explicit_gradient":
                n_iter = min(job.test_size, 8)
                out.iterate_trace = iterate_gradient(model, task, x_test[:n_iter], q,
                                                     job.iterate, device)
                out.floor = detect_floor([10.0 ** min(v, 300.0) for v in out.iterate_trace],
                                         log10_trace=out.iterate_trace)
                if out.floor.kind == "diverged" or not math.isfinite(out.iterate_trace[-1]):
                    out.status, out.error = "diverged", (
                        f"iterating the trained gradient diverges in {p.name} "
                        f"(log10 MSE {out.iterate_trace[-1]:.1f} after "
                        f"{len(out.iterate_trace)} iterations)")
            outcomes.append(out)
    n_params = sum(t.numel() for t in model.parameters())
    gradient_error = None
    if job.gradient_error and result.status == "ok":
        from probes.gradient_check import training_gradient_error

        gradient_error = training_gradient_error(job, task, model)
    return TrainedOutcome(result, outcomes, n_params, task.describe(),
                          time.perf_counter() - t0, trained.weights_error, check,
                          gradient_error)
