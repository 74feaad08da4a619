"""Single-layer BaseConv constructions of READ, AFFINE and MULTIPLY (001 App. C.1).

Positions are 0-based here (the paper counts from 1). The layer is eq. 40,
y = ((u W_gate + b_gate) ⊙ (k * (u W_in + b_in) + b_conv) [+ u]) W_out + b_out, wrapped in
the BaseConv model with identity input projection; the model's output projection selects
columns. READ uses the per-position gate bias b_gate (1 at position j, 0 elsewhere) in place of
the positional-encoding channels of App. C.1.1, so the input carries data only.
"""

from __future__ import annotations

import numpy as np
import torch

from precision.models.baseconv import BaseConv, BaseConvConfig


def _blank(d_in: int, d_out: int, width: int, n: int, residual: str) -> BaseConv:
    model = BaseConv(BaseConvConfig(d_in=d_in, d_out=d_out, depth=1, width=width, max_len=n,
                                    residual=residual)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.inp.weight[:d_in, :d_in] = torch.eye(d_in, dtype=torch.float64)
    return model


def read(n: int, d: int, i: int, j: int, a: int, b: int) -> BaseConv:
    """READ(i, j, a, b) (001 eq. 5 / 41): row j becomes row i, output columns a:b.

    Causal, so it needs i <= j: the filter k[0] = -1, k[j - i] = +1 gives
    (k * u)[t] = u[t - (j - i)] - u[t]; the gate is 1 only at position j; the inner residual
    adds u back: position j gets u[i], every other position keeps u[t].
    """
    if not (0 <= i <= j < n and 0 <= a < b <= d):
        raise ValueError(f"READ needs 0 <= i <= j < N and 0 <= a < b <= D (got i={i}, j={j}, "
                         f"a={a}, b={b}, N={n}, D={d})")
    model = _blank(d, b - a, d, n, residual="inner")
    layer = model.layers[0]
    eye = torch.eye(b - a, dtype=torch.float64)
    # Only channels a:b reach the output, so only they carry weights (every non-zero weight
    # then matters, which the perturbation tests check).
    with torch.no_grad():
        layer.w_in.weight[a:b, a:b] = eye
        layer.w_out.weight[a:b, a:b] = eye
        layer.b_gate[j, a:b] = 1.0
        layer.filter[a:b, 0] -= 1.0
        layer.filter[a:b, j - i] += 1.0
        model.out.weight[:, a:b] = eye
    return model


def affine(n: int, H: np.ndarray) -> BaseConv:
    """AFFINE(H) (001 eq. 42): u -> u H, H (D, D_out). Conv(W_in u) = 1 (W_in = 0, b_in = 1,
    filter = delta), W_gate = I, so the gated product is u; the output projection is H."""
    d, d_out = H.shape
    model = _blank(d, d_out, d, n, residual="none")
    layer = model.layers[0]
    with torch.no_grad():
        layer.b_in.fill_(1.0)
        layer.filter[:, 0] = 1.0
        layer.w_gate.weight.copy_(torch.eye(d, dtype=torch.float64))
        layer.w_out.weight.copy_(torch.eye(d, dtype=torch.float64))
        model.out.weight.copy_(torch.as_tensor(H, dtype=torch.float64).T)
    return model


def multiply(n: int, d: int, a: int, b: int, d_out: int) -> BaseConv:
    """MULTIPLY(a, b, d_out) (001 eq. 43): u[:, a:a+d_out] ⊙ u[:, b:b+d_out].
    Conv = identity (delta filter), W_in = proj(a : a+d_out), W_gate = proj(b : b+d_out)."""
    if not (0 <= a and a + d_out <= d and 0 <= b and b + d_out <= d and d_out >= 1):
        raise ValueError(f"MULTIPLY needs a + d_out <= D and b + d_out <= D (got a={a}, b={b}, "
                         f"d_out={d_out}, D={d})")
    model = _blank(d, d_out, d, n, residual="none")
    layer = model.layers[0]
    eye = torch.eye(d_out, dtype=torch.float64)
    with torch.no_grad():  # channels 0:d_out carry the product; the rest stay zero
        layer.filter[:d_out, 0] = 1.0
        layer.w_in.weight[:d_out, a:a + d_out] = eye
        layer.w_gate.weight[:d_out, b:b + d_out] = eye
        layer.w_out.weight[:d_out, :d_out] = eye
        model.out.weight[:, :d_out] = eye
    return model
