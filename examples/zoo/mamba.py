"""A Mamba-style selective state-space block: input-dependent step (softplus), B and C;
the scan h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t is an unrolled Python loop over tokens.
Stacked by ``PreNormStack`` (LayerNorm, no MLP)."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class SelectiveScan(nn.Module):
    """(B, N, width) -> (B, N, width); state (B, width, d_state)."""

    def __init__(self, width: int, d_state: int = 4) -> None:
        super().__init__()
        self.in_proj = nn.Linear(width, 2 * width)
        self.dt = nn.Linear(width, width)
        self.bc = nn.Linear(width, 2 * d_state, bias=False)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)
                                            ).repeat(width, 1))
        self.d = nn.Parameter(torch.ones(width))
        self.out_proj = nn.Linear(width, width)
        self.d_state = d_state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, z = self.in_proj(x).chunk(2, dim=-1)
        dt = F.softplus(self.dt(u))                        # (B, N, W)
        bmat, cmat = self.bc(u).split(self.d_state, dim=-1)  # (B, N, S) each
        a = -torch.exp(self.a_log)                         # (W, S)
        h = torch.zeros(x.shape[0], x.shape[2], self.d_state, dtype=x.dtype)
        ys = []
        for t in range(x.shape[1]):
            da = torch.exp(dt[:, t, :, None] * a)          # (B, W, S)
            h = da * h + (dt[:, t, :, None] * bmat[:, t, None, :]) * u[:, t, :, None]
            ys.append((h * cmat[:, t, None, :]).sum(-1))   # (B, W)
        y = torch.stack(ys, dim=1) + u * self.d
        return self.out_proj(y * F.silu(z))


def mamba(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return PreNormStack(d_in, d_out, depth, width, SelectiveScan)
