"""A Llama-style decoder: RoPE, RMSNorm, SwiGLU MLP, causal scaled-dot-product attention."""

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., 2m) -> (..., 2m): (x1, x2) -> (-x2, x1) on the two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class LlamaBlock(nn.Module):
    """h + attn(rmsnorm(h)); h + swiglu(rmsnorm(h)); h (B, N, width)."""

    def __init__(self, width: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, width // heads
        self.norm1, self.norm2 = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.gate = nn.Linear(width, 2 * width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1), persistent=False)
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1), persistent=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, n, w = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(b, n, 3, self.heads, self.hd).permute(
            2, 0, 3, 1, 4)
        cos, sin = self.cos[:n].to(h.dtype), self.sin[:n].to(h.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(a.transpose(1, 2).reshape(b, n, w))
        z = self.norm2(h)
        return h + self.down(F.silu(self.gate(z)) * self.up(z))


class Llama(nn.Module):
    def __init__(self, d_in: int, d_out: int, depth: int, width: int, max_len: int) -> None:
        super().__init__()
        heads = 2 if width % 4 == 0 else 1
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, d_out)
        self.blocks = nn.ModuleList(LlamaBlock(width, heads, max_len) for _ in range(depth))
        self.norm = nn.RMSNorm(width, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h)
        return self.out(self.norm(h))


def llama(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return Llama(d_in, d_out, depth, width, max_len)
