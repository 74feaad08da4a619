"""Pooling (average, max with indices, adaptive average), reflection / replication padding,
nearest and bilinear upsampling, col2im, and pairwise distances (cdist, pdist).

Spatial ops take (N, C, *spatial) or (C, *spatial); the number of spatial axes is the
length of the kernel (or output size) argument, so one function serves 1-, 2- and 3-d.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.convolution import window_index
from precision.backends.interpreter.core import (
    NEG_INF,
    ZERO,
    Ctx,
    OpTable,
    UnsupportedOpError,
    map_array,
)
from precision.backends.interpreter.elementwise import UNARY, absolute, power
from precision.backends.interpreter.reductions import amax_amin, extreme_dim, total
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten


def _expand_arg(v: Sequence[int] | int, d: int) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * d if len(v) == 1 else v


def _out_size(size: int, k: int, s: int, p: int, dil: int, ceil_mode: bool) -> int:
    span = size + 2 * p - dil * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _padded(ctx: Ctx, x: MPArray, d: int, pads: list[tuple[int, int]], fill: Any
            ) -> np.ndarray:
    a = x.stripped().a
    shape = a.shape[:-d] + tuple(s + lo + hi for s, (lo, hi) in zip(a.shape[-d:], pads,
                                                                      strict=True))
    out = np.empty(shape, dtype=object)
    out.fill(fill)
    out[(Ellipsis,) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(a.shape[-d:], pads,
                                                                    strict=True))] = a
    return out


def _windows(ctx: Ctx, x: MPArray, kernel: Sequence[int], stride: Sequence[int],
             padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool, fill: Any
             ) -> tuple[np.ndarray, tuple[int, ...], list[tuple[int, int]]]:
    """Windows of x as an array (..., *out, *K), the output size, the paddings used."""
    d = len(kernel)
    sizes = x.shape[-d:]
    out = [_out_size(s, k, st, p, dl, ceil_mode)
           for s, k, st, p, dl in zip(sizes, kernel, stride, padding, dilation, strict=True)]
    pads = []
    for s, k, st, p, dl, o in zip(sizes, kernel, stride, padding, dilation, out, strict=True):
        need = (o - 1) * st + dl * (k - 1) + 1
        pads.append((p, max(need - s - p, p)))
    xp = _padded(ctx, x, d, pads, fill)
    idx, got = window_index(xp.shape[-d:], kernel, stride, dilation)
    idx = tuple(i[tuple(slice(0, o) for o in out)] for i in idx)
    return xp[(Ellipsis,) + idx], tuple(out), pads


def avg_pool(ctx: Ctx, x: Any, kernel: Sequence[int], stride: Sequence[int] = (),
             padding: Sequence[int] = (0,), ceil_mode: bool = False,
             count_include_pad: bool = True, divisor_override: int | None = None
             ) -> MPArray:
    """avg_pool{1,2,3}d: window sums divided by the window size (PyTorch's divisor rule)."""
    x = ctx.arr(x)
    d = len(kernel)
    stride = _expand_arg(stride or kernel, d)
    padding = _expand_arg(padding, d)
    win, out, _ = _windows(ctx, x, kernel, stride, padding, [1] * d, ceil_mode, ZERO)
    lead = win.shape[: win.ndim - 2 * d]
    flat = win.reshape(lead + tuple(out) + (int(np.prod(kernel)),))
    with workprec(ctx.prec):
        sums = np.add.reduce(flat, axis=-1) if flat.shape[-1] > 1 else flat[..., 0]
    sums = np.asarray(sums, dtype=object)
    div = np.ones(tuple(out), dtype=np.int64)
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    div = np.ones(tuple(out), dtype=np.int64)
    for i in range(d):
        start = grids[i] * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], x.shape[-d + i] + padding[i])
        if count_include_pad:
            div = div * (end - start)
        else:
            div = div * (np.minimum(end, x.shape[-d + i]) - np.maximum(start, 0))
    if divisor_override:
        div = np.full(tuple(out), divisor_override, dtype=np.int64)
    return MPArray(sums, ctx.prec) / ctx.arr(div.astype(np.float64))


def max_pool(ctx: Ctx, x: Any, kernel: Sequence[int], stride: Sequence[int] = (),
             padding: Sequence[int] = (0,), dilation: Sequence[int] = (1,),
             ceil_mode: bool = False) -> tuple[MPArray, np.ndarray]:
    """max_pool{2,3}d_with_indices: (values, flat index into the input's spatial axes)."""
    x = ctx.arr(x)
    d = len(kernel)
    stride = _expand_arg(stride or kernel, d)
    padding, dilation = _expand_arg(padding, d), _expand_arg(dilation, d)
    win, out, pads = _windows(ctx, x, kernel, stride, padding, dilation, ceil_mode, NEG_INF)
    lead = win.shape[: win.ndim - 2 * d]
    flat = win.reshape(lead + tuple(out) + (int(np.prod(kernel)),))
    vals, arg = extreme_dim(ctx, MPArray(flat, ctx.prec, True), -1, False, True)
    koff = np.unravel_index(arg, tuple(kernel))
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    index = np.zeros(arg.shape, dtype=np.int64)
    for i in range(d):
        pos = grids[i] * stride[i] - padding[i] + koff[i] * dilation[i]
        index = index * x.shape[-d + i] + pos
    return vals, index


def adaptive_avg_pool(ctx: Ctx, x: Any, output_size: Sequence[int]) -> MPArray:
    """_adaptive_avg_pool{2,3}d: window i spans [floor(i S / O), ceil((i + 1) S / O))."""
    x = ctx.arr(x)
    d = len(output_size)
    a = x.stripped().a
    out = np.empty(a.shape[:-d] + tuple(output_size), dtype=object)
    for pos in np.ndindex(*output_size):
        sl, n = [], 1
        for i, o in enumerate(pos):
            s = a.shape[-d + i]
            lo, hi = (o * s) // output_size[i], -(-((o + 1) * s) // output_size[i])
            sl.append(slice(lo, hi))
            n *= hi - lo
        block = MPArray(a[(Ellipsis,) + tuple(sl)], ctx.prec, True)
        s_ = total(ctx, block, list(range(block.ndim - d, block.ndim)), False) / float(n)
        out[(Ellipsis,) + pos] = s_.stripped().a
    return MPArray(out, ctx.prec, clean=True)


def _pad_mode(mode: str) -> Any:
    def apply(ctx: Ctx, x: Any, pad: Sequence[int]) -> Any:
        d = len(pad) // 2
        widths = [(0, 0)] * (len(x.shape) - d) + [(pad[2 * i], pad[2 * i + 1])
                                                  for i in reversed(range(d))]
        return map_array(x, lambda a: np.pad(a, widths, mode=mode))

    return apply


def _src_index(ctx: Ctx, n_in: int, n_out: int, scale: float | None, align: bool
               ) -> list[flint.arb]:
    """Source coordinates of the output pixels (bilinear rule of PyTorch), exact in arb."""
    out = []
    with workprec(ctx.prec):
        for i in range(n_out):
            if align:
                v = flint.arb(0) if n_out == 1 else flint.arb(i) * (n_in - 1) / (n_out - 1)
            else:
                r = (flint.arb(1) / flint.arb(scale)) if scale else flint.arb(n_in) / n_out
                v = (flint.arb(i) + 0.5) * r - 0.5
                if v < 0:
                    v = flint.arb(0)
            out.append(v.mid())
    return out


def upsample_bilinear2d(ctx: Ctx, x: Any, output_size: Sequence[int] | None,
                        align_corners: bool, scale_factors: Sequence[float] | None
                        ) -> MPArray:
    x = ctx.arr(x)
    h, w = x.shape[-2:]
    oh, ow = output_size if output_size else (int(math.floor(h * scale_factors[0])),
                                              int(math.floor(w * scale_factors[1])))
    sh = scale_factors[0] if scale_factors else None
    sw = scale_factors[1] if scale_factors else None
    a = x.stripped().a
    res = a
    for axis, n_in, n_out, sc in ((-2, h, oh, sh), (-1, w, ow, sw)):
        src = _src_index(ctx, n_in, n_out, sc, align_corners)
        lo = np.array([min(int(s.floor().unique_fmpz()), n_in - 1) for s in src])
        hi = np.minimum(lo + 1, n_in - 1)
        with workprec(ctx.prec):
            lam = np.array([(s - int(l_)).mid() for s, l_ in zip(src, lo, strict=True)],
                           dtype=object)
            shape = [1] * res.ndim
            shape[axis] = n_out
            lam = lam.reshape(shape)
            a_lo, a_hi = np.take(res, lo, axis=axis), np.take(res, hi, axis=axis)
            res = np.frompyfunc(lambda p, q, t: (p + (q - p) * t).mid(), 3, 1)(a_lo, a_hi, lam)
    return MPArray(np.asarray(res, dtype=object), ctx.prec, clean=True)


def upsample_nearest(ctx: Ctx, x: Any, output_size: Sequence[int] | None,
                     scale_factors: Sequence[float] | None) -> Any:
    d = len(output_size) if output_size else len(scale_factors)
    shape = x.shape[-d:]
    sizes = output_size or [int(math.floor(s * f)) for s, f in zip(shape, scale_factors,
                                                                   strict=True)]
    res = x
    for i in range(d):
        n_in, n_out = shape[i], sizes[i]
        scale = (1.0 / scale_factors[i]) if scale_factors else n_in / n_out
        src = np.minimum(np.floor(np.arange(n_out) * scale).astype(np.int64), n_in - 1)
        res = map_array(res, lambda a, s=src, ax=i: np.take(a, s, axis=a.ndim - d + ax))
    return res


def col2im(ctx: Ctx, x: Any, output_size: Sequence[int], kernel_size: Sequence[int],
           dilation: Sequence[int], padding: Sequence[int], stride: Sequence[int]) -> MPArray:
    """(N, C*kh*kw, L) column blocks summed back into (N, C, H, W)."""
    x = ctx.arr(x)
    kh, kw = kernel_size
    a = x.stripped().a
    batched = a.ndim == 3
    if not batched:
        a = a[None]
    n, ckk, _ = a.shape
    c = ckk // (kh * kw)
    H, W = output_size  # noqa: N806
    oh = (H + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (W + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.empty((n, c, H + 2 * padding[0], W + 2 * padding[1]), dtype=object)
    out.fill(ZERO)
    blocks = a.reshape(n, c, kh, kw, oh, ow)
    with workprec(ctx.prec):
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dilation[0], j * dilation[1]
                sl = (slice(None), slice(None), slice(r0, r0 + stride[0] * (oh - 1) + 1,
                                                      stride[0]),
                      slice(c0, c0 + stride[1] * (ow - 1) + 1, stride[1]))
                out[sl] = out[sl] + blocks[:, :, i, j]
    out = out[:, :, padding[0]:padding[0] + H, padding[1]:padding[1] + W]
    res = MPArray(np.ascontiguousarray(out), ctx.prec).stripped()
    return res if batched else MPArray(res.a[0], ctx.prec, True)


def _pnorm(ctx: Ctx, diff: MPArray, p: float, axis: int) -> MPArray:
    """The p-norm of ``diff`` along ``axis`` (p = 0 counts nonzeros, inf takes the max)."""
    if p == 2:
        return UNARY["sqrt"](ctx, total(ctx, diff * diff, [axis], False))
    ad = absolute(ctx, diff)
    if p == 1:
        return total(ctx, ad, [axis], False)
    if p == math.inf:
        return amax_amin(True)(ctx, ad, [axis], False)
    if p == 0:
        nz = np.frompyfunc(lambda v: 0.0 if v.is_zero() else 1.0, 1, 1)(ad.stripped().a)
        return total(ctx, ctx.arr(nz.astype(np.float64)), [axis], False)
    return power(ctx, total(ctx, power(ctx, ad, float(p)), [axis], False), 1.0 / p)


def cdist(ctx: Ctx, x1: Any, x2: Any, p: float, compute_mode: int | None = None) -> MPArray:
    """_cdist_forward: (..., P, M) and (..., R, M) -> (..., P, R) p-norm distances."""
    a, b = ctx.arr(x1), ctx.arr(x2)
    diff = MPArray(a.a[..., :, None, :], ctx.prec, a.clean) - MPArray(
        b.a[..., None, :, :], ctx.prec, b.clean)
    return _pnorm(ctx, diff, p, -1)


def pdist(ctx: Ctx, x: Any, p: float = 2) -> MPArray:
    """_pdist_forward: distances between rows i < j of x (N, M), in row-major pair order."""
    a = ctx.arr(x)
    n = a.shape[0]
    i, j = np.triu_indices(n, k=1)
    if len(i) == 0:
        return ctx.wrap(np.empty((0,), dtype=object))
    diff = MPArray(a.a[i], ctx.prec, a.clean) - MPArray(a.a[j], ctx.prec, a.clean)
    return _pnorm(ctx, diff, p, -1)


def _reflect(v: Any, twice_low: int, twice_high: int) -> Any:
    """Reflect a coordinate into [twice_low / 2, twice_high / 2] (PyTorch's rule)."""
    if twice_low == twice_high:
        return flint.arb(0)
    lo = flint.arb(twice_low) / 2
    span = flint.arb(twice_high - twice_low) / 2
    d = abs(v - lo)
    flips = d / span
    n = flips.floor()
    extra = d - n * span
    return (extra + lo) if int(n.unique_fmpz()) % 2 == 0 else (span - extra + lo)


class _Sampler:
    """Source coordinates and padded reads of grid_sampler_2d for one (H, W) input."""

    def __init__(self, a: np.ndarray, padding_mode: int, align_corners: bool) -> None:
        self.a, self.mode, self.align = a, padding_mode, align_corners
        self.h, self.w = a.shape[-2:]

    def unnormalize(self, v: Any, size: int) -> Any:
        if self.align:
            return (v + 1) / 2 * (size - 1)
        return ((v + 1) * size - 1) / 2

    def pad(self, v: Any, size: int) -> Any:
        """compute_coordinates: border clips, reflection reflects then clips."""
        if self.mode == 2:
            v = _reflect(v, 0, 2 * (size - 1)) if self.align else _reflect(v, -1, 2 * size - 1)
        if self.mode in (1, 2):
            v = max(min(v, flint.arb(size - 1)), flint.arb(0))
        return v

    def read(self, b: int, yy: int, xx: int) -> np.ndarray:
        if 0 <= yy < self.h and 0 <= xx < self.w:
            return self.a[b, :, yy, xx]
        return np.array([ZERO] * self.a.shape[1], dtype=object)

    def read_padded(self, b: int, yy: int, xx: int) -> np.ndarray:
        """A tap of the bicubic stencil, its integer coordinates padded first."""
        py, px = self.pad(flint.arb(yy), self.h), self.pad(flint.arb(xx), self.w)
        return self.read(b, int(py.floor().unique_fmpz()), int(px.floor().unique_fmpz()))


def _cubic_weights(t: Any) -> list[Any]:
    """Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2."""
    a = flint.arb(-0.75)

    def near(x: Any) -> Any:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Any) -> Any:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sampler_2d(ctx: Ctx, x: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> MPArray:
    """Sample x (N, C, H, W) at grid (N, OH, OW, 2) -> (N, C, OH, OW): bilinear (0),
    nearest (1) or bicubic (2) interpolation; zeros (0), border (1) or reflection (2)
    padding; all coordinates and weights in the working precision."""
    x, g = ctx.arr(x).stripped(), ctx.arr(grid).stripped()
    n, c, h, w = x.shape
    _, oh, ow, _ = g.shape
    out = np.empty((n, c, oh, ow), dtype=object)
    smp = _Sampler(x.a, padding_mode, align_corners)
    mid = np.frompyfunc(flint.arb.mid, 1, 1)
    with workprec(ctx.prec):
        for b in range(n):
            for i in range(oh):
                for j in range(ow):
                    fx = smp.unnormalize(g.a[b, i, j, 0], w)
                    fy = smp.unnormalize(g.a[b, i, j, 1], h)
                    if interpolation_mode == 2:
                        x0, y0 = int(fx.floor().unique_fmpz()), int(fy.floor().unique_fmpz())
                        wx, wy = _cubic_weights(fx - x0), _cubic_weights(fy - y0)
                        acc = np.array([ZERO] * c, dtype=object)
                        for r in range(4):
                            row = np.array([ZERO] * c, dtype=object)
                            for q in range(4):
                                row = row + smp.read_padded(b, y0 - 1 + r, x0 - 1 + q) * wx[q]
                            acc = acc + row * wy[r]
                        out[b, :, i, j] = mid(acc)
                        continue
                    fx, fy = smp.pad(fx, w).mid(), smp.pad(fy, h).mid()
                    if interpolation_mode == 1:
                        out[b, :, i, j] = smp.read(b, _round_half_even(fy),
                                                   _round_half_even(fx))
                        continue
                    if interpolation_mode != 0:
                        raise UnsupportedOpError(f"grid_sampler_2d mode {interpolation_mode}")
                    x0, y0 = int(fx.floor().unique_fmpz()), int(fy.floor().unique_fmpz())
                    tx, ty = (fx - x0).mid(), (fy - y0).mid()
                    acc = np.array([ZERO] * c, dtype=object)
                    for dy, wy_ in ((0, 1 - ty), (1, ty)):
                        for dx, wx_ in ((0, 1 - tx), (1, tx)):
                            acc = acc + smp.read(b, y0 + dy, x0 + dx) * (wy_ * wx_).mid()
                    out[b, :, i, j] = mid(acc)
    return MPArray(out, ctx.prec, clean=True)


def _round_half_even(v: Any) -> int:
    f = int(v.floor().unique_fmpz())
    d = v - f
    if d > 0.5:
        return f + 1
    if d < 0.5:
        return f
    return f if f % 2 == 0 else f + 1


OPS: OpTable = {
    aten.avg_pool2d.default: avg_pool, aten.avg_pool3d.default: avg_pool,
    aten.avg_pool1d.default: avg_pool,
    aten.max_pool2d_with_indices.default: max_pool,
    aten.max_pool3d_with_indices.default: max_pool,
    aten._adaptive_avg_pool2d.default: adaptive_avg_pool,
    aten._adaptive_avg_pool3d.default: adaptive_avg_pool,
    aten.adaptive_avg_pool1d.default: adaptive_avg_pool,
    aten.reflection_pad1d.default: _pad_mode("reflect"),
    aten.reflection_pad2d.default: _pad_mode("reflect"),
    aten.reflection_pad3d.default: _pad_mode("reflect"),
    aten.replication_pad1d.default: _pad_mode("edge"),
    aten.replication_pad2d.default: _pad_mode("edge"),
    aten.replication_pad3d.default: _pad_mode("edge"),
    aten.upsample_bilinear2d.vec: upsample_bilinear2d,
    aten.upsample_nearest2d.vec: upsample_nearest,
    aten.upsample_nearest1d.vec: upsample_nearest,
    aten.col2im.default: col2im,
    aten._cdist_forward.default: cdist,
    aten._pdist_forward.default: pdist,
    aten.grid_sampler_2d.default: grid_sampler_2d,
}
