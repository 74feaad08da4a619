"""Causal linear attention (Katharopoulos et al.) with the ELU + 1 feature map; the causal
sums over tokens are ``cumsum`` of outer products. Stacked by ``PreNormStack`` (LayerNorm,
no MLP)."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class LinearAttention(nn.Module):
    """out_t = phi(q_t)^T S_t / (phi(q_t)^T z_t), S_t = sum_{s<=t} phi(k_s) v_s^T."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        s = torch.cumsum(k[..., :, None] * v[..., None, :], dim=1)   # (B, N, W, W)
        z = torch.cumsum(k, dim=1)                                   # (B, N, W)
        num = (q[..., None, :] @ s).squeeze(-2)
        den = (q * z).sum(-1, keepdim=True)
        return self.proj(num / den)


def linear_attention(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64
                     ) -> nn.Module:
    return PreNormStack(d_in, d_out, depth, width, LinearAttention)
