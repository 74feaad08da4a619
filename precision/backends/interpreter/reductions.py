"""Reductions: sums, products, extrema (with indices), boolean any/all, variance,
cumulative sums/products, softmax, logsumexp and vector norms.

Floating sums accumulate sequentially, each addition rounded at the working precision
(numpy's object reduce); extrema compare exact midpoints, so they pick the same entries as
PyTorch whenever the inputs are the same numbers. NaN propagates through max/min.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import compress
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.comparisons import truth
from precision.backends.interpreter.complex import is_complex
from precision.backends.interpreter.core import (
    NAN,
    NEG_INF,
    ZERO,
    Ctx,
    OpTable,
    is_float,
    reduce_axes,
)
from precision.backends.interpreter.elementwise import _EXP, UNARY, absolute, power
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten


def _keep(a: np.ndarray, axes: list[int], keepdim: bool) -> np.ndarray:
    if keepdim:
        for ax in axes:
            a = np.expand_dims(a, ax)
    return a


def total(ctx: Ctx, x: Any, dims: Any = None, keepdim: bool = False, dtype: Any = None
          ) -> Any:
    """sum over ``dims`` (all if None / []), each addition rounded at prec."""
    if is_complex(x):
        return x.map_parts(lambda p: total(ctx, p, dims, keepdim))
    nd = np.ndim(x.a) if is_float(x) else np.ndim(x)
    axes = reduce_axes(dims, nd)
    if not is_float(x):
        if dtype is not None and dtype.is_floating_point:
            return total(ctx, ctx.arr(x), dims, keepdim)
        res = np.asarray(np.sum(np.asarray(x), axis=tuple(axes), keepdims=keepdim))
        return res.astype(np.int64) if res.dtype == bool else res
    a = x.a
    if nd == 0:
        return x
    with workprec(ctx.prec):
        for ax in sorted(axes, reverse=True):
            if a.shape[ax] == 0:
                shape = tuple(s for i, s in enumerate(a.shape) if i != ax)
                a = np.empty(shape, dtype=object)
                a.fill(ZERO)
            else:
                a = np.add.reduce(a, axis=ax)
    return MPArray(np.asarray(_keep(np.asarray(a, dtype=object), axes, keepdim),
                              dtype=object), ctx.prec, finite=x.finite)


def count(shape: tuple[int, ...], dims: Any) -> int:
    """Number of entries reduced over ``dims`` (1 for a 0-d tensor)."""
    if not shape:
        return 1
    return int(np.prod([shape[d] for d in reduce_axes(dims, len(shape))]))


def mean(ctx: Ctx, x: Any, dims: Any = None, keepdim: bool = False, dtype: Any = None
         ) -> MPArray:
    if is_complex(x):
        return x.map_parts(lambda p: mean(ctx, p, dims, keepdim))
    x = ctx.arr(x)
    n = count(x.shape, dims)
    return total(ctx, x, dims, keepdim) / float(n) if n else ctx.filled(
        total(ctx, x, dims, keepdim).shape, NAN)


def product(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None
            ) -> Any:
    if not is_float(x):
        res = np.prod(np.asarray(x), axis=dim, keepdims=keepdim)
        return np.asarray(res).astype(np.int64) if np.asarray(res).dtype == bool else res
    axes = reduce_axes(dim, x.ndim)
    a = x.stripped().a
    with workprec(ctx.prec):
        for ax in sorted(axes, reverse=True):
            if a.ndim:
                a = np.multiply.reduce(a, axis=ax) if a.shape[ax] else np.ones(
                    tuple(s for i, s in enumerate(a.shape) if i != ax), dtype=object)
    out = np.asarray(_keep(np.asarray(a, dtype=object), axes, keepdim), dtype=object)
    if out.size and not isinstance(out.reshape(-1)[0], flint.arb):
        out = np.frompyfunc(ctx.const, 1, 1)(out)
    return ctx.wrap(out)


def _rows(x: Any, dim: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """x with ``dim`` moved last, as (rows, n), and the shape of the row grid."""
    a = x.stripped().a if is_float(x) else np.asarray(x)
    if a.ndim == 0:
        a = a.reshape(1)
        dim = 0
    moved = np.moveaxis(a, dim, -1)
    return moved.reshape(-1, moved.shape[-1]), moved.shape[:-1]


def _arg_extreme(row: np.ndarray, largest: bool) -> int:
    """Index of the first largest (smallest) entry; the first NaN if there is one."""
    best = 0
    for i in range(len(row)):
        v = row[i]
        if isinstance(v, flint.arb) and v.is_nan():
            return i
        if (v > row[best]) if largest else (v < row[best]):
            best = i
    return best


def extreme_dim(ctx: Ctx, x: Any, dim: int = 0, keepdim: bool = False, largest: bool = True
                ) -> tuple[Any, np.ndarray]:
    """(values, indices) of max.dim / min.dim."""
    nd = x.ndim if is_float(x) else np.ndim(x)
    rows, grid = _rows(x, dim if nd else 0)
    idx = np.array([_arg_extreme(r, largest) for r in rows], dtype=np.int64)
    vals = rows[np.arange(len(rows)), idx] if len(rows) else rows[:, 0]
    vals, idx = vals.reshape(grid), idx.reshape(grid)
    if keepdim and nd:
        vals, idx = np.expand_dims(vals, dim % nd), np.expand_dims(idx, dim % nd)
    if is_float(x):
        return MPArray(np.asarray(vals, dtype=object), ctx.prec, clean=True), idx
    return np.asarray(vals), idx


def arg_extreme(largest: bool) -> Callable[..., np.ndarray]:
    def apply(ctx: Ctx, x: Any, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
        if dim is None:
            flat = x.reshape(-1) if is_float(x) else np.asarray(x).reshape(-1)
            _, idx = extreme_dim(ctx, flat, 0, False, largest)
            return np.asarray(idx).reshape((1,) * (np.ndim(x.a if is_float(x) else x))
                                           if keepdim else ())
        return extreme_dim(ctx, x, dim, keepdim, largest)[1]

    return apply


def amax_amin(largest: bool) -> Callable[..., Any]:
    def apply(ctx: Ctx, x: Any, dims: Any = (), keepdim: bool = False) -> Any:
        nd = x.ndim if is_float(x) else np.ndim(x)
        axes = reduce_axes(dims, nd)
        out = x
        for ax in sorted(axes, reverse=True):
            if (out.ndim if is_float(out) else np.ndim(out)) == 0:
                break
            out = extreme_dim(ctx, out, ax, False, largest)[0]
        if keepdim and nd:
            out = (MPArray(_keep(out.a, axes, True), ctx.prec, True) if is_float(out)
                   else _keep(np.asarray(out), axes, True))
        return out

    return apply


def _whole_extreme(largest: bool) -> Callable[..., Any]:
    return lambda ctx, x: amax_amin(largest)(ctx, x, None, False)


def _any_all(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def apply(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False) -> np.ndarray:
        t = truth(x)
        axes = tuple(reduce_axes(dim, t.ndim)) if t.ndim else None
        return np.asarray(fn(t, axis=axes, keepdims=keepdim))

    return apply


def variance(ctx: Ctx, x: Any, dims: Any = None, unbiased: bool | None = None,
             keepdim: bool = False, *, correction: float | None = None) -> MPArray:
    """var.dim (unbiased flag) and var.correction (correction, default 1)."""
    x = ctx.arr(x)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    n = count(x.shape, dims)
    m = total(ctx, x, dims, True) / float(n)
    c = x - m
    return total(ctx, c * c, dims, keepdim) / float(max(n - correction, 0) or math.nan)


def _var_correction(ctx: Ctx, x: Any, dims: Any = None, correction: float | None = None,
                    keepdim: bool = False) -> MPArray:
    return variance(ctx, x, dims, None, keepdim, correction=1 if correction is None
                    else correction)


def var_mean(ctx: Ctx, x: Any, dims: Any = None, *, correction: float | None = None,
             keepdim: bool = False) -> tuple[MPArray, MPArray]:
    """var_mean.correction: (variance with ``correction`` (default 1), mean)."""
    return (_var_correction(ctx, x, dims, correction, keepdim),
            mean(ctx, x, dims, keepdim))


def logcumsumexp(ctx: Ctx, x: Any, dim: int) -> MPArray:
    """log(cumsum(exp(x))) along ``dim``: arb's exponent range has no overflow, so no
    shifting is needed; each step rounds at the working precision."""
    x = ctx.arr(x)
    return UNARY["log"](ctx, cumulative(np.add)(ctx, _EXP(ctx, x), dim).stripped())


def cumulative_extreme(largest: bool) -> Callable[..., tuple[Any, np.ndarray]]:
    """cummax / cummin: (running extreme, index of its latest occurrence) along ``dim``."""

    def apply(ctx: Ctx, x: Any, dim: int) -> tuple[Any, np.ndarray]:
        a = x.stripped().a if is_float(x) else np.asarray(x)
        if a.ndim == 0:
            return x, np.zeros((), dtype=np.int64)
        moved = np.moveaxis(a, dim, -1)
        rows = moved.reshape(-1, moved.shape[-1])
        vals = np.empty(rows.shape, dtype=rows.dtype)
        idx = np.zeros(rows.shape, dtype=np.int64)
        for r in range(rows.shape[0]):
            best = 0
            for i in range(rows.shape[1]):
                v, b = rows[r, i], rows[r, best]
                nan_v = isinstance(v, flint.arb) and v.is_nan()
                nan_b = isinstance(b, flint.arb) and b.is_nan()
                if not nan_b and (nan_v or (v >= b if largest else v <= b)):
                    best = i
                vals[r, i], idx[r, i] = rows[r, best], best
        vals = np.moveaxis(vals.reshape(moved.shape), -1, dim)
        idx = np.moveaxis(idx.reshape(moved.shape), -1, dim)
        return (MPArray(vals, ctx.prec, clean=True) if is_float(x) else vals), idx

    return apply


def cumulative(ufunc: np.ufunc) -> Callable[..., Any]:
    """cumsum / cumprod along ``dim`` (sequential, each step rounded)."""

    def apply(ctx: Ctx, x: Any, dim: int, dtype: Any = None) -> Any:
        if is_complex(x) and ufunc is np.add:
            return x.map_parts(lambda p: apply(ctx, p, dim))
        if not is_float(x):
            if dtype is not None and dtype.is_floating_point:
                return apply(ctx, ctx.arr(x), dim)
            res = ufunc.accumulate(np.asarray(x).astype(np.int64), axis=dim % max(np.ndim(x), 1)
                                   ) if np.ndim(x) else np.asarray(x)
            return res
        if x.ndim == 0:
            return x
        if ufunc is np.add and x.batchable and dim % x.ndim < x.ndim - 2:
            # running sums of whole 2-d slices (linear attention's sum of k v^T): arb_mat
            # additions, each the arb_add the object accumulate would do per entry
            with workprec(ctx.prec):
                res = x.as_batch().running_sum(dim % x.ndim)
            return MPArray.of_batch(res, ctx.prec, x.finite)
        a = x.stripped().a if ufunc is np.multiply else x.a
        with workprec(ctx.prec):
            res = ufunc.accumulate(a, axis=dim % x.ndim) if a.size else a
        return MPArray(np.asarray(res, dtype=object), ctx.prec)

    return apply


_IS_FINITE = flint.arb.is_finite
_MID = np.frompyfunc(flint.arb.mid, 1, 1)
_EXP_C = np.frompyfunc(flint.arb.exp, 1, 1)
_LOG_C = np.frompyfunc(flint.arb.log, 1, 1)


def softmax(ctx: Ctx, x: MPArray, dim: int, half_to_float: bool = False, log: bool = False
            ) -> MPArray:
    """softmax along ``dim``; entries that are not finite (a -inf mask) get probability
    exactly 0 (log-probability -inf), a row without a finite entry is NaN.

    Per row r: m = max of the finite entries, s_i = x_i - m, e_i = exp(s_i), t = sum_i e_i
    added left to right, out_i = e_i / t (log: s_i - log t); each op rounded at prec. The
    rows run together as numpy object passes (no Python loop per entry)."""
    x = ctx.arr(x)
    if x.ndim == 0:
        return ctx.filled((), ZERO if log else flint.arb(1))
    if x.size == 0:
        return x
    a = np.moveaxis(x.stripped().a, dim, -1)
    shape = a.shape
    rows = a.reshape(-1, shape[-1])
    listed = rows.tolist()
    live = np.fromiter(map(_IS_FINITE, rows.reshape(-1).tolist()), dtype=bool,
                       count=rows.size).reshape(rows.shape)
    any_live = live.any(axis=1)
    if live.all():
        m = list(map(max, listed))
        work = rows
    else:
        m = [max(compress(r, ok)) if any(ok) else ZERO
             for r, ok in zip(listed, live.tolist(), strict=True)]
        work = np.where(live, rows, np.fromiter(m, dtype=object, count=len(m))[:, None])
    with workprec(x.prec):
        shifted = _MID(work - np.fromiter(m, dtype=object, count=len(m))[:, None])
        ex = _MID(_EXP_C(shifted))
        ex[~live] = ZERO
        tot = _MID(np.add.reduce(ex, axis=1))  # sequential, each addition rounded
        if log:
            out = _MID(shifted - _MID(_LOG_C(tot))[:, None])
            out[~live] = NEG_INF
        else:
            out = _MID(ex / tot[:, None])
    out[~any_live] = NAN
    return MPArray(np.moveaxis(out.reshape(shape), -1, dim), x.prec, clean=True,
                   finite=bool(live.all()) or (not log and bool(any_live.all())))


def logsumexp(ctx: Ctx, x: Any, dims: Any, keepdim: bool = False) -> MPArray:
    """log(sum(exp(x - m))) + m with m the max over ``dims`` (finite inputs)."""
    x = ctx.arr(x)
    axes = reduce_axes(dims, x.ndim)
    m = amax_amin(True)(ctx, x, axes, True)
    s = total(ctx, _EXP(ctx, x - m), axes, True)
    out = UNARY["log"](ctx, s) + m
    if not keepdim:
        out = MPArray(np.squeeze(out.a, axis=tuple(axes)), ctx.prec)
    return out


def vector_norm(ctx: Ctx, x: Any, ord: float = 2, dim: Any = None,  # noqa: A002
                keepdim: bool = False, *, dtype: Any = None) -> MPArray:
    """linalg_vector_norm: (sum |x|^ord)^(1/ord), with ord in {2, 1, inf, -inf, 0} special."""
    x = ctx.arr(x)
    if ord == 2:
        return UNARY["sqrt"](ctx, total(ctx, x * x, dim, keepdim))
    ax = absolute(ctx, x)
    if ord == 1:
        return total(ctx, ax, dim, keepdim)
    if ord == math.inf:
        return amax_amin(True)(ctx, ax, dim if dim is not None else (), keepdim)
    if ord == -math.inf:
        return amax_amin(False)(ctx, ax, dim if dim is not None else (), keepdim)
    if ord == 0:
        nz = ctx.arr(truth(x).astype(np.float64))
        return total(ctx, nz, dim, keepdim)
    s = total(ctx, power(ctx, ax, float(ord)), dim, keepdim)  # any other p, also p < 0
    return power(ctx, s, 1.0 / ord)


OPS: OpTable = {
    aten.sum.dim_IntList: total,
    aten.sum.default: lambda ctx, x, dtype=None: total(ctx, x, None, False, dtype),
    aten.mean.dim: mean,
    aten.mean.default: lambda ctx, x, dtype=None: mean(ctx, x),
    aten.prod.default: lambda ctx, x, dtype=None: product(ctx, x),
    aten.prod.dim_int: product,
    aten.amax.default: amax_amin(True), aten.amin.default: amax_amin(False),
    aten.max.default: _whole_extreme(True), aten.min.default: _whole_extreme(False),
    aten.max.dim: lambda ctx, x, dim, keepdim=False: extreme_dim(ctx, x, dim, keepdim, True),
    aten.min.dim: lambda ctx, x, dim, keepdim=False: extreme_dim(ctx, x, dim, keepdim, False),
    aten.argmax.default: arg_extreme(True), aten.argmin.default: arg_extreme(False),
    aten.any.default: _any_all(np.any), aten.any.dim: _any_all(np.any),
    aten.any.dims: _any_all(np.any),
    aten.all.default: _any_all(np.all), aten.all.dim: _any_all(np.all),
    aten.all.dims: _any_all(np.all),
    aten.var.correction: _var_correction,
    aten.var.dim: variance,
    aten.cumsum.default: cumulative(np.add), aten.cumprod.default: cumulative(np.multiply),
    aten.logcumsumexp.default: logcumsumexp,
    aten.cummax.default: cumulative_extreme(True), aten.cummin.default: cumulative_extreme(False),
    aten.var_mean.correction: var_mean,
    aten._softmax.default: softmax,
    aten._log_softmax.default: lambda ctx, x, dim, half=False: softmax(ctx, x, dim, log=True),
    aten.logsumexp.default: logsumexp,
    aten.linalg_vector_norm.default: vector_norm,
}
