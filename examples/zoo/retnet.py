"""A RetNet-style block: parallel retention (Q K^T masked by per-head decays gamma^(n-m)),
GroupNorm over heads, swish gate. Stacked by ``PreNormStack`` (LayerNorm, no MLP)."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class Retention(nn.Module):
    """(B, N, width) -> (B, N, width), ``heads`` heads with decays 1 - 2^(-5-h)."""

    def __init__(self, width: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.gate = nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.norm = nn.GroupNorm(heads, width)
        gamma = 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float64))
        n = torch.arange(max_len, dtype=torch.float64)
        diff = n[:, None] - n[None, :]
        decay = torch.where(diff >= 0, gamma[:, None, None] ** diff.clamp(min=0), 0.0)
        self.register_buffer("decay", decay, persistent=False)  # (heads, L, L)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, w = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / self.hd**0.5 * self.decay[:, :n, :n].to(x.dtype)
        r = (scores @ v).transpose(1, 2).reshape(b * n, w)       # heads are channel groups
        r = self.norm(r).view(b, n, w)
        return self.out(F.silu(self.gate(x)) * r)


def retnet(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    heads = 2 if width % 2 == 0 else 1
    return PreNormStack(d_in, d_out, depth, width, lambda w: Retention(w, heads, max_len))
