"""Trained weights on disk: safetensors only, so loading a file never runs code from it.

``precision run SUITE --save-weights DIR`` writes every trained job's final weights (float64
tensors holding exactly the values of the training dtype) to ``DIR/<job id>.safetensors``
with the job config in the file's metadata; :func:`load_trained_model` rebuilds the model
from that config and loads the weights, e.g. to evaluate it in a precision the suite did not
ask for. A safetensors file is a JSON header and
raw tensor bytes: nothing in it is executed (a pickle, or any other file, is refused with a
one-line :class:`WeightsError`). Workers write the files (atomically: a temporary file, then
a rename); the store never holds weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: Environment variable through which the driver tells workers where to save weights.
WEIGHTS_DIR_ENV = "PRECISION_WEIGHTS_DIR"


class WeightsError(ValueError):
    """A weights file that cannot be read or does not fit its model (one line)."""


def weights_dir() -> Path | None:
    """The folder the current sweep saves weights into (None: weights are not saved)."""
    value = os.environ.get(WEIGHTS_DIR_ENV)
    return Path(value) if value else None


def save_weights(model: nn.Module, path: str | Path, job: dict[str, Any]) -> Path:
    """Write ``model``'s parameters and buffers to ``path`` (safetensors, atomically) with
    ``job`` (the job config) as JSON metadata."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    save_file(tensors, str(tmp), metadata={"job": json.dumps(job, sort_keys=True)})
    os.replace(tmp, path)
    return path


def load_weights(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and job config of a safetensors weights file; WeightsError otherwise."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"no weights file at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except (SafetensorError, OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise WeightsError(f"{path} is not a safetensors weights file ({first}); only "
                           "safetensors is loaded, never pickle") from None
    try:
        job = json.loads(meta["job"])
    except (KeyError, json.JSONDecodeError):
        raise WeightsError(f"{path} has no job config in its metadata (not written by "
                           "precision)") from None
    return tensors, job


def load_trained_model(path: str | Path) -> tuple[nn.Module, dict[str, Any]]:
    """The trained model of a weights file (rebuilt from its job config, weights loaded,
    eval mode, the file's dtype) and that job config."""
    from probes.job import Job

    tensors, job = load_weights(path)
    _, model = Job.from_config(job).build()
    dtypes = {t.dtype for t in tensors.values() if t.is_floating_point()}
    if len(dtypes) == 1:
        model = model.to(dtypes.pop())
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise WeightsError(f"{path} does not fit the model of its job config: {first}") \
            from None
    return model.eval(), job
