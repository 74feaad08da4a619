"""Normalisation layers: layer norm, group norm, batch norm (eval and training statistics),
RMS norm. Statistics are computed in the working precision (mean, then the mean of squared
deviations, biased), as PyTorch defines them; every op rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from precision.backends.interpreter.core import Ctx, OpTable
from precision.backends.interpreter.elementwise import UNARY
from precision.backends.interpreter.reductions import count, total
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def _moments(ctx: Ctx, x: MPArray, dims: list[int]) -> tuple[MPArray, MPArray, MPArray]:
    """(mean, centred x, biased variance) over ``dims``, kept as size-1 axes."""
    n = count(x.shape, dims)
    mean = total(ctx, x, dims, True) / float(n)
    centred = x - mean
    var = total(ctx, centred * centred, dims, True) / float(n)
    return mean, centred, var


def layer_norm(ctx: Ctx, x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any,
               eps: float) -> tuple[MPArray, MPArray, MPArray]:
    """native_layer_norm over the last len(normalized_shape) axes: (out, mean, rstd)."""
    x = ctx.arr(x)
    dims = list(range(x.ndim - len(normalized_shape), x.ndim))
    mean, centred, var = _moments(ctx, x, dims)
    rstd = UNARY["rsqrt"](ctx, var + eps)
    out = centred * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def group_norm(ctx: Ctx, x: Any, weight: Any, bias: Any, n: int, c: int, hw: int, group: int,
               eps: float) -> tuple[MPArray, MPArray, MPArray]:
    """native_group_norm: x (N, C, *) in ``group`` groups of C/group channels;
    returns (out like x, mean (N, group), rstd (N, group))."""
    x = ctx.arr(x)
    g = MPArray(x.a.reshape(n, group, -1), x.prec, x.clean)
    mean, centred, var = _moments(ctx, g, [2])
    rstd = UNARY["rsqrt"](ctx, var + eps)
    out = MPArray((centred * rstd).a.reshape(x.shape), ctx.prec)
    chan = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * MPArray(ctx.arr(weight).a.reshape(chan), ctx.prec)
    if bias is not None:
        out = out + MPArray(ctx.arr(bias).a.reshape(chan), ctx.prec)
    return (out, MPArray(mean.a.reshape(n, group), ctx.prec),
            MPArray(rstd.a.reshape(n, group), ctx.prec))


def _channel(ctx: Ctx, v: Any, ndim: int) -> MPArray:
    return MPArray(ctx.arr(v).a.reshape((1, -1) + (1,) * (ndim - 2)), ctx.prec)


def _batch_norm(ctx: Ctx, x: Any, weight: Any, bias: Any, mean: Any, var: Any, eps: float
                ) -> MPArray:
    x = ctx.arr(x)
    rstd = UNARY["rsqrt"](ctx, _channel(ctx, var, x.ndim) + eps)
    out = (x - _channel(ctx, mean, x.ndim)) * rstd
    if weight is not None:
        out = out * _channel(ctx, weight, x.ndim)
    if bias is not None:
        out = out + _channel(ctx, bias, x.ndim)
    return out


def _empty(ctx: Ctx) -> MPArray:
    return ctx.wrap(np.empty((0,), dtype=object))


def batch_norm_eval(ctx: Ctx, x: Any, weight: Any, bias: Any, running_mean: Any,
                    running_var: Any, momentum: float, eps: float
                    ) -> tuple[MPArray, MPArray, MPArray]:
    """_native_batch_norm_legit_no_training: normalise with the running statistics."""
    return _batch_norm(ctx, x, weight, bias, running_mean, running_var, eps), _empty(ctx), \
        _empty(ctx)


def batch_norm_batch_stats(ctx: Ctx, x: Any, weight: Any, bias: Any, eps: float
                           ) -> tuple[MPArray, MPArray, MPArray]:
    """Training-mode batch norm: statistics over every axis but the channel axis 1;
    returns (out, batch mean (C,), batch rstd (C,)). Running statistics are not updated."""
    x = ctx.arr(x)
    dims = [d for d in range(x.ndim) if d != 1]
    mean, centred, var = _moments(ctx, x, dims)
    rstd = UNARY["rsqrt"](ctx, var + eps)
    out = centred * rstd
    if weight is not None:
        out = out * _channel(ctx, weight, x.ndim)
    if bias is not None:
        out = out + _channel(ctx, bias, x.ndim)
    return out, MPArray(mean.a.reshape(-1), ctx.prec), MPArray(rstd.a.reshape(-1), ctx.prec)


def native_batch_norm(ctx: Ctx, x: Any, weight: Any, bias: Any, running_mean: Any,
                      running_var: Any, training: bool, momentum: float, eps: float
                      ) -> tuple[MPArray, MPArray, MPArray]:
    if training or running_mean is None:
        return batch_norm_batch_stats(ctx, x, weight, bias, eps)
    return batch_norm_eval(ctx, x, weight, bias, running_mean, running_var, momentum, eps)


def rms_norm(ctx: Ctx, x: Any, normalized_shape: Sequence[int], weight: Any = None,
             eps: float | None = None) -> MPArray:
    """x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) axes
    (eps defaults to float32's machine epsilon, as in PyTorch)."""
    x = ctx.arr(x)
    dims = list(range(x.ndim - len(normalized_shape), x.ndim))
    ms = total(ctx, x * x, dims, True) / float(count(x.shape, dims))
    e = float(np.finfo(np.float32).eps) if eps is None else eps
    out = x * UNARY["rsqrt"](ctx, ms + e)
    return out * weight if weight is not None else out


OPS: OpTable = {
    aten.native_layer_norm.default: layer_norm,
    aten.native_group_norm.default: group_norm,
    aten.native_batch_norm.default: native_batch_norm,
    aten._native_batch_norm_legit_no_training.default: batch_norm_eval,
    aten._native_batch_norm_legit.default: lambda ctx, x, w, b, rm, rv, training, mom, eps: (
        native_batch_norm(ctx, x, w, b, rm, rv, training, mom, eps)),
    aten._native_batch_norm_legit.no_stats: lambda ctx, x, w, b, training, mom, eps: (
        batch_norm_batch_stats(ctx, x, w, b, eps)),
    aten._native_batch_norm_legit_functional.default: lambda ctx, x, w, b, rm, rv, training,
    mom, eps: (*native_batch_norm(ctx, x, w, b, rm, rv, training, mom, eps), rm, rv),
    aten.rms_norm.default: rms_norm,
}
