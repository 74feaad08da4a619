"""Complex tensors: a pair of MPArrays (real part, imaginary part) of the same shape.

Keeping the parts as two real arrays lets every complex product go through ``arb_mat``
(four real products) and every elementwise op through the real kernels; each real operation
rounds to the working precision, as a complex floating-point machine would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flint
import numpy as np
import torch

from precision.backends import mp_backend
from precision.backends.interpreter.core import (
    Ctx,
    OpTable,
    UnsupportedOpError,
    lift,
)
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten


class MPComplex:
    """A complex tensor of shape ``re.shape`` held as two MPArrays."""

    __slots__ = ("re", "im")

    def __init__(self, re: MPArray, im: MPArray) -> None:
        if re.shape != im.shape:
            re_a, im_a = np.broadcast_arrays(re.a, im.a)
            re, im = MPArray(re_a, re.prec, re.clean), MPArray(im_a, im.prec, im.clean)
        self.re, self.im = re, im

    @property
    def shape(self) -> tuple[int, ...]:
        return self.re.shape

    @property
    def ndim(self) -> int:
        return self.re.ndim

    @property
    def size(self) -> int:
        return self.re.size

    @property
    def prec(self) -> int:
        return self.re.prec

    def map_parts(self, fn: Callable[[MPArray], MPArray]) -> MPComplex:
        """The same shape operation applied to both parts."""
        return MPComplex(fn(self.re), fn(self.im))


def is_complex(v: Any) -> bool:
    return isinstance(v, MPComplex)


def as_complex(ctx: Ctx, v: Any) -> MPComplex:
    """Any numeric value as an MPComplex (real values get a zero imaginary part)."""
    if isinstance(v, MPComplex):
        return v
    if isinstance(v, complex):
        return MPComplex(ctx.arr(v.real), ctx.arr(v.imag))
    if isinstance(v, np.ndarray) and np.iscomplexobj(v):
        return MPComplex(ctx.arr(v.real.copy()), ctx.arr(v.imag.copy()))
    re = ctx.arr(v)
    return MPComplex(re, ctx.filled(re.shape, flint.arb(0)))


def c_add(ctx: Ctx, a: Any, b: Any, alpha: Any = 1, sign: int = 1) -> MPComplex:
    x, y = as_complex(ctx, a), as_complex(ctx, b)
    if alpha != 1:
        y = c_mul(ctx, y, alpha)
    if sign > 0:
        return MPComplex(x.re + y.re, x.im + y.im)
    return MPComplex(x.re - y.re, x.im - y.im)


def c_mul(ctx: Ctx, a: Any, b: Any) -> MPComplex:
    x, y = as_complex(ctx, a), as_complex(ctx, b)
    return MPComplex(x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re)


def c_div(ctx: Ctx, a: Any, b: Any) -> MPComplex:
    x, y = as_complex(ctx, a), as_complex(ctx, b)
    den = y.re * y.re + y.im * y.im
    return MPComplex((x.re * y.re + x.im * y.im) / den, (x.im * y.re - x.re * y.im) / den)


_SQRT = lift(flint.arb.sqrt)


def c_abs(ctx: Ctx, x: MPComplex) -> MPArray:
    """|x| = sqrt(re^2 + im^2), one rounding per operation."""
    return _SQRT(ctx, x.re * x.re + x.im * x.im)


def c_matmul(ctx: Ctx, a: Any, b: Any) -> MPComplex:
    """(ar + i ai)(br + i bi) with four real arb_mat products."""
    x, y = as_complex(ctx, a), as_complex(ctx, b)
    if x.size == 0 or y.size == 0:  # empty operands: numpy's shape, zeros (empty sums)
        zero = ctx.filled(np.matmul(np.zeros(x.shape), np.zeros(y.shape)).shape, ctx.const(0))
        return MPComplex(zero, zero)
    re = mp_backend.matmul(x.re, y.re) - mp_backend.matmul(x.im, y.im)
    im = mp_backend.matmul(x.re, y.im) + mp_backend.matmul(x.im, y.re)
    return MPComplex(re.stripped(), im.stripped())


def c_exp(ctx: Ctx, x: MPComplex) -> MPComplex:
    x.re.stripped()
    x.im.stripped()
    with workprec(x.prec):
        mag = np.frompyfunc(lambda v: v.exp().mid(), 1, 1)(x.re.a)
        cs = np.frompyfunc(lambda v: v.cos().mid(), 1, 1)(x.im.a)
        sn = np.frompyfunc(lambda v: v.sin().mid(), 1, 1)(x.im.a)
    m = ctx.wrap(mag)
    return MPComplex(m * ctx.wrap(cs), m * ctx.wrap(sn))


def _complex_pair(ctx: Ctx, re: Any, im: Any) -> MPComplex:
    return MPComplex(ctx.arr(re), ctx.arr(im))


def _view_as_real(ctx: Ctx, x: MPComplex) -> MPArray:
    """(..., ) complex -> (..., 2) real."""
    return ctx.wrap(np.stack([x.re.stripped().a, x.im.stripped().a], axis=-1))


def _view_as_complex(ctx: Ctx, x: MPArray) -> MPComplex:
    """(..., 2) real -> (...) complex."""
    return MPComplex(MPArray(x.a[..., 0], x.prec, x.clean), MPArray(x.a[..., 1], x.prec, x.clean))


def _real(ctx: Ctx, x: Any) -> Any:
    return x.re if is_complex(x) else x


def _imag(ctx: Ctx, x: Any) -> Any:
    if not is_complex(x):
        raise UnsupportedOpError("imag of a real tensor")
    return x.im


def _conj(ctx: Ctx, x: Any) -> Any:
    return MPComplex(x.re, -x.im) if is_complex(x) else x


def _angle(ctx: Ctx, x: Any) -> MPArray:
    c = as_complex(ctx, x)
    c.re.stripped()
    c.im.stripped()
    with workprec(c.prec):
        out = np.frompyfunc(lambda y, r: flint.arb.atan2(y, r).mid(), 2, 1)(c.im.a, c.re.a)
    return ctx.wrap(out)


def _polar(ctx: Ctx, r: Any, theta: Any) -> MPComplex:
    """r (cos theta + i sin theta)."""
    r, th = ctx.arr(r), ctx.arr(theta).stripped()
    with workprec(ctx.prec):
        cs = np.frompyfunc(lambda v: v.cos().mid(), 1, 1)(th.a)
        sn = np.frompyfunc(lambda v: v.sin().mid(), 1, 1)(th.a)
    return MPComplex((r * ctx.wrap(cs)).stripped(), (r * ctx.wrap(sn)).stripped())


OPS: OpTable = {
    aten.view_as_real.default: _view_as_real,
    aten.view_as_complex.default: _view_as_complex,
    aten.complex.default: _complex_pair,
    aten.real.default: _real,
    aten.imag.default: _imag,
    aten.conj.default: _conj, aten._conj.default: _conj,
    aten.conj_physical.default: _conj,
    aten.resolve_conj.default: lambda ctx, x: x,
    aten.resolve_neg.default: lambda ctx, x: x,
    aten.angle.default: _angle,
    aten.polar.default: _polar,
}

