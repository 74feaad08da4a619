"""One-layer multi-head softmax attention over a token dictionary (004 eq. 2-6).

Input (batch, K, d + 1): columns of E = (E^P, E^Q) as rows, prompt tokens (v_k, y_k) for
k <= N, query tokens (v_k, 0) for k > N. With W^O = (I_K, ..., I_K), W_h^V = (0, w_h) and
(W_h^K)^T W_h^Q = [[Q_h, 0], [0, 0]], the prediction for every token k is (eq. 6)
  y_hat_k = < y, sum_h w_{h,k} softmax(V^T Q_h v_k) >,   V = (v_1, ..., v_N).
Output (batch, K, 1).
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
