"""A Hyena-style operator: a depthwise short Conv1d, then a gated long convolution computed
with the FFT (rfft / irfft of length 2N, so it is a linear, causal convolution)."""

import torch
from torch import nn


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


class Hyena(nn.Module):
    def __init__(self, d_in: int, d_out: int, depth: int, width: int, max_len: int) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, d_out)
        self.layers = nn.ModuleList(HyenaOperator(width, max_len) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for norm, layer in zip(self.norms, self.layers, strict=True):
            h = h + layer(norm(h))
        return self.out(h)


def hyena(d_in: int, d_out: int, depth: int, width: int, max_len: int = 64) -> nn.Module:
    return Hyena(d_in, d_out, depth, width, max_len)
