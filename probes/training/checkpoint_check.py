"""A checkpoint that is the right job's file but wrong inside is refused before any of it is
used: :func:`check_saved` compares what :func:`probes.training.recipes.train` would put
back -- the model's tensors, Adam's moments, the random states, the phase's state keys --
with the job's freshly built model and this torch's random states (names, shapes, dtypes,
sizes), and :func:`restoring` turns any error left while putting the state back into the
same one line. Either way the job is a ``failed`` record naming the file and how to go on
(delete it), never a traceback, a hang or a silently broadcast tensor."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from probes.training.checkpoint import CheckpointError, Phase

#: The state keys every phase but DONE holds, and the check of each value.
_COMMON = {"done": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
           "elapsed": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
           and math.isfinite(v) and v >= 0,
           "curve": lambda v: isinstance(v, dict), "lr_trace": lambda v: isinstance(v, list)}


def _refuse(path: Path | str, what: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {path} does not fit this job ({what}); delete it to "
                           "train this job from the start")


def check_saved(path: Path | str, saved: tuple[dict[str, torch.Tensor], dict[str, Any]],
                model: nn.Module) -> Phase:
    """The phase of ``saved`` (a checkpoint's tensors and state) after checking that it
    fits ``model`` (the job's model as built, before training); CheckpointError otherwise."""
    tensors, state = saved
    if not isinstance(state, dict):
        raise _refuse(path, "its state is not a table")
    try:
        phase = Phase(state.get("phase"))
    except ValueError:
        raise _refuse(path, f"unknown phase {str(state.get('phase'))[:40]!r}") from None
    _check_model(path, tensors, model)
    if phase is Phase.DONE:
        if not isinstance(state.get("result"), dict):
            raise _refuse(path, "a finished training without its result")
        return phase
    for key, ok in _COMMON.items():
        if key not in state or not ok(state[key]):
            raise _refuse(path, f"state '{key}' is missing or malformed")
    for name, fresh in (("gen", torch.Generator().get_state()),
                        ("rng", torch.get_rng_state())):
        t = tensors.get(name)
        if t is None or t.dtype != fresh.dtype or t.shape != fresh.shape:
            got = "missing" if t is None else f"{t.dtype} of {tuple(t.shape)}"
            raise _refuse(path, f"random state '{name}': {got}, this torch's is "
                          f"{fresh.dtype} of {tuple(fresh.shape)}")
    if phase is Phase.FIRST_ORDER:
        _check_adam(path, tensors, state, model)
    if phase is Phase.SECOND_ORDER_RUNNING and not isinstance(state.get("lm"), dict):
        raise _refuse(path, "the engine's state is missing")
    return phase


def _check_model(path: Path | str, tensors: dict[str, torch.Tensor], model: nn.Module) -> None:
    """The saved ``model.*`` tensors are the model's state, name for name and shape for
    shape, each a float tensor where the model's is one."""
    want = model.state_dict()
    have = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing or extra:
        name = (missing or extra)[0]
        raise _refuse(path, f"model tensor '{name}' is {'missing' if missing else 'unknown'}")
    for name, w in want.items():
        h = have[name]
        if h.shape != w.shape or h.is_floating_point() != w.is_floating_point():
            raise _refuse(path, f"model tensor '{name}' is {h.dtype} of {tuple(h.shape)}, "
                          f"the model's is {w.dtype} of {tuple(w.shape)}")


def _check_adam(path: Path | str, tensors: dict[str, torch.Tensor], state: dict[str, Any],
                model: nn.Module) -> None:
    """Adam's saved moments (when the phase saved them) are one pair per parameter, each of
    its parameter's shape; the step count a scalar."""
    keys = state.get("adam_keys")
    if keys is None:
        return   # saved before the first step: nothing of Adam's to put back
    params = [p for p in model.parameters() if p.requires_grad]   # Adam's, in order
    if not isinstance(keys, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                             and 0 <= i < len(params) for i in keys):
        raise _refuse(path, "Adam's parameter list is malformed")
    for i in keys:
        for moment in ("exp_avg", "exp_avg_sq"):
            t = tensors.get(f"adam.{i}.{moment}")
            if t is None or t.shape != params[i].shape:
                got = "missing" if t is None else f"of {tuple(t.shape)}"
                raise _refuse(path, f"Adam's {moment} of parameter {i} is {got}, the "
                              f"parameter is of {tuple(params[i].shape)}")
        step = tensors.get(f"adam.{i}.step")
        if step is not None and step.numel() != 1:
            raise _refuse(path, f"Adam's step of parameter {i} is not a number")


@contextlib.contextmanager
def restoring(path: Path | str) -> Iterator[None]:
    """Putting a checked checkpoint's state back: an error of the state's contents that
    :func:`check_saved` does not look at (a curve of the wrong form, a schedule's state) is
    the checkpoint's, one line."""
    try:
        yield
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        first = (str(exc).splitlines() or [""])[0][:160]
        raise _refuse(path, f"{type(exc).__name__}: {first}") from None
