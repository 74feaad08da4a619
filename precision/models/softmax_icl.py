"""One-layer multi-head softmax attention over a token dictionary (004 eq. 2-6).

Input (batch, K, d + 1): columns of E = (E^P, E^Q) as rows, prompt tokens (v_k, y_k) for
k <= N, query tokens (v_k, 0) for k > N. With W^O = (I_K, ..., I_K), W_h^V = (0, w_h) and
(W_h^K)^T W_h^Q = [[Q_h, 0], [0, 0]], the prediction for every token k is (eq. 6)
  y_hat_k = < y, sum_h w_{h,k} softmax(V^T Q_h v_k) >,   V = (v_1, ..., v_N).
Output (batch, K, 1). ``from_weights`` builds the model from given (Q, w), ``embed`` builds
the input from the dictionary and prompt labels, ``a_hat`` returns the N x K matrix
A_hat(theta) of eq. 32 (used by probes/studies/representations.py).
"""

from __future__ import annotations

import torch
from torch import nn


class SoftmaxICL(nn.Module):
    """004's one-layer, H-head softmax transformer with parameters {Q_h, w_h}."""

    def __init__(self, d: int, K: int, N: int, heads: int = 1, init_scale: float = 0.1) -> None:
        super().__init__()
        if not 0 < N <= K:
            raise ValueError(f"need 0 < N <= K, got N={N}, K={K}")
        self.d, self.K, self.N = d, K, N
        self.Q = nn.Parameter(init_scale * torch.randn(heads, d, d))
        self.w = nn.Parameter(init_scale * torch.randn(heads, K))

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        d, N = self.d, self.N
        v_all = e[..., :d]                            # (batch, K, d)
        v, y = e[:, :N, :d], e[:, :N, d]              # prompt tokens and labels
        # scores[b, h, k, j] = v_j^T Q_h v_k
        scores = torch.einsum("bkd,hde,bje->bhkj", v_all, self.Q.transpose(1, 2), v)
        attn = torch.softmax(scores, dim=-1)          # over prompt tokens j
        per_head = attn @ y[:, None, :, None]         # (batch, heads, K, 1)
        out = (self.w[None, :, :, None] * per_head).sum(dim=1)
        return out

    @classmethod
    def from_weights(cls, Q: torch.Tensor, w: torch.Tensor, N: int) -> SoftmaxICL:  # noqa: N803
        """The model with given parameters Q (H, d, d) and w (H, K), in Q's dtype (the global
        torch RNG is left untouched)."""
        heads, d, _ = Q.shape
        with torch.random.fork_rng(devices=[]):
            model = cls(d, int(w.shape[1]), N, heads=heads).to(Q.dtype)
        with torch.no_grad():
            model.Q.copy_(Q)
            model.w.copy_(w)
        return model

    @staticmethod
    def embed(tokens: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Model input (batch, K, d + 1): E = (E^P, E^Q) of 004 eq. 2-3 as rows, from the
        dictionary ``tokens`` (K, d) and prompt labels ``y`` (batch, N); query labels are 0."""
        batch, N = y.shape
        K, d = tokens.shape
        e = torch.zeros(batch, K, d + 1, dtype=tokens.dtype, device=tokens.device)
        e[:, :, :d] = tokens
        e[:, :N, d] = y
        return e

    def a_hat(self, tokens: torch.Tensor) -> torch.Tensor:
        """A_hat(theta) (N, K) of 004 eq. 32: column k is sum_h w_{h,k} softmax(V^T Q_h v_k),
        so that y_hat_k = <y, A_hat[:, k]>; ``tokens`` (K, d) is the dictionary."""
        v = tokens[: self.N]                                        # (N, d)
        scores = torch.einsum("kd,hed,je->hjk", tokens, self.Q, v)  # v_j^T Q_h v_k
        attn = torch.softmax(scores, dim=1)                         # over prompt tokens j
        return (attn * self.w[:, None, :]).sum(dim=0)
