"""Binary floating-point formats by their bits: the named ones (FP8, TF32, MX elements) and
custom ``eXmY``.

A :class:`BinaryFormat` is a sign, ``exponent_bits`` of biased exponent and ``mantissa_bits``
stored significand bits (significand precision p = mantissa_bits + 1 with the implicit bit),
normal exponents ``emin..emax``, gradual underflow (subnormals down to 2**(emin - m)), and a
rule for results beyond the largest finite value (``overflow``): ``"inf"`` (IEEE 754: round to
infinity), ``"saturate"`` (clamp to +-max, infinities included: OCP's saturating mode) or
``"nan"`` (OCP's non-saturating e4m3: overflow and infinities become NaN). A NaN input stays
NaN in every format (also in FP6/FP4, which have no NaN encoding: a simulation does not hide a
NaN). No torch import here: :mod:`precision.precisions` reads this registry.

Named formats (OCP 8-bit FP spec v1.0, OCP MX spec v1.0, IEEE 754, NVIDIA TF32)::

    name              e  m  emin emax  max          overflow  reference (bit for bit)
    float8_e4m3       4  3   -6    8   448          saturate  torch.float8_e4m3fn casts
    float8_e4m3_nan   4  3   -6    8   448          nan       ml_dtypes.float8_e4m3fn
    float8_e5m2       5  2  -14   15   57344        inf       torch.float8_e5m2 casts
    float8_e5m2_sat   5  2  -14   15   57344        saturate  (OCP saturating e5m2)
    float6_e2m3       2  3    0    2   7.5          saturate  ml_dtypes.float6_e2m3fn
    float6_e3m2       3  2   -2    4   28           saturate  ml_dtypes.float6_e3m2fn
    float4_e2m1       2  1    0    2   6            saturate  ml_dtypes.float4_e2m1fn
    tf32              8 10 -126  127   3.40e38      inf       (float32's range, 10 bits)
    float16           5 10  -14   15   65504        inf       torch.float16
    bfloat16          8  7 -126  127   3.39e38      inf       torch.bfloat16
    float32           8 23 -126  127   3.40e38      inf       torch.float32

MXINT8's element (OCP MX v1.0, Sec. 5.3, its INT8 element type; :data:`MX_INT8_ELEMENT`,
not a precision of its own) is an 8-bit two's-complement integer k with an implicit scale of
2^-6: the values k 2^-6, -128 <= k <= 127, i.e. the fixed-point grid of spacing 2^-6 on
[-2, 127/64]. As a
:class:`BinaryFormat` it is the sign-magnitude grid emin = emax = 0, six stored significand
bits (subnormals k 2^-6 below 1, normals 1.xxxxxx in [1, 2), max 127/64, saturating), with
``twos_complement`` adding the one extra negative value -2 (the code 0b10000000).

Custom ``eXmY`` (2 <= X <= 10, 1 <= Y <= 51) is IEEE-like: bias 2**(X-1) - 1, emin = 1 - bias,
emax = bias, subnormals, infinities (overflow ``"inf"``) and NaN; ``e5m10`` is float16's grid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OVERFLOWS = ("inf", "saturate", "nan")

_CUSTOM_RE = re.compile(r"^e([0-9]{1,3})m([0-9]{1,3})$")  # ASCII digits only
#: Bounds of custom ``eXmY``: every such format lies strictly inside float64 (the carrier).
CUSTOM_EXPONENT_BITS = (2, 10)
CUSTOM_MANTISSA_BITS = (1, 51)


@dataclass(frozen=True)
class BinaryFormat:
    """A binary floating-point format (see the module docstring).

    Attributes:
        name: canonical name (``"float8_e4m3"``, ``"e5m10"``).
        exponent_bits, mantissa_bits: field widths; p = mantissa_bits + 1.
        emin, emax: smallest and largest normal exponent (min normal 2**emin).
        max_finite: the largest finite value.
        overflow: one of :data:`OVERFLOWS`.
        torch_dtype: name of the torch dtype whose casts this format matches bit for bit
            (``None`` where torch has none).
        twos_complement: the negative end reaches -2^(emax + 1), one spacing beyond
            -max_finite (MXINT8's element: -2 = -128 2^-6); only MX quantisation
            (:func:`precision.formats.mx.quantize_mx`) rounds to such a format.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    emin: int
    emax: int
    max_finite: float
    overflow: str = "inf"
    torch_dtype: str | None = None
    twos_complement: bool = False

    @property
    def significand_bits(self) -> int:
        """p: significand bits including the implicit one."""
        return self.mantissa_bits + 1

    @property
    def unit_roundoff(self) -> float:
        """u = 2**-p (round to nearest; directed roundings err by up to 2u)."""
        return 2.0 ** -self.significand_bits

    @property
    def min_finite(self) -> float:
        """The most negative finite value: -max_finite, or -2^(emax + 1) for a
        two's-complement grid."""
        return -(2.0 ** (self.emax + 1)) if self.twos_complement else -self.max_finite

    @property
    def min_normal(self) -> float:
        return 2.0 ** self.emin

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.mantissa_bits)

    def with_overflow(self, overflow: str) -> BinaryFormat:
        """The same grid with another overflow rule (MX elements saturate)."""
        if overflow == self.overflow:
            return self
        return BinaryFormat(self.name, self.exponent_bits, self.mantissa_bits, self.emin,
                            self.emax, self.max_finite, overflow, None, self.twos_complement)


def _ieee(name: str, e: int, m: int, overflow: str = "inf", torch_dtype: str | None = None
          ) -> BinaryFormat:
    """IEEE-like: the all-ones exponent holds inf and NaN."""
    bias = 2 ** (e - 1) - 1
    return BinaryFormat(name, e, m, 1 - bias, bias, (2 - 2.0 ** -m) * 2.0 ** bias, overflow,
                        torch_dtype)


def _fn(name: str, e: int, m: int, bias: int, nan_slot: bool, overflow: str,
        torch_dtype: str | None = None) -> BinaryFormat:
    """OCP 'finite' formats: the all-ones exponent holds normal numbers (e4m3 keeps its
    all-ones significand there for NaN, ``nan_slot``)."""
    emax = 2 ** e - 1 - bias
    top = 2 - 2.0 ** -m * (2 if nan_slot else 1)
    return BinaryFormat(name, e, m, 1 - bias, emax, top * 2.0 ** emax, overflow, torch_dtype)


FORMATS: dict[str, BinaryFormat] = {f.name: f for f in (
    _fn("float8_e4m3", 4, 3, 7, True, "saturate", "float8_e4m3fn"),
    _fn("float8_e4m3_nan", 4, 3, 7, True, "nan"),
    _ieee("float8_e5m2", 5, 2, "inf", "float8_e5m2"),
    _ieee("float8_e5m2_sat", 5, 2, "saturate"),
    _fn("float6_e2m3", 2, 3, 1, False, "saturate"),
    _fn("float6_e3m2", 3, 2, 3, False, "saturate"),
    _fn("float4_e2m1", 2, 1, 1, False, "saturate"),
    _ieee("tf32", 8, 10),
    _ieee("float16", 5, 10, "inf", "float16"),
    _ieee("bfloat16", 8, 7, "inf", "bfloat16"),
    _ieee("float32", 8, 23, "inf", "float32"),
)}

#: float64's grid (the widest carrier; a format to round *to* only as an accumulator).
FLOAT64 = _ieee("float64", 11, 52, "inf", "float64")

#: An MX block: elements that share one E8M0 scale (OCP MX v1.0), and E8M0's exponent range
#: (bias 127; the all-ones code is NaN).
MX_BLOCK = 32
MX_SCALE_EMIN, MX_SCALE_EMAX = -127, 127

#: MXINT8's element (module docstring): k 2^-6 for -128 <= k <= 127; emax_elem = 0.
MX_INT8_ELEMENT = BinaryFormat("ocp_int8", 1, 6, 0, 0, 127 / 64, "saturate", None, True)

#: MX block formats (OCP MX v1.0): name -> the name of its element format (a named format of
#: :data:`FORMATS`, or MXINT8's ``ocp_int8``; :func:`mx_element` gives the format).
MX_FORMATS: dict[str, str] = {
    "mxfp8_e4m3": "float8_e4m3",
    "mxfp8_e5m2": "float8_e5m2",
    "mxfp6_e2m3": "float6_e2m3",
    "mxfp6_e3m2": "float6_e3m2",
    "mxfp4_e2m1": "float4_e2m1",
    "mxint8": MX_INT8_ELEMENT.name,
}

#: The rules for an MX block's shared exponent (docs/formats.md, "MX scale"): ``exact``
#: X = floor(log2 amax) - emax_elem as the spec writes it (from amax's exponent bits; the
#: default), ``log2`` with log2 computed in floating point, as microxcaling and gfloat do.
MX_SCALE_RULES = ("exact", "log2")


def mx_element(name: str) -> BinaryFormat:
    """The element format of MX format ``name`` (a key of :data:`MX_FORMATS`)."""
    element = MX_FORMATS[name]
    return MX_INT8_ELEMENT if element == MX_INT8_ELEMENT.name else FORMATS[element]


def binary_format(name: str) -> BinaryFormat | None:
    """The named or custom (``eXmY``) format called ``name``, or None."""
    if name in FORMATS:
        return FORMATS[name]
    if name == "float64":
        return FLOAT64
    match = _CUSTOM_RE.match(name)
    if match is None:
        return None
    e, m = int(match.group(1)), int(match.group(2))
    if not (CUSTOM_EXPONENT_BITS[0] <= e <= CUSTOM_EXPONENT_BITS[1]
            and CUSTOM_MANTISSA_BITS[0] <= m <= CUSTOM_MANTISSA_BITS[1]):
        return None
    return _ieee(f"e{e}m{m}", e, m)


def fits_float32(f: BinaryFormat) -> bool:
    """True when every value of ``f`` and every rounding boundary between them is a float32
    strictly finer than ``f`` (so a float32 carrier can hold a result before rounding)."""
    return (f.significand_bits < 24 and f.emax <= 127
            and f.emin - f.mantissa_bits - 1 >= -149)
