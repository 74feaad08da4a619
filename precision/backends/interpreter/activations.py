"""Activation functions: sigmoid, ReLU, GELU (erf and tanh forms), ELU, leaky ReLU,
hardtanh, SiLU, softplus, Mish, hard sigmoid / swish; elementwise, rounded at the working
precision, same shape out as in.
"""

from __future__ import annotations

import operator
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.comparisons import clamp, compare, truth, where
from precision.backends.interpreter.core import ONE, ZERO, Ctx, OpTable, is_float, lift
from precision.backends.interpreter.elementwise import _ERF, _EXP, _EXPM1, _LOG1P, _TANH
from precision.backends.mp_backend import MPArray, workprec

aten = torch.ops.aten


def _sigmoid_one(v: Any) -> Any:
    if v >= 0:
        return (ONE / (ONE + (-v).exp())).mid()
    e = v.exp()
    return (e / (ONE + e)).mid()


_SIGMOID = lift(_sigmoid_one, lambda v: 1.0 / (1.0 + np.exp(-v)))
_EXP_C = np.frompyfunc(flint.arb.exp, 1, 1)
_MID = np.frompyfunc(flint.arb.mid, 1, 1)


def sigmoid(ctx: Ctx, x: Any) -> MPArray:
    """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below (no overflow either way):
    with t = exp(-|x|), 1 / (1 + t) or t / (1 + t), the same arb operations on the same
    values as :func:`_sigmoid_one` entry by entry, run as numpy object passes. An input
    that is not finite everywhere takes the entry-by-entry path (its IEEE fall-back)."""
    xa = ctx.arr(x).stripped()
    if not xa.finite or xa.ndim == 0:
        return _SIGMOID(ctx, xa)
    with workprec(xa.prec):
        flat = xa.a.reshape(-1)
        neg = np.fromiter(map(ZERO.__gt__, flat.tolist()), dtype=bool, count=flat.size)
        t = _EXP_C(np.where(neg, flat, -flat))        # exp(-|x|), radius kept as in one()
        den = ONE + t
        out = _MID(np.where(neg, t, ONE) / den)
    return MPArray(np.asarray(out, dtype=object).reshape(xa.shape), xa.prec, clean=True,
                   finite=True)


def elu(ctx: Ctx, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0
        ) -> MPArray:
    """scale * (x if x > 0 else alpha * expm1(input_scale * x)), expm1 computed only at the
    entries that take it (x <= 0 or NaN); a factor of 1 is skipped (an exact product)."""
    x = ctx.arr(x)
    positive = truth(compare(operator.gt)(ctx, x, 0))
    if x.ndim == 0:
        neg_part = _EXPM1(ctx, x * input_scale if input_scale != 1 else x) * alpha
        out = where(ctx, positive, x, neg_part)
        return out * scale if scale != 1 else out
    rest = ~positive
    src = (x * input_scale).stripped() if input_scale != 1 else x.stripped()
    out = x.a.copy()
    if rest.any():
        neg_part = _EXPM1(ctx, MPArray(src.a[rest], ctx.prec, clean=True, finite=src.finite))
        out[rest] = (neg_part * alpha if alpha != 1 else neg_part).stripped().a
    res = MPArray(out, ctx.prec, clean=True, finite=x.finite)
    return res * scale if scale != 1 else res


def leaky_relu(ctx: Ctx, x: Any, slope: float = 0.01) -> MPArray:
    x = ctx.arr(x)
    return where(ctx, compare(operator.gt)(ctx, x, 0), x, x * slope)


def relu(ctx: Ctx, x: Any) -> Any:
    if not is_float(x):
        return np.maximum(x, 0)
    return where(ctx, compare(operator.gt)(ctx, x, 0), x, 0.0)


def gelu(ctx: Ctx, x: Any, approximate: str = "none") -> MPArray:
    x = ctx.arr(x)
    with workprec(ctx.prec):
        if approximate == "tanh":
            c = ctx.wrap(np.array((flint.arb(2) / flint.arb.pi()).sqrt().mid(), dtype=object))
            inner = (x + x * x * x * 0.044715) * c
            return x * 0.5 * (_TANH(ctx, inner) + 1.0)
        r2 = ctx.wrap(np.array(flint.arb(2).sqrt().mid(), dtype=object))
    return x * 0.5 * (_ERF(ctx, x / r2) + 1.0)


def softplus(ctx: Ctx, x: Any, beta: float = 1.0, threshold: float = 20.0) -> MPArray:
    """log1p(exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch)."""
    x = ctx.arr(x)
    bx = x * beta if beta != 1 else x
    soft = _LOG1P(ctx, _EXP(ctx, bx))
    soft = soft / beta if beta != 1 else soft
    return where(ctx, compare(operator.gt)(ctx, bx, threshold), x, soft)


def silu(ctx: Ctx, x: Any) -> MPArray:
    x = ctx.arr(x)
    return x * sigmoid(ctx, x)


def mish(ctx: Ctx, x: Any) -> MPArray:
    x = ctx.arr(x)
    return x * _TANH(ctx, softplus(ctx, x))


def hardsigmoid(ctx: Ctx, x: Any) -> MPArray:
    return clamp(ctx, ctx.arr(x) / 6.0 + 0.5, 0.0, 1.0)


def hardswish(ctx: Ctx, x: Any) -> MPArray:
    x = ctx.arr(x)
    return x * hardsigmoid(ctx, x)


OPS: OpTable = {
    aten.sigmoid.default: sigmoid,
    aten.relu.default: relu,
    aten.gelu.default: gelu,
    aten.elu.default: elu,
    aten.leaky_relu.default: leaky_relu,
    aten.hardtanh.default: lambda ctx, x, lo=-1.0, hi=1.0: clamp(ctx, x, lo, hi),
    aten.silu.default: silu,
    aten.softplus.default: softplus,
    aten.mish.default: mish,
    aten.hardsigmoid.default: hardsigmoid,
    aten.hardswish.default: hardswish,
}
