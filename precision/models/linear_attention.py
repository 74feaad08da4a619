"""Linear self-attention (LSA) models of 002, 003 and 000.

Tokens are rows: x (batch, N, d+1) with e_i = (x_i, y_i) for the n = N - 1 context tokens and
the query e_{n+1} = (x_t, 0) last. For column-token papers, Z = E^T.

* :class:`LSA` (002 eq. 1-3): e_i <- e_i + sum_h sum_{j<=n} (e_j^T Q_h e_i) P_h e_j, i.e. in
  row form E <- E + sum_h E Q_h^T C P_h^T with C = sum_{j<=n} e_j e_j^T (the query is never a
  key). Parameterisations: ``full`` (P, Q free), ``diag`` (eq. 8: P = diag(p_x I, p_y),
  Q = diag(q_x I, q_y)), ``gdpp`` (eq. 11: x <- (I + w_xx Sigma) x, y <- y + w_yx <alpha, x>).
  Read-out (002 Sec. 2): prediction = -y of each token; the query's is the last row.
* :class:`RestrictedLSA` (003 eq. 2.5-2.8): Z <- Z + (1/n) P_l Z M Z^T Q_l Z with
  P_l = [[B_l, 0], [0, 1]], Q_l = [[-A_l, 0], [0, 0]]; B_l = 0 is preconditioned GD with
  preconditioner A_l, B_l != 0 the GD++ variant. Read-out -y. (003's printed signs are
  inconsistent; with A_l positive definite this sign convention predicts +w*^T x.)
* :class:`LinearTransformer` (000 eq. 3.1): H <- H + sum_h W_V H (W_K H)^T (W_Q H), then
  H <- H + W_2 ReLU(W_1 H); unmasked, unnormalised; tokens (batch, N, width) in and out.
"""

from __future__ import annotations

import torch
from torch import nn


def context_moment(e: torch.Tensor) -> torch.Tensor:
    """C = sum_{j <= n} e_j e_j^T over the context rows (all but the last): (batch, D, D)."""
    ctx = e[:, :-1, :]
    return ctx.transpose(1, 2) @ ctx


class LSA(nn.Module):
    """002 linear transformer, ``depth`` layers x ``heads`` heads, on d + 1 dim tokens."""

    def __init__(self, d: int, depth: int = 1, heads: int = 1, param: str = "full",
                 init_scale: float = 0.02) -> None:
        super().__init__()
        if param not in ("full", "diag", "gdpp"):
            raise ValueError(f"param must be full, diag or gdpp, not {param!r}")
        self.d, self.depth, self.heads, self.param = d, depth, heads, param
        D = d + 1
        if param == "full":
            self.P = nn.Parameter(init_scale * torch.randn(depth, heads, D, D))
            self.Q = nn.Parameter(init_scale * torch.randn(depth, heads, D, D))
        elif param == "diag":  # (p_x, p_y), (q_x, q_y) per layer and head
            self.p = nn.Parameter(init_scale * torch.randn(depth, heads, 2))
            self.q = nn.Parameter(init_scale * torch.randn(depth, heads, 2))
        else:  # (w_xx, w_yx) per layer
            self.w = nn.Parameter(init_scale * torch.randn(depth, 2))

    def _diag(self, pq: torch.Tensor) -> torch.Tensor:
        """(heads, 2) -> (heads, D, D) matrices diag(a I_d, b)."""
        d = self.d
        ones = torch.ones(d, dtype=pq.dtype, device=pq.device)
        vec = torch.cat([pq[:, :1] * ones, pq[:, 1:]], dim=1)  # (heads, D)
        return torch.diag_embed(vec)

    def step(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        """One layer on tokens e (batch, N, D)."""
        C = context_moment(e)
        if self.param == "gdpp":
            d = self.d
            x, y = e[..., :d], e[..., d:]
            sigma, alpha = C[:, :d, :d], C[:, :d, d:]         # Sigma, alpha (002 Sec. 2)
            w_xx, w_yx = self.w[layer, 0], self.w[layer, 1]
            x_new = x + w_xx * (x @ sigma)                     # (I + w_xx Sigma) x
            y_new = y + w_yx * (x @ alpha)                     # y + w_yx <alpha, x>
            return torch.cat([x_new, y_new], dim=-1)
        if self.param == "full":
            P, Q = self.P[layer], self.Q[layer]
        else:
            P, Q = self._diag(self.p[layer]), self._diag(self.q[layer])
        delta = 0
        for h in range(self.heads):
            delta = delta + e @ Q[h].T @ C @ P[h].T
        return e + delta

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        for layer in range(self.depth):
            e = self.step(e, layer)
        return -e[..., self.d:]


class RestrictedLSA(nn.Module):
    """003 linear transformer: preconditioned GD (B_l = 0) or its GD++ variant."""

    def __init__(self, d: int, depth: int = 3, gdpp: bool = False,
                 init_scale: float = 0.1) -> None:
        super().__init__()
        self.d, self.depth = d, depth
        self.A = nn.Parameter(init_scale * torch.eye(d).repeat(depth, 1, 1)
                              + 0.01 * torch.randn(depth, d, d))
        self.B = nn.Parameter(torch.zeros(depth, d, d)) if gdpp else None

    def attn(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        """Row form of (1/n) P Z M Z^T Q Z with P = [[B, 0], [0, 1]], Q = [[-A, 0], [0, 0]]."""
        n = e.shape[1] - 1
        d = self.d
        C = context_moment(e)                                  # Z M Z^T as rows
        x = e[..., :d]
        # E Q^T C P^T: only the x-block of Q is non-zero.
        s = -(x @ self.A[layer].T) @ C[:, :d, :]                   # (batch, N, D)
        dx = s[..., :d] @ self.B[layer].T if self.B is not None else torch.zeros_like(x)
        return torch.cat([dx, s[..., d:]], dim=-1) / n

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        for layer in range(self.depth):
            e = e + self.attn(e, layer)
        return -e[..., self.d:]

    def query_per_layer(self, e: torch.Tensor) -> torch.Tensor:
        """The query's read-out -y after each layer: (batch, depth)."""
        outs = []
        for layer in range(self.depth):
            e = e + self.attn(e, layer)
            outs.append(-e[:, -1, self.d])
        return torch.stack(outs, dim=1)


class LinearTransformer(nn.Module):
    """000 eq. 3.1: linear attention (heads summed) + ReLU MLP, both residual."""

    def __init__(self, width: int, depth: int = 1, heads: int = 1, mlp_width: int = 0,
                 init_scale: float = 0.02) -> None:
        super().__init__()
        self.depth, self.heads = depth, heads
        s = init_scale
        self.WQ = nn.Parameter(s * torch.randn(depth, heads, width, width))
        self.WK = nn.Parameter(s * torch.randn(depth, heads, width, width))
        self.WV = nn.Parameter(s * torch.randn(depth, heads, width, width))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(width, mlp_width), nn.ReLU(), nn.Linear(mlp_width, width))
            for _ in range(depth)
        ) if mlp_width else None

    def step(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """One layer (attention, then the ReLU MLP if any) on tokens h (batch, N, width)."""
        delta = 0
        for k in range(self.heads):
            q = h @ self.WQ[layer, k].T
            kk = h @ self.WK[layer, k].T
            v = h @ self.WV[layer, k].T
            delta = delta + (q @ kk.transpose(1, 2)) @ v  # row form of W_V H (W_K H)^T W_Q H
        h = h + delta
        if self.mlp is not None:
            h = h + self.mlp[layer](h)
        return h

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for layer in range(self.depth):
            h = self.step(h, layer)
        return h
