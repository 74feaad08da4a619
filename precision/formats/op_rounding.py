"""Per-op rounding on the float path: compute each op in the carrier dtype, round its result.

A simulated precision runs a model in a wide *carrier* dtype (float32 or float64 tensors) under
:class:`RoundResults`, a ``TorchDispatchMode``: every ATen op is computed by PyTorch in the
carrier dtype (after PyTorch's own decompositions) and each floating tensor it returns is
rounded to the precision in force for that op (:func:`round_values`), the semantics of chop and
CPFloat: the result is formed in a wider format, then rounded once. Ops that return views of
their inputs (``view``, ``transpose``, ...) are not rounded again (their values already are);
an op that writes into an argument (``add_``, ``copy_``, ``out=``) has the written tensor
rounded in place. Ops that only select among their inputs' values (:data:`SELECTING`:
``relu``, ``clone``, ``cat``, indexing, ``max``...) skip the rounding when every floating
input is known to be on the precision's grid (:class:`GridMarks`: a result this mode rounded,
a view of one, or such an op's result, unchanged since): the rounding would be the identity.

Which precision is in force is a callable (``choose``), so that a per-module assignment can
change it as the forward enters and leaves modules; ``choose()`` returning ``None`` leaves a
result as the carrier computed it.

Formats (docs/formats.md states the semantics): a result is rounded to the precision's value
format (:attr:`Precision.value_format`) with its rounding mode; stochastic bits come from a
:class:`~precision.formats.rounding.RandomStream` per seed, owned by the mode (a fresh stream
per evaluation). The products and sums of :data:`MATMULS` and :data:`SUMS` accumulate in
:attr:`Precision.accumulation_format`: the carrier's own kernel when that is the carrier
dtype, the op computed in float64 when it is float64 over a float32 carrier, and otherwise a
recursive sum in index order whose every partial sum is rounded to the accumulation format
(each product formed in the carrier: exact for two operands of p <= 12 bits in float32). An
MX precision (``mxfp*``, ``mxint8``) first quantises the operands of :data:`MATMULS` per block
of 32 along the reduction dimension by its shared-exponent rule (``+scale=``,
:func:`precision.formats.mx.quantize_mx`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.weak import WeakIdKeyDictionary

from precision.backends.torch_backend import round_to_dtype
from precision.formats.binary_format import BinaryFormat
from precision.formats.mx import quantize_mx
from precision.formats.rounding import RandomStream, round_to_format
from precision.precisions import Precision

aten = torch.ops.aten
#: Products: op -> ((argument index, reduction dim) of each operand).
MATMULS: dict[Any, tuple[tuple[int, int], ...]] = {
    aten.mm.default: ((0, -1), (1, -2)),
    aten.addmm.default: ((1, -1), (2, -2)),
    aten.bmm.default: ((0, -1), (1, -2)),
    aten.baddbmm.default: ((1, -1), (2, -2)),
    aten.dot.default: ((0, 0), (1, 0)),
    aten.mv.default: ((0, -1), (1, 0)),
}
#: Reductions that accumulate: sum and mean, whole-tensor or over dims.
SUMS = {aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim}


def round_values(t: torch.Tensor, p: Precision, *, stream: RandomStream | None = None
                 ) -> torch.Tensor:
    """The values of floating tensor ``t`` rounded to ``p`` (its value format, by its rounding
    mode; ``stream``: the bits of stochastic rounding), kept in ``t``'s dtype.

    Shapes: any; the result has ``t``'s shape, dtype and device.
    """
    if p.is_mp:
        raise ValueError(f"round_values: no rounding to {p.name} on the float path")
    if not p.is_simulated:
        if t.dtype == p.torch_dtype:
            return t
        return round_to_dtype(t, p.torch_dtype).to(t.dtype)
    fmt = p.value_format
    if fmt.name == "float32" and t.dtype == torch.float32:
        return t  # on float32's grid already, in every mode
    if p.rounding == "sr" and stream is None:
        stream = RandomStream(p.seed or 0)
    return round_to_format(t, fmt, p.rounding, stream)


def _sequential_sum(terms: torch.Tensor, acc: BinaryFormat, mode: str,
                    stream: RandomStream | None) -> torch.Tensor:
    """sum over the last axis of ``terms``, in index order, each partial sum rounded to
    ``acc`` (shape: ``terms.shape[:-1]``)."""
    total = torch.zeros(terms.shape[:-1], dtype=terms.dtype, device=terms.device)
    for k in range(terms.shape[-1]):
        total = round_to_format(total + terms[..., k], acc, mode, stream)
    return total


def _accumulated(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], p: Precision,
                 stream: RandomStream | None) -> torch.Tensor:
    """A product or sum whose partial sums are rounded to a format narrower than the
    carrier (see the module docstring)."""
    acc, mode = p.accumulation_format, p.rounding
    if func in SUMS:
        x = args[0]
        dims = args[1] if len(args) > 1 and args[1] is not None else kwargs.get("dim")
        keepdim = bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False))
        dims = list(range(x.dim())) if not dims else [d % x.dim() for d in dims]
        rest = [d for d in range(x.dim()) if d not in dims]
        moved = x.permute(*rest, *dims)
        flat = moved.reshape(*moved.shape[:len(rest)], -1)
        out = _sequential_sum(flat, acc, mode, stream)
        if func in (aten.mean.default, aten.mean.dim):
            out = out / flat.shape[-1]
        if keepdim:
            out = out.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
        return out
    if func in (aten.dot.default, aten.mv.default):   # (K) . (K), (M, K) . (K): sum over K
        return _sequential_sum(args[0] * args[1], acc, mode, stream)
    a, b = (args[0], args[1]) if func in (aten.mm.default, aten.bmm.default) else \
        (args[1], args[2])
    terms = a.unsqueeze(-1) * b.unsqueeze(-3)            # (..., M, K, N)
    product = _sequential_sum(terms.transpose(-1, -2), acc, mode, stream)
    if func in (aten.addmm.default, aten.baddbmm.default):
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        product = beta * args[0] + alpha * product
    return product


def _mx_operand(t: torch.Tensor, p: Precision, dim: int, stream: RandomStream | None,
                cache: dict[tuple, tuple[torch.Tensor, torch.Tensor]] | None) -> torch.Tensor:
    """``t`` quantised to ``p``'s MX format along ``dim``; under a deterministic rounding the
    same operand (same storage, layout and version: a weight, a solver's matrix) is
    quantised once per ``cache`` (the entry holds ``t``, so its memory is not reused while
    cached)."""
    if cache is None or p.needs_stream:
        return quantize_mx(t, p.element_format, dim, p.rounding, stream,  # type: ignore[arg-type]
                           scale=p.mx_scale)
    key = (t.data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype,
           t._version, dim, p.format, p.rounding, p.mx_scale)
    if key not in cache:
        if len(cache) >= MX_CACHE_SIZE:
            cache.clear()
        cache[key] = (t, quantize_mx(t, p.element_format, dim, p.rounding,  # type: ignore[arg-type]
                                     scale=p.mx_scale))
    return cache[key][1]


#: Quantised MX operands a :class:`RoundResults` keeps (then it starts afresh).
MX_CACHE_SIZE = 256


#: Ops each of whose floating result values is one of their floating inputs' values (or,
#: ``relu``, a zero): on inputs on a format's grid their results are on it, so rounding them
#: is the identity and is skipped (``masked_fill`` when its fill value is on the grid too).
SELECTING = {aten.relu.default, aten._unsafe_view.default, aten.clone.default,
             aten.cat.default, aten.stack.default, aten.neg.default, aten.abs.default,
             aten.index_select.default, aten.gather.default, aten.index.Tensor,
             aten.where.self, aten.maximum.default, aten.minimum.default, aten.max.dim,
             aten.min.dim, aten.amax.default, aten.amin.default, aten.masked_fill.Scalar}

#: Per op: (returns a view of an input, returns an argument it wrote, kind: "matmul", "sum",
#: "select" or "").
_OPS: dict[Any, tuple[bool, bool, str]] = {}


def _op(func: Any) -> tuple[bool, bool, str]:
    """What :func:`run_op` needs to know of ``func`` (its schema's return aliases and its
    kind), read once per op."""
    info = _OPS.get(func)
    if info is None:
        aliases = [r.alias_info for r in func._schema.returns if r.alias_info is not None]
        kind = "matmul" if func in MATMULS else "sum" if func in SUMS else \
            "select" if func in SELECTING else ""
        info = (any(not a.is_write for a in aliases), any(a.is_write for a in aliases), kind)
        _OPS[func] = info
    return info


def _floating_inputs(args: tuple[Any, ...]) -> list[torch.Tensor]:
    """The floating tensors among ``args`` and the lists in it (``cat``, ``stack``)."""
    found = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_floating_point():
                found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(t for t in a if isinstance(t, torch.Tensor) and t.is_floating_point())
    return found


class GridMarks:
    """The tensors known to hold values on a precision's value-format grid: results this
    mode rounded, views of them and exact (selecting) ops on them, each with the version of
    its data when marked (an in-place change, which bumps the version, unmarks it). Held
    weakly, by identity."""

    def __init__(self) -> None:
        self._marks: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def mark(self, out: Any, p: Precision) -> None:
        """Mark every floating tensor of ``out`` (a tensor, or a tuple or list of them)."""
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self._marks[t] = (p, t._version)

    def on_grid(self, tensors: list[torch.Tensor], p: Precision) -> bool:
        """True when every tensor of ``tensors`` (at least one) is marked for ``p`` and
        unchanged since."""
        for t in tensors:
            mark = self._marks.get(t)
            if mark is None or mark[1] != t._version or not (mark[0] is p or mark[0] == p):
                return False
        return bool(tensors)


@functools.lru_cache(maxsize=256)
def _fill_on_grid(value: Any, p: Precision, dtype: torch.dtype) -> bool:
    """True when the scalar ``value`` is on ``p``'s value-format grid."""
    t = torch.tensor([value], dtype=dtype)
    rounded = round_values(t, p, stream=RandomStream(0) if p.needs_stream else None)
    return bool(torch.equal(rounded, t) or (torch.isnan(t).all() and torch.isnan(rounded).all()))


def run_op(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], p: Precision, *,
           stream: RandomStream | None = None,
           cache: dict[tuple, tuple[torch.Tensor, torch.Tensor]] | None = None,
           marks: GridMarks | None = None) -> Any:
    """``func(*args, **kwargs)`` computed in the carrier dtype, its floating results rounded
    to ``p`` (see the module docstring for views, written arguments, accumulation and MX
    operands; ``stream``: stochastic-rounding bits; ``cache``: quantised MX operands;
    ``marks``: the tensors known to be on the grid, which lets a selecting op on them skip
    its rounding, see :data:`SELECTING`)."""
    view, writes, kind = _op(func)
    if kind == "select" and marks is not None and p.is_simulated and not writes:
        inputs = _floating_inputs((*args, *kwargs.values()))
        if marks.on_grid(inputs, p) and (func is not aten.masked_fill.Scalar
                                         or _fill_on_grid(args[2], p, inputs[0].dtype)):
            out = func(*args, **kwargs)   # exact: its values are its inputs' (module docstring)
            marks.mark(out, p)
            return out
    out = None
    if kind in ("matmul", "sum") and p.is_simulated:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if tensors and all(t.dtype in (torch.float32, torch.float64) for t in tensors):
            if p.kind == "mx" and kind == "matmul":
                args = list(args)  # type: ignore[assignment]
                for index, dim in MATMULS[func]:
                    args[index] = _mx_operand(args[index], p, dim, stream, cache)  # type: ignore[index]
                args = tuple(args)
            carrier = tensors[0].dtype
            acc = p.accumulation_format.name
            if acc == "float64" and carrier == torch.float32:
                wide = [a.to(torch.float64) if isinstance(a, torch.Tensor)
                        and a.is_floating_point() else a for a in args]  # flat: tensors, scalars
                out = round_values(func(*wide, **kwargs), p, stream=stream).to(carrier)
                if marks is not None:
                    marks.mark(out, p)
                return out
            if acc != {torch.float32: "float32", torch.float64: "float64"}[carrier]:
                out = _accumulated(func, args, kwargs, p, stream)
    if out is None:
        out = func(*args, **kwargs)
    if view:
        # a view of an input: its values are rounded already (and on the grid if it is)
        if marks is not None and marks.on_grid(_floating_inputs(args[:1]), p):
            marks.mark(out, p)
        return out

    def _round(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            rounded = round_values(t, p, stream=stream)
            if writes:
                with torch.no_grad():
                    t.copy_(rounded)  # an in-place op: round the tensor it wrote
                rounded = t
            if marks is not None and p.is_simulated:
                marks.mark(rounded, p)
            return rounded
        return t

    if isinstance(out, torch.Tensor):
        return _round(out)
    return tree_map(_round, out)


class RoundResults(TorchDispatchMode):
    """Round the floating results of every ATen op to ``choose()`` (see the module docstring).

    Args:
        choose: the precision in force for the next op, or ``None`` for no rounding.
        domain: keys this mode's stochastic-rounding streams apart from other users of the
            same seed (one stream per seed, started afresh by each new mode).
    """

    def __init__(self, choose: Callable[[], Precision | None], domain: int = 1) -> None:
        super().__init__()
        self.choose = choose
        self.domain = domain
        self.streams: dict[int, RandomStream] = {}
        self.mx_cache: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.marks = GridMarks()
        #: the ATen op being dispatched when ``choose()`` is called (a ``choose`` that
        #: depends on the op reads it: per-op assignment, ``+mod[PATH::OP]``)
        self.current: Any = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # no torch.compile runs under this mode: spare each op torch's dynamo-disabling
        # wrapper around __torch_dispatch__ (torch.utils._python_dispatch documents the hook)
        return False

    def stream(self, p: Precision) -> RandomStream | None:
        """The stochastic-rounding stream of ``p``'s seed (None unless ``p`` rounds ``sr``)."""
        if not p.needs_stream:
            return None
        seed = p.seed or 0
        if seed not in self.streams:
            self.streams[seed] = RandomStream(seed, self.domain)
        return self.streams[seed]

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        self.current = func
        p = self.choose()
        if p is None:
            return func(*args, **kwargs)
        return run_op(func, args, kwargs, p, stream=self.stream(p), cache=self.mx_cache,
                      marks=self.marks)
