"""Trained linear self-attention model of 000 Sec. 6, with or without LayerNorm.

000 Sec. 6 (linear regression): "linear self-attention (LSA) with and without LayerNorm (LN)
... an embedding dimension of 64 and 4 attention heads", d = 10, n = 50 in-context samples;
App. D: a NanoGPT backbone with full (non-causal) attention. The paper gives no more detail,
so this module fixes the rest (documented choices, not the paper's code):

* tokens (batch, n + 1, d + 1): e_i = (x_i, y_i) for the n context pairs, the query
  (x_test, 0) last;
* read-in ``Linear(d + 1, width)``; then ``depth`` residual layers
  h <- h + W_O LinAttn(LN_l(h)) (pre-LN as in NanoGPT; LN_l = identity without LayerNorm),
  no MLP (the paper's models are "LSA" models);
* linear attention per head (width / heads channels): out_i = (1/n) sum_{j <= n}
  (q_i^T k_j) v_j over the *context* tokens only (the query is never a key, as in 002's LSA
  and von Oswald et al.), no softmax; the 1/n keeps the scale independent of n;
* read-out ``Linear(width, 1)`` of LN_f(h) at the query token (LN_f = identity without LN).

:meth:`LinearTransformerLN.per_layer` applies the read-out after every layer (one forward
pass), the per-layer comparison with Newton's iterations of 000 Fig. 2-3.
"""

from __future__ import annotations

import torch
from torch import nn


class LinearTransformerLN(nn.Module):
    """Linear self-attention transformer for in-context regression (000 Sec. 6).

    forward(x (batch, n + 1, d + 1)) -> (batch,) prediction for the last (query) token.
    """

    def __init__(self, d: int, depth: int, width: int = 64, heads: int = 4,
                 layernorm: bool = False, out_scale: float = 0.1) -> None:
        super().__init__()
        if depth < 1 or heads < 1 or width % heads:
            raise ValueError(f"need depth >= 1, heads >= 1 and heads | width; got depth={depth},"
                             f" heads={heads}, width={width}")
        self.d, self.depth, self.width, self.heads = d, depth, width, heads
        self.layernorm = layernorm
        self.read_in = nn.Linear(d + 1, width)
        self.qkv = nn.ModuleList(nn.Linear(width, 3 * width, bias=False) for _ in range(depth))
        self.proj = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(depth))
        with torch.no_grad():  # small residual updates at init: cubic layers stay stable
            for lin in self.proj:
                lin.weight.mul_(out_scale)
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth)) if layernorm \
            else None
        self.norm_f = nn.LayerNorm(width) if layernorm else None
        self.read_out = nn.Linear(width, 1)

    def attention(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Layer ``layer``'s linear attention on h (batch, N, width), context = all tokens but
        the last: (batch, N, width)."""
        z = self.norms[layer](h) if self.norms is not None else h
        b, N, w = z.shape
        dh = w // self.heads
        q, k, v = self.qkv[layer](z).split(w, dim=-1)
        q = q.reshape(b, N, self.heads, dh).transpose(1, 2)           # (b, H, N, dh)
        k = k[:, :-1].reshape(b, N - 1, self.heads, dh).transpose(1, 2)
        v = v[:, :-1].reshape(b, N - 1, self.heads, dh).transpose(1, 2)
        kv = k.transpose(2, 3) @ v / float(N - 1)                    # (b, H, dh, dh)
        out = (q @ kv).transpose(1, 2).reshape(b, N, w)               # = (1/n) (q k^T) v
        return self.proj[layer](out)

    def step(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """One residual layer on h (batch, N, width)."""
        return h + self.attention(h, layer)

    def read(self, h: torch.Tensor) -> torch.Tensor:
        """Prediction at the query token: (batch,)."""
        z = self.norm_f(h) if self.norm_f is not None else h
        return self.read_out(z[:, -1, :])[:, 0]

    def per_layer(self, x: torch.Tensor) -> torch.Tensor:
        """The read-out after each layer: (batch, depth)."""
        h = self.read_in(x)
        outs = []
        for layer in range(self.depth):
            h = self.step(h, layer)
            outs.append(self.read(h))
        return torch.stack(outs, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.read_in(x)
        for layer in range(self.depth):
            h = self.step(h, layer)
        return self.read(h)

