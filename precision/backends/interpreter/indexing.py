"""Shapes, views, indexing and scatter: ops that move entries without rounding them.

Every op here works on any tensor value (MPArray, MPComplex, numpy array) through
:func:`~precision.backends.interpreter.core.map_array`, except the scatters, which write
into a copy of their first operand. Index tensors are numpy int64 arrays, masks numpy bool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.comparisons import truth
from precision.backends.interpreter.complex import MPComplex, as_complex, is_complex
from precision.backends.interpreter.core import (
    ZERO,
    Ctx,
    OpTable,
    UnsupportedOpError,
    is_float,
    map_array,
    ndim_of,
    shape_of,
)
from precision.backends.mat_batch import MatBatch
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten


def _storage(ctx: Ctx, like: Any, values: Any) -> tuple[np.ndarray, bool]:
    """(a writable copy of ``like``'s entries, whether they are arb) for a scatter."""
    if is_float(like) or is_float(values):
        return ctx.arr(like).stripped().a.copy(), True
    return np.array(like, copy=True), False


def _entries(ctx: Ctx, v: Any, as_arb: bool) -> Any:
    if not as_arb:
        return np.asarray(v)
    if isinstance(v, MPArray):
        return v.stripped().a
    if isinstance(v, np.ndarray):
        return ctx.arr(v).a
    return ctx.const(v)


def _result(ctx: Ctx, a: np.ndarray, as_arb: bool) -> Any:
    return MPArray(a, ctx.prec, clean=True) if as_arb else a


def _complex_parts(fn: Any) -> Any:
    """Lift a real scatter to complex tensors part by part."""

    def apply(ctx: Ctx, x: Any, *args: Any, **kw: Any) -> Any:
        if any(is_complex(v) for v in (x, *args)):
            parts = []
            for part in ("re", "im"):
                parts.append(fn(ctx, getattr(as_complex(ctx, x), part), *[
                    getattr(as_complex(ctx, v), part) if is_complex(v) or is_float(v) else v
                    for v in args], **kw))
            return MPComplex(*parts)
        return fn(ctx, x, *args, **kw)

    return apply


# --- views ------------------------------------------------------------------------------
def _batched(x: Any) -> bool:
    return isinstance(x, MPArray) and x.batchable


def _same(x: MPArray) -> MPArray:
    """``x`` unmoved, in the form it is held (a new value sharing the immutable batch)."""
    return MPArray.of_batch(x._batch, x.prec, x.finite)  # type: ignore[arg-type]


def _lead_moved(x: MPArray, move: Any, transpose: bool = False) -> MPArray | None:
    """``x`` held as a batch, its leading axes moved by ``move`` (a numpy shape op applied to
    the array of slice positions, shape ``x.shape[:-2]``) and each 2-d slice transposed when
    ``transpose``; None for pending outer products (the object form takes the move)."""
    b = x.batch
    if b is None:
        return None
    return MPArray.of_batch(b.regroup(move(b.lead_index()), transpose), x.prec, x.finite)


def _resolved(shape: Sequence[int], size: int) -> tuple[int, ...]:
    """A view's shape with its -1 worked out."""
    out = [int(s) for s in shape]
    if -1 in out:
        k = out.index(-1)
        rest = int(np.prod([s for i, s in enumerate(out) if i != k]))
        out[k] = size // rest if rest else 0
    return tuple(out)


def view(ctx: Ctx, x: Any, shape: Sequence[int]) -> Any:
    if _batched(x):
        new = tuple(shape)
        if new == x.shape:
            return _same(x)
        new = _resolved(shape, x.size)
        if new == x.shape:
            return _same(x)
        if len(new) >= 2 and new[-2:] == x.shape[-2:]:
            moved = _lead_moved(x, lambda i: i.reshape(new[:-2]))
            if moved is not None:
                return moved
    return map_array(x, lambda a: np.reshape(a, tuple(shape)))


def expand(ctx: Ctx, x: Any, size: Sequence[int], implicit: bool = False) -> Any:
    nd = ndim_of(x)
    shp = shape_of(x)
    shape = tuple(shp[i - (len(size) - nd)] if s == -1 else s for i, s in enumerate(size))
    if _batched(x):
        if shape == x.shape:
            return _same(x)
        if nd >= 2 and shape[-2:] == x.shape[-2:]:
            moved = _lead_moved(x, lambda i: np.broadcast_to(i, shape[:-2]))
            if moved is not None:
                return moved
    return map_array(x, lambda a: np.broadcast_to(a, shape))


def squeeze(ctx: Ctx, x: Any, dims: Any = None) -> Any:
    nd, shp = ndim_of(x), shape_of(x)
    if dims is None:
        keep = tuple(d for d in range(nd) if shp[d] == 1)
    else:
        dims = [dims] if isinstance(dims, int) else list(dims)
        keep = tuple(d % nd for d in dims if nd and shp[d] == 1)
    if _batched(x) and all(d < nd - 2 for d in keep):
        moved = _same(x) if not keep else _lead_moved(x, lambda i: np.squeeze(i, axis=keep))
        if moved is not None:
            return moved
    return map_array(x, lambda a: np.squeeze(a, axis=keep) if keep else a)


def unsqueeze(ctx: Ctx, x: Any, d: int) -> Any:
    nd = ndim_of(x)
    d = d if d >= 0 else nd + 1 + d
    if _batched(x) and d <= nd - 2:
        moved = _lead_moved(x, lambda i: np.expand_dims(i, d))
        if moved is not None:
            return moved
    return map_array(x, lambda a: np.expand_dims(a, d))


def slice_(ctx: Ctx, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
           ) -> Any:
    idx: list[Any] = [slice(None)] * ndim_of(x)
    idx[dim] = slice(start, end, step)
    if _batched(x) and dim % x.ndim < x.ndim - 2:
        moved = _lead_moved(x, lambda i: i[tuple(idx[:-2])])
        if moved is not None:
            return moved
    return map_array(x, lambda a: a[tuple(idx)])


def select(ctx: Ctx, x: Any, dim: int, index: int) -> Any:
    idx: list[Any] = [slice(None)] * ndim_of(x)
    idx[dim] = index
    if _batched(x) and dim % x.ndim < x.ndim - 2:
        moved = _lead_moved(x, lambda i: i[tuple(idx[:-2])])
        if moved is not None:
            return moved
    return map_array(x, lambda a: np.asarray(a[tuple(idx)]))


def permute(ctx: Ctx, x: Any, dims: Sequence[int]) -> Any:
    nd = ndim_of(x)
    dims = [d % nd for d in dims] if nd else list(dims)
    if _batched(x) and nd >= 2 and sorted(dims[-2:]) == [nd - 2, nd - 1]:
        if dims == list(range(nd)):
            return _same(x)
        moved = _lead_moved(x, lambda i: np.transpose(i, dims[:-2]), dims[-1] == nd - 2)
        if moved is not None:
            return moved
    return map_array(x, lambda a: np.transpose(a, dims))


def transpose(ctx: Ctx, x: Any, d0: int, d1: int) -> Any:
    dims = list(range(ndim_of(x)))
    if dims:
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(ctx, x, dims)


def cat(ctx: Ctx, tensors: Sequence[Any], dim: int = 0) -> Any:
    """Concatenate; legacy empty 1-d tensors are skipped, as PyTorch does."""
    nd = max(ndim_of(t) for t in tensors)
    tensors = [t for t in tensors if not (shape_of(t) == (0,) and nd > 1)] or list(tensors[:1])
    if any(is_complex(t) for t in tensors):
        cs = [as_complex(ctx, t) for t in tensors]
        return MPComplex(cat(ctx, [c.re for c in cs], dim), cat(ctx, [c.im for c in cs], dim))
    if all(isinstance(t, MPArray) and t.batch is not None and t.ndim == nd
           and t.shape[-2:] == tensors[0].shape[-2:] for t in tensors) and dim % nd < nd - 2:
        joined = MatBatch.concatenate([t.batch for t in tensors], dim % nd)
        return MPArray.of_batch(joined, ctx.prec, all(t.finite for t in tensors))
    if any(is_float(t) for t in tensors):
        parts = [ctx.arr(t).a for t in tensors]
        return ctx.wrap(np.concatenate(parts, axis=dim))
    return np.concatenate([np.asarray(t) for t in tensors], axis=dim)


def split(ctx: Ctx, x: Any, sizes: Any, dim: int = 0) -> list[Any]:
    n = shape_of(x)[dim]
    if isinstance(sizes, int):
        sizes = [sizes] * (n // sizes) + ([n % sizes] if n % sizes else []) if sizes else [0]
    out, start = [], 0
    for s in sizes:
        out.append(slice_(ctx, x, dim, start, start + s))
        start += s
    return out


def index(ctx: Ctx, x: Any, indices: Sequence[Any]) -> Any:
    """aten.index.Tensor: advanced indexing with optional (None) index tensors."""
    idx = _index_tuple(indices)
    return map_array(x, lambda a: a[idx])


def _index_tuple(indices: Sequence[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for i in indices:
        if i is None:
            out.append(slice(None))
        else:
            arr = np.asarray(i)
            out.append(arr.astype(bool) if arr.dtype == bool else arr.astype(np.int64))
    return tuple(out)


def as_strided(ctx: Ctx, x: Any, size: Sequence[int], stride: Sequence[int],
               storage_offset: int | None = None) -> Any:
    """A strided view of ``x``'s row-major entries (x is taken as contiguous)."""
    pos = np.full(tuple(size), storage_offset or 0, dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[k] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(shape) * s
    return map_array(x, lambda a: np.reshape(a, -1)[pos])


def unfold(ctx: Ctx, x: Any, dim: int, size: int, step: int) -> Any:
    """Tensor.unfold: windows of ``size`` every ``step`` along ``dim`` -> a new last axis."""
    def fn(a: np.ndarray) -> np.ndarray:
        if a.ndim == 0:
            return a.reshape(1)
        win = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim % a.ndim)
        sel = [slice(None)] * win.ndim
        sel[dim % a.ndim] = slice(None, None, step)
        return np.array(win[tuple(sel)])

    return map_array(x, fn)


def diagonal(ctx: Ctx, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    return map_array(x, lambda a: np.array(np.diagonal(a, offset, dim1, dim2)))


def flip(ctx: Ctx, x: Any, dims: Sequence[int]) -> Any:
    return map_array(x, lambda a: np.flip(a, axis=tuple(dims)) if a.ndim else a)


def repeat(ctx: Ctx, x: Any, repeats: Sequence[int]) -> Any:
    return map_array(x, lambda a: np.tile(a, tuple(repeats)))


def constant_pad(ctx: Ctx, x: Any, pad: Sequence[int], value: float = 0.0) -> Any:
    """constant_pad_nd: ``pad`` lists (left, right) pairs from the last dim backwards;
    negative widths crop."""
    if is_complex(x):
        return x.map_parts(lambda p: constant_pad(ctx, p, pad, value))
    nd = ndim_of(x)
    widths = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        widths[nd - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = tuple(slice(-lo if lo < 0 else 0, (s + hi) if hi < 0 else s)
                 for s, (lo, hi) in zip(shape_of(x), widths, strict=True))
    x = map_array(x, lambda a: a[crop])
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(shape_of(x), widths, strict=True))
    inner = tuple(slice(lo, lo + s) for s, (lo, _) in zip(shape_of(x), widths, strict=True))
    if is_float(x):
        out = np.empty(shape, dtype=object)
        out.fill(ctx.const(value))
        out[inner] = x.stripped().a
        return MPArray(out, ctx.prec, clean=True)
    out = np.full(shape, value, dtype=np.asarray(x).dtype)
    out[inner] = x
    return out


# --- gather / scatter -------------------------------------------------------------------
def _scatter_coords(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    """Full coordinates into the output for every entry of ``index`` along ``dim``."""
    index = np.asarray(index, dtype=np.int64)
    coords = list(np.indices(index.shape, sparse=False)) if index.ndim else []
    if not coords:
        return (index,)
    coords[dim] = index
    return tuple(coords)


def _src_block(a: Any, shape: tuple[int, ...]) -> Any:
    """The leading block of ``src`` matching the index's shape."""
    if not isinstance(a, np.ndarray) or a.ndim == 0:
        return a
    return a[tuple(slice(0, s) for s in shape)]


def gather(ctx: Ctx, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Any:
    idx = np.asarray(index, dtype=np.int64)

    def take(a: np.ndarray) -> np.ndarray:
        if idx.size == 0:
            return np.empty(idx.shape, dtype=a.dtype)
        if a.ndim == 0:  # a 0-d input: every index is 0
            return np.array(np.broadcast_to(a, idx.shape))
        if idx.ndim == 0:  # a 0-d index into a 1-d input
            return np.array(a[int(idx)])
        return np.take_along_axis(a, idx, axis=dim)

    return map_array(x, take)


def scatter(ctx: Ctx, x: Any, dim: int, index: Any, src: Any, reduce: str | None = None
            ) -> Any:
    """scatter.src / scatter.value (without a reduce: later writes win)."""
    if reduce is not None:
        return scatter_reduce(ctx, x, dim, index, src,
                              {"add": "sum", "multiply": "prod"}[reduce], True)
    out, as_arb = _storage(ctx, x, src)
    idx = np.asarray(index, dtype=np.int64)
    if idx.size:
        vals = _entries(ctx, src, as_arb)
        out[_scatter_coords(idx, dim)] = _src_block(vals, idx.shape)
    return _result(ctx, out, as_arb)


def scatter_add(ctx: Ctx, x: Any, dim: int, index: Any, src: Any) -> Any:
    return scatter_reduce(ctx, x, dim, index, src, "sum", True)


def scatter_reduce(ctx: Ctx, x: Any, dim: int, index: Any, src: Any, reduce: str,
                   include_self: bool = True) -> Any:
    """scatter_reduce.two: sum / prod / mean / amax / amin into a copy of ``x``, entries
    combined in index order, each step rounded."""
    out, as_arb = _storage(ctx, x, src)
    idx = np.asarray(index, dtype=np.int64)
    if not idx.size:
        return _result(ctx, out, as_arb)
    if out.ndim == 0:  # 0-d: one entry, index 0
        flat = scatter_reduce(ctx, map_array(x, lambda a: a.reshape(1)), 0, idx.reshape(1),
                              map_array(src, lambda a: np.reshape(a, 1)) if not isinstance(
                                  src, int | float) else src, reduce, include_self)
        return map_array(flat, lambda a: a.reshape(()))
    vals = _src_block(_entries(ctx, src, as_arb), idx.shape)
    vals = np.broadcast_to(vals, idx.shape)
    coords = _scatter_coords(idx, dim)
    flat_targets = list(zip(*[c.reshape(-1) for c in coords], strict=True))
    flat_vals = vals.reshape(-1)
    acc: dict[tuple[int, ...], list[Any]] = {}
    for t, v in zip(flat_targets, flat_vals, strict=True):
        acc.setdefault(t, [out[t]] if include_self else []).append(v)
    with workprec(ctx.prec):
        for t, items in acc.items():
            if reduce in ("sum", "mean"):
                r = items[0]
                for v in items[1:]:
                    r = r + v
                if reduce == "mean":
                    r = r / len(items) if as_arb else r // len(items)
            elif reduce == "prod":
                r = items[0]
                for v in items[1:]:
                    r = r * v
            elif reduce in ("amax", "amin"):
                r = items[0]
                for v in items[1:]:
                    if (v > r) if reduce == "amax" else (v < r):
                        r = v
            else:
                raise UnsupportedOpError(f"scatter_reduce with reduce={reduce!r}")
            out[t] = r.mid() if as_arb else r
    return _result(ctx, out, as_arb)


def index_put(ctx: Ctx, x: Any, indices: Sequence[Any], values: Any, accumulate: bool = False
              ) -> Any:
    out, as_arb = _storage(ctx, x, values)
    idx = _index_tuple(indices)
    vals = _entries(ctx, values, as_arb)
    if accumulate:
        with workprec(ctx.prec):
            np.add.at(out, idx, vals)
        if as_arb:
            out = np.frompyfunc(flint.arb.mid, 1, 1)(out) if out.ndim else out
    else:
        out[idx] = vals
    return _result(ctx, np.asarray(out, dtype=object) if as_arb else out, as_arb)


def select_scatter(ctx: Ctx, x: Any, src: Any, dim: int, index: int) -> Any:
    out, as_arb = _storage(ctx, x, src)
    sl: list[Any] = [slice(None)] * out.ndim
    sl[dim] = index
    out[tuple(sl)] = _entries(ctx, src, as_arb)
    return _result(ctx, out, as_arb)


def slice_scatter(ctx: Ctx, x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None,
                  step: int = 1) -> Any:
    out, as_arb = _storage(ctx, x, src)
    sl: list[Any] = [slice(None)] * out.ndim
    sl[dim] = slice(start, end, step)
    out[tuple(sl)] = _entries(ctx, src, as_arb)
    return _result(ctx, out, as_arb)


def masked_scatter(ctx: Ctx, x: Any, mask: Any, source: Any) -> Any:
    """Entries of ``source`` (row-major) written where ``mask`` is true."""
    out, as_arb = _storage(ctx, x, source)
    m = truth(mask)
    shape = np.broadcast_shapes(out.shape, m.shape)
    out, m = np.array(np.broadcast_to(out, shape)), np.broadcast_to(m, shape)
    vals = np.reshape(_entries(ctx, source, as_arb), -1)
    out[m] = vals[: int(m.sum())]
    return _result(ctx, out, as_arb)


def nonzero(ctx: Ctx, x: Any) -> np.ndarray:
    return np.argwhere(truth(x)).astype(np.int64)


def tri(fn: Any) -> Any:
    def apply(ctx: Ctx, x: Any, diagonal: int = 0) -> Any:
        mask = fn(np.ones(shape_of(x)[-2:], dtype=bool), diagonal)
        if is_float(x):
            return MPArray(np.where(mask, x.a, ZERO), ctx.prec, x.clean)
        return np.where(mask, np.asarray(x), 0).astype(np.asarray(x).dtype)

    return apply


def embedding_bag(ctx: Ctx, weight: MPArray, indices: Any, offsets: Any,
                  scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int = -1) -> tuple[Any, ...]:
    """_embedding_bag: (output, offset2bag, bag_size, max_indices); modes sum / mean / max."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1).tolist()
    if include_last_offset:
        bounds = offs
    else:
        bounds = offs + [len(idx)]
    nbags = len(bounds) - 1
    d = weight.shape[1]
    w = weight.stripped().a
    psw = None if per_sample_weights is None else ctx.arr(per_sample_weights).stripped().a
    out = np.empty((nbags, d), dtype=object)
    bag_size = np.zeros(nbags, dtype=np.int64)
    max_idx = np.zeros((nbags, d), dtype=np.int64)
    offset2bag = np.zeros(len(idx), dtype=np.int64)
    with workprec(ctx.prec):
        for b in range(nbags):
            members = [j for j in range(bounds[b], bounds[b + 1]) if idx[j] != padding_idx]
            offset2bag[bounds[b]:bounds[b + 1]] = b
            bag_size[b] = len(members)
            for c in range(d):
                if not members:
                    out[b, c] = ZERO
                    continue
                vals = [w[idx[j], c] * (psw[j] if psw is not None else 1) for j in members]
                if mode == 2:
                    k = max(range(len(vals)), key=lambda i, v=vals: v[i])
                    out[b, c], max_idx[b, c] = vals[k], idx[members[k]]
                else:
                    s = vals[0]
                    for v in vals[1:]:
                        s = s + v
                    out[b, c] = (s / len(vals)).mid() if mode == 1 else s.mid()
    return MPArray(out, ctx.prec, clean=True), offset2bag, bag_size, max_idx


def embedding_renorm(ctx: Ctx, weight: Any, indices: Any, max_norm: float, norm_type: float
                     ) -> MPArray:
    """Rows of ``weight`` used by ``indices`` whose norm exceeds ``max_norm`` scaled to
    max_norm / (norm + 1e-7), as PyTorch (the functional form of the in-place op)."""
    from precision.backends.interpreter.reductions import vector_norm

    w = ctx.arr(weight).stripped()
    out = w.a.copy()
    for r in sorted(set(np.asarray(indices, dtype=np.int64).reshape(-1).tolist())):
        row = MPArray(w.a[r], ctx.prec, True)
        norm = vector_norm(ctx, row, float(norm_type))
        if float(norm) > max_norm:
            scale = ctx.const(max_norm) / (norm + 1e-7)
            out[r] = (row * scale).stripped().a
    return MPArray(out, ctx.prec, clean=True)


def resize(ctx: Ctx, x: Any, size: Sequence[int], memory_format: Any = None) -> Any:
    """resize_ (functional): the first prod(size) entries in row-major order, zeros after."""
    n = int(np.prod(size))
    def fn(a: np.ndarray) -> np.ndarray:
        flat = np.reshape(a, -1)[:n]
        if flat.size < n:
            pad = np.zeros(n - flat.size, dtype=flat.dtype)
            if flat.dtype == object:
                pad = np.array([ZERO] * (n - flat.size), dtype=object)
            flat = np.concatenate([flat, pad])
        return flat.reshape(tuple(size))
    return map_array(x, fn)


def _copy(ctx: Ctx, dst: Any, src: Any, non_blocking: bool = False) -> Any:
    """aten.copy: ``src`` broadcast to ``dst``'s shape (and kind: float or integer)."""
    shape = shape_of(dst)
    if is_float(dst) or is_complex(dst):
        v = ctx.arr(src) if not is_complex(src) else src
        return map_array(v, lambda a: np.array(np.broadcast_to(a, shape)))
    return np.array(np.broadcast_to(np.asarray(src).astype(np.asarray(dst).dtype), shape))


OPS: OpTable = {
    aten.view.default: view, aten._unsafe_view.default: view, aten.reshape.default: view,
    aten.view_copy.default: view,
    aten.permute.default: permute,
    aten.t.default: lambda ctx, x: map_array(x, lambda a: a.T) if ndim_of(x) < 2 else permute(
        ctx, x, [1, 0]),
    aten.transpose.int: transpose,
    aten.expand.default: expand,
    aten.unsqueeze.default: unsqueeze,
    aten.squeeze.dim: squeeze, aten.squeeze.dims: squeeze, aten.squeeze.default: squeeze,
    aten.slice.Tensor: slice_, aten.select.int: select,
    aten.cat.default: cat,
    aten.split.Tensor: split, aten.split_with_sizes.default: split,
    aten.constant_pad_nd.default: constant_pad,
    aten.index.Tensor: index,
    aten.index_select.default: lambda ctx, x, dim, idx: map_array(
        x, lambda a: np.take(a, np.asarray(idx, dtype=np.int64).reshape(-1), axis=dim)
        if a.ndim else a),
    aten.embedding.default: lambda ctx, w, idx, *a: map_array(
        w, lambda arr: arr[np.asarray(idx, dtype=np.int64)]),
    aten._embedding_bag.default: embedding_bag,
    aten._embedding_bag_forward_only.default: embedding_bag,
    aten.embedding_renorm.default: embedding_renorm,
    aten.resize_.default: resize, aten.resize.default: resize,
    aten.tril.default: tri(np.tril), aten.triu.default: tri(np.triu),
    aten.as_strided.default: as_strided,
    aten.diagonal.default: diagonal,
    aten.unfold.default: unfold,
    aten.flip.default: flip,
    aten.repeat.default: repeat,
    aten.gather.default: gather,
    aten.scatter.src: _complex_parts(scatter), aten.scatter.value: scatter,
    aten.scatter.value_reduce: scatter, aten.scatter.reduce: scatter,
    aten.scatter_add.default: scatter_add,
    aten.scatter_reduce.two: scatter_reduce,
    aten.index_put.default: index_put,
    aten.select_scatter.default: _complex_parts(select_scatter),
    aten.slice_scatter.default: _complex_parts(slice_scatter),
    aten.masked_scatter.default: masked_scatter,
    aten.nonzero.default: nonzero,
    aten.copy.default: _copy,
}
