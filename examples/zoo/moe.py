"""A top-2 mixture of experts after a causal token mixer: a router picks each token's two
best experts (``topk``), their softmax weights are scattered into a dense gate, and the
output is the gated sum of expert MLPs. ``PreNormStack`` with the token mix as the mixer
(on the un-normed h) and the experts as the MLP (after a LayerNorm)."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class CausalTokenMix(nn.Module):
    """(B, N, width) -> (B, N, width): tril(M[:N, :N]) @ x, a learned causal token mixing."""

    def __init__(self, max_len: int) -> None:
        super().__init__()
        self.mix = nn.Parameter(torch.randn(max_len, max_len) / max_len)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        return torch.tril(self.mix[:n, :n]) @ x


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


def moe(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return PreNormStack(d_in, d_out, depth, width, lambda w: CausalTokenMix(max_len),
                        mlp=Top2MoE, norm_mixer_input=False)
