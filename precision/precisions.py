"""The precision value type: ``float16``, ``bfloat16``, ``float32``, ``float64`` and ``mpN``.

A :class:`Precision` knows its unit roundoff, its bits, its torch dtype and which backend
computes in it (``precision.backends.backend_for(p)`` gives that backend).
``parse_precision("mp50")`` is the single way to turn user text into one; an unknown spelling
raises :class:`PrecisionError` listing the valid forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Significand bits (including the implicit bit) of the PyTorch float formats.
FLOAT_BITS: dict[str, int] = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}

#: Largest ``N`` accepted in ``mpN``; beyond this the store's float columns lose meaning.
MAX_MP_DIGITS = 2000

#: Other spellings ``parse_precision`` accepts (case and surrounding spaces never matter).
ALIASES: dict[str, str] = {
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "single": "float32",
    "fp64": "float64",
    "double": "float64",
}

#: The aliases as help texts and error messages state them.
ALIASES_TEXT = "aliases " + ", ".join(
    f"{'/'.join(a for a, t in ALIASES.items() if t == target)} = {target}"
    for target in dict.fromkeys(ALIASES.values())) + "; any case"

VALID_FORMS = (
    "float16, bfloat16, float32, float64, mpN (N decimal digits, 1 <= N <= 2000, e.g. mp50); "
    + ALIASES_TEXT
)

_MP_RE = re.compile(r"^mp(\d+)$")


class PrecisionError(ValueError):
    """An unknown or impossible precision spelling."""


def digits_to_bits(digits: int) -> int:
    """Binary precision used for ``digits`` decimal digits (mpmath's ``dps_to_prec`` rule)."""
    return max(1, int(round((digits + 1) * 3.3219280948873626)))


@dataclass(frozen=True)
class Precision:
    """One arithmetic: a PyTorch float format or an arbitrary precision of ``digits`` digits.

    Attributes:
        name: canonical spelling, e.g. ``"float32"`` or ``"mp50"``.
        digits: decimal digits for ``mpN``; ``None`` for the float formats.
    """

    name: str
    digits: int | None = None

    @property
    def is_mp(self) -> bool:
        """True for the arbitrary-precision formats."""
        return self.digits is not None

    @property
    def bits(self) -> int:
        """Significand bits p (unit roundoff is 2**-p)."""
        if self.digits is not None:
            return digits_to_bits(self.digits)
        return FLOAT_BITS[self.name]

    @property
    def unit_roundoff(self) -> float:
        """u = 2**-p: the largest relative error of rounding one real number (round-to-nearest)."""
        return 2.0 ** (-self.bits)

    @property
    def backend_name(self) -> str:
        """``"torch"`` for the float formats, ``"mp"`` (python-flint arb midpoints) otherwise."""
        return "mp" if self.is_mp else "torch"

    @property
    def torch_dtype(self) -> Any:
        """The ``torch.dtype`` of a float format (error for ``mpN``)."""
        if self.is_mp:
            raise PrecisionError(f"{self.name} has no torch dtype")
        import torch

        return getattr(torch, self.name)

    def __str__(self) -> str:
        return self.name


def parse_precision(spec: str | Precision) -> Precision:
    """Parse ``"float32"``, ``"fp64"``, ``"bf16"``, ``"mp50"``, ... into a :class:`Precision`.

    Raises:
        PrecisionError: for an unknown spelling, listing the valid forms.
    """
    if isinstance(spec, Precision):
        return spec
    if not isinstance(spec, str):
        raise PrecisionError(f"precision must be a string, got {type(spec).__name__}")
    text = spec.strip().lower()
    text = ALIASES.get(text, text)
    if text in FLOAT_BITS:
        return Precision(text)
    match = _MP_RE.match(text)
    if match:
        digits = int(match.group(1))
        if 1 <= digits <= MAX_MP_DIGITS:
            return Precision(f"mp{digits}", digits)
    raise PrecisionError(f"unknown precision {spec!r}; valid forms: {VALID_FORMS}")


def parse_precisions(specs: list[str] | tuple[str, ...] | str) -> list[Precision]:
    """Parse a list (or a comma-separated string) of precision spellings."""
    if isinstance(specs, str):
        specs = [s for s in specs.split(",") if s.strip()]
    return [parse_precision(s) for s in specs]
