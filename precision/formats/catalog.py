"""What ``precision list precisions`` says about each precision: bits, unit roundoff, range.
Data only (no torch), so the listing is instant."""

from __future__ import annotations

from precision.formats.binary_format import (
    FORMATS,
    MX_BLOCK,
    MX_FORMATS,
    MX_SCALE_EMAX,
    MX_SCALE_EMIN,
)
from precision.precisions import Precision, parse_precision

#: The precisions the list shows (any other spelling of the grammar is accepted too).
LISTED = ("bfloat16", "float16", "float32", "float64", "mp30", "mp50", "mp100",
          *(name for name in FORMATS if name not in ("bfloat16", "float16", "float32")),
          "e5m10", *MX_FORMATS, "int8", "int4", "int4_g32")


def describe(p: Precision) -> str:
    """One line: significand bits, unit roundoff and range of ``p`` (and how it computes)."""
    head = f"{p.bits:>4} bits  u = {p.unit_roundoff:.2e}  "
    if p.is_mp:
        return head + "range: arb (unbounded exponent)  backend mp"
    if p.kind == "int":
        bits, group = p.int_weights  # type: ignore[misc]
        qmax = 2 ** (bits - 1) - 1
        per = f"per group of {group}" if group else "per output channel"
        return head + (f"weights q*s, |q| <= {qmax}, s = max|w|/{qmax} {per}; u relative to "
                       "the group's max |w|; activations float32 (+act=)")
    fmt = p.element_format
    assert fmt is not None
    span = (f"subnormal >= {fmt.min_subnormal:.3g}, normal {fmt.min_normal:.3g} .. "
            f"max {fmt.max_finite:.6g}")
    if fmt.twos_complement:   # MXINT8's element: k 2^-6, -128 <= k <= 127
        step = fmt.min_subnormal
        span = (f"k*{step:.3g}, {round(fmt.min_finite / step)} <= k <= "
                f"{round(fmt.max_finite / step)}")
    if p.kind == "mx":
        return head + (f"elements {MX_FORMATS[p.format]} ({span}) times an E8M0 scale "
                       f"2^{MX_SCALE_EMIN}..2^{MX_SCALE_EMAX} per block of {MX_BLOCK}; other ops "
                       "float32 (+act=)")
    how = "torch dtype" if not p.is_simulated else f"simulated in {p.carrier_name}"
    return head + f"{span}, overflow {fmt.overflow}  ({how})"


def listing() -> list[str]:
    """The lines of ``precision list precisions`` for :data:`LISTED`."""
    return [f"  {name:<16} {describe(parse_precision(name))}" for name in LISTED]
