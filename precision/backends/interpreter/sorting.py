"""Sorting and top-k with exact comparisons of arb midpoints (no rounding anywhere).

Sorts are stable; NaN sorts as the largest value, as in PyTorch.
"""

from __future__ import annotations

import functools
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.core import Ctx, OpTable, is_float
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def _compare(a: Any, b: Any) -> int:
    an = isinstance(a, flint.arb) and a.is_nan()
    bn = isinstance(b, flint.arb) and b.is_nan()
    if an or bn:
        return int(an) - int(bn)
    return -1 if a < b else (1 if a > b else 0)


_KEY = functools.cmp_to_key(_compare)


def _order(row: np.ndarray, descending: bool) -> list[int]:
    """Stable order of ``row``'s entries (ascending, or descending keeping ties in order)."""
    keyed = [_KEY(v) for v in row]
    return sorted(range(len(row)), key=lambda i: keyed[i], reverse=descending)


def _sorted_along(ctx: Ctx, x: Any, dim: int, descending: bool, k: int | None
                  ) -> tuple[Any, np.ndarray]:
    a = x.stripped().a if is_float(x) else np.asarray(x)
    if a.ndim == 0:
        return x, np.zeros((), dtype=np.int64)
    moved = np.moveaxis(a, dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    n = rows.shape[1] if k is None else k
    idx = np.zeros((rows.shape[0], n), dtype=np.int64)
    for r in range(rows.shape[0]):
        idx[r] = _order(rows[r], descending)[:n]
    vals = np.take_along_axis(rows, idx, axis=1)
    shape = moved.shape[:-1] + (n,)
    vals = np.moveaxis(vals.reshape(shape), -1, dim)
    idx = np.moveaxis(idx.reshape(shape), -1, dim)
    if is_float(x):
        return MPArray(np.asarray(vals, dtype=object), ctx.prec, clean=True), idx
    return vals, idx


def sort(ctx: Ctx, x: Any, dim: int = -1, descending: bool = False, *, stable: Any = None
         ) -> tuple[Any, np.ndarray]:
    """(values, indices) sorted along ``dim``."""
    return _sorted_along(ctx, x, dim, descending, None)


def sort_stable(ctx: Ctx, x: Any, *, stable: Any = None, dim: int = -1,
                descending: bool = False) -> tuple[Any, np.ndarray]:
    return _sorted_along(ctx, x, dim, descending, None)


def topk(ctx: Ctx, x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
         ) -> tuple[Any, np.ndarray]:
    """The k largest (smallest) entries along ``dim``, in order, and their indices."""
    return _sorted_along(ctx, x, dim, largest, k)


def kthvalue(ctx: Ctx, x: Any, k: int, dim: int = -1, keepdim: bool = False
             ) -> tuple[Any, np.ndarray]:
    """The k-th smallest entry (1-based) along ``dim`` and its index."""
    vals, idx = _sorted_along(ctx, x, dim, False, None)
    nd = vals.ndim if is_float(vals) else np.ndim(vals)
    if nd == 0:
        return vals, idx
    sel = [slice(None)] * nd
    sel[dim] = slice(k - 1, k) if keepdim else k - 1
    pick = tuple(sel)
    v = MPArray(np.asarray(vals.a[pick], dtype=object), ctx.prec, True) if is_float(vals) \
        else np.asarray(vals[pick])
    return v, np.asarray(idx[pick])


def median_dim(ctx: Ctx, x: Any, dim: int = -1, keepdim: bool = False
               ) -> tuple[Any, np.ndarray]:
    """The lower median ((n - 1) // 2-th smallest, as PyTorch) along ``dim``."""
    n = (x.shape if is_float(x) else np.shape(x))[dim] if np.ndim(
        x.a if is_float(x) else x) else 1
    return kthvalue(ctx, x, (n - 1) // 2 + 1, dim, keepdim)


OPS: OpTable = {
    aten.sort.default: sort,
    aten.sort.stable: sort_stable,
    aten.topk.default: topk,
    aten.kthvalue.default: kthvalue,
    aten.median.dim: median_dim,
    aten.median.default: lambda ctx, x: median_dim(
        ctx, x.reshape(-1) if is_float(x) else np.asarray(x).reshape(-1), 0)[0],
}
