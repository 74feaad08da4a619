"""Matrix products (mm, bmm, matmul, addmm, baddbmm, dot): each output entry is one dot
product through ``arb_mat``, rounded once (real or complex operands); ``_trilinear``
(``nn.Bilinear``) as its products and sum."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision.backends.interpreter.complex import c_matmul, is_complex
from precision.backends.interpreter.core import ONE, ZERO, Ctx, OpTable, map_array
from precision.backends.interpreter.elementwise import mul
from precision.backends.interpreter.reductions import total
from precision.backends.mp_backend import MPArray

aten = torch.ops.aten


def matmul(ctx: Ctx, a: Any, b: Any) -> Any:
    """numpy matmul semantics; integer operands stay integer."""
    if is_complex(a) or is_complex(b):
        return c_matmul(ctx, a, b)
    if not isinstance(a, MPArray) and not isinstance(b, MPArray):
        return np.matmul(a, b)
    a, b = ctx.arr(a), ctx.arr(b)
    if a.size == 0 or b.size == 0:  # empty operands: numpy's shape, zeros (empty sums)
        shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
        return ctx.filled(shape, ZERO)
    return a @ b


def addmm(ctx: Ctx, bias: Any, a: Any, b: Any, beta: float = 1, alpha: float = 1) -> MPArray:
    """beta * bias + alpha * (a @ b). For the usual beta = alpha = 1 with a row-vector bias
    (a Linear layer), the bias is folded into the product as one more term of each dot
    product, [a | 1] @ [b ; bias], so it costs no separate elementwise pass."""
    a, b, bias = ctx.arr(a), ctx.arr(b), ctx.arr(bias)
    if beta == 1 and alpha == 1 and bias.ndim == 1 and a.ndim == 2 and b.ndim == 2:
        ones = np.empty((a.shape[0], 1), dtype=object)
        ones.fill(ONE)
        left = MPArray(np.concatenate([a.a, ones], axis=1), ctx.prec, a.clean, a.finite)
        right = MPArray(np.concatenate([b.a, bias.a.reshape(1, -1)], axis=0), ctx.prec,
                        b.clean and bias.clean, b.finite and bias.finite)
        return left @ right
    prod = a @ b
    prod = prod * alpha if alpha != 1 else prod
    if beta == 0:
        return prod
    return prod + (bias * beta if beta != 1 else bias)


def trilinear(ctx: Ctx, i1: Any, i2: Any, i3: Any, expand1: list[int], expand2: list[int],
              expand3: list[int], sumdim: list[int], unroll_dim: int = 1) -> Any:
    """aten._trilinear: each operand with size-1 axes inserted at its ``expand`` positions,
    the three multiplied (broadcast) and summed over ``sumdim``. ``nn.Bilinear``'s
    y_bo = sum_ij x1_bi W_oij x2_bj + b_o is
    ``_trilinear(x1, W, x2, [1, 3], [0], [1, 2], [2, 3])``. ``unroll_dim`` only picks
    PyTorch's loop order."""

    def unsqueeze(x: Any, dims: list[int]) -> Any:
        for d in sorted(dims):
            x = map_array(x, lambda a, d=d: np.expand_dims(a, d))
        return x

    prod = mul(ctx, mul(ctx, unsqueeze(i1, expand1), unsqueeze(i2, expand2)),
               unsqueeze(i3, expand3))
    return total(ctx, prod, list(sumdim), False) if sumdim else prod


OPS: OpTable = {
    aten._trilinear.default: trilinear,
    aten.mm.default: matmul, aten.bmm.default: matmul, aten.matmul.default: matmul,
    aten.dot.default: matmul,
    aten.addmm.default: addmm,
    aten.baddbmm.default: addmm,
}
