"""Elementwise arithmetic: + - * /, powers, transcendental functions, rounding and
remainders (comparisons and activations have their own modules).

Shapes broadcast as in numpy / PyTorch. Floating results are arb midpoints rounded to the
working precision after every operation; integer and boolean tensors stay numpy arrays and
use numpy's integer semantics (which are PyTorch's). Non-finite results follow IEEE
(log(0) = -inf, 1/0 = inf), not arb's indeterminate balls.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.complex import (
    MPComplex,
    c_abs,
    c_add,
    c_div,
    c_exp,
    c_mul,
    is_complex,
)
from precision.backends.interpreter.core import (
    NAN,
    ONE,
    POS_INF,
    ZERO,
    Ctx,
    OpTable,
    UnsupportedOpError,
    fix_nonfinite,
    float_result,
    is_float,
    is_integral,
    lift,
)
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten

def _operands(ctx: Ctx, a: Any, b: Any) -> tuple[Any, Any]:
    """Float operands as MPArrays (numpy int/bool tensors converted) or Python scalars."""
    a = ctx.arr(a) if isinstance(a, np.ndarray) else a
    b = ctx.arr(b) if isinstance(b, np.ndarray) else b
    return a, b


def _is_arb(v: Any) -> bool:
    """An arb scalar: a float literal computed exactly (:mod:`.constants`), so an integer
    tensor operand is converted, not multiplied by numpy."""
    return isinstance(v, flint.arb)


# --- arithmetic ----------------------------------------------------------------------
def add(ctx: Ctx, a: Any, b: Any, alpha: Any = 1, sign: int = 1) -> Any:
    """a + sign * alpha * b for tensors, arrays or scalars (aten.add / aten.sub)."""
    if is_complex(a) or is_complex(b) or isinstance(a, complex) or isinstance(b, complex):
        return c_add(ctx, a, b, alpha, sign)
    if not (is_float(a) or is_float(b) or _is_arb(a) or _is_arb(b)):
        bb = np.multiply(b, alpha) if alpha != 1 else b
        return float_result(ctx, np.add(a, bb) if sign > 0 else np.subtract(a, bb))
    a, b = _operands(ctx, a, b)
    if alpha != 1:
        b = b * alpha
    if sign > 0:
        res = a + b if is_float(a) else b + a
    else:
        res = a - b if is_float(a) else (-b) + a
    return fix_nonfinite(res, a, b, operator.add if sign > 0 else operator.sub)


def sub(ctx: Ctx, a: Any, b: Any, alpha: Any = 1) -> Any:
    return add(ctx, a, b, alpha, -1)


def mul(ctx: Ctx, a: Any, b: Any) -> Any:
    if is_complex(a) or is_complex(b) or isinstance(a, complex) or isinstance(b, complex):
        return c_mul(ctx, a, b)
    if not (is_float(a) or is_float(b) or _is_arb(a) or _is_arb(b)):
        return float_result(ctx, np.multiply(a, b))
    a, b = _operands(ctx, a, b)
    res = a * b if is_float(a) else b * a
    return fix_nonfinite(res, a, b, operator.mul)


def _trunc_div(q: Any) -> Any:
    return q.floor() if q >= 0 else q.ceil()


def div(ctx: Ctx, a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    if is_complex(a) or is_complex(b):
        if rounding_mode is not None:
            raise UnsupportedOpError("complex division with a rounding mode")
        return c_div(ctx, a, b)
    if rounding_mode is not None and not (is_float(a) or is_float(b)):
        if rounding_mode == "floor":
            return np.floor_divide(a, b)
        fa, fb = np.asarray(a), np.asarray(b)
        q = np.trunc(np.divide(fa, fb))
        return q.astype(np.result_type(fa, fb))
    a = ctx.arr(a) if not is_float(a) else a
    b = ctx.arr(b) if isinstance(b, np.ndarray) else b
    res = fix_nonfinite(a / b, a, b, operator.truediv)
    if rounding_mode is None:
        return res
    fn = flint.arb.floor if rounding_mode == "floor" else _trunc_div
    return _apply(ctx, res, fn, np.floor if rounding_mode == "floor" else np.trunc)


def _apply(ctx: Ctx, x: MPArray, fn: Callable[[Any], Any],
           fallback: Callable[[float], float] | None = None) -> MPArray:
    return lift(fn, fallback)(ctx, x)


def neg(ctx: Ctx, x: Any) -> Any:
    if is_complex(x):
        return MPComplex(-x.re, -x.im)
    return -x if is_float(x) else np.negative(x)


def absolute(ctx: Ctx, x: Any) -> Any:
    if is_complex(x):
        return c_abs(ctx, x)
    return abs(x) if is_float(x) else np.abs(x)


def reciprocal(ctx: Ctx, x: Any) -> Any:
    if is_complex(x):
        return c_div(ctx, 1.0, x)
    return div(ctx, 1.0, ctx.arr(x))


def exp(ctx: Ctx, x: Any) -> Any:
    return c_exp(ctx, x) if is_complex(x) else _EXP(ctx, x)


def _pow_one(v: Any, w: Any) -> Any:
    if w.is_exact() and w.is_integer() and abs(w) < 2**20:
        k = int(w.unique_fmpz())
        if k == 0:
            return ONE
        if v == 0 and k < 0:
            return POS_INF
        return (v**k).mid()
    if v == 0:
        return ZERO if w > 0 else POS_INF
    return (v**w).mid()


_POW = np.frompyfunc(_pow_one, 2, 1)


def power(ctx: Ctx, x: Any, e: Any) -> Any:
    """x ** e for tensors and scalars of any dtypes (a float base with an integer exponent
    tensor: ALiBi slopes); integer exponents by exact repeated products."""
    if is_complex(x) or is_complex(e):
        raise UnsupportedOpError("complex pow")
    if is_integral(x) and is_integral(e):
        return np.power(x, e)
    if is_float(x) and isinstance(e, int | float) and float(e).is_integer() and abs(e) <= 64:
        k = int(e)
        if k == 0:
            return ctx.filled(x.shape, ONE)
        if k == 1:
            return x
        if k == 2:
            return (x * x).stripped()
        if k > 0:
            return x ** k
        return div(ctx, 1.0, x ** (-k))
    if is_float(x) and isinstance(e, int | float) and e == 0.5:
        return _SQRT(ctx, x)
    xa, ea = ctx.arr(x).stripped(), ctx.arr(e).stripped()
    with workprec(ctx.prec):
        res = _POW(xa.a, ea.a)
    res = ctx.wrap(res)
    return fix_nonfinite(res, xa, ea, np.power)


# --- rounding and remainders ------------------------------------------------------------
def _round_half_even(v: Any) -> Any:
    f = v.floor()
    d = v - f
    if d > 0.5:
        return f + 1
    if d < 0.5:
        return f
    return f if int(f.unique_fmpz()) % 2 == 0 else f + 1


def _rounding(fn: Callable[[Any], Any], np_fn: Callable[[Any], Any]) -> Callable[..., Any]:
    op = lift(fn, np_fn)

    def apply(ctx: Ctx, x: Any) -> Any:
        return op(ctx, x) if is_float(x) else np.asarray(x)

    return apply


def _mod(floor: bool) -> Callable[..., Any]:
    """fmod (sign of the dividend, floor=False) or remainder (sign of the divisor)."""

    def one(prec: int) -> Callable[[Any, Any], Any]:
        def f(v: Any, w: Any) -> Any:
            if w == 0 or not (v.is_finite() and w.is_finite()):
                with np.errstate(all="ignore"):
                    r = (np.remainder if floor else np.fmod)(float(v), float(w))
                return NAN if math.isnan(r) else flint.arb(float(r))
            # v and w are dyadic with <= prec bits, so at this precision n * w and v - n * w
            # are exact; r is then corrected into the remainder's range: the exact
            # remainder, rounded once.
            gap = math.frexp(float(v))[1] - math.frexp(float(w))[1]  # log2 |v / w|
            with workprec(prec * 2 + 64 + max(0, gap)):
                q = v / w
                n = q.floor() if floor or q >= 0 else q.ceil()
                r = v - n * w
                aw = abs(w)
                if floor:  # same sign as w, |r| < |w|
                    while (r < 0 < w) or (r > 0 > w):
                        r = r + w
                    while abs(r) >= aw:
                        r = r - w
                else:  # same sign as v, |r| < |w|
                    while abs(r) >= aw:
                        r = r - aw if r > 0 else r + aw
            with workprec(prec):
                return (+r).mid()

        return f

    def apply(ctx: Ctx, a: Any, b: Any) -> Any:
        if is_integral(a) and is_integral(b):
            return (np.remainder if floor else np.fmod)(a, b)
        aa, bb = ctx.arr(a).stripped(), ctx.arr(b).stripped()
        with np.errstate(all="ignore"):  # x % 0 is nan, as in PyTorch
            return ctx.wrap(np.frompyfunc(one(ctx.prec), 2, 1)(aa.a, bb.a))

    return apply


def _sign_one(v: Any) -> Any:
    return NAN if v.is_nan() else v.sgn()


def sign(ctx: Ctx, x: Any) -> Any:
    if not is_float(x):
        return x if np.asarray(x).dtype == bool else np.sign(x)
    return lift(_sign_one)(ctx, x)


def _atan2_one(y: Any, x: Any) -> Any:
    if x.is_zero() and y.is_zero():
        return ZERO
    return flint.arb.atan2(y, x).mid()


def atan2(ctx: Ctx, a: Any, b: Any, out: Any = None) -> MPArray:
    ya, xa = ctx.arr(a).stripped(), ctx.arr(b).stripped()
    with workprec(ctx.prec):
        res = ctx.wrap(np.frompyfunc(_atan2_one, 2, 1)(ya.a, xa.a))
    return fix_nonfinite(res, ya, xa, np.arctan2)


def hypot(ctx: Ctx, a: Any, b: Any) -> MPArray:
    """sqrt(a^2 + b^2)."""
    aa, bb = ctx.arr(a), ctx.arr(b)
    return _SQRT(ctx, aa * aa + bb * bb)


def copysign(ctx: Ctx, a: Any, b: Any) -> MPArray:
    """|a| with the sign of b."""
    aa, bb = ctx.arr(a).stripped(), ctx.arr(b).stripped()
    with workprec(ctx.prec):
        out = np.frompyfunc(lambda v, w: -abs(v) if w < 0 else abs(v), 2, 1)(aa.a, bb.a)
    return MPArray(np.asarray(out, dtype=object), ctx.prec, clean=True)


def _fn(name: str, fallback: Callable[[float], float]) -> Callable[..., MPArray]:
    return lift(getattr(flint.arb, name), fallback)


def _log_base(base: float) -> Callable[..., MPArray]:
    def apply(ctx: Ctx, x: Any) -> MPArray:
        with workprec(ctx.prec + 16):
            lb = flint.arb(base).log()
        return lift(lambda v: v.log() / lb, np.log2 if base == 2 else np.log10)(ctx, x)

    return apply


_EXP = _fn("exp", np.exp)
_EXPM1 = _fn("expm1", np.expm1)
_LOG1P = _fn("log1p", np.log1p)
_SQRT = _fn("sqrt", np.sqrt)
_TANH = _fn("tanh", np.tanh)
_ERF = _fn("erf", math.erf)


UNARY: dict[str, Callable[..., MPArray]] = {
    "log": _fn("log", np.log), "log1p": _LOG1P, "log2": _log_base(2.0),
    "log10": _log_base(10.0), "expm1": _EXPM1, "sqrt": _SQRT,
    "rsqrt": lift(flint.arb.rsqrt, lambda v: 1.0 / np.sqrt(v)),
    "sin": _fn("sin", np.sin), "cos": _fn("cos", np.cos), "tan": _fn("tan", np.tan),
    "asin": _fn("asin", np.arcsin), "acos": _fn("acos", np.arccos),
    "atan": _fn("atan", np.arctan), "sinh": _fn("sinh", np.sinh), "cosh": _fn("cosh", np.cosh),
    "tanh": _TANH, "asinh": _fn("asinh", np.arcsinh), "acosh": _fn("acosh", np.arccosh),
    "atanh": _fn("atanh", np.arctanh), "erf": _ERF, "erfc": _fn("erfc", math.erfc),
    "erfinv": _fn("erfinv", lambda v: math.copysign(math.inf, v) if abs(v) == 1 else math.nan),
    "lgamma": _fn("lgamma", lambda v: math.inf),
    "digamma": _fn("digamma", lambda v: -math.inf if v == 0 else math.nan),
}


def _sinc_one(v: Any) -> Any:
    return ONE if v.is_zero() else flint.arb.sinc_pi(v)


OPS: OpTable = {
    aten.add.Tensor: add,
    aten.add.Scalar: add,
    aten.sub.Tensor: sub,
    aten.sub.Scalar: sub,
    aten.rsub.Scalar: lambda ctx, a, b, alpha=1: sub(ctx, b, a, alpha),
    aten.rsub.Tensor: lambda ctx, a, b, alpha=1: sub(ctx, b, a, alpha),
    aten.mul.Tensor: mul,
    aten.mul.Scalar: mul,
    aten.div.Tensor: div,
    aten.div.Scalar: div,
    aten.div.Tensor_mode: div,
    aten.div.Scalar_mode: div,
    aten.neg.default: neg,
    aten.abs.default: absolute,
    aten.reciprocal.default: reciprocal,
    aten.pow.Tensor_Scalar: power,
    aten.pow.Scalar: power,
    aten.pow.Tensor_Tensor: power,
    aten.exp.default: exp,
    aten.exp2.default: lambda ctx, x: power(ctx, 2.0, ctx.arr(x)),
    aten.sign.default: sign,
    aten.sgn.default: sign,
    aten.atan2.default: atan2,
    aten.atan2.out: atan2,
    aten.hypot.default: hypot,
    aten.copysign.Tensor: copysign, aten.copysign.Scalar: copysign,
    aten.sinc.default: lift(_sinc_one, np.sinc),
    aten.floor.default: _rounding(flint.arb.floor, np.floor),
    aten.ceil.default: _rounding(flint.arb.ceil, np.ceil),
    aten.trunc.default: _rounding(_trunc_div, np.trunc),
    aten.round.default: _rounding(_round_half_even, np.round),
    aten.frac.default: lambda ctx, x: sub(ctx, x, _rounding(_trunc_div, np.trunc)(ctx, x)),
    aten.fmod.Tensor: _mod(False),
    aten.fmod.Scalar: _mod(False),
    aten.remainder.Tensor: _mod(True),
    aten.remainder.Scalar: _mod(True),
}
for _name, _op in UNARY.items():
    OPS[getattr(aten, _name).default] = _op
