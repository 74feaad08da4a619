"""The zoo's one backbone: a pre-norm residual stack with a pluggable sequence mixer (in the
spirit of zoology's single backbone); each zoo file supplies its mixer, and its MLP if any.

    h_0 = x W_in + b_in
    h   = h + mixer_l(norm(h))      l = 1 .. depth (mixer_l(h) with norm_mixer_input=False)
    h   = h + mlp_l(norm(h))        only with ``mlp``
    y   = norm(h) W_out + b_out     the final norm only with ``final_norm``

Layers are built in order (mixer_1, mlp_1, mixer_2, ...), so a seed fixes the same weights
as a hand-written stack built block by block.
"""

from collections.abc import Callable

import torch
from torch import nn

ModuleFactory = Callable[[int], nn.Module]


class PreNormStack(nn.Module):
    """(B, N, d_in) -> (B, N, d_out) through ``depth`` residual blocks of width ``width``.

    ``mixer(width)`` and ``mlp(width)`` build one block's (B, N, width) -> (B, N, width)
    sublayers; ``norm(width)`` builds every norm (default LayerNorm).
    """

    def __init__(self, d_in: int, d_out: int, depth: int, width: int, mixer: ModuleFactory,
                 mlp: ModuleFactory | None = None, norm: ModuleFactory = nn.LayerNorm,
                 norm_mixer_input: bool = True, final_norm: bool = False) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, d_out)
        self.layers, self.norms = nn.ModuleList(), nn.ModuleList()
        self.mlps, self.mlp_norms = nn.ModuleList(), nn.ModuleList()
        for _ in range(depth):
            self.norms.append(norm(width) if norm_mixer_input else nn.Identity())
            self.layers.append(mixer(width))
            if mlp is not None:
                self.mlp_norms.append(norm(width))
                self.mlps.append(mlp(width))
        self.norm = norm(width) if final_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for i, (norm, layer) in enumerate(zip(self.norms, self.layers, strict=True)):
            h = h + layer(norm(h))
            if self.mlps:
                h = h + self.mlps[i](self.mlp_norms[i](h))
        return self.out(self.norm(h))
