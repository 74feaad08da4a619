"""Vectorised rounding of float32/float64 carrier values to a :class:`BinaryFormat`.

Modes: ``rne`` (to nearest, ties to even), ``rz`` (toward zero), ``ru`` (toward +inf), ``rd``
(toward -inf) and ``sr`` (stochastic: up with probability equal to the distance from the lower
neighbour in units of the spacing, so E[round(x)] = x). The computation, exact in float64: with
x = m 2^E (0.5 <= |m| < 1), e = max(E - 1, emin) and s = mantissa_bits - e, y = x 2^s holds the
format's last significand bit at the units place (every scaling is by an exact power of two
built from its bits), y is rounded to an integer n by the mode, and n 2^-s is the result on the
unbounded-exponent grid. Beyond ``max_finite`` the format's overflow rule applies (IEEE 754
for directed modes: toward zero gives +-max, the far side gives the overflow value). Where
torch has the format as a dtype and the mode is ``rne``, the cast itself is used (float32
input, one rounding), bit for bit the same.

Stochastic bits: :class:`RandomStream` gives each rounding call (an op, a step) a fresh
``torch.Generator`` keyed by (seed, domain, counter), so the bits are independent across the
elements of a tensor, across ops and across steps, and reproducible from the seed.
"""

from __future__ import annotations

import torch

from precision.formats.binary_format import BinaryFormat, fits_float32

MODES = ("rne", "rz", "ru", "rd", "sr")
_MASK64 = (1 << 64) - 1


def _mix64(value: int) -> int:
    """splitmix64's finaliser: a 64-bit bijection that scatters nearby keys."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


class RandomStream:
    """Counter-based source of stochastic-rounding bits: call ``k`` of stream (seed, domain)
    draws from a generator seeded by a hash of (seed, domain, k)."""

    def __init__(self, seed: int, domain: int = 0) -> None:
        self.seed, self.domain, self.counter = seed, domain, 0

    def uniform(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """float64 uniforms in [0, 1) (53 random bits each), shaped ``shape``; advances the
        counter."""
        key = _mix64(_mix64(_mix64(self.seed) ^ self.domain) ^ self.counter)
        self.counter += 1
        gen = torch.Generator().manual_seed(key & ((1 << 63) - 1))
        return torch.rand(tuple(shape), generator=gen, dtype=torch.float64)

    def bits24(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """int32 uniforms in [0, 2^24), shaped ``shape``; advances the counter."""
        key = _mix64(_mix64(_mix64(self.seed) ^ self.domain) ^ self.counter)
        self.counter += 1
        gen = torch.Generator().manual_seed(key & ((1 << 63) - 1))
        return torch.randint(0, 1 << 24, tuple(shape), generator=gen, dtype=torch.int32)


def pow2(k: torch.Tensor) -> torch.Tensor:
    """2**k exactly, as float64, for integer tensor k in [-1022, 1023] (built from its bits)."""
    return ((k.to(torch.int64) + 1023) << 52).view(torch.float64)


def round_integers(y: torch.Tensor, mode: str, stream: RandomStream | None = None
                   ) -> torch.Tensor:
    """``y`` (float64) rounded to integers by ``mode`` (``sr`` needs ``stream``)."""
    if mode == "rne":
        return torch.round(y)  # ties to even
    if mode == "rz":
        return torch.trunc(y)
    if mode == "ru":
        return torch.ceil(y)
    if mode == "rd":
        return torch.floor(y)
    if mode == "sr":
        if stream is None:
            raise ValueError("stochastic rounding needs a RandomStream")
        low = torch.floor(y)
        return low + (stream.uniform(y.shape).to(y.device) < (y - low)).to(y.dtype)
    raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")


def _unbounded_float64(x: torch.Tensor, fmt: BinaryFormat, mode: str,
                       stream: RandomStream | None) -> torch.Tensor:
    """float64 ``x`` rounded on ``fmt``'s grid with an unbounded exponent (scaling by exact
    powers of two; any format inside float64)."""
    _, exponent = torch.frexp(x)
    e = (exponent.to(torch.int64) - 1).clamp(min=fmt.emin)
    shift = fmt.mantissa_bits - e
    return round_integers(x * pow2(shift), mode, stream) * pow2(-shift)


def _unbounded_float32(x: torch.Tensor, fmt: BinaryFormat, mode: str,
                       stream: RandomStream | None, any_small: bool) -> torch.Tensor:
    """float32 ``x`` rounded on the grid of ``fmt`` (which :func:`fits_float32`) with an
    unbounded exponent, on the bits: in ``fmt``'s normal range the 23 - m low bits of the
    encoding are rounded off as an integer (the sign bit is untouched, since the magnitude
    plus the increment stays below 2^31, and a carry rolls into the exponent, as it should);
    below 2^emin (``any_small``: some |x| is) the value is rounded as a fixed-point number of
    quantum 2^(emin - m) (to nearest: by adding and subtracting 1.5 2^(emin - m + 23), whose
    float32 spacing is that quantum, so the hardware's own ties-to-even rounding does it)."""
    drop = 23 - fmt.mantissa_bits
    bits = x.view(torch.int32)
    one = 1 << drop
    random = stream.bits24(x.shape).to(x.device) if mode == "sr" else None  # type: ignore[union-attr]
    if mode == "rne":
        add = ((bits >> drop) & 1) + ((one >> 1) - 1)
    elif mode == "rz":
        add = None
    elif mode in ("ru", "rd"):
        away = (bits >= 0) if mode == "ru" else (bits < 0)
        add = away.to(torch.int32) * (one - 1)
    elif mode == "sr":
        add = random >> (24 - drop)  # type: ignore[operator]
    else:
        raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")
    normal = ((bits if add is None else bits + add) & ~(one - 1)).view(torch.float32)
    if not any_small:
        return normal
    small = x.abs() < 2.0 ** fmt.emin
    if mode == "rne":
        magic = 1.5 * 2.0 ** (fmt.emin - fmt.mantissa_bits + 23)
        fixed = torch.copysign((x + magic) - magic, x)                     # keeps -0
        return torch.where(small, fixed, normal)
    # fixed point below 2^emin: y = x 2^(m - emin) < 2^m, scaled in two exact steps
    up = fmt.mantissa_bits - fmt.emin
    half = up // 2
    y = x * 2.0 ** half * 2.0 ** (up - half)
    if mode == "sr":
        low = torch.floor(y)
        uniform = random.to(torch.float32) * 2.0 ** -24  # type: ignore[union-attr]
        n = low + (uniform < (y - low)).to(torch.float32)
    else:
        n = round_integers(y, mode)
    fixed = torch.copysign(n * 2.0 ** -half * 2.0 ** -(up - half), x)  # keeps -0
    return torch.where(small, fixed, normal)


def round_to_format(x: torch.Tensor, fmt: BinaryFormat, mode: str = "rne",
                    stream: RandomStream | None = None) -> torch.Tensor:
    """``x`` (float32 or float64, any shape) rounded to ``fmt`` by ``mode``, returned in
    ``x``'s dtype (which must hold every value of ``fmt``). See the module docstring."""
    if (mode == "rne" and fmt.torch_dtype is not None
            and (x.dtype == torch.float32 or fmt.name == "float32")):
        dtype = getattr(torch, fmt.torch_dtype)
        return x if x.dtype == dtype else x.to(dtype).to(x.dtype)
    if mode == "sr" and stream is None:
        raise ValueError("stochastic rounding needs a RandomStream")
    if x.numel() == 0:
        return x
    big = fmt.max_finite
    low, high = (float(v) for v in torch.aminmax(x.abs()))
    if x.dtype == torch.float32 and fits_float32(fmt):
        work = x
        rounded = _unbounded_float32(x, fmt, mode, stream,
                                     not low >= 2.0 ** fmt.emin)  # NaN: check them all
    else:
        work = x.to(torch.float64)
        rounded = _unbounded_float64(work, fmt, mode, stream)
    if high <= big:
        return rounded.to(x.dtype)  # no overflow, no inf or NaN (a NaN fails <=)
    if fmt.overflow == "saturate":
        fill = big
    else:
        fill = float("inf") if fmt.overflow == "inf" else float("nan")
    over = rounded.abs() > big
    if bool(over.any()):
        positive = work > 0
        toward_zero = {"rz": torch.ones_like(positive), "ru": ~positive,
                       "rd": positive}.get(mode)
        magnitude = torch.full_like(work, fill)
        if toward_zero is not None:
            magnitude = torch.where(toward_zero, big, magnitude)
        rounded = torch.where(over, torch.copysign(magnitude, work), rounded)
    special = ~torch.isfinite(work)
    if bool(special.any()):
        at_inf = torch.copysign(torch.full_like(work, fill), work)
        rounded = torch.where(special, torch.where(torch.isnan(work), work, at_inf), rounded)
    return rounded.to(x.dtype)
