"""A Hyena-style operator: a depthwise short Conv1d, then a gated long convolution computed
with the FFT (rfft / irfft of length 2N, so it is a linear, causal convolution). Stacked by
``PreNormStack`` (LayerNorm, no MLP)."""

import sys
from pathlib import Path

import torch
from torch import nn

if (root := str(Path(__file__).resolve().parents[2])) not in sys.path:  # for FILE.py:FACTORY
    sys.path.append(root)
from examples.zoo.backbone import PreNormStack  # noqa: E402


class HyenaOperator(nn.Module):
    """(B, N, width) -> (B, N, width): y = x2 * longconv(x1 * v)."""

    def __init__(self, width: int, max_len: int, short: int = 3) -> None:
        super().__init__()
        self.in_proj = nn.Linear(width, 3 * width)
        self.short = nn.Conv1d(3 * width, 3 * width, short, groups=3 * width,
                               padding=short - 1)
        t = torch.arange(max_len, dtype=torch.float32)
        decay = torch.exp(-0.3 * t)[None, :]
        self.filt = nn.Parameter(torch.randn(width, max_len) * decay / 4)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        z = self.short(self.in_proj(x).transpose(1, 2))[..., :n]  # causal short conv
        x1, x2, v = z.chunk(3, dim=1)                             # (B, W, N) each
        f = torch.fft.rfft(self.filt[:, :n], n=2 * n)
        y = torch.fft.irfft(torch.fft.rfft(x1 * v, n=2 * n) * f, n=2 * n)[..., :n]
        return self.out_proj((x2 * y).transpose(1, 2))


def hyena(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return PreNormStack(d_in, d_out, depth, width, lambda w: HyenaOperator(w, max_len))
