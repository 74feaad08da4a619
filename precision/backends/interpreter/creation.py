"""Tensor creation, copies, dtype conversions, metadata queries and no-op bookkeeping
nodes (assertions, dropout in evaluation) that export leaves in graphs.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from precision.backends.interpreter.complex import MPComplex, is_complex
from precision.backends.interpreter.core import (
    Ctx,
    OpTable,
    UnsupportedOpError,
    is_float,
    shape_of,
)
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def _np_dtype(dtype: torch.dtype) -> Any:
    return bool if dtype == torch.bool else np.int64


def full(ctx: Ctx, size: Sequence[int], value: Any, dtype: Any = None, **_: Any) -> Any:
    """A tensor of ``size`` filled with ``value`` (float unless ``dtype`` says otherwise)."""
    if dtype is not None and dtype.is_complex:
        re = ctx.filled(size, ctx.const(complex(value).real))
        return MPComplex(re, ctx.filled(size, ctx.const(complex(value).imag)))
    if dtype is not None and not dtype.is_floating_point:
        return np.full(tuple(size), value, dtype=_np_dtype(dtype))
    if dtype is None and isinstance(value, bool | int) and not isinstance(value, float):
        return np.full(tuple(size), value, dtype=bool if isinstance(value, bool) else np.int64)
    return ctx.filled(tuple(size), ctx.const(value))


def _like(value: Any) -> Any:
    def apply(ctx: Ctx, x: Any, *args: Any, dtype: Any = None, **kw: Any) -> Any:
        v = args[0] if args else value
        if dtype is None:
            if is_float(x):
                dtype = torch.float64
            elif is_complex(x):
                dtype = torch.complex128
            else:
                dtype = torch.bool if np.asarray(x).dtype == bool else torch.int64
        return full(ctx, shape_of(x), v, dtype=dtype)

    return apply


def arange(ctx: Ctx, start: Any, end: Any = None, step: Any = 1, dtype: Any = None, **_: Any
           ) -> Any:
    if end is None:
        start, end = 0, start
    if dtype is not None and dtype.is_floating_point or any(
            isinstance(v, float) for v in (start, end, step)):
        n = max(0, math.ceil((end - start) / step))
        base = ctx.const(start)
        stp = ctx.const(step)
        vals = np.array([base + stp * i for i in range(n)], dtype=object)
        return MPArray(vals, ctx.prec).stripped()
    return np.arange(start, end, step, dtype=np.int64)


def to_copy(ctx: Ctx, x: Any, dtype: Any = None, **_: Any) -> Any:
    """_to_copy: dtype conversions (floats stay in the working precision; float -> int
    truncates toward zero, as PyTorch)."""
    if dtype is None or dtype.is_floating_point:
        if is_complex(x):
            return x.re
        return ctx.arr(x) if isinstance(x, np.ndarray) else x
    if dtype.is_complex:
        return x if is_complex(x) else MPComplex(ctx.arr(x), ctx.filled(shape_of(x),
                                                                         ctx.const(0)))
    if isinstance(x, MPArray):
        vals = x.to_float64()
        if dtype == torch.bool:
            return vals != 0
        with np.errstate(invalid="ignore"):  # +-inf / nan: unspecified, as in PyTorch
            return np.trunc(vals).astype(np.int64)
    return np.asarray(x).astype(_np_dtype(dtype))


def local_scalar(ctx: Ctx, x: Any) -> Any:
    """_local_scalar_dense: the one entry of x as a Python number."""
    if is_float(x):
        return float(x)
    return np.asarray(x).reshape(-1)[0].item()


def native_dropout(ctx: Ctx, x: Any, p: float, train: bool | None) -> tuple[Any, np.ndarray]:
    """Dropout in evaluation (or with p = 0) is the identity with an all-true mask."""
    if train and p > 0:
        raise UnsupportedOpError("native_dropout in training mode (random sampling)")
    return x, np.ones(shape_of(x), dtype=bool)


def _stride(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return list(reversed(out))


#: Python arithmetic on symbolic sizes (export emits these around data-dependent shapes).
SYMBOLIC: OpTable = {fn: (lambda f: lambda ctx, *a: f(*a))(fn) for fn in (
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
    operator.truediv, operator.neg, operator.pow, operator.eq, operator.ne, operator.lt,
    operator.le, operator.gt, operator.ge, operator.and_, operator.or_, operator.not_)}


def _identity(ctx: Ctx, x: Any, *_: Any, **__: Any) -> Any:
    return x


def _nothing(ctx: Ctx, *_: Any, **__: Any) -> None:
    return None


OPS: OpTable = {
    aten.full.default: full,
    aten.zeros.default: lambda ctx, size, **kw: full(ctx, size, 0.0, **kw),
    aten.ones.default: lambda ctx, size, **kw: full(ctx, size, 1.0, **kw),
    aten.empty.memory_format: lambda ctx, size, **kw: full(ctx, size, 0.0, **kw),
    aten.empty_strided.default: lambda ctx, size, stride, **kw: full(ctx, size, 0.0, **kw),
    aten.new_zeros.default: lambda ctx, x, size, **kw: full(ctx, size, 0.0, **kw),
    aten.new_ones.default: lambda ctx, x, size, **kw: full(ctx, size, 1.0, **kw),
    aten.new_full.default: lambda ctx, x, size, v, **kw: full(ctx, size, v, **kw),
    aten.new_empty.default: lambda ctx, x, size, **kw: full(ctx, size, 0.0, **kw),
    aten.full_like.default: _like(None),
    aten.zeros_like.default: _like(0.0), aten.ones_like.default: _like(1.0),
    aten.empty_like.default: _like(0.0),
    aten.fill.Scalar: lambda ctx, x, v: _like(v)(ctx, x),
    aten.fill.Tensor: lambda ctx, x, v: _like(v)(ctx, x),
    aten.scalar_tensor.default: lambda ctx, v, **kw: full(ctx, (), v, **kw),
    aten.arange.default: arange, aten.arange.start: arange, aten.arange.start_step: arange,
    aten.clone.default: _identity, aten.alias.default: _identity,
    aten.detach.default: _identity, aten.lift_fresh_copy.default: _identity,
    aten.contiguous.default: _identity,
    aten._to_copy.default: to_copy,
    aten._local_scalar_dense.default: local_scalar,
    aten.native_dropout.default: native_dropout,
    aten.dropout.default: lambda ctx, x, p, train: native_dropout(ctx, x, p, train)[0],
    aten.sym_size.int: lambda ctx, x, d: shape_of(x)[d],
    aten.sym_numel.default: lambda ctx, x: int(np.prod(shape_of(x))),
    aten.sym_stride.int: lambda ctx, x, d: _stride(shape_of(x))[d],
    aten.sym_storage_offset.default: lambda ctx, x: 0,
    operator.getitem: lambda ctx, x, i: x[i],
    aten.sym_is_contiguous.default: lambda ctx, x, *a: True,
    aten._assert_tensor_metadata.default: _nothing,
    aten._assert_scalar.default: _nothing,
    aten.sym_constrain_range_for_size.default: _nothing,
    aten.sym_constrain_range.default: _nothing,
    aten._assert_async.msg: _nothing,
    **SYMBOLIC,
}
