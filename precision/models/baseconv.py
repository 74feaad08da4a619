"""BaseConv (001 eq. 2): a gated long convolution, exact in arbitrary precision.

  y = h + (h W_g + b_g) ⊙ (K * (h W_u + b_u))     per layer, h = x W_in (+ LN optional)
K * u is a causal per-channel convolution with a filter as long as the sequence,
(K * u)[t, c] = sum_{s <= t} k[c, t - s] u[s, c]. It is evaluated as a product with the
lower-triangular Toeplitz matrix of k — a plain matmul, so the arbitrary-precision graph
interpreter computes it exactly (no FFT rounding). ``short=True`` replaces the long filter
by a depthwise causal Conv1d of length ``short_len``. Without LayerNorm the whole map is a
polynomial in the input, which the tests check against exact rational arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class BaseConvConfig:
    d_in: int
    d_out: int
    depth: int = 1
    width: int = 64
    max_len: int = 64     # longest sequence the long filter covers
    short: bool = False
    short_len: int = 3
    layernorm: bool = False
    residual: bool = True


def toeplitz_causal(k: torch.Tensor, n: int) -> torch.Tensor:
    """(channels, n, n) lower-triangular Toeplitz matrices T[c, t, s] = k[c, t - s] (t >= s)."""
    idx = torch.arange(n)
    diff = idx[:, None] - idx[None, :]  # t - s
    taps = k[:, diff.clamp(min=0)]      # (channels, n, n)
    return taps * (diff >= 0).to(k.dtype)


class BaseConvLayer(nn.Module):
    """One gated-convolution layer of width ``width``."""

    def __init__(self, cfg: BaseConvConfig) -> None:
        super().__init__()
        w = cfg.width
        self.ln = nn.LayerNorm(w) if cfg.layernorm else nn.Identity()
        self.gate = nn.Linear(w, w)
        self.value = nn.Linear(w, w)
        self.short = cfg.short
        self.residual = cfg.residual
        if cfg.short:
            self.conv = nn.Conv1d(w, w, cfg.short_len, groups=w, padding=cfg.short_len - 1)
        else:
            self.filter = nn.Parameter(torch.randn(w, cfg.max_len) / cfg.max_len)

    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """Causal convolution of u (batch, N, width) along the sequence."""
        n = u.shape[1]
        if self.short:
            return self.conv(u.transpose(1, 2))[..., :n].transpose(1, 2)
        T = toeplitz_causal(self.filter[:, :n], n)           # (width, N, N)
        return (T @ u.permute(2, 1, 0)).permute(2, 1, 0)   # per channel: T_c @ u[:, :, c]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = self.ln(h)
        y = self.gate(z) * self.mix(self.value(z))
        return h + y if self.residual else y


class BaseConv(nn.Module):
    """(batch, N, d_in) -> (batch, N, d_out): input projection, layers, output projection."""

    def __init__(self, cfg: BaseConvConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.d_in, cfg.width)
        self.layers = nn.ModuleList(BaseConvLayer(cfg) for _ in range(cfg.depth))
        self.out = nn.Linear(cfg.width, cfg.d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.cfg.max_len and not self.cfg.short:
            raise ValueError(f"sequence length {x.shape[1]} exceeds max_len {self.cfg.max_len}")
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)
