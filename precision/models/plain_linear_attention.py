"""Plain linear attention of 001 App. B.3 (eq. 21): unmasked, unnormalised, no softmax,

    LinearAttn(u) = (u W_Q)(u W_K)^T (u W_V + B),   u (batch, N, D) -> (batch, N, D).

001 Thm. B.1: one such layer cannot represent SQUARE, u -> u ⊙ u, exactly. Its output has
no term of degree 1 in u and its degree-2 terms are (u W_Q)(u W_K)^T B, which pair every row
with every other row, so no choice of weights leaves only the squares. ``depth`` layers are
composed, u <- LinearAttn_l(u) (with ``residual``: u <- u + LinearAttn_l(u)).
"""

from __future__ import annotations

import torch
from torch import nn


class PlainLinearAttention(nn.Module):
    """``depth`` layers of eq. 21 on D-dimensional tokens, at most ``max_len`` of them.

    B is a per-position bias of the values, (max_len, D): eq. 21 adds it to u W_V (N x D)
    (the paper writes B in R^{D x D}, which matches only when N = D). The weights start at
    a scale that keeps the output O(1) for standard normal inputs: each of the three factors
    has std D^-1/2 (N D)^-1/6."""

    def __init__(self, d: int, depth: int = 1, max_len: int = 64, residual: bool = False,
                 init_scale: float | None = None) -> None:
        super().__init__()
        if depth < 1 or d < 1 or max_len < 1:
            raise ValueError("plain linear attention needs depth, d and max_len >= 1")
        scale = init_scale if init_scale is not None else (
            d ** -0.5 * (max_len * d) ** (-1.0 / 6.0))
        self.d, self.depth, self.max_len, self.residual = d, depth, max_len, residual
        self.W_Q = nn.Parameter(scale * torch.randn(depth, d, d))
        self.W_K = nn.Parameter(scale * torch.randn(depth, d, d))
        self.W_V = nn.Parameter(scale * torch.randn(depth, d, d))
        self.B = nn.Parameter(torch.zeros(depth, max_len, d))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u (batch, N, D) -> (batch, N, D), N <= max_len."""
        n = u.shape[-2]
        if n > self.max_len:
            raise ValueError(f"plain linear attention: {n} tokens > max_len {self.max_len}")
        for layer in range(self.depth):
            q = u @ self.W_Q[layer]
            k = u @ self.W_K[layer]
            v = u @ self.W_V[layer] + self.B[layer, :n]
            out = (q @ k.transpose(-1, -2)) @ v
            u = u + out if self.residual else out
        return u

    def extra_repr(self) -> str:
        return (f"d={self.d}, depth={self.depth}, max_len={self.max_len}, "
                f"residual={self.residual}, parameters={3 * self.depth * self.d ** 2}"
                f"+{self.depth * self.max_len * self.d} (B)")

