"""READ in one softmax-attention layer with one head: hand-set weights of the grid's Transformer.

READ(i, j, a, b) (001 eq. 5) replaces row j of u (N x D) by row i (columns a:b). The
`primitives` grid trains a 1-head GPT-2 block (:mod:`precision.models.transformer`) on it;
this module shows that the depth-1 cell can represent READ to any precision, so a trained
cell that stays at MSE ~ 1/N (row j zeroed) sits on an optimisation plateau, not at the
architecture's floor.

The construction (positions 0-based, causal, i < j, no LayerNorm, MLP weights zero):

* residual stream: u_t in channels 0:D, then three position channels p_t = (t, [t = i],
  [t = j]) (the learned positional embedding), so ``width >= D + 3``;
* attention logits, before the 1/sqrt(d_head) scale: q_t . k_s = g (s + (j - i)[t = j][s = i]),
  integers times g = round(gap sqrt(d_head)). Causal attention then puts weight ~1 on s = t
  (the largest allowed s), except at t = j where s = i and s = j tie at g j: weight 1/2 each.
  Every other key is at least ``gap`` lower, so the leak is ~exp(-gap). The logits are
  integers (exact in float32 up to 2^24), so the tie at j is exact in every precision that
  holds them;
* value -2 u_s (columns a:b), output projection the identity: the stream becomes
  u_t - 2 u_t = -u_t at t != j and u_j - (u_i + u_j) = -u_i at t = j;
* readout -I on columns a:b.

Each head's value carries D channels, so the head needs d_head >= D as well: one head here.
With LayerNorm before the attention the value would be u_s / ||u_s||-like, not linear in
u_s, and this construction does not apply.
"""

from __future__ import annotations

import math

import torch

from precision.models.transformer import Transformer, TransformerConfig

#: Default logit gap: the leak exp(-gap) ~ 1e-111 is below the resolution of mp100.
DEFAULT_GAP = 256.0


def read(n: int, d: int, i: int, j: int, a: int = 0, b: int | None = None, *,
         width: int | None = None, mlp_factor: int = 4, gap: float = DEFAULT_GAP
         ) -> Transformer:
    """A 1-layer, 1-head causal Transformer without LayerNorm computing READ(i, j, a, b) on
    (batch, N, D) inputs, output (batch, N, b - a); float64 weights.

    ``width`` defaults to D + 3 (the least that holds the construction); the grid's cells use
    32 and 64 with D = 20. ``gap`` is the logit margin of every unwanted key (leak
    ~exp(-gap))."""
    b = d if b is None else b
    width = d + 3 if width is None else width
    if not (0 <= i < j < n and 0 <= a < b <= d):
        raise ValueError(f"READ in a causal Transformer needs 0 <= i < j < N and "
                         f"0 <= a < b <= D (got i={i}, j={j}, a={a}, b={b}, N={n}, D={d})")
    if width < d + 3:
        raise ValueError(f"the READ construction needs width >= D + 3 = {d + 3}, got {width}")
    if not gap > 0:
        raise ValueError(f"gap must be > 0, got {gap}")
    cfg = TransformerConfig(d_in=d, d_out=b - a, depth=1, width=width, heads=1,
                            mlp_factor=mlp_factor, ln_attn=False, ln_mlp=False,
                            ln_final=False, max_len=n)
    model = Transformer(cfg).double()
    cols = slice(a, b)
    eye = torch.eye(b - a, dtype=torch.float64)
    g = float(round(gap * math.sqrt(width)))   # d_head = width: one head
    pos_t, pos_i, pos_j = d, d + 1, d + 2      # the three position channels
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.inp.weight[:d, :d] = torch.eye(d, dtype=torch.float64)
        model.pos[:, pos_t] = torch.arange(n, dtype=torch.float64)
        model.pos[i, pos_i] = 1.0
        model.pos[j, pos_j] = 1.0
        qkv = model.blocks[0].attn.qkv
        q, k, v = 0, width, 2 * width              # row offsets of W_q, W_k, W_v
        qkv.bias[q] = g                            # q_t = (g, g [t = j], 0, ...)
        qkv.weight[q + 1, pos_j] = g
        qkv.weight[k, pos_t] = 1.0                 # k_s = (s, (j - i) [s = i], 0, ...)
        qkv.weight[k + 1, pos_i] = float(j - i)
        qkv.weight[v + a:v + b, cols] = -2.0 * eye  # v_s = -2 u_s on columns a:b
        model.blocks[0].attn.proj.weight[cols, cols] = eye
        model.out.weight[:, cols] = -eye
    return model
