"""The discrete Fourier transform as exact-twiddle matrix products.

``_fft_r2c`` / ``_fft_c2r`` / ``_fft_c2c`` along any list of axes. Along one axis of
length n the DFT is the matrix product with cos(2 pi jk / n) and sin(2 pi jk / n), computed
by arb from the exact rational angle (jk mod n) / n at the working precision; each output
entry is then one dot product rounded once (more accurate than an FFT's log n roundings,
and O(n^2) work, which is what sequence lengths of a few hundred afford).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np
import torch

from precision.backends import mp_backend
from precision.backends.interpreter.complex import MPComplex, as_complex
from precision.backends.interpreter.core import Ctx, OpTable
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten

_TWIDDLES: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}


def twiddles(n: int, m: int, prec: int) -> tuple[np.ndarray, np.ndarray]:
    """(C, S), both (m, n): C[k, j] = cos(2 pi jk / n), S[k, j] = sin(2 pi jk / n)."""
    key = (n, m, prec)
    if key not in _TWIDDLES:
        cos = np.empty((m, n), dtype=object)
        sin = np.empty((m, n), dtype=object)
        table = {}
        with workprec(prec):
            for r in range(n):
                s, c = flint.arb.sin_cos_pi_fmpq(flint.fmpq(2 * r, n))
                table[r] = (c.mid(), s.mid())
        for k in range(m):
            for j in range(n):
                cos[k, j], sin[k, j] = table[(j * k) % n]
        _TWIDDLES[key] = (cos, sin)
    return _TWIDDLES[key]


def _along(x: MPArray, axis: int, mat: np.ndarray) -> MPArray:
    """out[..., k, ...] = sum_j mat[k, j] x[..., j, ...] along ``axis``."""
    a = np.moveaxis(x.a, axis, -1)
    lead = a.shape[:-1]
    rows = MPArray(np.ascontiguousarray(a).reshape(-1, a.shape[-1]), x.prec, x.clean)
    prod = mp_backend.matmul(rows, MPArray(np.ascontiguousarray(mat.T), x.prec, True))
    return MPArray(np.moveaxis(prod.a.reshape(lead + (mat.shape[0],)), -1, axis), x.prec,
                   clean=True)


def _scale(ctx: Ctx, z: MPComplex | MPArray, n: int, normalization: int) -> Any:
    if normalization == 0:
        return z
    with workprec(ctx.prec):
        f = (flint.arb(1) / (flint.arb(n).sqrt() if normalization == 1 else flint.arb(n))).mid()
    fa = MPArray(np.array(f, dtype=object), ctx.prec, True)
    if isinstance(z, MPComplex):
        return MPComplex((z.re * fa).stripped(), (z.im * fa).stripped())
    return (z * fa).stripped()


def _c2c_axis(ctx: Ctx, z: MPComplex, axis: int, forward: bool) -> MPComplex:
    n = z.shape[axis]
    cos, sin = twiddles(n, n, ctx.prec)
    ac, as_ = _along(z.re, axis, cos), _along(z.re, axis, sin)
    bc, bs = _along(z.im, axis, cos), _along(z.im, axis, sin)
    if forward:  # (a + ib)(C - iS)
        return MPComplex((ac + bs).stripped(), (bc - as_).stripped())
    return MPComplex((ac - bs).stripped(), (bc + as_).stripped())


def fft_c2c(ctx: Ctx, x: Any, dim: Sequence[int], normalization: int, forward: bool
            ) -> MPComplex:
    """Complex DFT along ``dim`` (forward: e^{-2 pi i jk/n}; inverse: e^{+...})."""
    z = as_complex(ctx, x)
    total = 1
    for d in dim:
        total *= z.shape[d]
        z = _c2c_axis(ctx, z, d, forward)
    return _scale(ctx, z, total, normalization)


def fft_r2c(ctx: Ctx, x: Any, dim: Sequence[int], normalization: int, onesided: bool
            ) -> MPComplex:
    """Real-input DFT: the last axis of ``dim`` first (only n//2 + 1 bins when
    ``onesided``), then complex DFTs along the others."""
    x = ctx.arr(x)
    last = dim[-1]
    n = x.shape[last]
    m = n // 2 + 1 if onesided else n
    cos, sin = twiddles(n, m, ctx.prec)
    z = MPComplex(_along(x, last, cos), (-_along(x, last, sin)).stripped())
    total = n
    for d in dim[:-1]:
        total *= z.shape[d]
        z = _c2c_axis(ctx, z, d, True)
    return _scale(ctx, z, total, normalization)


def fft_c2r(ctx: Ctx, x: Any, dim: Sequence[int], normalization: int, last_dim_size: int
            ) -> MPArray:
    """Inverse of a one-sided transform: complex inverse DFTs along dim[:-1], then the
    Hermitian-symmetric inverse along dim[-1] giving ``last_dim_size`` real outputs (the
    imaginary parts of the DC and Nyquist bins are ignored, as in PyTorch)."""
    z = as_complex(ctx, x)
    total = 1
    for d in dim[:-1]:
        total *= z.shape[d]
        z = _c2c_axis(ctx, z, d, False)
    last = dim[-1]
    n = last_dim_size
    used = n // 2 + 1
    z = z.map_parts(lambda p: MPArray(np.take(p.a, np.arange(min(used, p.shape[last])),
                                              axis=last), p.prec, p.clean))
    k_avail = z.shape[last]
    cos, sin = twiddles(n, k_avail, ctx.prec)
    weights = np.array([1 if k == 0 or 2 * k == n else 2 for k in range(k_avail)],
                       dtype=object)
    wc = (cos * weights[:, None]).T  # (n, k): out_j = sum_k w_k (Re C - Im S)
    ws = (sin * weights[:, None]).T
    out = _along(z.re, last, wc) - _along(z.im, last, ws)
    return _scale(ctx, out.stripped(), total * n, normalization)


OPS: OpTable = {
    aten._fft_r2c.default: fft_r2c,
    aten._fft_c2r.default: fft_c2r,
    aten._fft_c2c.default: fft_c2c,
}
