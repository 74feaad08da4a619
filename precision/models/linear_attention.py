"""Linear self-attention (LSA) models of 002, 003 and 000.

Tokens are rows: x (batch, N, d+1) with e_i = (x_i, y_i) for the n = N - 1 context tokens and
the query e_{n+1} = (x_t, 0) last. For column-token papers, Z = E^T.

* :class:`LSA` (002 eq. 1-3): e_i <- e_i + sum_h sum_{j<=n} (e_j^T Q_h e_i) P_h e_j, i.e. in
  row form E <- E + sum_h E Q_h^T C P_h^T with C = sum_{j<=n} e_j e_j^T (the query is never a
  key). Parameterisations: ``full`` (P, Q free), ``diag`` (eq. 8: P = diag(p_x I, p_y),
  Q = diag(q_x I, q_y)), ``gdpp`` (eq. 11: x <- (I + w_xx Sigma) x, y <- y + w_yx <alpha, x>).
  Read-out (002 Sec. 2): prediction = -y of each token; the query's is the last row.
  :func:`implicit_linear_model` gives 002 Thm 4.1's implicit linear model (Lemma 4.2).
* :class:`RestrictedLSA` (003 eq. 2.5-2.8): Z <- Z + (1/n) P_l Z M Z^T Q_l Z with
  P_l = [[B_l, 0], [0, 1]], Q_l = [[-A_l, 0], [0, 0]]; B_l = 0 is preconditioned GD with
  preconditioner A_l, B_l != 0 the GD++ variant. Read-out -y. (003's printed signs are
  inconsistent; with A_l positive definite this sign convention predicts +w*^T x.)
* :class:`LinearTransformer` (000 eq. 3.1): H <- H + sum_h W_V H (W_K H)^T (W_Q H), then
  H <- H + W_2 ReLU(W_1 H); unmasked, unnormalised; tokens (batch, N, width) in and out.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def _diag_vec(self, pq: torch.Tensor) -> torch.Tensor:
        """(heads, 2) -> (heads, D) diagonals (a, ..., a, b) of diag(a I_d, b)."""
        d = self.d
        ones = torch.ones(d, dtype=pq.dtype, device=pq.device)
        return torch.cat([pq[:, :1] * ones, pq[:, 1:]], dim=1)

    def step(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        """One layer on tokens e (batch, N, D): e_i + G^l e_i, i.e. E + E (G^l)^T."""
        if self.param == "gdpp":
            C = context_moment(e)
            d = self.d
            x, y = e[..., :d], e[..., d:]
            sigma, alpha = C[:, :d, :d], C[:, :d, d:]         # Sigma, alpha (002 Sec. 2)
            w_xx, w_yx = self.w[layer, 0], self.w[layer, 1]
            x_new = x + w_xx * (x @ sigma)                     # (I + w_xx Sigma) x
            y_new = y + w_yx * (x @ alpha)                     # y + w_yx <alpha, x>
            return torch.cat([x_new, y_new], dim=-1)
        return e + e @ self.layer_matrix(e, layer).transpose(1, 2)

    def layer_matrix(self, e: torch.Tensor, layer: int) -> torch.Tensor:
        """G^l = sum_h P_h C^l Q_h (batch, D, D) for tokens e (batch, N, D): the layer maps
        every token e_i -> e_i + G^l e_i (002 eq. 12); its blocks [[A, b], [c^T, d]] are those
        of Lemma 4.2. Diag (eq. 8-9): G = C * W elementwise with W = sum_h p_h q_h^T, whose
        blocks are w_xx, w_xy, w_yx, w_yy. GD++ (eq. 11): A = w_xx Sigma, c = w_yx alpha,
        b = 0, d = 0."""
        C = context_moment(e)
        if self.param == "gdpp":
            d = self.d
            G = torch.zeros_like(C)
            G[:, :d, :d] = self.w[layer, 0] * C[:, :d, :d]
            G[:, d, :d] = self.w[layer, 1] * C[:, :d, d]
            return G
        if self.param == "diag":
            vp, vq = self._diag_vec(self.p[layer]), self._diag_vec(self.q[layer])
            return C * (vp.T @ vq)                             # sum_h outer(p_h, q_h)
        P, Q = self.P[layer], self.Q[layer]
        G = P[0] @ C @ Q[0]
        for h in range(1, self.heads):
            G = G + P[h] @ C @ Q[h]
        return G

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        for layer in range(self.depth):
            e = self.step(e, layer)
        return -e[..., self.d:]

    def query_per_layer(self, e: torch.Tensor) -> torch.Tensor:
        """The query's read-out -y_{n+1}^l after each layer l = 1..depth (002 Fig. 2):
        (batch, depth); the last column is the model's prediction."""
        outs = []
        for layer in range(self.depth):
            e = self.step(e, layer)
            outs.append(-e[:, -1, self.d])
        return torch.stack(outs, dim=1)


@dataclass
class ImplicitLinearModel:
    """002 Thm 4.1 state after each layer l = 0..L (index l): M (batch, L+1, d, d),
    u (batch, L+1, d), a (batch, L+1), w (batch, L+1, d), with x_i^l = M^l x_i + y_i u^l,
    y_i^l = a^l y_i - <w^l, x_i>, and for the query x_t^l = M^l x_t, y_t^l = -<w^l, x_t>."""

    M: torch.Tensor
    u: torch.Tensor
    a: torch.Tensor
    w: torch.Tensor


def implicit_linear_model(model: LSA, e: torch.Tensor) -> ImplicitLinearModel:
    """The implicit linear model of an :class:`LSA` on prompts e (batch, N, D), by the
    recursion of 002 Lemma 4.2 from a^0 = 1, w^0 = 0, M^0 = I, u^0 = 0, with
    [[A, b], [c^T, d]] = G^l of the layer-l tokens (:meth:`LSA.layer_matrix`).

    The prediction is -y_t^L = <w^L, x_t>. Computed in e's dtype."""
    B, d = e.shape[0], model.d
    M = torch.eye(d, dtype=e.dtype).expand(B, d, d).clone()
    u = torch.zeros(B, d, dtype=e.dtype)
    a = torch.ones(B, dtype=e.dtype)
    w = torch.zeros(B, d, dtype=e.dtype)
    Ms, us, as_, ws = [M], [u], [a], [w]
    for layer in range(model.depth):
        G = model.layer_matrix(e, layer)
        A, b, c, dd = G[:, :d, :d], G[:, :d, d], G[:, d, :d], G[:, d, d]
        IA = A + torch.eye(d, dtype=e.dtype)
        # README misprint: 002 Lemma 4.2 prints "+ b^l (w^l)^T"; the identity holds with minus.
        M_new = IA @ M - b[:, :, None] * w[:, None, :]
        u_new = (IA @ u[:, :, None])[..., 0] + a[:, None] * b
        a_new = (1 + dd) * a + (c * u).sum(-1)
        w_new = (1 + dd)[:, None] * w - (M.transpose(1, 2) @ c[:, :, None])[..., 0]
        M, u, a, w = M_new, u_new, a_new, w_new
        Ms.append(M)
        us.append(u)
        as_.append(a)
        ws.append(w)
        e = model.step(e, layer)
    return ImplicitLinearModel(M=torch.stack(Ms, 1), u=torch.stack(us, 1),
                               a=torch.stack(as_, 1), w=torch.stack(ws, 1))


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
