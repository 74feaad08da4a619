"""A top-2 mixture of experts after a causal token mixer: a router picks each token's two
best experts (``topk``), their softmax weights are scattered into a dense gate, and the
output is the gated sum of expert MLPs."""

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


class Top2MoE(nn.Module):
    """(B, N, width) -> (B, N, width) with ``experts`` GELU MLPs."""

    def __init__(self, width: int, experts: int = 4) -> None:
        super().__init__()
        self.router = nn.Linear(width, experts, bias=False)
        self.up = nn.ModuleList(nn.Linear(width, 2 * width) for _ in range(experts))
        self.down = nn.ModuleList(nn.Linear(2 * width, width) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.router(x)                                  # (B, N, E)
        top, idx = torch.topk(logits, 2, dim=-1)
        gate = torch.zeros_like(logits).scatter(-1, idx, F.softmax(top, dim=-1))
        outs = torch.stack([d(F.gelu(u(x))) for u, d in zip(self.up, self.down, strict=True)],
                           dim=-1)                               # (B, N, W, E)
        return (outs * gate[..., None, :]).sum(-1)


class MoE(nn.Module):
    def __init__(self, d_in: int, d_out: int, depth: int, width: int, max_len: int) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, d_out)
        self.mix = nn.ParameterList(nn.Parameter(torch.randn(max_len, max_len) / max_len)
                                    for _ in range(depth))
        self.moes = nn.ModuleList(Top2MoE(width) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        h = self.inp(x)
        for mix, norm, moe in zip(self.mix, self.norms, self.moes, strict=True):
            h = h + torch.tril(mix[:n, :n]) @ h
            h = h + moe(norm(h))
        return self.out(h)


def moe(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return MoE(d_in, d_out, depth, width, max_len)
