"""Evaluate one module in any precision, and split its error into approximation and rounding.

``evaluate(model, x, "float32")`` runs a copy of the model cast to float32 on x rounded to
float32 and returns a float32 tensor; ``evaluate(model, x, "mp50")`` interprets the model's
exported graph in 50-digit arithmetic with the *same* weights (exact conversion) and returns
an :class:`~precision.mp_output.MPOutput` (exact values, ``.to_float()``, ``.to_mpmath()``,
``.digits``). :func:`evaluate_exact` returns every precision's output as a numpy object array
of exact arb values, so outputs of every precision compare exactly (what the toolkit uses).

Simulated formats (``float8_e4m3``, ``mxfp4_e2m1``, ``int4_g32``, ``bfloat16:sr+seed=1``, ...;
docs/formats.md): the model's parameters and x are rounded to the format once and held in a
carrier dtype, and the forward runs under per-op rounding (:mod:`precision.formats`).

Casts (``casts="keep"|"promote"``, or spelled in the precision: ``float64+casts=promote``):
``keep`` (the default) runs the model as written, so a model that casts to float32 inside
computes those islands in float32 in every precision (mpN included); ``promote`` computes
every float cast in the evaluation precision (float path: :class:`PromoteCasts`, a dispatch
mode over the eager forward; mpN: the interpreter does not round the islands). The truth a
model is measured against is the promoted model: :func:`error_decomposition`'s reference.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
import weakref
from collections.abc import Collection, Iterator
from typing import Any

import flint
import numpy as np
import torch

from precision.backends import backend_for
from precision.backends.interpreter import MPProgram
from precision.backends.interpreter.casts import NARROW_DTYPES
from precision.backends.mp_backend import exact_array
from precision.backends.promote_casts import PromoteCasts
from precision.backends.torch_backend import cast_module, round_to_dtype
from precision.devices import resolve_device
from precision.formats.module_assignment import (
    check_globs,
    module_paths,
    run_float,
    work_precision,
)
from precision.formats.simulate import prepare_module, round_tensor, simulation
from precision.forward_failure import call_naming_failure
from precision.metrics import ErrorSummary, decompose, error_summary
from precision.module_fingerprint import structure_key, values_digest
from precision.mp_output import MPOutput
from precision.precisions import (
    FLOAT_BITS,
    Precision,
    PrecisionError,
    as_precision,
    with_casts,
)
from precision.reference import CHECK_SUBSET, certain_digits, check_precision

#: model -> (input shape, dtype) -> (structure key it was exported from, program).
_PROGRAMS: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple, tuple[str, MPProgram]]] = (
    weakref.WeakKeyDictionary()
)


def mp_program(model: torch.nn.Module, x: torch.Tensor) -> MPProgram:
    """The exported program of ``model`` for inputs shaped like ``x``: cached per shape and
    dtype while the module's structure is unchanged (:func:`structure_key`: a module replaced
    inside it, a new forward or hook, a changed attribute exports again; the parameters'
    values are read at each call). The program is the model's in eval mode."""
    key = (tuple(x.shape), x.dtype)
    with evaluating(model):   # exported in eval mode, whatever mode the caller left it in
        structure = structure_key(model)
        per_model = _PROGRAMS.setdefault(model, {})
        cached = per_model.get(key)
        if cached is None or cached[0] != structure:
            per_model[key] = (structure, MPProgram(model, (x,)))
    return per_model[key][1]


def evaluate(model: torch.nn.Module, x: torch.Tensor | np.ndarray | MPOutput,
             precision: Precision | str, device: str = "cpu", *, casts: str | None = None,
             kept_modules: Collection[str] | None = None) -> torch.Tensor | MPOutput:
    """Output of ``model`` on ``x`` computed in ``precision``: what a PyTorch user expects.

    A float precision (float32, bfloat16, a simulated format such as ``float8_e4m3``, a
    per-module assignment without an mpN) returns a ``torch.Tensor`` on the CPU, in the
    precision's dtype (a simulated format: its carrier dtype, every value on the format's
    grid). An mpN precision returns an :class:`~precision.mp_output.MPOutput`: the exact
    values, ``.to_float()`` / ``.to_mpmath()``, and ``.digits``, the digits an mp2N
    evaluation of the first sequence certifies. :func:`evaluate_exact` is the same
    computation returned as exact arb values in every precision (to compare precisions
    exactly); the arguments are :func:`evaluate_exact`'s.

    Shapes: ``x`` and the output as the model takes and returns them.
    """
    p = _checked(as_precision(precision), casts, kept_modules, device)  # the API's edge
    xin = x.values if isinstance(x, MPOutput) else x
    out = _forward(model, xin, p, device, kept_modules)
    if isinstance(out, torch.Tensor):
        return out
    # .digits certifies these values: it evaluates the model as it was now (a snapshot, used
    # when the caller has changed the model since) on the input as it was now (a copy)
    first = xin[:CHECK_SUBSET].copy() if isinstance(xin, np.ndarray) else \
        xin[:CHECK_SUBSET].clone()
    computed_from = (structure_key(model), values_digest(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        snapshot = copy.deepcopy(model)

    def run(source: torch.nn.Module, q: Precision) -> np.ndarray:
        if p.modules:
            return evaluate_assigned(source, first, p, device, work=q)
        return _exact(_forward(source, first, q, device, kept_modules))

    def certify() -> float:
        work = work_precision(p) if p.modules else p
        source = model   # unchanged since: the live model (it reuses its program)
        if (structure_key(model), values_digest(model)) != computed_from:
            source = snapshot
            # a copy is faithful unless its code reaches the live object (an instance's
            # forward or a hook closing over it): it must recompute the values it certifies
            if not _identical(run(snapshot, work), out[:CHECK_SUBSET]):
                raise ValueError("the model changed after this output was computed, and its "
                                 "copy does not recompute it (its forward or a hook refers "
                                 "to the live model): read .digits before changing the model")
        check = run(source, check_precision(work))
        return certain_digits(out[:CHECK_SUBSET], check, int(work.digits or 0))

    return MPOutput(out, work_precision(p) if p.modules else p, certify)


def evaluate_exact(model: torch.nn.Module, x: torch.Tensor | np.ndarray,
                   precision: Precision | str, device: str = "cpu", *,
                   casts: str | None = None,
                   kept_modules: Collection[str] | None = None) -> np.ndarray:
    """Output of ``model`` on ``x`` computed in ``precision``, as exact arb values.

    Float precisions: the model (deep copy) and ``x`` are cast to the dtype and run by
    PyTorch. mpN: the graph interpreter, weights converted exactly from their stored values.
    ``x`` may also be an object array of exact values (e.g. an mp iterate fed back as input):
    the interpreter takes it as it is; float precisions round it into the dtype. ``device``:
    where a float precision runs (:mod:`precision.devices`); mpN always runs on the CPU.
    ``casts``: ``"keep"`` or ``"promote"`` (module docstring); None: the precision's own
    policy. ``kept_modules`` (mpN under ``keep`` only): round the islands of these module
    paths only (as :attr:`MPProgram.islands` spells them), to attribute their effect. A
    per-module assignment (``float64+mod[*.mlp]=bfloat16``) is :func:`evaluate_assigned`.
    """
    p = _checked(as_precision(precision), casts, kept_modules, device)  # the API's edge
    return _exact(_forward(model, x, p, device, kept_modules))


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of exact arb values hold the same numbers, entry for entry."""
    def key(v: Any) -> Any:
        m = v.mid()
        return m.man_exp() if m.is_finite() else str(m)

    return a.shape == b.shape and all(
        key(x) == key(y) for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist(),
                                         strict=True))


def _checked(p: Precision, casts: str | None, kept_modules: Collection[str] | None,
             device: str = "cpu") -> Precision:
    """``p`` with ``casts`` applied, its options and ``device`` checked (a device this
    machine lacks is :class:`~precision.devices.DeviceError`, one line, not torch's
    assertion deep in the forward)."""
    resolve_device(str(device))
    if p.unseeded:
        raise PrecisionError(f"{p.name!r} has no seed here: spell '+seed=N' (a suite's run "
                             "or a command seeds it with its own --seed)")
    if casts is not None:
        p = with_casts(p, casts)
    if kept_modules is not None and not (p.is_mp and p.casts == "keep" and not p.modules):
        raise ValueError("kept_modules applies to an mpN precision under casts='keep'")
    return p


def _exact(out: torch.Tensor | np.ndarray) -> np.ndarray:
    """Exact arb values of a forward's output (a float tensor converts exactly)."""
    if isinstance(out, np.ndarray):
        return out
    return exact_array(out.to(torch.float64).numpy())


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` in eval mode inside the block (dropout off, batch statistics fixed), and
    every module's training flag as the caller left it afterwards: evaluating a model never
    changes it."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, training in flags:
            m.training = training


def _forward(model: torch.nn.Module, x: torch.Tensor | np.ndarray, p: Precision, device: str,
             kept_modules: Collection[str] | None) -> torch.Tensor | np.ndarray:
    """The forward of :func:`evaluate_exact`: a float precision's output tensor (on the CPU,
    in its dtype), or an mpN's exact arb values; the model in eval mode (:func:`evaluating`)."""
    with evaluating(model):
        return _forward_eval(model, x, p, device, kept_modules)


def _forward_eval(model: torch.nn.Module, x: torch.Tensor | np.ndarray, p: Precision,
                  device: str, kept_modules: Collection[str] | None
                  ) -> torch.Tensor | np.ndarray:
    """:func:`_forward` of a model in eval mode."""
    if (p.is_mp or p.modules) and (x.numel() if isinstance(x, torch.Tensor) else x.size) == 0:
        return _empty_exact(model, x)
    if p.modules:
        return _assigned(model, x, p, device)
    if isinstance(x, np.ndarray) and p.is_simulated:
        x = torch.from_numpy(np.asarray(x, dtype=np.float64))  # rounded by the simulation
    if isinstance(x, np.ndarray):
        if p.is_mp:
            example = torch.zeros(x.shape, dtype=torch.float64)
            return exact_output(p, mp_program(model, example)(x, precision=p,
                                                              kept_modules=kept_modules))
        x = backend_for(p).asarray(x)  # rounded into the dtype
    if p.is_mp:
        example = x.to(torch.float64) if x.is_floating_point() else x
        out = mp_program(model, example)(x, precision=p, kept_modules=kept_modules)
        return exact_output(p, out)
    if p.is_simulated:
        return _forward_simulated(model, x, p, device)
    dtype = p.torch_dtype
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        clone = cast_module(copy.deepcopy(model), dtype).to(device)
    mode = PromoteCasts(dtype) if p.casts == "promote" else contextlib.nullcontext()
    # a copy in torch's aligned memory: a BLAS kernel's result can depend on where x starts
    # (precision.deterministic.tensor), and the caller's x may live in numpy's memory
    # (contiguous: a kernel's result can also depend on the input's strides)
    xin = (round_to_dtype(x, dtype) if x.is_floating_point() else x).to(device).clone(
        memory_format=torch.contiguous_format)
    with torch.no_grad(), mode:   # a failure names its module and op (ForwardFailure)
        out = call_naming_failure(clone, lambda: clone(xin))
    return out.detach().cpu()


def _empty_exact(model: torch.nn.Module, x: torch.Tensor | np.ndarray) -> np.ndarray:
    """The output of an mpN evaluation of an input with no entries (a 0-size batch): no
    value to compute, so an empty object array of the shape the model's float64 forward
    gives (the interpreter's kernels assume at least one entry)."""
    x64 = torch.zeros(np.shape(x), dtype=torch.float64) if isinstance(x, np.ndarray) or \
        x.is_floating_point() else x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        clone = cast_module(copy.deepcopy(model), torch.float64)
    with torch.no_grad():
        out = call_naming_failure(clone, lambda: clone(x64))
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the model's forward returned {type(out).__name__}, not a tensor: "
                        "evaluate takes a module whose forward returns one tensor")
    return np.empty(tuple(out.shape), dtype=object)


def exact_output(p: Precision, out: Any) -> np.ndarray:
    """The interpreter's output of an mpN forward as exact arb values: a float output as
    computed; an integer or boolean output (a count, a mask, an argmax) is exact as it is.
    Anything else (a tuple, a dict) is a one-line ``TypeError``."""
    if isinstance(out, np.ndarray) and out.dtype != object:
        if out.dtype.kind not in "biu":
            raise TypeError(f"the model's output has dtype {out.dtype}, which an mpN "
                            "evaluation cannot return")
        return np.fromiter((flint.arb(int(v)) for v in out.reshape(-1).tolist()),
                           dtype=object, count=out.size).reshape(out.shape)
    if not hasattr(out, "to_exact_numpy"):
        raise TypeError(f"the model's forward returned {type(out).__name__}, not a tensor: "
                        "evaluate takes a module whose forward returns one tensor")
    return backend_for(p).to_exact(out)


def _forward_simulated(model: torch.nn.Module, x: torch.Tensor, p: Precision,
                       device: str) -> torch.Tensor:
    """A simulated format (docs/formats.md): a copy of the model with its parameters rounded
    (or quantised) into the format and held in the carrier dtype, ``x`` rounded likewise, the
    forward under per-op rounding (and under ``promote``, every float cast made the carrier)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        clone = prepare_module(copy.deepcopy(model), p).to(device)
    if x.is_floating_point():
        x = round_tensor(x, p)
    promote = PromoteCasts(p.carrier_dtype) if p.casts == "promote" else \
        contextlib.nullcontext()
    xin = x.to(device).clone(memory_format=torch.contiguous_format)   # as _forward's
    with torch.no_grad(), promote, simulation(p):   # a failure names its module and op
        out = call_naming_failure(clone, lambda: clone(xin))
    return out.detach().cpu()


def evaluate_assigned(model: torch.nn.Module, x: torch.Tensor | np.ndarray, p: Precision,
                      device: str = "cpu", *, work: Precision | None = None,
                      carrier: torch.dtype | None = None) -> np.ndarray:
    """:func:`evaluate_exact` of a per-module assignment ``p`` (``float64+mod[*.mlp]=bfloat16``;
    :mod:`precision.formats.module_assignment` states the rule), as exact arb values.

    It names an mpN, or ``work`` (an mpN) is given: the graph interpreter computes it in that
    mpN and rounds each assigned node into its float format; else the float path computes
    each op in the carrier dtype (``carrier``, or the narrowest that holds every format) and
    rounds its result (on ``device``). ``x`` may be an object array of exact values, as for
    :func:`evaluate_exact`.
    """
    with evaluating(model):
        return _exact(_assigned(model, x, p, device, work=work, carrier=carrier))


def _assigned(model: torch.nn.Module, x: torch.Tensor | np.ndarray, p: Precision,
              device: str = "cpu", *, work: Precision | None = None,
              carrier: torch.dtype | None = None) -> torch.Tensor | np.ndarray:
    """:func:`evaluate_assigned`'s forward: the float path's output tensor (in the carrier
    dtype, on the CPU), or the interpreter's exact arb values."""
    work = work_precision(p) if work is None else with_casts(work, p.casts)
    if work is None:
        if isinstance(x, np.ndarray):
            x = backend_for(Precision("float64")).asarray(x)
        return run_float(model, x, p, device, carrier=carrier)
    if not work.is_mp:
        raise ValueError(f"evaluate_assigned: work must be an mpN, not {work.name}")
    check_globs(module_paths(model), p)
    shape = x.shape
    example = (torch.zeros(shape, dtype=torch.float64) if isinstance(x, np.ndarray) else
               x.to(torch.float64) if x.is_floating_point() else x)
    out = mp_program(model, example)(x, precision=work, assignment=p)
    return exact_output(work, out)


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
    """:func:`evaluate_exact` of ``model.<method>(x)`` instead of ``model(x)`` -- e.g. a per-layer
    read-out ``query_per_layer``, so one export gives the whole layer trace in any precision."""
    return evaluate_exact(_MethodAsForward(model, method), x, precision)


def error_decomposition(
    model: torch.nn.Module,
    x: torch.Tensor,
    truth: Any,
    precision: Precision | str,
    *,
    reference: Precision | str = "mp100",
    check_reference: bool = True,
) -> dict[str, ErrorSummary]:
    """total = f_p(x) - y*, approximation = f_ref(x) - y*, rounding = f_p(x) - f_ref(x), and
    for a model that casts below p: casts = f_p(x) - f_p,promote(x).

    ``truth`` is the task's high-precision target (object array of arb, or floats); ``f_ref``
    is the same weights evaluated in the high ``reference`` precision (mp100 by default) with
    every cast promoted: the model its author wrote. Under ``casts="keep"`` (the default) a
    model whose graph computes some nodes in a dtype narrower than p (its float32 islands in a
    float64 run) also gets ``casts``: how far those islands move the output, the part of
    ``rounding`` they cause (:mod:`precision.islands` says which module causes how much).
    With ``check_reference`` the result also holds ``"reference"``: f_ref against the same
    weights in mp2N on the first sequence of ``x`` (:mod:`precision.reference`), whose
    ``digits`` are how many digits of the reference are certain.
    """
    p = as_precision(precision)  # the Python API's edge
    ref = with_casts(as_precision(reference), "promote")
    fp = evaluate_exact(model, x, p)
    fref = evaluate_exact(model, x, ref)
    parts = decompose(fp, fref, truth)
    if p.casts == "keep":
        example = x.to(torch.float64) if x.is_floating_point() else x
        narrow = {dtype for dtype, _ in mp_program(model, example).islands.values()}
        if any(FLOAT_BITS[NARROW_DTYPES[d]] < p.bits for d in narrow):
            parts["casts"] = decompose(fp, evaluate_exact(model, x, with_casts(p, "promote")),
                                       truth)["rounding"]
    if check_reference:
        first = x[:CHECK_SUBSET]
        parts["reference"] = error_summary(fref[:CHECK_SUBSET],
                                           evaluate_exact(model, first, check_precision(ref)))
    return parts


def reference_digits(model: torch.nn.Module, x: torch.Tensor, reference_out: np.ndarray,
                     reference: Precision, *, subset: int = CHECK_SUBSET) -> float:
    """Certain digits of ``reference_out`` = ``evaluate_exact(model, x, reference)`` (an mpN output
    whose first axis is the batch axis of ``x``): mp2N is evaluated on ``x[:subset]`` and
    compared with ``reference_out[:subset]`` (:func:`precision.reference.certain_digits`)."""
    check = evaluate_exact(model, x[:subset], check_precision(reference))
    return certain_digits(np.asarray(reference_out)[:subset], check, int(reference.digits or 0))
