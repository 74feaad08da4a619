"""BaseConv (001 eq. 2): a gated long convolution, exact in arbitrary precision.

One layer, u (batch, N, width) -> (batch, N, width), exactly eq. 2 of 001 (= eq. 40):
  y = ((u W_gate + b_gate) ⊙ (k * (u W_in + b_in) + b_conv)) W_out + b_out
with *per-position* biases b_* in R^{N x width} (that is how positions enter: the READ
construction of App. C.1.1 gates one position through b_gate). ``residual``: "outer"
(h + layer(h), the usual stacking), "inner" (App. C.1.1: (G ⊙ C + u) W_out + b_out) or "none".
k * u is a causal per-channel convolution with a filter as long as the sequence,
(k * u)[t, c] = sum_{s <= t} k[c, t - s] u[s, c], evaluated as a product with the
lower-triangular Toeplitz matrix of k — a plain matmul, so the arbitrary-precision graph
interpreter computes it exactly (no FFT rounding). ``causal=False`` makes the long convolution
two-sided (the non-causal BaseConv of 001 App. C.2.1): the filter has 2 max_len - 1 taps, tap
max_len - 1 + l for lag l = t - s in (-max_len, max_len), so
(k * u)[t, c] = sum_s k[c, t - s + max_len - 1] u[s, c] — a full Toeplitz matrix, again a
plain matmul. ``short=True`` replaces the long filter by a depthwise causal Conv1d of length
``short_len``. Without LayerNorm the whole map is a polynomial in the input, which the tests
check against exact rational arithmetic.
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
    residual: str = "outer"   # "outer" | "inner" | "none"
    causal: bool = True       # False: two-sided long filter (001 App. C.2.1)


def toeplitz_causal(k: torch.Tensor, n: int) -> torch.Tensor:
    """(channels, n, n) lower-triangular Toeplitz matrices T[c, t, s] = k[c, t - s] (t >= s)."""
    idx = torch.arange(n, device=k.device)
    diff = idx[:, None] - idx[None, :]  # t - s
    taps = k[:, diff.clamp(min=0)]      # (channels, n, n)
    return taps * (diff >= 0).to(k.dtype)


def toeplitz_full(k: torch.Tensor, n: int) -> torch.Tensor:
    """(channels, n, n) two-sided Toeplitz matrices T[c, t, s] = k[c, t - s + center] for a
    filter k of 2 center + 1 taps (center >= n - 1): tap ``center`` is lag 0."""
    center = (k.shape[1] - 1) // 2
    idx = torch.arange(n, device=k.device)
    return k[:, idx[:, None] - idx[None, :] + center]


class BaseConvLayer(nn.Module):
    """One gated-convolution layer of width ``width`` (001 eq. 2 / eq. 40)."""

    def __init__(self, cfg: BaseConvConfig) -> None:
        super().__init__()
        if cfg.residual not in ("outer", "inner", "none"):
            raise ValueError(f"residual must be outer, inner or none, not {cfg.residual!r}")
        if cfg.short and not cfg.causal:
            raise ValueError("causal=False applies to the long convolution; short=True is causal")
        w, n = cfg.width, cfg.max_len
        self.ln = nn.LayerNorm(w) if cfg.layernorm else nn.Identity()
        self.w_in = nn.Linear(w, w, bias=False)
        self.w_gate = nn.Linear(w, w, bias=False)
        self.w_out = nn.Linear(w, w, bias=False)
        self.b_in = nn.Parameter(0.02 * torch.randn(n, w))
        self.b_gate = nn.Parameter(0.02 * torch.randn(n, w))
        self.b_conv = nn.Parameter(0.02 * torch.randn(n, w))
        self.b_out = nn.Parameter(0.02 * torch.randn(n, w))
        self.short = cfg.short
        self.causal = cfg.causal
        self.residual = cfg.residual
        if cfg.short:
            self.conv = nn.Conv1d(w, w, cfg.short_len, groups=w, padding=cfg.short_len - 1,
                                  bias=False)
        elif cfg.causal:
            self.filter = nn.Parameter(torch.randn(w, n) / n)
        else:  # taps for lags -(n - 1) .. n - 1; lag 0 at index n - 1
            self.filter = nn.Parameter(torch.randn(w, 2 * n - 1) / n)

    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """Long convolution k * u of u (batch, N, width) along the sequence (causal unless
        ``causal=False``)."""
        n = u.shape[1]
        if self.short:
            return self.conv(u.transpose(1, 2))[..., :n].transpose(1, 2)
        if self.causal:
            T = toeplitz_causal(self.filter[:, :n], n)       # (width, N, N)
        else:
            T = toeplitz_full(self.filter, n)                # (width, N, N), two-sided
        return (T @ u.permute(2, 1, 0)).permute(2, 1, 0)   # per channel: T_c @ u[:, :, c]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        n = h.shape[1]
        u = self.ln(h)
        gate = self.w_gate(u) + self.b_gate[:n]
        conv = self.mix(self.w_in(u) + self.b_in[:n]) + self.b_conv[:n]
        inner = gate * conv
        if self.residual == "inner":
            inner = inner + u
        y = self.w_out(inner) + self.b_out[:n]
        return h + y if self.residual == "outer" else y

    def identity_parameters(self) -> tuple[str, ...] | None:
        """With the outer residual, the parameters that write into it (``w_out``,
        ``b_out``): all zero, the layer is the identity exactly (h + 0 = h), so a deeper model
        contains this one (:mod:`precision.models.containment`). None otherwise: an inner
        or no residual has no exact identity."""
        return ("w_out.weight", "b_out") if self.residual == "outer" else None


class BaseConv(nn.Module):
    """(batch, N, d_in) -> (batch, N, d_out): input projection, layers, output projection."""

    def __init__(self, cfg: BaseConvConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.d_in, cfg.width)
        self.layers = nn.ModuleList(BaseConvLayer(cfg) for _ in range(cfg.depth))
        self.out = nn.Linear(cfg.width, cfg.d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence length {x.shape[1]} exceeds max_len {self.cfg.max_len}")
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)
