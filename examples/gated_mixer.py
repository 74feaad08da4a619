"""An architecture the toolkit has never seen: a gated bilinear token mixer.

Probe it with
    precision probe examples/gated_mixer.py:gated_mixer --suite primitives --profile quick

A factory takes (d_in, d_out, depth, width, [max_len]) and returns an ordinary nn.Module
mapping (batch, tokens, d_in) -> (batch, tokens, d_out); nothing is registered.
"""

import torch
from torch import nn


class GatedMixer(nn.Module):
    """depth x [ h + W_o((h W_a) ⊙ (causal token mix of h W_b)) ] between in/out projections."""

    def __init__(self, d_in: int, d_out: int, depth: int, width: int, max_len: int) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, d_out)
        self.a = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.b = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.o = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.mix = nn.Parameter(torch.eye(max_len).repeat(depth, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        h = self.inp(x)
        for i in range(len(self.a)):
            mixed = torch.tril(self.mix[i, :n, :n]) @ self.b[i](h)
            h = h + self.o[i](self.a[i](h) * mixed)
        return self.out(h)


def gated_mixer(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return GatedMixer(d_in, d_out, depth, width, max_len)
