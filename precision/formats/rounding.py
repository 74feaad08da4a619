"""Vectorised rounding of float32/float64 carrier values to a :class:`BinaryFormat`.

Modes: ``rne`` (to nearest, ties to even), ``rna`` (to nearest, ties away from zero: IEEE
754's roundTiesToAway), ``rz`` (toward zero), ``ru`` (toward +inf), ``rd`` (toward -inf) and
``sr`` (stochastic: up with probability equal to the distance from the lower
neighbour in units of the spacing, so E[round(x)] = x). Every path computes the same thing:
with x = m 2^E (1 <= |m| < 2), the format's spacing at x is q = 2^(max(E, emin) - mantissa_bits)
(the grid with an unbounded exponent), y = x / q is rounded to an integer n by the mode, and
n q is the result; beyond ``max_finite`` the format's overflow rule applies (IEEE 754 for
directed modes: toward zero gives +-max, the far side gives the overflow value). Paths, by
carrier and format (all of them bit for bit the same function):

- float32, rne, torch has the dtype and its cast is fast on a CPU (float16, bfloat16,
  float8_e5m2): the cast itself.
- float32, a format whose largest binade and spacing fit float32's normal range (FP8, FP6,
  FP4, float16, custom ``eXmY`` with X <= 7): q is read off x's exponent bits and clamped to
  the format's binades; x / q and n q are exact (scalings by powers of two), so the rounding
  is one float op (``round``, ``trunc``, ``floor``, ``ceil``). torch's own float8_e4m3fn cast
  is several times slower than this on CPUs without FP8 conversion instructions.
- float32, a format with float32's exponent range (TF32, bfloat16, ``e8mY``): the 23 - m low
  bits of the encoding are rounded off as an integer (float32's subnormals share the format's
  emin, so this is also the fixed-point rounding below 2^emin).
- float64 (or a format float32 cannot carry): the same scaling by exact powers of two in
  float64.

Stochastic bits: :class:`RandomStream` draws from one SFC64 generator per (seed, domain)
(numpy's bit generator, 64 random bits per call of ``random_raw``), consumed in the order of
the rounding calls (ops, steps); every element of every call gets its own fresh bits, so they
are independent across elements, ops and steps, and a run reproduces from its seed.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from precision.formats.binary_format import BinaryFormat, fits_float32
from precision.precisions import torch_dtype_of

MODES = ("rne", "rna", "rz", "ru", "rd", "sr")
#: float32's exponent field, as a 0-d int32 tensor (a Python int operand is slower).
_EXPONENT_BITS = torch.tensor(0x7F800000, dtype=torch.int32)
#: torch dtypes whose rne cast from float32 is the fastest rounding on a CPU (measured:
#: float8_e4m3fn's cast is several times slower than the scaled path, float8_e5m2's faster).
_FAST_CASTS = ("float16", "bfloat16", "float32", "float64", "float8_e5m2")


class RandomStream:
    """Seeded source of stochastic-rounding bits: stream (seed, domain) is an SFC64 generator
    seeded by numpy's ``SeedSequence([seed, domain])`` (seed, domain >= 0), read in call
    order."""

    def __init__(self, seed: int, domain: int = 0) -> None:
        self.seed, self.domain = seed, domain
        self._bits = np.random.SFC64(np.random.SeedSequence([seed, domain]))

    def _words(self, count: int) -> np.ndarray:
        """``count`` fresh uniform 32-bit words (uint32), two per 64-bit draw."""
        return self._bits.random_raw((count + 1) // 2).view(np.uint32)[:count]

    def uniform(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """float64 uniforms in [0, 1) on the grid of 2^-53 (53 random bits each)."""
        raw = self._bits.random_raw(math.prod(shape))
        np.right_shift(raw, np.uint64(11), out=raw)
        out = raw.astype(np.float64)
        np.multiply(out, 2.0 ** -53, out=out)
        return torch.from_numpy(out).reshape(tuple(shape))

    def uniform32(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """float32 uniforms in [0, 1) on the grid of 2^-24 (24 random bits each)."""
        words = self._words(math.prod(shape))
        np.right_shift(words, np.uint32(8), out=words)
        out = words.view(np.int32).astype(np.float32)  # < 2^24: exact, a signed conversion
        np.multiply(out, np.float32(2.0 ** -24), out=out)
        return torch.from_numpy(out).reshape(tuple(shape))

    def bits(self, shape: torch.Size | tuple[int, ...], width: int) -> torch.Tensor:
        """int32 uniforms in [0, 2^width) (``width`` <= 24), shaped ``shape``."""
        words = self._words(math.prod(shape))
        np.right_shift(words, np.uint32(32 - width), out=words)
        return torch.from_numpy(words.view(np.int32)).reshape(tuple(shape))


def pow2(k: torch.Tensor) -> torch.Tensor:
    """2**k exactly, as float64, for integer tensor k in [-1022, 1023] (built from its bits)."""
    return ((k.to(torch.int64) + 1023) << 52).view(torch.float64)


def round_integers(y: torch.Tensor, mode: str, stream: RandomStream | None = None
                   ) -> torch.Tensor:
    """``y`` (float32 or float64) rounded to integers by ``mode`` (``sr`` needs ``stream``);
    ``y`` is overwritten (pass a temporary) and returned. Under ``sr`` a float32 ``y`` draws
    24 random bits per element (exact for fractions of up to 24 bits, as a scaled format
    value has), a float64 one 53."""
    if mode == "rne":
        return y.round_()  # ties to even
    if mode == "rna":
        # n = trunc(y) + sign(y) [|y - trunc(y)| >= 1/2]: y - trunc(y) is exact, where
        # floor(|y| + 1/2) would round the sum above 2^52 (float64) or 2^23 (float32)
        whole = torch.trunc(y)
        away = y.sub_(whole).abs_().ge_(0.5).to(whole.dtype).copysign_(whole)
        return whole.add_(away).copysign_(whole)  # a tie of -0.5 is -1, and -0.4 is -0
    if mode == "rz":
        return y.trunc_()
    if mode == "ru":
        return y.ceil_()
    if mode == "rd":
        return y.floor_()
    if mode == "sr":
        if stream is None:
            raise ValueError("stochastic rounding needs a RandomStream")
        low = torch.floor(y)
        # up iff u < frac, for u uniform on a grid of 2^-24 (float32) or 2^-53 (float64):
        # ceil(frac - u) is 1 or (-)0 (the difference's sign is exact: under gradual
        # underflow a float difference is 0 only when its operands are equal)
        if y.dtype == torch.float32:
            up = y.sub_(low).sub_(stream.uniform32(y.shape).to(y.device)).ceil_()
        else:
            up = y.sub_(low).sub_(stream.uniform(y.shape).to(y.device)).ceil_()  # 53 bits
        return low.add_(up)
    raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")


#: Per carrier dtype: (its integer view, its exponent field as a 0-d tensor, its largest
#: exponent).
CARRIER_BITS = {torch.float32: (torch.int32, _EXPONENT_BITS, 127),
           torch.float64: (torch.int64, torch.tensor(0x7FF0000000000000, dtype=torch.int64),
                           1023)}


@functools.cache
def scales_in(fmt: BinaryFormat, dtype: torch.dtype) -> bool:
    """True when ``dtype`` (float32 or float64) holds every value and rounding boundary of
    ``fmt`` and every spacing q up to its overflow binade 2^(emax + 1), and that binade (then
    :func:`_unbounded_scaled` is exact)."""
    if dtype == torch.float32:
        return fits_float32(fmt) and fmt.emax <= 126
    return fmt.emax <= 1022 and fmt.mantissa_bits <= 51


def _unbounded_scaled(x: torch.Tensor, fmt: BinaryFormat, mode: str,
                      stream: RandomStream | None) -> torch.Tensor:
    """``x`` (float32 or float64, :func:`scales_in` its dtype) rounded on ``fmt``'s grid with
    an unbounded exponent: q = 2^(E' - m) with E' = x's exponent clamped to [emin, emax + 1]
    (from its exponent bits: 0 for zero and subnormals, which the clamp lifts to 2^emin),
    n = round(x / q), result n q. x / q is exact (a power-of-two scaling: by q <= 1/2 below
    2^emin it never loses bits; above, the result is normal), and so is n q (a value of the
    grid, or beyond max_finite, which the caller's overflow rule replaces). Signs of zero
    follow round/trunc/floor/ceil."""
    int_dtype, exponent_bits, _ = CARRIER_BITS[x.dtype]
    binade = torch.bitwise_and(x.view(int_dtype), exponent_bits).view(x.dtype)
    q = binade.clamp_(2.0 ** fmt.emin, 2.0 ** (fmt.emax + 1)).mul_(2.0 ** -fmt.mantissa_bits)
    n = round_integers(x / q, mode, stream)
    out = n.mul_(q)
    if mode == "sr":
        out = out.copysign_(x)  # a negative x rounded up to 0 is -0, as the other modes give
    return out


def _unbounded_float64(x: torch.Tensor, fmt: BinaryFormat, mode: str,
                       stream: RandomStream | None) -> torch.Tensor:
    """float64 ``x`` rounded on ``fmt``'s grid with an unbounded exponent (scaling by exact
    powers of two; any format inside float64, float64's own grid included)."""
    _, exponent = torch.frexp(x)
    e = (exponent.to(torch.int64) - 1).clamp(min=fmt.emin)
    shift = fmt.mantissa_bits - e
    return round_integers(x * pow2(shift), mode, stream) * pow2(-shift)


def _unbounded_float32_bits(x: torch.Tensor, fmt: BinaryFormat, mode: str,
                            stream: RandomStream | None) -> torch.Tensor:
    """float32 ``x`` rounded on the grid of a format with float32's emin (-126): the 23 - m
    low bits of the encoding are rounded off as an integer (the sign bit is untouched, since
    the magnitude plus the increment stays below 2^31, and a carry rolls into the exponent, as
    it should; float32's subnormals are the fixed point of quantum 2^-149, so the same integer
    rounding is the format's fixed point of quantum 2^(-126 - m) there)."""
    drop = 23 - fmt.mantissa_bits
    bits = x.view(torch.int32)
    one = 1 << drop
    if mode == "rne":
        add = torch.bitwise_and(bits >> drop, torch.tensor(1, dtype=torch.int32)) \
            .add_((one >> 1) - 1)
    elif mode == "rna":   # half the dropped unit: a tie carries, away from zero
        add = torch.full_like(bits, one >> 1)
    elif mode == "rz":
        add = None
    elif mode in ("ru", "rd"):
        away = (bits >= 0) if mode == "ru" else (bits < 0)
        add = away.to(torch.int32) * (one - 1)
    elif mode == "sr":
        if stream is None:
            raise ValueError("stochastic rounding needs a RandomStream")
        add = stream.bits(x.shape, drop).to(x.device)
    else:
        raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")
    mask = torch.tensor(~(one - 1), dtype=torch.int32)
    summed = bits if add is None else add.add_(bits)
    return torch.bitwise_and(summed, mask).view(torch.float32)


def _overflowed(x: torch.Tensor, rounded: torch.Tensor, fmt: BinaryFormat, mode: str
                ) -> torch.Tensor:
    """``rounded`` (``x`` on the unbounded grid) with ``fmt``'s overflow rule applied where
    |rounded| > max_finite, and infinities and NaNs of ``x`` mapped by it."""
    big = fmt.max_finite
    if fmt.overflow == "saturate":
        fill = big
    else:
        fill = float("inf") if fmt.overflow == "inf" else float("nan")
    over = rounded.abs() > big
    if bool(over.any()):
        positive = x > 0
        toward_zero = {"rz": torch.ones_like(positive), "ru": ~positive,
                       "rd": positive}.get(mode)
        magnitude = torch.full_like(x, fill)
        if toward_zero is not None:
            magnitude = torch.where(toward_zero, big, magnitude)
        rounded = torch.where(over, torch.copysign(magnitude, x), rounded)
    special = ~torch.isfinite(x)
    if bool(special.any()):
        at_inf = torch.copysign(torch.full_like(x, fill), x)
        rounded = torch.where(special, torch.where(torch.isnan(x), x, at_inf), rounded)
    return rounded


def round_to_format(x: torch.Tensor, fmt: BinaryFormat, mode: str = "rne",
                    stream: RandomStream | None = None) -> torch.Tensor:
    """``x`` (float32 or float64, any shape) rounded to ``fmt`` by ``mode``, returned in
    ``x``'s dtype (which must hold every value of ``fmt``). See the module docstring. A
    two's-complement grid (MXINT8's element) is rounded by MX quantisation only."""
    if fmt.twos_complement:
        raise ValueError(f"{fmt.name}: a two's-complement element is rounded by "
                         "precision.formats.mx.quantize_mx, not round_to_format")
    if mode not in MODES:
        raise ValueError(f"unknown rounding mode {mode!r} (modes: {', '.join(MODES)})")
    if mode == "sr" and stream is None:
        raise ValueError("stochastic rounding needs a RandomStream")
    if (mode == "rne" and fmt.torch_dtype in _FAST_CASTS
            and (x.dtype == torch.float32 or fmt.name == "float32")):
        dtype = torch_dtype_of(fmt.torch_dtype)
        return x if x.dtype == dtype else x.to(dtype).to(x.dtype)
    if x.numel() == 0:
        return x
    low, high = (float(v) for v in torch.aminmax(x))  # NaN if x holds one
    in_range = -fmt.max_finite <= low and high <= fmt.max_finite
    if x.dtype == torch.float32 and not scales_in(fmt, x.dtype) and fits_float32(fmt):
        rounded = _unbounded_float32_bits(x, fmt, mode, stream)
        if in_range or (fmt.overflow == "inf" and low == low and high == high):
            # the carry of the integer rounding is IEEE's overflow (to inf when rounding
            # away, to max_finite toward zero) and +-inf stays; only a NaN whose payload
            # lies in the dropped bits would not stay NaN
            return rounded
        return _overflowed(x, rounded, fmt, mode)
    work = x if x.dtype == torch.float32 and fits_float32(fmt) else x.to(torch.float64)
    if not scales_in(fmt, work.dtype):
        rounded = _unbounded_float64(work, fmt, mode, stream)
        return (rounded if in_range else _overflowed(work, rounded, fmt, mode)).to(x.dtype)
    if not in_range and fmt.overflow == "saturate":
        # every mode saturates: beyond +-max_finite (a grid value) the clamped value rounds
        # to it, as the rule says; NaN stays NaN
        work, in_range = work.clamp(-fmt.max_finite, fmt.max_finite), True
    rounded = _unbounded_scaled(work, fmt, mode, stream)
    if in_range:
        return rounded.to(x.dtype)  # no overflow: |n q| <= max_finite when |x| is
    if fmt.overflow == "inf" and mode == "rne":
        # n q >= 2^(emax + 1) (the next binade: overflow) becomes inf when scaled up to the
        # carrier's top binade, max_finite stays finite; the scalings are exact otherwise
        top = CARRIER_BITS[work.dtype][2]
        return rounded.mul_(2.0 ** (top - fmt.emax)).mul_(2.0 ** (fmt.emax - top)).to(x.dtype)
    return _overflowed(work, rounded, fmt, mode).to(x.dtype)
