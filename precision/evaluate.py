"""Evaluate one module in any precision, and split its error into approximation and rounding.

``evaluate(model, x, "float32")`` runs a copy of the model cast to float32 on x rounded to
float32; ``evaluate(model, x, "mp50")`` interprets the model's exported graph in 50-digit
arithmetic with the *same* weights (exact conversion). Both return a numpy object array of
exact arb values, so outputs of every precision compare exactly.
"""

from __future__ import annotations

import copy
import warnings
import weakref
from typing import Any

import numpy as np
import torch

from precision.backends import backend_for
from precision.backends.interpreter import MPProgram
from precision.backends.torch_backend import cast_module, round_to_dtype
from precision.metrics import ErrorSummary, decompose, error_summary
from precision.precisions import Precision, as_precision
from precision.reference import CHECK_SUBSET, certain_digits, check_precision

_PROGRAMS: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple, MPProgram]] = (
    weakref.WeakKeyDictionary()
)


def mp_program(model: torch.nn.Module, x: torch.Tensor) -> MPProgram:
    """The exported program of ``model`` for inputs shaped like ``x`` (cached per shape)."""
    key = (tuple(x.shape), x.dtype)
    per_model = _PROGRAMS.setdefault(model, {})
    if key not in per_model:
        per_model[key] = MPProgram(model, (x,))
    return per_model[key]


def evaluate(model: torch.nn.Module, x: torch.Tensor | np.ndarray, precision: Precision | str,
             device: str = "cpu") -> np.ndarray:
    """Output of ``model`` on ``x`` computed in ``precision``, as exact arb values.

    Float precisions: the model (deep copy) and ``x`` are cast to the dtype and run by
    PyTorch. mpN: the graph interpreter, weights converted exactly from their stored values.
    ``x`` may also be an object array of exact values (e.g. an mp iterate fed back as input):
    the interpreter takes it as it is; float precisions round it into the dtype. ``device``:
    where a float precision runs (:mod:`precision.devices`); mpN always runs on the CPU.
    """
    p = as_precision(precision)  # the Python API's edge
    model.eval()
    if isinstance(x, np.ndarray):
        if p.is_mp:
            example = torch.zeros(x.shape, dtype=next(iter(model.parameters())).dtype)
            return backend_for(p).to_exact(mp_program(model, example)(x, precision=p))
        x = backend_for(p).asarray(x)  # rounded into the dtype
    if p.is_mp:
        example = x.to(next(iter(model.parameters()), x).dtype) if x.is_floating_point() else x
        out = mp_program(model, example)(x, precision=p)
        return backend_for(p).to_exact(out)
    dtype = p.torch_dtype
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        clone = cast_module(copy.deepcopy(model), dtype).to(device)
    with torch.no_grad():
        out = clone((round_to_dtype(x, dtype) if x.is_floating_point() else x).to(device))
    return backend_for(p).to_exact(out.cpu())


class _MethodAsForward(torch.nn.Module):
    """``model.<method>`` as a module's forward, so it can be exported and evaluated."""

    def __init__(self, model: torch.nn.Module, method: str) -> None:
        super().__init__()
        self.model = model
        self.method = method

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self.model, self.method)(x)


def evaluate_method(model: torch.nn.Module, method: str, x: torch.Tensor | np.ndarray,
                    precision: Precision | str) -> np.ndarray:
    """:func:`evaluate` of ``model.<method>(x)`` instead of ``model(x)`` -- e.g. a per-layer
    read-out ``query_per_layer``, so one export gives the whole layer trace in any precision."""
    return evaluate(_MethodAsForward(model, method), x, precision)


def error_decomposition(
    model: torch.nn.Module,
    x: torch.Tensor,
    truth: Any,
    precision: Precision | str,
    *,
    reference: Precision | str = "mp100",
    check_reference: bool = True,
) -> dict[str, ErrorSummary]:
    """total = f_p(x) - y*, approximation = f_ref(x) - y*, rounding = f_p(x) - f_ref(x).

    ``truth`` is the task's high-precision target (object array of arb, or floats); ``f_ref``
    is the same weights evaluated in the high ``reference`` precision mpN (mp100 by default).
    With ``check_reference`` the result also holds ``"reference"``: f_ref against the same
    weights in mp2N on the first sequence of ``x`` (:mod:`precision.reference`), whose
    ``digits`` are how many digits of the reference are certain.
    """
    p, ref = as_precision(precision), as_precision(reference)
    fp = evaluate(model, x, p)
    fref = evaluate(model, x, ref)
    parts = decompose(fp, fref, truth)
    if check_reference:
        first = x[:CHECK_SUBSET]
        parts["reference"] = error_summary(fref[:CHECK_SUBSET],
                                           evaluate(model, first, check_precision(ref)))
    return parts


def reference_digits(model: torch.nn.Module, x: torch.Tensor, reference_out: np.ndarray,
                     reference: Precision, *, subset: int = CHECK_SUBSET) -> float:
    """Certain digits of ``reference_out`` = ``evaluate(model, x, reference)`` (an mpN output
    whose first axis is the batch axis of ``x``): mp2N is evaluated on ``x[:subset]`` and
    compared with ``reference_out[:subset]`` (:func:`precision.reference.certain_digits`)."""
    check = evaluate(model, x[:subset], check_precision(reference))
    return certain_digits(np.asarray(reference_out)[:subset], check, int(reference.digits or 0))
