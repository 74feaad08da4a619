"""Arbitrary-precision evaluation of any exportable PyTorch module (DESIGN principle 1).

The module is exported with ``torch.export`` and decomposed to core ATen ops; this module
interprets that graph with :class:`~precision.backends.mp_backend.MPArray` values. Weights
and buffers are read from the module at every call and converted exactly (every float32 /
float64 value is an exact arb), inputs likewise, so the same weights run in mpN. An op
missing from :data:`OPS` is an :class:`UnsupportedOpError` naming the op and the module path.

Values flowing through the graph: ``MPArray`` for floating tensors, numpy ``bool`` / ``int64``
arrays for masks and indices, Python scalars and lists for the rest.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.mp_backend import (
    MPArray,
    MPBackend,
    _Prec,
    elementwise,
    exact_array,
    matmul,
)
from precision.precisions import Precision, parse_precision

aten = torch.ops.aten


class UnsupportedOpError(NotImplementedError):
    """The graph uses an op the arbitrary-precision interpreter does not implement."""


class Ctx:
    """Interpretation context: the backend (precision) and its bit count."""

    def __init__(self, xp: MPBackend) -> None:
        self.xp = xp
        self.prec = xp.prec

    def arr(self, v: Any) -> MPArray:
        """A float operand as an MPArray (numpy bool/int arrays and scalars converted)."""
        if isinstance(v, MPArray):
            return v
        if isinstance(v, np.ndarray):
            return self.xp.asarray(v.astype(np.float64) if v.dtype != object else v)
        return self.xp.scalar(float(v))

    def wrap(self, a: np.ndarray) -> MPArray:
        return MPArray(np.asarray(a, dtype=object), self.prec)


def _is_float(v: Any) -> bool:
    return isinstance(v, MPArray)


_ZERO = flint.arb(0)
_ONE = flint.arb(1)
_NEG_INF = flint.arb("-inf")


_exp = elementwise(flint.arb.exp)
_log = elementwise(flint.arb.log)
_sqrt = elementwise(flint.arb.sqrt)
_rsqrt = elementwise(flint.arb.rsqrt)
_tanh = elementwise(flint.arb.tanh)
_erf = elementwise(flint.arb.erf)
_sin = elementwise(flint.arb.sin)
_cos = elementwise(flint.arb.cos)
_relu = np.frompyfunc(lambda v: v if v > 0 else _ZERO, 1, 1)


def _finite_or_float(res: MPArray, a: Any, b: Any, op: Callable[[float, float], float]
                     ) -> MPArray:
    """arb turns -inf + 2 into [+/- inf]; redo non-finite entries with IEEE semantics."""
    flat = res.a.reshape(-1)
    if all(v.is_finite() for v in flat):
        return res
    aa = np.broadcast_to(a.a if isinstance(a, MPArray) else np.asarray(a, dtype=object),
                         res.shape).reshape(-1)
    bb = np.broadcast_to(b.a if isinstance(b, MPArray) else np.asarray(b, dtype=object),
                         res.shape).reshape(-1)
    out = flat.copy()
    for i, v in enumerate(flat):
        if not v.is_finite():
            out[i] = flint.arb(op(float(aa[i]), float(bb[i])))
    return MPArray(out.reshape(res.shape), res.prec)


def _reduce_axes(dims: Any, ndim: int) -> list[int]:
    if dims is None or (isinstance(dims, list | tuple) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % ndim for d in dims})


def _sum(ctx: Ctx, x: MPArray, dims: Any, keepdim: bool) -> MPArray:
    axes = _reduce_axes(dims, x.ndim)
    out = x
    for ax in sorted(axes, reverse=True):
        out = ctx.xp.sum(out, axis=ax) if out.ndim > 0 else out
    if keepdim:
        a = out.a
        for ax in axes:
            a = np.expand_dims(a, ax)
        out = MPArray(a, x.prec)
    return out


def _count(x: MPArray, dims: Any) -> int:
    return int(np.prod([x.shape[d] for d in _reduce_axes(dims, x.ndim)]))


# --- op implementations ---------------------------------------------------------------
def _add_sub(ctx: Ctx, a: Any, b: Any, alpha: float, sign: int) -> Any:
    """a + sign * alpha * b for tensors, arrays or scalars (aten.add / aten.sub)."""
    if not (_is_float(a) or _is_float(b)):
        return np.add(a, b * alpha) if sign > 0 else np.subtract(a, b * alpha)
    a = ctx.arr(a) if not _is_float(a) and isinstance(a, np.ndarray) else a
    b = ctx.arr(b) if not _is_float(b) and isinstance(b, np.ndarray) else b
    if alpha != 1:
        b = b * alpha
    if sign > 0:
        res = a + b if _is_float(a) else b + a
    else:
        res = a - b if _is_float(a) else (-b) + a
    return _finite_or_float(res, a, b, operator.add if sign > 0 else operator.sub)


def _add(ctx: Ctx, a: Any, b: Any, alpha: float = 1) -> Any:
    return _add_sub(ctx, a, b, alpha, +1)


def _sub(ctx: Ctx, a: Any, b: Any, alpha: float = 1) -> Any:
    return _add_sub(ctx, a, b, alpha, -1)


def _mul(ctx: Ctx, a: Any, b: Any) -> Any:
    if not (_is_float(a) or _is_float(b)):
        return np.multiply(a, b)
    a = ctx.arr(a) if isinstance(a, np.ndarray) else a
    b = ctx.arr(b) if isinstance(b, np.ndarray) else b
    return a * b if _is_float(a) else b * a


def _div(ctx: Ctx, a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    if rounding_mode is not None:
        raise UnsupportedOpError(f"div with rounding_mode={rounding_mode!r}")
    a = ctx.arr(a) if not _is_float(a) else a
    return a / (ctx.arr(b) if isinstance(b, np.ndarray) else b)


def _where(ctx: Ctx, cond: Any, a: Any, b: Any) -> Any:
    if not (_is_float(a) or _is_float(b)):
        return np.where(cond, a, b)
    aa = ctx.arr(a).a if not (isinstance(a, float) and math.isinf(a)) else (
        _NEG_INF if a < 0 else flint.arb("inf"))
    bb = ctx.arr(b).a if not (isinstance(b, float) and math.isinf(b)) else (
        _NEG_INF if b < 0 else flint.arb("inf"))
    c = cond.a if isinstance(cond, MPArray) else np.asarray(cond)
    return ctx.wrap(np.where(c.astype(bool), aa, bb))


def _cmp(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def apply(ctx: Ctx, a: Any, b: Any) -> np.ndarray:
        a = a.stripped() if isinstance(a, MPArray) else a
        b = b.stripped() if isinstance(b, MPArray) else b
        aa = a.a if isinstance(a, MPArray) else a
        bb = b.a if isinstance(b, MPArray) else b
        if isinstance(bb, float | int) and isinstance(aa, np.ndarray) and aa.dtype == object:
            bb = flint.arb(bb)
        if isinstance(aa, float | int) and isinstance(bb, np.ndarray) and bb.dtype == object:
            aa = flint.arb(aa)
        return np.asarray(op(aa, bb), dtype=bool)

    return apply


def _softmax(ctx: Ctx, x: MPArray, dim: int, half_to_float: bool = False, log: bool = False
             ) -> MPArray:
    """softmax along ``dim``; entries equal to -inf (masked) get probability exactly 0."""
    a = np.moveaxis(x.stripped().a, dim, -1)
    shape = a.shape
    rows = a.reshape(-1, shape[-1])
    out = np.empty(rows.shape, dtype=object)
    with _Prec(x.prec):
        for r in range(rows.shape[0]):
            row = rows[r]
            live = [v.is_finite() for v in row]
            if not any(live):
                out[r] = [flint.arb("nan")] * len(row)
                continue
            m = max(v for v, ok in zip(row, live, strict=True) if ok)
            shifted = [(v - m).mid() if ok else None for v, ok in zip(row, live, strict=True)]
            ex = [s.exp().mid() if s is not None else _ZERO for s in shifted]
            total = _ZERO
            for e in ex:
                total = (total + e).mid()
            if log:
                lt = total.log().mid()
                out[r] = [(s - lt).mid() if s is not None else _NEG_INF for s in shifted]
            else:
                out[r] = [(e / total).mid() for e in ex]
    return MPArray(np.moveaxis(out.reshape(shape), -1, dim), x.prec)


def _layer_norm(ctx: Ctx, x: MPArray, normalized_shape: Sequence[int], weight: Any, bias: Any,
                eps: float) -> tuple[MPArray, MPArray, MPArray]:
    k = len(normalized_shape)
    dims = list(range(x.ndim - k, x.ndim))
    n = _count(x, dims)
    mean = _sum(ctx, x, dims, True) / float(n)
    centered = x - mean
    var = _sum(ctx, centered * centered, dims, True) / float(n)
    rstd = _rsqrt(var + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _gelu(ctx: Ctx, x: MPArray, approximate: str = "none") -> MPArray:
    if approximate == "tanh":
        with _Prec(x.prec):
            c = (flint.arb(2) / flint.arb.pi()).sqrt().mid()
        inner = (x + x * x * x * 0.044715) * MPArray(np.array(c, dtype=object), x.prec)
        return x * 0.5 * (_tanh(inner) + 1.0)
    with _Prec(x.prec):
        r2 = flint.arb(2).sqrt().mid()
    return x * 0.5 * (_erf(x / MPArray(np.array(r2, dtype=object), x.prec)) + 1.0)


def _pow(ctx: Ctx, x: Any, e: Any) -> Any:
    if not _is_float(x):
        if isinstance(x, int | float) and _is_float(e):  # scalar ** tensor
            base = ctx.xp.scalar(float(x))
            return elementwise(lambda v: base.a[()] ** v)(e)
        return np.power(x, e)
    if isinstance(e, int) or (isinstance(e, float) and e.is_integer() and abs(e) <= 64):
        k = int(e)
        if k == 0:
            return ctx.wrap(np.full(x.shape, _ONE, dtype=object))
        out = x
        for _ in range(abs(k) - 1):
            out = out * x
        return out if k > 0 else 1.0 / out
    if e == 0.5:
        return _sqrt(x)
    ee = ctx.xp.scalar(float(e)).a[()] if not _is_float(e) else None
    if ee is None:
        raise UnsupportedOpError("pow with a tensor exponent")
    return elementwise(lambda v: v**ee)(x)


def _view(ctx: Ctx, x: Any, shape: Sequence[int]) -> Any:
    a = x.a if isinstance(x, MPArray) else x
    out = np.reshape(a, tuple(shape))
    return MPArray(out, x.prec) if isinstance(x, MPArray) else out


def _map_array(x: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    if isinstance(x, MPArray):
        return MPArray(np.asarray(fn(x.a), dtype=object), x.prec)
    return fn(np.asarray(x))


def _slice(ctx: Ctx, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
           ) -> Any:
    idx = [slice(None)] * (x.ndim if isinstance(x, MPArray) else np.ndim(x))
    idx[dim] = slice(start, end, step)
    return _map_array(x, lambda a: a[tuple(idx)])


def _select(ctx: Ctx, x: Any, dim: int, index: int) -> Any:
    idx: list[Any] = [slice(None)] * (x.ndim if isinstance(x, MPArray) else np.ndim(x))
    idx[dim] = index
    return _map_array(x, lambda a: np.asarray(a[tuple(idx)]))


def _cat(ctx: Ctx, tensors: Sequence[Any], dim: int = 0) -> Any:
    tensors = [t for t in tensors if not (isinstance(t, MPArray) and t.size == 0 and t.ndim == 1)]
    if any(isinstance(t, MPArray) for t in tensors):
        parts = [ctx.arr(t).a for t in tensors]
        return ctx.wrap(np.concatenate(parts, axis=dim))
    return np.concatenate([np.asarray(t) for t in tensors], axis=dim)


def _pad(ctx: Ctx, x: MPArray, pad: Sequence[int], value: float = 0.0) -> MPArray:
    """constant_pad_nd: ``pad`` lists (left, right) pairs from the last dim backwards."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise UnsupportedOpError("constant_pad_nd with negative padding")
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, widths, strict=True))
    fill = ctx.xp.scalar(value).a[()]
    out = np.empty(shape, dtype=object)
    out.fill(fill)
    out[tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape, widths, strict=True))] = x.a
    return ctx.wrap(out)


def _convolution(ctx: Ctx, x: MPArray, w: MPArray, bias: Any, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                 output_padding: Sequence[int], groups: int) -> MPArray:
    """1-d convolution (cross-correlation, as torch) as grouped matrix products."""
    if transposed or x.ndim != 3 or len(stride) != 1:
        raise UnsupportedOpError("convolution other than a plain 1-d convolution")
    if padding[0]:
        x = _pad(ctx, x, [padding[0], padding[0]])
    b, cin, length = x.shape
    cout, cin_g, k = w.shape
    s, d = stride[0], dilation[0]
    lout = (length - d * (k - 1) - 1) // s + 1
    pos = np.arange(lout)[:, None] * s + np.arange(k)[None, :] * d  # (lout, k)
    cout_g = cout // groups
    outs = []
    for g in range(groups):
        xg = x.a[:, g * cin_g:(g + 1) * cin_g, :][:, :, pos]  # (b, cin_g, lout, k)
        cols = np.moveaxis(xg, 2, 1).reshape(b, lout, cin_g * k)  # (b, lout, cin_g*k)
        wg = w.a[g * cout_g:(g + 1) * cout_g].reshape(cout_g, cin_g * k).T
        prod = matmul(MPArray(np.ascontiguousarray(cols), x.prec), MPArray(wg, w.prec))
        outs.append(np.moveaxis(prod.a, 2, 1))  # (b, cout_g, lout)
    out = ctx.wrap(np.concatenate(outs, axis=1))
    if bias is not None:
        out = out + MPArray(bias.a.reshape(1, cout, 1), bias.prec)
    return out


def _full(ctx: Ctx, size: Sequence[int], value: Any, dtype: Any = None, **_: Any) -> Any:
    if dtype is not None and not dtype.is_floating_point:
        np_dtype = bool if dtype == torch.bool else np.int64
        return np.full(tuple(size), value, dtype=np_dtype)
    if isinstance(value, float) and math.isinf(value):
        out = np.empty(tuple(size), dtype=object)
        out.fill(flint.arb("inf") if value > 0 else _NEG_INF)
        return ctx.wrap(out)
    return ctx.xp.zeros(tuple(size)) + float(value)


def _arange(ctx: Ctx, start: Any, end: Any = None, step: Any = 1, dtype: Any = None,
            **_: Any) -> Any:
    if end is None:
        start, end = 0, start
    vals = np.arange(start, end, step)
    if dtype is not None and dtype.is_floating_point:
        return ctx.xp.asarray(vals.astype(np.float64))
    return vals


def _index(ctx: Ctx, x: Any, indices: Sequence[Any]) -> Any:
    idx = tuple(slice(None) if i is None else np.asarray(i.a if isinstance(i, MPArray) else i)
                for i in indices)
    return _map_array(x, lambda a: a[idx])


def _to_copy(ctx: Ctx, x: Any, dtype: Any = None, **_: Any) -> Any:
    if dtype is None or dtype.is_floating_point:
        return ctx.arr(x) if isinstance(x, np.ndarray) else x
    if isinstance(x, MPArray):
        vals = np.vectorize(float, otypes=[np.float64])(x.a)
        return vals.astype(bool if dtype == torch.bool else np.int64)
    return np.asarray(x).astype(bool if dtype == torch.bool else np.int64)


def _amax(ctx: Ctx, x: MPArray, dims: Any = (), keepdim: bool = False) -> MPArray:
    axes = tuple(_reduce_axes(dims, x.ndim))
    return ctx.wrap(np.max(x.stripped().a, axis=axes, keepdims=keepdim))


def _amin(ctx: Ctx, x: MPArray, dims: Any = (), keepdim: bool = False) -> MPArray:
    axes = tuple(_reduce_axes(dims, x.ndim))
    return ctx.wrap(np.min(x.stripped().a, axis=axes, keepdims=keepdim))


def _var(ctx: Ctx, x: MPArray, dims: Any = None, correction: float | None = None,
         keepdim: bool = False, **_: Any) -> MPArray:
    n = _count(x, dims)
    mean = _sum(ctx, x, dims, True) / float(n)
    c = x - mean
    corr = 1 if correction is None else correction
    return _sum(ctx, c * c, dims, keepdim) / float(n - corr)


def _expand(ctx: Ctx, x: Any, size: Sequence[int], **_: Any) -> Any:
    shape = tuple(x.shape[i - (len(size) - x.ndim)] if s == -1 else s for i, s in enumerate(size))
    return _map_array(x, lambda a: np.broadcast_to(a, shape))


def _squeeze(ctx: Ctx, x: Any, dims: Any = None) -> Any:
    if dims is None:
        return _map_array(x, np.squeeze)
    dims = [dims] if isinstance(dims, int) else list(dims)
    nd = x.ndim if isinstance(x, MPArray) else np.ndim(x)
    keep = tuple(d % nd for d in dims if x.shape[d] == 1)
    return _map_array(x, lambda a: np.squeeze(a, axis=keep) if keep else a)


def _split(ctx: Ctx, x: Any, sizes: Any, dim: int = 0) -> list[Any]:
    n = x.shape[dim]
    if isinstance(sizes, int):
        sizes = [sizes] * (n // sizes) + ([n % sizes] if n % sizes else [])
    out, start = [], 0
    for s in sizes:
        out.append(_slice(ctx, x, dim, start, start + s))
        start += s
    return out


def _tri(fn: Callable[..., np.ndarray]) -> Callable[..., Any]:
    def apply(ctx: Ctx, x: Any, diagonal: int = 0) -> Any:
        if isinstance(x, MPArray):
            mask = fn(np.ones(x.shape[-2:], dtype=bool), diagonal)
            return ctx.wrap(np.where(mask, x.a, _ZERO))
        return fn(np.asarray(x), diagonal)

    return apply


def _clamp(ctx: Ctx, x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    if not isinstance(x, MPArray):
        return np.clip(x, min, max)
    out = x
    if min is not None:
        out = _where(ctx, _cmp(operator.ge)(ctx, out, min), out, ctx.xp.zeros(x.shape) + min)
    if max is not None:
        out = _where(ctx, _cmp(operator.le)(ctx, out, max), out, ctx.xp.zeros(x.shape) + max)
    return out


def _addmm(ctx: Ctx, bias: Any, a: Any, b: Any, beta: float = 1, alpha: float = 1) -> MPArray:
    """beta * bias + alpha * (a @ b). For the usual beta = alpha = 1 with a row-vector bias
    (a Linear layer), the bias is folded into the product as one more term of each dot
    product, [a | 1] @ [b ; bias], so it costs no separate elementwise pass."""
    a, b, bias = ctx.arr(a), ctx.arr(b), ctx.arr(bias)
    if beta == 1 and alpha == 1 and bias.ndim == 1 and a.ndim == 2 and b.ndim == 2:
        ones = np.empty((a.shape[0], 1), dtype=object)
        ones.fill(_ONE)
        left = MPArray(np.concatenate([a.a, ones], axis=1), ctx.prec, a.clean)
        right = MPArray(np.concatenate([b.a, bias.a.reshape(1, -1)], axis=0), ctx.prec,
                        b.clean and bias.clean)
        return left @ right
    prod = a @ b
    return (prod * alpha if alpha != 1 else prod) + (bias * beta if beta != 1 else bias)


def _unary(fn: Callable[[MPArray], MPArray]) -> Callable[..., MPArray]:
    return lambda ctx, x: fn(ctx.arr(x))


OPS: dict[Any, Callable[..., Any]] = {
    # arithmetic
    aten.add.Tensor: _add, aten.add.Scalar: _add,
    aten.sub.Tensor: _sub, aten.sub.Scalar: _sub,
    aten.rsub.Scalar: lambda ctx, a, b, alpha=1: _sub(ctx, b, a * alpha if alpha != 1 else a),
    aten.mul.Tensor: _mul, aten.mul.Scalar: _mul,
    aten.div.Tensor: _div, aten.div.Scalar: _div, aten.div.Tensor_mode: _div,
    aten.neg.default: lambda ctx, x: -ctx.arr(x),
    aten.abs.default: lambda ctx, x: abs(ctx.arr(x)),
    aten.reciprocal.default: lambda ctx, x: 1.0 / ctx.arr(x),
    aten.pow.Tensor_Scalar: _pow, aten.pow.Scalar: _pow, aten.pow.Tensor_Tensor: _pow,
    aten.exp.default: _unary(_exp), aten.log.default: _unary(_log),
    aten.sqrt.default: _unary(_sqrt), aten.rsqrt.default: _unary(_rsqrt),
    aten.tanh.default: _unary(_tanh), aten.erf.default: _unary(_erf),
    aten.sin.default: _unary(_sin), aten.cos.default: _unary(_cos),
    aten.sigmoid.default: lambda ctx, x: 1.0 / (_exp(-ctx.arr(x)) + 1.0),
    aten.relu.default: lambda ctx, x: ctx.wrap(_relu(ctx.arr(x).stripped().a)),
    aten.gelu.default: _gelu,
    aten.maximum.default: lambda ctx, a, b: ctx.wrap(np.where(
        _cmp(operator.ge)(ctx, ctx.arr(a), ctx.arr(b)), *np.broadcast_arrays(
            ctx.arr(a).a, ctx.arr(b).a))),
    aten.minimum.default: lambda ctx, a, b: ctx.wrap(np.where(
        _cmp(operator.le)(ctx, ctx.arr(a), ctx.arr(b)), *np.broadcast_arrays(
            ctx.arr(a).a, ctx.arr(b).a))),
    aten.clamp.default: _clamp,
    aten.clamp_min.default: lambda ctx, x, m: _clamp(ctx, x, m, None),
    aten.clamp_max.default: lambda ctx, x, m: _clamp(ctx, x, None, m),
    aten.where.self: _where,
    aten.gt.Scalar: _cmp(operator.gt), aten.gt.Tensor: _cmp(operator.gt),
    aten.ge.Scalar: _cmp(operator.ge), aten.ge.Tensor: _cmp(operator.ge),
    aten.lt.Scalar: _cmp(operator.lt), aten.lt.Tensor: _cmp(operator.lt),
    aten.le.Scalar: _cmp(operator.le), aten.le.Tensor: _cmp(operator.le),
    aten.eq.Scalar: _cmp(operator.eq), aten.eq.Tensor: _cmp(operator.eq),
    aten.ne.Scalar: _cmp(operator.ne), aten.ne.Tensor: _cmp(operator.ne),
    aten.logical_not.default: lambda ctx, x: np.logical_not(x),
    aten.bitwise_not.default: lambda ctx, x: np.logical_not(x),
    aten.logical_and.default: lambda ctx, a, b: np.logical_and(a, b),
    # products
    aten.mm.default: lambda ctx, a, b: ctx.arr(a) @ ctx.arr(b),
    aten.bmm.default: lambda ctx, a, b: ctx.arr(a) @ ctx.arr(b),
    aten.matmul.default: lambda ctx, a, b: ctx.arr(a) @ ctx.arr(b),
    aten.addmm.default: _addmm,
    aten.convolution.default: _convolution,
    # reductions and normalisation
    aten.sum.dim_IntList: lambda ctx, x, dims, keepdim=False, dtype=None: _sum(ctx, x, dims,
                                                                               keepdim),
    aten.sum.default: lambda ctx, x, dtype=None: _sum(ctx, x, None, False),
    aten.mean.dim: lambda ctx, x, dims, keepdim=False, dtype=None: _sum(
        ctx, x, dims, keepdim) / float(_count(x, dims)),
    aten.mean.default: lambda ctx, x, dtype=None: _sum(ctx, x, None, False) / float(x.size),
    aten.amax.default: _amax, aten.amin.default: _amin,
    aten.var.correction: _var,
    aten._softmax.default: _softmax,
    aten._log_softmax.default: lambda ctx, x, dim, half=False: _softmax(ctx, x, dim, log=True),
    aten.native_layer_norm.default: _layer_norm,
    # shapes and views
    aten.view.default: _view, aten._unsafe_view.default: _view, aten.reshape.default: _view,
    aten.permute.default: lambda ctx, x, dims: _map_array(x, lambda a: np.transpose(a, dims)),
    aten.t.default: lambda ctx, x: _map_array(x, lambda a: a.T),
    aten.transpose.int: lambda ctx, x, d0, d1: _map_array(x, lambda a: np.swapaxes(a, d0, d1)),
    aten.expand.default: _expand,
    aten.unsqueeze.default: lambda ctx, x, d: _map_array(
        x, lambda a: np.expand_dims(a, d if d >= 0 else a.ndim + 1 + d)),
    aten.squeeze.dim: _squeeze, aten.squeeze.dims: _squeeze, aten.squeeze.default: _squeeze,
    aten.slice.Tensor: _slice, aten.select.int: _select,
    aten.cat.default: _cat,
    aten.split.Tensor: _split, aten.split_with_sizes.default: _split,
    aten.constant_pad_nd.default: _pad,
    aten.index.Tensor: _index,
    aten.index_select.default: lambda ctx, x, dim, idx: _map_array(
        x, lambda a: np.take(a, np.asarray(idx), axis=dim)),
    aten.embedding.default: lambda ctx, w, idx, *a: _map_array(
        w, lambda arr: arr[np.asarray(idx)]),
    aten.tril.default: _tri(np.tril), aten.triu.default: _tri(np.triu),
    # creation and copies
    aten.full.default: _full,
    aten.zeros.default: lambda ctx, size, **kw: _full(ctx, size, 0.0, **kw),
    aten.ones.default: lambda ctx, size, **kw: _full(ctx, size, 1.0, **kw),
    aten.full_like.default: lambda ctx, x, v, **kw: _full(ctx, x.shape, v, **kw),
    aten.zeros_like.default: lambda ctx, x, **kw: _full(ctx, x.shape, 0.0, **kw),
    aten.ones_like.default: lambda ctx, x, **kw: _full(ctx, x.shape, 1.0, **kw),
    aten.scalar_tensor.default: lambda ctx, v, **kw: _full(ctx, (), v, **kw),
    aten.arange.default: _arange, aten.arange.start: _arange, aten.arange.start_step: _arange,
    aten.clone.default: lambda ctx, x, **kw: x,
    aten.alias.default: lambda ctx, x: x,
    aten.detach.default: lambda ctx, x: x,
    aten.lift_fresh_copy.default: lambda ctx, x: x,
    aten._to_copy.default: _to_copy,
    operator.getitem: lambda ctx, x, i: x[i],
    # shape / metadata assertions export inserts: nothing to compute
    aten._assert_tensor_metadata.default: lambda ctx, *a, **k: None,
    aten._assert_scalar.default: lambda ctx, *a, **k: None,
    aten.sym_constrain_range_for_size.default: lambda ctx, *a, **k: None,
}


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, kind = list(stack.values())[-1]
        name = getattr(kind, "__name__", str(kind)).split(".")[-1]
        return f"{path or '<root>'} ({name})"
    return "<root>"


def _to_exact(t: torch.Tensor, ctx: Ctx) -> Any:
    if t.dtype.is_floating_point:
        out = exact_array(t.detach().to(torch.float64).cpu().numpy())
        # Rounded into the precision (a no-op for float64 data at >= 16 digits).
        return ctx.xp.asarray(out) if ctx.prec < 53 else MPArray(out, ctx.prec, clean=True)
    return t.detach().cpu().numpy()


class MPProgram:
    """An exported module, ready to evaluate in any ``mpN`` (weights read at each call)."""

    def __init__(self, module: torch.nn.Module, example_inputs: tuple[Any, ...]) -> None:
        self.module = module
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's own deprecations
            ep = torch.export.export(module, example_inputs)
            self.program = ep.run_decompositions()
        self.graph = self.program.graph_module.graph
        self._missing = self.unsupported_ops()

    def unsupported_ops(self) -> list[tuple[str, str]]:
        """(op, module path) of every graph node the interpreter cannot evaluate."""
        out = []
        for node in self.graph.nodes:
            if node.op == "call_function" and node.target not in OPS:
                out.append((str(node.target), _module_path(node)))
        return out

    def _state(self) -> dict[str, torch.Tensor]:
        state = dict(self.module.state_dict(keep_vars=True))
        state.update({k: v for k, v in self.program.constants.items()
                      if isinstance(v, torch.Tensor)})
        return state

    def __call__(self, *inputs: Any, precision: Precision | str = "mp50") -> Any:
        if self._missing:
            op, where = self._missing[0]
            raise UnsupportedOpError(
                f"op {op} (in module {where}) has no arbitrary-precision implementation"
            )
        p = parse_precision(precision)
        if not p.is_mp:
            raise ValueError(f"MPProgram evaluates mpN precisions, not {p.name}")
        ctx = Ctx(p.backend)  # type: ignore[arg-type]
        state = self._state()
        env: dict[str, Any] = {}
        user = iter(inputs)
        specs = {s.arg.name: s for s in self.program.graph_signature.input_specs}
        for node in self.graph.nodes:
            if node.op == "placeholder":
                spec = specs[node.name]
                if spec.kind.name == "USER_INPUT":
                    v = next(user)
                    env[node.name] = _to_exact(v, ctx) if isinstance(v, torch.Tensor) else (
                        ctx.xp.asarray(v) if isinstance(v, np.ndarray) else v)
                else:
                    env[node.name] = _to_exact(state[spec.target], ctx)
            elif node.op == "call_function":
                args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
                kwargs = {k: v for k, v in kwargs.items()
                          if k not in ("layout", "device", "pin_memory", "memory_format")}
                try:
                    env[node.name] = OPS[node.target](ctx, *args, **kwargs)
                except UnsupportedOpError as exc:
                    raise UnsupportedOpError(
                        f"op {node.target} (in module {_module_path(node)}): {exc}"
                    ) from None
            elif node.op == "output":
                outs = node.args[0]
                res = [env[n.name] if isinstance(n, torch.fx.Node) else n for n in outs]
                return res[0] if len(res) == 1 else tuple(res)
        raise RuntimeError("graph without output")
