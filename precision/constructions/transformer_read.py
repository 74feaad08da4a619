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

With LayerNorm (``layernorm=True``: the grid's LayerNorm cell, LN before the attention, before
the MLP and before the readout) no weights give READ exactly: LN(h) = (h - mean h) / s(h) is
scale-free. The construction then adds two constant channels +K and -K (the positional
embedding; a pair, so that they leave the mean alone: one channel alone would put a term
K sum(h) / W^2 in the variance and make the error first order in 1/K) and reads a channel c
of the stream through LN as sigma0 (LN(h)_c - LN(h)_z), with z a channel that stays 0: that
is h_c sigma0 / s(h), where sigma0 = K sqrt(2 / W) is s(h) of the pair alone. The ratio is
1 - delta with delta ~ (t^2 + |u|^2) / (4 K^2), so READ holds to relative error ~delta
(values, readout) and the tie at row j is off by ~g j delta logits. ``width >= D + 6`` (the
pair and the zero channel).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from precision.models.transformer import Transformer, TransformerConfig

#: Default logit gap: the leak exp(-gap) ~ 1e-111 is below the resolution of mp100.
DEFAULT_GAP = 256.0
#: Default constant channels +-K of the LayerNorm construction: delta ~ t^2 / (4 K^2) ~ 4e-14 at
#: N = 40 (K^2 = 1e16 stays far inside the float32 and bfloat16 ranges; not float16's).
DEFAULT_SCALE = 1e8


def read(n: int, d: int, i: int, j: int, a: int = 0, b: int | None = None, *,
         width: int | None = None, mlp_factor: int = 4, gap: float = DEFAULT_GAP,
         layernorm: bool = False, scale: float = DEFAULT_SCALE) -> Transformer:
    """A 1-layer, 1-head causal Transformer computing READ(i, j, a, b) on (batch, N, D)
    inputs, output (batch, N, b - a); float64 weights. Without LayerNorm exactly (up to the
    leak); with it (every LN of the block and the final one, unit gain and zero bias) to
    relative error ~(t^2 + |u|^2) / (4 scale^2) (module docstring).

    ``width`` defaults to D + 3 (D + 6 with LayerNorm: the least that holds the
    construction); the grid's cells use 32 and 64 with D = 20. ``gap`` is the logit margin of
    every unwanted key (leak ~exp(-gap)); ``scale`` the constant channels' K."""
    b = d if b is None else b
    least = d + 6 if layernorm else d + 3
    width = least if width is None else width
    if not (0 <= i < j < n and 0 <= a < b <= d):
        raise ValueError(f"READ in a causal Transformer needs 0 <= i < j < N and "
                         f"0 <= a < b <= D (got i={i}, j={j}, a={a}, b={b}, N={n}, D={d})")
    if width < least:
        raise ValueError(f"the READ construction needs width >= D + {least - d} = {least}"
                         f"{' with LayerNorm' if layernorm else ''}, got {width}")
    if not gap > 0:
        raise ValueError(f"gap must be > 0, got {gap}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    cfg = TransformerConfig(d_in=d, d_out=b - a, depth=1, width=width, heads=1,
                            mlp_factor=mlp_factor, ln_attn=layernorm, ln_mlp=layernorm,
                            ln_final=layernorm, max_len=n)
    model = Transformer(cfg).double()
    cols = range(a, b)
    g = float(round(gap * math.sqrt(width)))   # d_head = width: one head
    pos_t, pos_i, pos_j = d, d + 1, d + 2      # the three position channels
    plus, minus, zero = d + 3, d + 4, d + 5    # LayerNorm: the channels +K, -K and a 0
    sigma0 = scale * math.sqrt(2.0 / width)    # s(h) of the pair alone

    def channel(c: int) -> torch.Tensor:
        """The row vector that reads stream channel c from the sub-layer's input."""
        row = torch.zeros(width, dtype=torch.float64)
        row[c] = sigma0 if layernorm else 1.0
        if layernorm:
            row[zero] = -sigma0   # LN(h)_c - LN(h)_z = h_c / s(h): the mean cancels
        return row

    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):   # unit gain, zero bias
                m.weight.fill_(1.0)
        model.inp.weight[:d, :d] = torch.eye(d, dtype=torch.float64)
        model.pos[:, pos_t] = torch.arange(n, dtype=torch.float64)
        model.pos[i, pos_i] = 1.0
        model.pos[j, pos_j] = 1.0
        if layernorm:
            model.pos[:, plus], model.pos[:, minus] = scale, -scale
        qkv = model.blocks[0].attn.qkv
        q, k, v = 0, width, 2 * width              # row offsets of W_q, W_k, W_v
        qkv.bias[q] = g                            # q_t = (g, g [t = j], 0, ...)
        qkv.weight[q + 1] = g * channel(pos_j)
        qkv.weight[k] = channel(pos_t)             # k_s = (s, (j - i) [s = i], 0, ...)
        qkv.weight[k + 1] = float(j - i) * channel(pos_i)
        for c in cols:
            qkv.weight[v + c] = -2.0 * channel(c)  # v_s = -2 u_s on columns a:b
            model.blocks[0].attn.proj.weight[c, c] = 1.0
            model.out.weight[c - a] = -channel(c)  # readout -I
    return model
