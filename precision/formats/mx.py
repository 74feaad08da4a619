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

MXINT8 (Sec. 5.3's INT8 element, :data:`~precision.formats.binary_format.MX_INT8_ELEMENT`):
emax_elem = 0, elements k 2^-6 with -128 <= k <= 127, so a block's elements are rounded on the
fixed grid of spacing 2^(X - 6) and clamped to [-2, 127/64] 2^X (two's complement: -2 is an
element, +2 is not, and there is no -0: an element that rounds to zero is +0).

The shared exponent's rule (``scale``): ``"exact"`` (the default) takes floor(log2 amax) from
amax's exponent bits, as the spec defines it; ``"log2"`` computes floor(fl(log2(amax))) with
log2 evaluated in floating point in the dtype of ``t``, as the reference implementations do
(microxcaling's ``_shared_exponents``, gfloat's ``compute_scale_amax``). The two differ only
when amax lies within a few dozen units in the last place (of ``t``'s dtype) below a power of
two 2^k with k <= -2 or k >= 3, where fl(log2(amax)) rounds up to k: ``"log2"`` then takes X
one larger (every element of the block one bit coarser, none saturating).
"""

from __future__ import annotations

import torch

from precision.formats.binary_format import MX_BLOCK as BLOCK
from precision.formats.binary_format import MX_SCALE_EMAX as SCALE_EMAX
from precision.formats.binary_format import MX_SCALE_EMIN as SCALE_EMIN
from precision.formats.binary_format import MX_SCALE_RULES, BinaryFormat
from precision.formats.rounding import CARRIER_BITS, RandomStream, pow2, round_integers


def _log2_scale(amax: torch.Tensor, element: BinaryFormat, dtype: torch.dtype
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(2^X, X <= 127 and amax finite) per block under the ``"log2"`` rule: X =
    floor(fl(log2(amax))) - emax_elem with log2 evaluated in ``dtype`` (amax = 0 gives -inf,
    so 2^-127), clamped to E8M0's [-127, 127]; 2^X in ``amax``'s dtype (exact: E8M0's
    range lies in float32's, subnormal 2^-127 included). Shapes: those of ``amax``."""
    shared = torch.log2(amax.to(dtype)).floor_().to(torch.float64).sub_(element.emax)
    ok = shared <= SCALE_EMAX                    # False for NaN and inf
    exponent = shared.nan_to_num_(0.0).clamp_(SCALE_EMIN, SCALE_EMAX)
    return pow2(exponent).to(amax.dtype), ok


def quantize_mx(t: torch.Tensor, element: BinaryFormat, dim: int, mode: str = "rne",
                stream: RandomStream | None = None, block: int = BLOCK,
                scale: str = "exact") -> torch.Tensor:
    """``t`` quantised to the MX format with element format ``element`` (saturating), blocks
    of ``block`` along ``dim``, the shared exponent by rule ``scale`` (``"exact"`` or
    ``"log2"``, module docstring); returned dequantised, in ``t``'s dtype and shape.

    V_i / 2^X is rounded as :func:`precision.formats.rounding.round_to_format` does (spacing
    from its exponent bits, :func:`round_integers` of the exact quotient), then clamped to
    the element's range (saturation, every mode) and scaled back. A float32 ``t`` is scaled
    in float32 under rne / rz / sr: a value that underflows there (below 2^-126 after
    division by the scale, far below every element format's smallest subnormal) rounds to the
    same element as its exact value would (to 0; under sr with probability below 2^-24
    otherwise, which 24 random bits cannot resolve); ru and rd, for which it would not, scale
    in float64. The element's
    range is [element.min_finite, element.max_finite] (MXINT8's two's complement: [-2,
    127/64]). Shapes: any ``t``; the result has ``t``'s shape, dtype and device."""
    if scale not in MX_SCALE_RULES:
        raise ValueError(f"unknown MX scale rule {scale!r} (rules: {', '.join(MX_SCALE_RULES)})")
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
    if scale == "exact":
        # 2^X = 2^(floor(log2 amax) - emax) from amax's exponent bits, clamped to E8M0's
        # range (a zero or subnormal amax has exponent bits 0: it takes 2^-127)
        binade = torch.bitwise_and(amax.view(int_dtype), exponent_bits).view(work)
        shared = binade.mul_(2.0 ** -element.emax).clamp_(2.0 ** SCALE_EMIN,
                                                          2.0 ** SCALE_EMAX)
        finite = amax < 2.0 ** (SCALE_EMAX + element.emax + 1)   # X <= 127, amax finite
    else:
        shared, finite = _log2_scale(amax, element, t.dtype)
    scaled = blocks / shared                                 # exact but for underflow
    spacing = torch.bitwise_and(scaled.view(int_dtype), exponent_bits).view(work)
    spacing = spacing.clamp_(2.0 ** element.emin, 2.0 ** (element.emax + 1)) \
        .mul_(2.0 ** -element.mantissa_bits)
    q = round_integers(scaled / spacing, mode, stream).mul_(spacing)
    if mode == "sr":
        q = q.copysign_(scaled)  # a negative value rounded up to 0 is -0
    q = q.clamp_(element.min_finite, element.max_finite)
    if element.twos_complement:
        q = q.add_(0.0)          # two's complement has no -0: an element rounded to 0 is +0
    q = q.mul_(shared)
    if not bool(finite.all()):
        q = torch.where(finite, q, float("nan"))
    q = q.reshape(*moved.shape[:-1], -1)[..., :length]
    return q.movedim(-1, dim).to(t.dtype)
