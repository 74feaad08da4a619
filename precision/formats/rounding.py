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

from precision.formats.binary_format import BinaryFormat

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
        return low + (stream.uniform(y.shape) < (y - low)).to(y.dtype)
    raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")


def round_to_format(x: torch.Tensor, fmt: BinaryFormat, mode: str = "rne",
                    stream: RandomStream | None = None) -> torch.Tensor:
    """``x`` (float32 or float64, any shape) rounded to ``fmt`` by ``mode``, returned in
    ``x``'s dtype (which must hold every value of ``fmt``). See the module docstring."""
    if (mode == "rne" and fmt.torch_dtype is not None
            and (x.dtype == torch.float32 or fmt.name == "float32")):
        dtype = getattr(torch, fmt.torch_dtype)
        return x if x.dtype == dtype else x.to(dtype).to(x.dtype)
    work = x.to(torch.float64)
    _, exponent = torch.frexp(work)
    e = (exponent.to(torch.int64) - 1).clamp(min=fmt.emin)
    shift = fmt.mantissa_bits - e
    rounded = round_integers(work * pow2(shift), mode, stream) * pow2(-shift)
    big = fmt.max_finite
    over = rounded.abs() > big
    if fmt.overflow == "saturate":
        fill = torch.tensor(big, dtype=torch.float64)
    else:
        fill = torch.tensor(float("inf") if fmt.overflow == "inf" else float("nan"),
                            dtype=torch.float64)
    positive = work > 0
    toward_zero = {"rz": torch.ones_like(positive), "ru": ~positive, "rd": positive}.get(mode)
    magnitude = torch.where(toward_zero, big, fill) if toward_zero is not None else fill
    rounded = torch.where(over, torch.copysign(magnitude, work), rounded)
    special = ~torch.isfinite(work)
    if bool(special.any()):
        inf_value = fill if fmt.overflow != "saturate" else torch.tensor(big, dtype=work.dtype)
        at_inf = torch.copysign(inf_value.expand_as(work), work)
        rounded = torch.where(special, torch.where(torch.isnan(work), work, at_inf), rounded)
    return rounded.to(x.dtype)
