"""Memformers (003 Sec. 3): linear attention with memory across layers.

Attention as in :class:`~precision.models.linear_attention.RestrictedLSA`:
Attn_l(Z) = P_l Z M Z^T Q_l Z (row form; ``heads`` heads summed).
* CGD-like memory (eq. 3.1-3.2): R_l = Attn_l(Z_l) + gamma_l R_{l-1};
  Z_{l+1} = Z_l + alpha_l R_l / n.
* LFOM memory (eq. 3.4): Z_{l+1} = Z_l + (1/n) sum_{j<=l} Gamma_j ⊙ R_j with
  R_j = Attn_j(Z_j) and Gamma_j either a full (max_len, d + 1) gate per token and
  coordinate (``gamma="full"``) or one scalar per layer (``gamma="scalar"``).
Read-out -y of each token (the query's is last).
"""

from __future__ import annotations

import torch
from torch import nn

from precision.models.linear_attention import context_moment


class Memformer(nn.Module):
    """(batch, N, d + 1) tokens -> (batch, N, 1) predictions."""

    def __init__(self, d: int, depth: int = 3, heads: int = 1, memory: str = "cgd",
                 gamma: str = "scalar", max_len: int = 64, gdpp: bool = False) -> None:
        super().__init__()
        if memory not in ("cgd", "lfom"):
            raise ValueError(f"memory must be cgd or lfom, not {memory!r}")
        if gamma not in ("scalar", "full"):
            raise ValueError(f"gamma must be scalar or full, not {gamma!r}")
        self.d, self.depth, self.heads, self.memory = d, depth, heads, memory
        self.A = nn.Parameter(0.1 * torch.eye(d).repeat(depth, heads, 1, 1)
                              + 0.01 * torch.randn(depth, heads, d, d))
        self.B = nn.Parameter(torch.zeros(depth, heads, d, d)) if gdpp else None
        if memory == "cgd":
            self.alpha = nn.Parameter(torch.ones(depth))
            self.gamma = nn.Parameter(torch.zeros(depth))
        elif gamma == "scalar":
            self.Gamma = nn.Parameter(torch.ones(depth, 1, 1))
        else:
            self.Gamma = nn.Parameter(torch.ones(depth, max_len, d + 1))

    def attn(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        d = self.d
        C = context_moment(e)
        x = e[..., :d]
        out = 0
        for h in range(self.heads):
            s = -(x @ self.A[layer, h].T) @ C[:, :d, :]
            dx = s[..., :d] @ self.B[layer, h].T if self.B is not None else torch.zeros_like(x)
            out = out + torch.cat([dx, s[..., d:]], dim=-1)
        return out

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        n = e.shape[1] - 1
        if self.memory == "cgd":
            R = torch.zeros_like(e)
            for layer in range(self.depth):
                R = self.attn(e, layer) + self.gamma[layer] * R
                e = e + self.alpha[layer] * R / n
        else:
            acc = torch.zeros_like(e)
            for layer in range(self.depth):
                full = self.Gamma.shape[1] > 1
                gate = self.Gamma[layer, : e.shape[1]] if full else self.Gamma[layer]
                acc = acc + gate * self.attn(e, layer)
                e = e + acc / n
        return -e[..., self.d:]
