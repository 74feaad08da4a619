"""A DeltaNet-style layer: the delta rule S_t = S_{t-1} - beta_t (S_{t-1} k_t - v_t) k_t^T
with L2-normalised keys, read out o_t = S_t q_t; an unrolled loop over tokens. Stacked by
``PreNormStack`` (LayerNorm, no MLP)."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class DeltaRule(nn.Module):
    """(B, N, width) -> (B, N, width); state S (B, width, width)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.beta = nn.Linear(width, 1)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        k = F.normalize(k, dim=-1)
        beta = torch.sigmoid(self.beta(x))                       # (B, N, 1)
        s = torch.zeros(x.shape[0], x.shape[2], x.shape[2], dtype=x.dtype)
        outs = []
        for t in range(x.shape[1]):
            kt, vt = k[:, t, :, None], v[:, t, :, None]          # (B, W, 1)
            s = s - beta[:, t, :, None] * ((s @ kt - vt) @ kt.transpose(1, 2))
            outs.append((s @ q[:, t, :, None]).squeeze(-1))
        return self.proj(torch.stack(outs, dim=1))


def deltanet(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return PreNormStack(d_in, d_out, depth, width, DeltaRule)
