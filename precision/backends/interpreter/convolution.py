"""Convolutions (1-, 2-, 3-d, grouped, strided, dilated, transposed) as matrix products.

Patches of the padded input are gathered into rows (im2col) and multiplied with the
flattened kernel through ``arb_mat``: every output entry is one dot product rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from precision.backends import mp_backend
from precision.backends.interpreter.core import Ctx, OpTable
from precision.backends.interpreter.indexing import constant_pad
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def window_index(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                 dilation: Sequence[int]) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    """Index arrays selecting every (output position, kernel offset) of a sliding window
    over spatial ``sizes``; each array has shape (*out, *kernel). Returns (indices, out)."""
    d = len(sizes)
    out = tuple((s - dl * (k - 1) - 1) // st + 1
                for s, k, st, dl in zip(sizes, kernel, stride, dilation, strict=True))
    idx = []
    for i in range(d):
        shape = [1] * (2 * d)
        pos = np.arange(out[i])[:, None] * stride[i] + np.arange(kernel[i])[None, :] * dilation[i]
        shape[i], shape[d + i] = out[i], kernel[i]
        idx.append(np.broadcast_to(pos.reshape(shape), tuple(out) + tuple(kernel)))
    return tuple(idx), out


def _conv(ctx: Ctx, x: MPArray, w: MPArray, stride: Sequence[int], dilation: Sequence[int],
          groups: int) -> MPArray:
    """Valid (unpadded) grouped convolution of x (B, Cin, *S) with w (Cout, Cin/g, *K)."""
    b, cin = x.shape[:2]
    cout, cin_g = w.shape[:2]
    kernel = w.shape[2:]
    d = len(kernel)
    idx, out = window_index(x.shape[2:], kernel, stride, dilation)
    xa = x.stripped().a
    patches = xa[(slice(None), slice(None)) + idx]  # (B, Cin, *out, *K)
    nout, nk = int(np.prod(out)), int(np.prod(kernel))
    cout_g = cout // groups
    parts = []
    for g in range(groups):
        pg = patches[:, g * cin_g:(g + 1) * cin_g]  # (B, cin_g, *out, *K)
        pg = np.moveaxis(pg, 1, 1 + d)  # (B, *out, cin_g, *K)
        cols = np.ascontiguousarray(pg).reshape(b * nout, cin_g * nk)
        wg = w.stripped().a[g * cout_g:(g + 1) * cout_g].reshape(cout_g, cin_g * nk)
        prod = mp_backend.matmul(MPArray(cols, ctx.prec, True),
                                 MPArray(np.ascontiguousarray(wg.T), ctx.prec, True))
        parts.append(prod.a.reshape((b,) + tuple(out) + (cout_g,)))
    res = np.concatenate(parts, axis=-1)  # (B, *out, Cout)
    return MPArray(np.moveaxis(res, -1, 1), ctx.prec, clean=True)


def convolution(ctx: Ctx, x: Any, w: Any, bias: Any, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                output_padding: Sequence[int], groups: int) -> MPArray:
    """aten.convolution: cross-correlation as PyTorch, x (B, Cin, *S) -> (B, Cout, *O)."""
    x, w = ctx.arr(x), ctx.arr(w)
    unbatched = x.ndim == w.ndim - 1
    if unbatched:
        x = MPArray(x.a[None], x.prec, x.clean)
    d = w.ndim - 2
    stride, padding, dilation = (list(v) * (d if len(v) == 1 else 1)
                                 for v in (stride, padding, dilation))
    if not transposed:
        pad = []
        for p in reversed(padding):
            pad += [p, p]
        xp = constant_pad(ctx, x, pad) if any(padding) else x
        out = _conv(ctx, xp, w, stride, dilation, groups)
    else:
        out = _conv_transposed(ctx, x, w, stride, padding, dilation, output_padding, groups)
    if bias is not None:
        out = out + MPArray(ctx.arr(bias).a.reshape((1, -1) + (1,) * d), ctx.prec)
    if unbatched:
        out = MPArray(out.a[0], out.prec, out.clean)
    return out


def _conv_transposed(ctx: Ctx, x: MPArray, w: MPArray, stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int],
                     output_padding: Sequence[int], groups: int) -> MPArray:
    """Transposed convolution = a stride-1 convolution of the zero-dilated input with the
    flipped kernel (in/out channels swapped per group)."""
    d = w.ndim - 2
    output_padding = list(output_padding) * (d if len(output_padding) == 1 else 1)
    b, cin = x.shape[:2]
    kernel = w.shape[2:]
    sizes = [(s - 1) * st + 1 for s, st in zip(x.shape[2:], stride, strict=True)]
    up = np.empty((b, cin, *sizes), dtype=object)
    up.fill(ctx.const(0))
    up[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in stride)] = \
        x.stripped().a
    pad = []
    for i in reversed(range(d)):
        edge = dilation[i] * (kernel[i] - 1) - padding[i]
        pad += [edge, edge + output_padding[i]]
    xp = constant_pad(ctx, MPArray(up, ctx.prec, True), pad)
    cin_g = cin // groups
    cout_g = w.shape[1]
    wa = w.stripped().a
    flipped = np.flip(wa, axis=tuple(range(2, 2 + d)))
    wt = np.concatenate([np.swapaxes(flipped[g * cin_g:(g + 1) * cin_g], 0, 1)
                         for g in range(groups)], axis=0)  # (cout_g * groups, cin_g, *K)
    assert wt.shape[0] == cout_g * groups
    return _conv(ctx, xp, MPArray(np.ascontiguousarray(wt), ctx.prec, True), [1] * d,
                 dilation, groups)


OPS: OpTable = {
    aten.convolution.default: convolution,
}
