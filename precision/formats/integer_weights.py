"""Weight-only integer quantisation: int8 / int4 weights, per output channel or per group.

Symmetric quantisation (the GPTQ / AWQ storage convention without zero points): for each
output channel (row of a weight, ``group=None``) or each group of ``group`` consecutive
entries along the input dimension of a row, the scale is s = max |w| / qmax with
qmax = 2^(bits-1) - 1 (127 for int8, 7 for int4), computed and stored in the carrier dtype
(a zero group takes s = 1); q = clamp(round(w / s), -qmax, qmax) with the precision's rounding
mode; the weight the model then uses is q s in the carrier dtype (one rounding of the product,
exact for float64 and for int4 scales). A weight is a floating parameter of two or more
dimensions, flattened to rows x (everything else) (nn.Linear: out x in; convolutions:
out x in*kernel); vectors (biases, norm gains) are activations' business.
"""

from __future__ import annotations

import torch

from precision.formats.rounding import RandomStream, round_integers

#: Integer widths a weight format can name.
INT_BITS = (8, 4)


def quantize_weight(w: torch.Tensor, bits: int, group: int | None, mode: str = "rne",
                    stream: RandomStream | None = None) -> torch.Tensor:
    """``w`` (ndim >= 2) quantised to ``bits``-bit integers with per-channel (``group=None``)
    or per-group scales, returned dequantised in ``w``'s dtype and shape."""
    qmax = 2 ** (bits - 1) - 1
    rows = w.reshape(w.shape[0], -1)
    cols = rows.shape[1]
    size = group if group is not None else cols
    pad = (-cols) % size
    padded = torch.nn.functional.pad(rows, (0, pad)) if pad else rows
    groups = padded.reshape(rows.shape[0], -1, size)
    scale = groups.abs().amax(dim=-1, keepdim=True) / qmax   # rounded in the carrier dtype
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = round_integers((groups / scale).to(torch.float64), mode, stream).clamp(-qmax, qmax)
    deq = (q.to(w.dtype) * scale).reshape(rows.shape[0], -1)[:, :cols]
    return deq.reshape(w.shape)
