"""Comparisons, masks and selections: comparisons of exact midpoints (never rounded),
NaN / inf tests, logical and bitwise ops, where, clamp, maximum / minimum.

Results of comparisons are numpy bool arrays; integer tensors keep numpy's integer
semantics (PyTorch's).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from precision.backends.interpreter.complex import MPComplex, as_complex, is_complex
from precision.backends.interpreter.core import (
    Ctx,
    OpTable,
    UnsupportedOpError,
    float_result,
    is_float,
)
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def _cmp_operand(ctx: Ctx, v: Any, other_float: bool) -> Any:
    if isinstance(v, MPArray):
        return v.stripped().a
    if isinstance(v, np.ndarray) and other_float:
        return ctx.arr(v).a
    if other_float and isinstance(v, int | float | bool | np.number):
        return ctx.const(v)
    return v


def compare(op: Callable[[Any, Any], Any]) -> Callable[..., np.ndarray]:
    """A comparison of exact midpoints (no rounding anywhere), giving a numpy bool array."""

    def apply(ctx: Ctx, a: Any, b: Any) -> np.ndarray:
        fl = is_float(a) or is_float(b)
        aa, bb = _cmp_operand(ctx, a, fl), _cmp_operand(ctx, b, fl)
        return np.asarray(op(aa, bb), dtype=bool)

    return apply


def _ne(ctx: Ctx, a: Any, b: Any) -> np.ndarray:
    return np.logical_not(compare(operator.eq)(ctx, a, b))


def truth(x: Any) -> np.ndarray:
    """A tensor's entries as booleans (nonzero; NaN counts as True)."""
    if is_complex(x):
        return truth(x.re) | truth(x.im)
    if isinstance(x, MPArray):
        return np.asarray(np.frompyfunc(lambda v: not v.is_zero(), 1, 1)(x.stripped().a),
                          dtype=bool)
    return np.asarray(x).astype(bool)


def _logical(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda ctx, *xs: fn(*[truth(x) for x in xs])


def _bitwise(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def apply(ctx: Ctx, a: Any, b: Any) -> Any:
        if is_float(a) or is_float(b):
            raise UnsupportedOpError("bitwise op on a floating tensor")
        return fn(a, b)

    return apply


def _bitwise_not(ctx: Ctx, x: Any) -> Any:
    x = np.asarray(x)
    return np.logical_not(x) if x.dtype == bool else np.invert(x)


def isnan(ctx: Ctx, x: Any) -> np.ndarray:
    if is_complex(x):
        return isnan(ctx, x.re) | isnan(ctx, x.im)
    if isinstance(x, MPArray):
        return np.asarray(np.frompyfunc(lambda v: v.is_nan(), 1, 1)(x.stripped().a), dtype=bool)
    return np.zeros(np.shape(x), dtype=bool)


def isinf(ctx: Ctx, x: Any) -> np.ndarray:
    if isinstance(x, MPArray):
        return np.asarray(np.frompyfunc(lambda v: not v.is_finite() and not v.is_nan(), 1, 1)(
            x.stripped().a), dtype=bool)
    return np.zeros(np.shape(x), dtype=bool)


def where(ctx: Ctx, cond: Any, a: Any, b: Any) -> Any:
    c = truth(cond)
    if is_complex(a) or is_complex(b):
        x, y = as_complex(ctx, a), as_complex(ctx, b)
        return MPComplex(where(ctx, c, x.re, y.re), where(ctx, c, x.im, y.im))
    if not (is_float(a) or is_float(b)):
        return np.where(c, a, b)
    aa = ctx.arr(a).stripped().a if not isinstance(a, float | int) else ctx.const(a)
    bb = ctx.arr(b).stripped().a if not isinstance(b, float | int) else ctx.const(b)
    return MPArray(np.asarray(np.where(c, aa, bb), dtype=object), ctx.prec, clean=True)


def clamp(ctx: Ctx, x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """clamp / clamp.Tensor: NaN inputs stay NaN, as in PyTorch."""
    if not is_float(x) and not is_float(min) and not is_float(max):
        out = np.asarray(x)
        if min is not None:
            out = np.maximum(out, min)
        if max is not None:
            out = np.minimum(out, max)
        return float_result(ctx, out)
    out = ctx.arr(x)
    if min is not None:
        out = where(ctx, compare(operator.lt)(ctx, out, min), min, out)
    if max is not None:
        out = where(ctx, compare(operator.gt)(ctx, out, max), max, out)
    return out


def _extremum(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """maximum / minimum; NaN propagates."""

    def apply(ctx: Ctx, a: Any, b: Any) -> Any:
        if not (is_float(a) or is_float(b)):
            return np.maximum(a, b) if op is operator.ge else np.minimum(a, b)
        pick = compare(op)(ctx, a, b)
        out = where(ctx, pick, a, b)
        nan = isnan(ctx, ctx.arr(a)) | isnan(ctx, ctx.arr(b))
        return where(ctx, nan, float("nan"), out) if nan.any() else out

    return apply


OPS: OpTable = {
    aten.maximum.default: _extremum(operator.ge),
    aten.minimum.default: _extremum(operator.le),
    aten.clamp.default: clamp,
    aten.clamp.Tensor: clamp,
    aten.clamp_min.default: lambda ctx, x, m: clamp(ctx, x, m, None),
    aten.clamp_max.default: lambda ctx, x, m: clamp(ctx, x, None, m),
    aten.where.self: where,
    aten.gt.Scalar: compare(operator.gt),
    aten.gt.Tensor: compare(operator.gt),
    aten.ge.Scalar: compare(operator.ge),
    aten.ge.Tensor: compare(operator.ge),
    aten.lt.Scalar: compare(operator.lt),
    aten.lt.Tensor: compare(operator.lt),
    aten.le.Scalar: compare(operator.le),
    aten.le.Tensor: compare(operator.le),
    aten.eq.Scalar: compare(operator.eq),
    aten.eq.Tensor: compare(operator.eq),
    aten.ne.Scalar: _ne,
    aten.ne.Tensor: _ne,
    aten.isnan.default: isnan,
    aten.isinf.default: isinf,
    aten.logical_not.default: _logical(np.logical_not),
    aten.logical_and.default: _logical(np.logical_and),
    aten.logical_or.default: _logical(np.logical_or),
    aten.logical_xor.default: _logical(np.logical_xor),
    aten.bitwise_not.default: _bitwise_not,
    aten.bitwise_and.Tensor: _bitwise(np.bitwise_and),
    aten.bitwise_and.Scalar: _bitwise(np.bitwise_and),
    aten.bitwise_or.Tensor: _bitwise(np.bitwise_or),
    aten.bitwise_or.Scalar: _bitwise(np.bitwise_or),
    aten.bitwise_xor.Tensor: _bitwise(np.bitwise_xor),
    aten.bitwise_xor.Scalar: _bitwise(np.bitwise_xor),
}
