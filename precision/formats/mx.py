"""OCP Microscaling (MX v1.0) block quantisation: 32 elements share one E8M0 scale.

For each block V of 32 consecutive values along the reduction dimension (OCP MX spec v1.0,
Sec. 6.3, "conversion from a vector of scalar floats"): the shared exponent is
X = floor(log2(max |V_i|)) - emax_elem (emax_elem: the element format's largest normal
exponent, e.g. 8 for E4M3), clamped below to E8M0's smallest scale 2^-127; a block whose
max is zero takes 2^-127, one whose X exceeds 127 or that holds an inf or NaN gets the NaN
scale (every element NaN). Each element is then P_i = quantize(V_i / 2^X) to the element
format, saturating (|V_i| / 2^X can reach 2^(emax_elem + 1) > max; OCP and the reference
implementation clamp it to +-max), with the precision's rounding mode. The block's values are
P_i 2^X. A last block shorter than 32 (a reduction length not a multiple of 32) is its own
block.
"""

from __future__ import annotations

import torch

from precision.formats.binary_format import MX_BLOCK as BLOCK
from precision.formats.binary_format import MX_SCALE_EMAX as SCALE_EMAX
from precision.formats.binary_format import MX_SCALE_EMIN as SCALE_EMIN
from precision.formats.binary_format import BinaryFormat
from precision.formats.rounding import CARRIER_BITS, RandomStream, round_integers


def quantize_mx(t: torch.Tensor, element: BinaryFormat, dim: int, mode: str = "rne",
                stream: RandomStream | None = None, block: int = BLOCK) -> torch.Tensor:
    """``t`` quantised to the MX format with element format ``element`` (saturating), blocks
    of ``block`` along ``dim``; returned dequantised, in ``t``'s dtype and shape.

    V_i / 2^X is rounded as :func:`precision.formats.rounding.round_to_format` does (spacing
    from its exponent bits, :func:`round_integers` of the exact quotient), then clamped to
    +-max (saturation, every mode) and scaled back. A float32 ``t`` is scaled in float32 under
    rne / rz / sr: a value that underflows there (below 2^-126 after division by the scale,
    far below every element format's smallest subnormal) rounds to the same element as its
    exact value would (to 0; under sr with probability below 2^-24 otherwise, which 24 random
    bits cannot resolve); ru and rd, for which it would not, scale in float64."""
    element = element.with_overflow("saturate")
    exact = t.dtype == torch.float32 and mode in ("rne", "rz", "sr")
    work = torch.float32 if exact else torch.float64
    int_dtype, exponent_bits, _ = CARRIER_BITS[work]
    moved = t.movedim(dim, -1).to(work)
    length = moved.shape[-1]
    pad = (-length) % block
    if pad:
        moved = torch.nn.functional.pad(moved, (0, pad))
    blocks = moved.reshape(*moved.shape[:-1], -1, block)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    # 2^X = 2^(floor(log2 amax) - emax) from amax's exponent bits, clamped to E8M0's range
    # (a zero or subnormal amax has exponent bits 0: it takes 2^-127)
    binade = torch.bitwise_and(amax.view(int_dtype), exponent_bits).view(work)
    scale = binade.mul_(2.0 ** -element.emax).clamp_(2.0 ** SCALE_EMIN, 2.0 ** SCALE_EMAX)
    scaled = blocks / scale                                  # exact but for underflow
    spacing = torch.bitwise_and(scaled.view(int_dtype), exponent_bits).view(work)
    spacing = spacing.clamp_(2.0 ** element.emin, 2.0 ** (element.emax + 1)) \
        .mul_(2.0 ** -element.mantissa_bits)
    q = round_integers(scaled / spacing, mode, stream).mul_(spacing)
    if mode == "sr":
        q = q.copysign_(scaled)  # a negative value rounded up to 0 is -0
    q = q.clamp_(-element.max_finite, element.max_finite).mul_(scale)
    finite = amax < 2.0 ** (SCALE_EMAX + element.emax + 1)   # X <= 127 and amax finite
    if not bool(finite.all()):
        q = torch.where(finite, q, float("nan"))
    q = q.reshape(*moved.shape[:-1], -1)[..., :length]
    return q.movedim(-1, dim).to(t.dtype)
