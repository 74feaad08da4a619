"""GPT-2-style Transformer (001 eq. 1), read like nanoGPT's model.py.

x (batch, N, d_in) -> input projection -> [+ learned positional embedding] ->
depth x Block -> [final LayerNorm] -> output projection -> (batch, N, d_out), where
  Block(h) = h + Attn(LN1(h));  h = h + MLP(LN2(h))          (pre-LN, 001 eq. 1)
  Attn = multi-head softmax attention, causal or not;  MLP = W2 act(W1 h), act ReLU or GELU.
LayerNorm can be switched off per sub-layer (``ln_attn``, ``ln_mlp``, ``ln_final``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TransformerConfig:
    d_in: int
    d_out: int
    depth: int = 2
    width: int = 64          # n_embd
    heads: int = 1
    mlp_factor: int = 4      # MLP hidden = mlp_factor * width
    activation: str = "relu"  # "relu" | "gelu"
    causal: bool = True
    ln_attn: bool = True
    ln_mlp: bool = True
    ln_final: bool = True
    max_len: int = 0         # > 0: learned positional embedding for up to max_len tokens


class SelfAttention(nn.Module):
    """Multi-head softmax attention: softmax(Q K^T / sqrt(d_head) [+ causal mask]) V W_o."""

    def __init__(self, width: int, heads: int, causal: bool) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by heads {heads}")
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.causal = heads, causal

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, n, w = h.shape
        q, k, v = self.qkv(h).split(w, dim=-1)
        dh = w // self.heads
        q, k, v = (t.reshape(b, n, self.heads, dh).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        if self.causal:
            mask = torch.ones(n, n, dtype=torch.bool, device=h.device).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, w))


class MLP(nn.Module):
    """W2 act(W1 h + b1) + b2."""

    def __init__(self, width: int, factor: int, activation: str) -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be relu or gelu, not {activation!r}")
        self.fc = nn.Linear(width, factor * width)
        self.out = nn.Linear(factor * width, width)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.fc(h)))


class Block(nn.Module):
    """Pre-LN residual block: attention then MLP."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width) if cfg.ln_attn else nn.Identity()
        self.attn = SelfAttention(cfg.width, cfg.heads, cfg.causal)
        self.ln2 = nn.LayerNorm(cfg.width) if cfg.ln_mlp else nn.Identity()
        self.mlp = MLP(cfg.width, cfg.mlp_factor, cfg.activation)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.ln1(h))
        return h + self.mlp(self.ln2(h))

    def identity_parameters(self) -> tuple[str, ...]:
        """The parameters that write into the residual stream: all zero, the block is the
        identity exactly (h + 0 = h), so a deeper model contains this one
        (:mod:`precision.models.containment`)."""
        return tuple(f"{sub}.{name}" for sub in ("attn.proj", "mlp.out")
                     for name, _ in self.get_submodule(sub).named_parameters())


class Transformer(nn.Module):
    """(batch, N, d_in) -> (batch, N, d_out)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.d_in, cfg.width)
        self.pos = nn.Parameter(torch.zeros(cfg.max_len, cfg.width)) if cfg.max_len else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.ln_f = nn.LayerNorm(cfg.width) if cfg.ln_final else nn.Identity()
        self.out = nn.Linear(cfg.width, cfg.d_out)
        if self.pos is not None:
            nn.init.normal_(self.pos, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        if self.pos is not None:
            h = h + self.pos[: x.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.out(self.ln_f(h))
