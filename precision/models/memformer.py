"""Memformers (003 Sec. 3): linear attention with memory across layers.

Attention as in :class:`~precision.models.linear_attention.RestrictedLSA`:
Attn_l(Z) = P_l Z M Z^T Q_l Z (row form; ``heads`` heads summed), P_l = [[B_l, 0], [0, 1]],
Q_l = [[-A_l, 0], [0, 0]] (eq. 2.8; B_l = 0 unless ``gdpp``).
* No memory (``memory="none"``, eq. 2.5): Z_{l+1} = Z_l + Attn_l(Z_l) / n, the linear
  transformer = preconditioned GD with preconditioners A_l (Lemma 1, eq. 2.9-2.10).
* CGD-like memory (eq. 3.1-3.2): R_l = Attn_l(Z_l) + gamma_l R_{l-1};
  Z_{l+1} = Z_l + alpha_l R_l / n.
* LFOM memory (eq. 3.4): Z_{l+1} = Z_l + (1/n) sum_{j<=l} Gamma_j ⊙ R_j with
  R_j = Attn_j(Z_j) and Gamma_j either a full (max_len, d + 1) gate per token and
  coordinate (``gamma="full"``) or one scalar per layer (``gamma="scalar"``); Gamma_j^l =
  Gamma_j for every l, the special case 003 Sec. 3.3 trains.
Read-out -y of each token (the query's is last). 003's printed signs (eq. 2.7 / Lemma 1) are
inconsistent; with A_l positive definite this read-out predicts +w*^T x (README misprint).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from precision.models.linear_attention import context_moment

MEMORIES = ("none", "cgd", "lfom")


class Memformer(nn.Module):
    """(batch, N, d + 1) tokens -> (batch, N, 1) predictions.

    ``init_scale``: A_l starts at (init_scale / heads) I + 0.01 N(0, 1) per head, so the
    summed preconditioner starts near init_scale I whatever the number of heads.
    """

    def __init__(self, d: int, depth: int = 3, heads: int = 1, memory: str = "cgd",
                 gamma: str = "scalar", max_len: int = 64, gdpp: bool = False,
                 init_scale: float = 0.1) -> None:
        super().__init__()
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {', '.join(MEMORIES)}, not {memory!r}")
        if gamma not in ("scalar", "full"):
            raise ValueError(f"gamma must be scalar or full, not {gamma!r}")
        self.d, self.depth, self.heads, self.memory = d, depth, heads, memory
        self.A = nn.Parameter((init_scale / heads) * torch.eye(d).repeat(depth, heads, 1, 1)
                              + 0.01 * torch.randn(depth, heads, d, d))
        self.B = nn.Parameter(torch.zeros(depth, heads, d, d)) if gdpp else None
        if memory == "cgd":
            self.alpha = nn.Parameter(torch.ones(depth))
            self.gamma = nn.Parameter(torch.zeros(depth))
        elif memory == "lfom" and gamma == "scalar":
            self.Gamma = nn.Parameter(torch.ones(depth, 1, 1))
        elif memory == "lfom":
            self.Gamma = nn.Parameter(torch.ones(depth, max_len, d + 1))

    def attn(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        """n * Attn_l in row form, heads summed: (batch, N, d + 1) -> (batch, N, d + 1).

        Head h moves x by -x A_h^T C_xx B_h^T and y by -x A_h^T C_xy (C = sum_{j<=n} e_j
        e_j^T); the heads' sums are formed once: M = sum_h A_h^T C_xx B_h^T, sum_h A_h."""
        d = self.d
        C = context_moment(e)
        x = e[..., :d]
        sy = -(x @ self.A[layer].sum(0).T) @ C[:, :d, d:]
        if self.B is None:
            return torch.cat([torch.zeros_like(x), sy], dim=-1)
        M = torch.einsum("hed,bef,hgf->bdg", self.A[layer], C[:, :d, :d], self.B[layer])
        return torch.cat([-(x @ M), sy], dim=-1)

    def attn_y(self, x: torch.Tensor, y: torch.Tensor, layer: int) -> torch.Tensor:
        """The y row of n * Attn_l when B_l = 0 (x never moves): x (batch, N, d), y (batch, N)
        -> (batch, N), s_i = -x_i^T (sum_h A_h)^T sum_{j<=n} x_j y_j."""
        v = torch.einsum("bnd,bn->bd", x[:, :-1], y[:, :-1])     # sum_j x_j y_j
        u = v @ self.A[layer].sum(0)                              # (A^T v)^T
        return -torch.einsum("bnd,bd->bn", x, u)

    def _memory(self, state: torch.Tensor, n: int, attn: Any, gate: Any
                ) -> Iterator[torch.Tensor]:
        """Eq. 2.5 / 3.1-3.2 / 3.4 on ``state`` (tokens, or the y row) given n * Attn_l."""
        if self.memory == "none":
            for layer in range(self.depth):
                state = state + attn(state, layer) / n
                yield state
        elif self.memory == "cgd":
            R = torch.zeros_like(state)
            for layer in range(self.depth):
                R = attn(state, layer) + self.gamma[layer] * R
                state = state + self.alpha[layer] * R / n
                yield state
        else:
            acc = torch.zeros_like(state)
            for layer in range(self.depth):
                acc = acc + gate(layer) * attn(state, layer)
                state = state + acc / n
                yield state

    def _gate(self, layer: int, N: int, y_only: bool) -> torch.Tensor:
        if self.Gamma.shape[1] == 1:
            return self.Gamma[layer, 0, 0] if y_only else self.Gamma[layer]
        return self.Gamma[layer, :N, self.d] if y_only else self.Gamma[layer, :N]

    def query_trace(self, e: torch.Tensor) -> Iterator[torch.Tensor]:
        """The read-outs -y of every token after each layer, (batch, N) each. Without B
        blocks only the y row is propagated (the same arithmetic as the token form, cheaper)."""
        n, N, d = e.shape[1] - 1, e.shape[1], self.d
        if self.B is None:
            x = e[..., :d]
            steps = self._memory(e[..., d], n, lambda y, layer: self.attn_y(x, y, layer),
                                 lambda layer: self._gate(layer, N, True))
            for y in steps:
                yield -y
        else:
            steps = self._memory(e, n, self.attn, lambda layer: self._gate(layer, N, False))
            for z in steps:
                yield -z[..., d]

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        out = -e[..., self.d]
        for out in self.query_trace(e):  # noqa: B007 -- the last layer's read-out
            pass
        return out.unsqueeze(-1)

    def query_per_layer(self, e: torch.Tensor) -> torch.Tensor:
        """The query's read-out -y after each layer: (batch, depth)."""
        return torch.stack([r[:, -1] for r in self.query_trace(e)], dim=1)

