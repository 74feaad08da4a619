"""A Llama-style decoder: RoPE, RMSNorm, SwiGLU MLP, causal scaled-dot-product attention;
``PreNormStack`` with RMSNorm before attention, before the MLP and before the output."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., 2m) -> (..., 2m): (x1, x2) -> (-x2, x1) on the two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class RopeAttention(nn.Module):
    """(B, N, width) -> (B, N, width): causal softmax attention, RoPE on q and k."""

    def __init__(self, width: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1), persistent=False)
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, w = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:n].to(x.dtype), self.sin[:n].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(b, n, w))


class SwiGLU(nn.Module):
    """(B, N, width) -> (B, N, width): W_down (silu(x W_gate) * x W_up), hidden 2 width."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.gate = nn.Linear(width, 2 * width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def llama(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    heads = 2 if width % 4 == 0 else 1
    return PreNormStack(d_in, d_out, depth, width, lambda w: RopeAttention(w, heads, max_len),
                        mlp=SwiGLU, norm=lambda w: nn.RMSNorm(w, eps=1e-6), final_norm=True)
