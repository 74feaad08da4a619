"""The precision value type: one typed value for "how a computation rounds".

A :class:`Precision` is a number format (``float16``, ``bfloat16``, ``float32``, ``float64``,
``mpN``: N decimal digits of arb, or a simulated format: ``float8_e4m3``, ``tf32``, a custom
``eXmY``, an MX block format ``mxfp8_e4m3`` / ``mxint8``, weight-only ``int8`` /
``int4_g32``; see docs/formats.md and :mod:`precision.formats`) together with everything that
says how arithmetic in it rounds: a rounding mode, a seed for stochastic rounding, an
accumulation format for sums and matrix products, the activation format of MX and
integer-weight formats, the rule for an MX block's shared exponent, a policy for the float
casts a model makes inside, and a per-module assignment of other precisions. Each field
has one canonical spelling, and a precision's spelling (``str(p)``, ``p.name``) is what the
store holds and what :func:`parse_precision` reads back::

    FORMAT[:ROUNDING][+acc=FORMAT][+act=FORMAT][+scale=exact|log2][+casts=keep|promote]
        [+seed=N][+mod[GLOB]=FORMAT[:ROUNDING]]...

e.g. ``float32``, ``mp50``, ``float8_e4m3:sr+acc=float16+seed=3``, ``mxfp4_e2m1``,
``int4_g32+act=bfloat16``, ``mxint8+scale=log2``, ``float32+mod[blocks.*.mlp]=bfloat16``.
Spellings never hold ``/`` (they name report files). Options at their default are not
spelled, so today's names (``float32``, ``mp50``) are their own canonical spelling.

Parsing happens at the edges only (the CLI, suite files, the Python API, reading the store):
inside, every signature takes a :class:`Precision`. :func:`parse_spelling` reads the grammar;
:func:`parse_precision` also refuses what this version cannot compute yet (only the fields'
formats, roundings, accumulation and activation formats are computed on the float path, and
per-module assignments of the torch formats, of mpN and of the binary formats; see
docs/formats.md and docs/precision_assignment.md), so a spelling is never accepted
and then silently ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import Any

from precision.formats.binary_format import (
    FLOAT64,
    FORMATS,
    MX_FORMATS,
    MX_SCALE_RULES,
    BinaryFormat,
    binary_format,
    fits_float32,
    mx_element,
)
from precision.suggest import did_you_mean
from precision.text_numbers import NumberError, parse_whole, shown

#: Significand bits (including the implicit bit) of the PyTorch float formats.
FLOAT_BITS: dict[str, int] = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}

#: Largest ``N`` accepted in ``mpN``; beyond this the store's float columns lose meaning.
MAX_MP_DIGITS = 2000

#: Rounding modes a precision can name: round to nearest even (the default), to nearest with
#: ties away from zero, toward zero, up, down, and stochastic (seeded by ``+seed=N``, else
#: by the seed of the run that computes it).
ROUNDINGS = ("rne", "rna", "rz", "ru", "rd", "sr")
#: Cast policies: ``keep`` runs a model's own float casts as written, ``promote`` treats
#: every float cast as the evaluation precision.
CAST_POLICIES = ("keep", "promote")

#: Other spellings of a format that the parser accepts (case and surrounding spaces never
#: matter).
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
    "float16, bfloat16, float32, float64, mpN (N decimal digits, 1 <= N <= 2000, e.g. mp50), "
    "float8_e4m3, float8_e4m3_nan, float8_e5m2, float8_e5m2_sat, float6_e2m3, float6_e3m2, "
    "float4_e2m1, tf32, eXmY (custom: 2 <= X <= 10 exponent bits, 1 <= Y <= 51 significand "
    "bits), " + ", ".join(MX_FORMATS) + ", int8, int4, intB_gG (per group of G, e.g. "
    "int4_g32); " + ALIASES_TEXT
)

#: Integer weight formats: ``int8`` / ``int4`` (per output channel) or ``int8_gG`` /
#: ``int4_gG`` (per group of G input entries).
_INT_RE = re.compile(r"^int(8|4)(?:_g([1-9][0-9]{0,8}))?$")  # ASCII digits only
#: The activation / accumulation format of MX and integer formats when none is spelled, and
#: the accumulation format of every simulated format: float32 (see docs/formats.md).
DEFAULT_SIDE_FORMAT = "float32"

_MP_RE = re.compile(r"^mp([0-9]+)$")  # ASCII digits only (text_numbers)
_OPTION_RE = re.compile(r"^(acc|act|scale|casts|seed)=(.+)$|^mod\[([^\[\]=+]+)\]=(.+)$")

#: Spellings parsed in this process (each distinct text once); see :func:`parse_precision`.
PARSE_COUNT = 0


class PrecisionError(ValueError):
    """An unknown or impossible precision spelling (one line)."""


@cache
def _torch_dtypes() -> dict[str, Any]:
    """Name -> torch dtype of every torch dtype a format names (torch is imported on first
    use: parsing a precision does not need it)."""
    import torch

    names = [*FLOAT_BITS, *(f.torch_dtype for f in FORMATS.values() if f.torch_dtype)]
    return {name: getattr(torch, name) for name in dict.fromkeys(names)}


def torch_dtype_of(name: str) -> Any:
    """The ``torch.dtype`` called ``name``: a torch float format (:data:`FLOAT_BITS`:
    float16, bfloat16, float32, float64) or the torch dtype whose casts a binary format
    matches (``BinaryFormat.torch_dtype``, e.g. ``float8_e5m2``, ``float8_e4m3fn``). The one
    table from a format's name to its torch dtype; PrecisionError for any other name."""
    try:
        return _torch_dtypes()[name]
    except KeyError:
        raise PrecisionError(f"no torch dtype is called {name!r} (known: "
                             f"{', '.join(_torch_dtypes())})") from None


def digits_to_bits(digits: int) -> int:
    """Binary precision used for ``digits`` decimal digits (mpmath's ``dps_to_prec`` rule)."""
    return max(1, int(round((digits + 1) * 3.3219280948873626)))


@dataclass(frozen=True)
class Precision:
    """One arithmetic (see the module docstring for the spelling).

    Attributes:
        format: the number format, e.g. ``"float32"`` or ``"mp50"``.
        digits: decimal digits of ``mpN``; ``None`` for the float formats.
        rounding: one of :data:`ROUNDINGS` (``"rne"``: round to nearest, ties to even;
            ``"rna"``: ties away from zero).
        seed: seed of stochastic rounding (``rounding == "sr"``, or a module's: one seed
            seeds every stochastic rounding of the precision).
        accumulate: the format sums and matrix products accumulate in (``None``: the
            torch kernels' own for a torch dtype, the carrier dtype for a simulated format;
            see :attr:`accumulation_format`).
        casts: one of :data:`CAST_POLICIES`: ``"keep"`` (the default, not spelled) runs the
            model's own float casts as written (a cast to float32 rounds to float32 in every
            precision, mpN included); ``"promote"`` computes every float cast in this
            precision (the model its author wrote, without the casts).
        modules: ``(glob over module paths, precision)`` pairs; the first glob that matches a
            module's path gives its precision, the others run in this one.
        activations: MX and integer-weight formats only: the format every op's result is
            rounded to (``None``: float32).
        mx_scale: MX formats only: the rule for a block's shared exponent, one of
            :data:`~precision.formats.binary_format.MX_SCALE_RULES` (``"exact"``, the
            default, not spelled: floor(log2 amax) as OCP MX v1.0 Sec. 6.3 defines it;
            ``"log2"``: log2 in floating point, as microxcaling and gfloat compute it;
            spelled ``+scale=log2``; see :mod:`precision.formats.mx`).
    """

    format: str
    digits: int | None = None
    rounding: str = "rne"
    seed: int | None = None
    accumulate: Precision | None = None
    casts: str = "keep"
    modules: tuple[tuple[str, Precision], ...] = ()
    activations: Precision | None = None
    mx_scale: str = "exact"

    @property
    def name(self) -> str:
        """The canonical spelling (stored, shown, parsed back by :func:`parse_precision`)."""
        text = self.format + (f":{self.rounding}" if self.rounding != "rne" else "")
        if self.accumulate is not None:
            text += f"+acc={self.accumulate.name}"
        if self.activations is not None:
            text += f"+act={self.activations.name}"
        if self.mx_scale != "exact":
            text += f"+scale={self.mx_scale}"
        if self.casts != "keep":
            text += f"+casts={self.casts}"
        if self.seed is not None:
            text += f"+seed={self.seed}"
        # the seed is spelled once, at the top: it also seeds the modules' stochastic rounding
        return text + "".join(f"+mod[{glob}]={replace(p, seed=None).name}"
                              for glob, p in self.modules)

    @property
    def is_mp(self) -> bool:
        """True for the arbitrary-precision formats."""
        return self.digits is not None

    @cached_property
    def kind(self) -> str:
        """``"mp"``, ``"float"`` (a binary format: the torch dtypes, FP8, TF32, eXmY...),
        ``"mx"`` (an MX block format) or ``"int"`` (integer weights)."""
        if self.is_mp:
            return "mp"
        if self.format in MX_FORMATS:
            return "mx"
        if _INT_RE.match(self.format):
            return "int"
        return "float"

    @cached_property
    def element_format(self) -> BinaryFormat | None:
        """The binary format of a ``"float"`` precision, the element format of an MX one;
        None for mpN and integer formats."""
        if self.kind == "mx":
            return mx_element(self.format)
        return binary_format(self.format) if self.kind == "float" else None

    @cached_property
    def int_weights(self) -> tuple[int, int | None] | None:
        """(bits, group size or None for per channel) of an integer format, else None."""
        match = _INT_RE.match(self.format)
        if match is None:
            return None
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None

    @cached_property
    def value_format(self) -> BinaryFormat:
        """The format every op's result is rounded to: the format itself, or the activation
        format of an MX / integer precision (float32 unless ``+act=`` says otherwise)."""
        if self.kind in ("mx", "int"):
            side = self.activations.format if self.activations is not None else \
                DEFAULT_SIDE_FORMAT
            return binary_format(side)  # type: ignore[return-value]
        fmt = self.element_format
        if fmt is None:
            raise PrecisionError(f"{self.name} has no binary format")
        return fmt

    @cached_property
    def is_simulated(self) -> bool:
        """True when the float path simulates the precision (a carrier dtype under per-op
        rounding, :mod:`precision.formats.op_rounding`) instead of running a torch dtype."""
        if self.is_mp:
            return False
        return not (self.format in FLOAT_BITS and self.rounding == "rne"
                    and self.accumulate is None and self.activations is None)

    @cached_property
    def carrier_dtype(self) -> Any:
        """The torch dtype the float path computes in (:attr:`carrier_name`)."""
        import torch

        if not self.is_simulated:
            return self.torch_dtype
        return getattr(torch, self.carrier_name)

    @property
    def carrier_name(self) -> str:
        """The name of the torch dtype the float path computes in: the dtype itself for a
        plain torch format; for a simulated one float32 when every value and rounding
        boundary of its value format (and MX elements) is a float32 finer than the format
        (or the format is float32 under rne), else float64."""
        if not self.is_simulated:
            return self.format
        formats = [self.value_format] + ([self.element_format] if self.kind == "mx" else [])
        narrow = all(fits_float32(f) or (f.name == "float32" and self.rounding == "rne")
                     for f in formats)
        return "float32" if narrow else "float64"

    @cached_property
    def accumulation_format(self) -> BinaryFormat:
        """The format matrix products and sums accumulate in: ``+acc=`` or, by default, the
        carrier dtype (float32 for every format that fits in float32)."""
        if self.accumulate is not None:
            return binary_format(self.accumulate.format)  # type: ignore[return-value]
        import torch

        return FLOAT64 if self.carrier_dtype == torch.float64 else binary_format("float32")  # type: ignore[return-value]

    @property
    def bits(self) -> int:
        """Significand bits p of the format (unit roundoff is 2**-p): MX: of its elements;
        integer weights: the integer width b (u = 2**-b of a group's max |w|)."""
        if self.digits is not None:
            return digits_to_bits(self.digits)
        if self.format in FLOAT_BITS:
            return FLOAT_BITS[self.format]
        if self.kind == "int":
            return self.int_weights[0]  # type: ignore[index]
        return self.element_format.significand_bits  # type: ignore[union-attr]

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
        """The ``torch.dtype`` of a plain torch float format (error for ``mpN`` and for
        simulated formats, which compute in :attr:`carrier_dtype`)."""
        if self.is_mp or self.is_simulated:
            raise PrecisionError(f"{self.name} has no torch dtype"
                                 + (" (it is simulated in its carrier dtype)"
                                    if self.is_simulated else ""))
        return torch_dtype_of(self.format)

    @property
    def is_plain(self) -> bool:
        """True when every option is at its default (the format alone)."""
        return self == Precision(self.format, self.digits)

    @property
    def unseeded(self) -> bool:
        """Stochastic rounding with no seed spelled (``float8_e4m3:sr``): the run or command
        that computes it gives its own seed (:func:`seeded_by`)."""
        return self.rounding == "sr" and self.seed is None

    @property
    def needs_stream(self) -> bool:
        """True for stochastic rounding (its bits come from a seeded stream)."""
        return self.rounding == "sr"

    def __str__(self) -> str:
        return self.name


def _format(text: str, spec: str) -> Precision:
    """The plain format of ``text`` (an alias resolved), or PrecisionError."""
    text = ALIASES.get(text, text)
    if text in FLOAT_BITS or text in MX_FORMATS or _INT_RE.match(text) \
            or binary_format(text) is not None:
        return Precision(text)
    match = _MP_RE.match(text)
    if match:
        try:
            n = parse_whole(match.group(1), "the N of mpN", lo=1, hi=MAX_MP_DIGITS)
        except NumberError as exc:
            raise PrecisionError(f"unknown precision {shown(spec)}: {exc}; valid forms: "
                                 f"{VALID_FORMS}") from None
        return Precision(f"mp{n}", n)
    near = did_you_mean(text, [*FLOAT_BITS, *MX_FORMATS, *ALIASES, *FORMATS, "mp50",
                               "int8", "int4_g32"])
    raise PrecisionError(f"unknown precision {shown(spec)}{near}; valid forms: {VALID_FORMS}")


def lookalike_note(p: Precision) -> str | None:
    """For a custom ``eXmY`` with the field widths of a named format of another range, one
    line that says which format it is and which it is not (``e4m3`` is IEEE-style:
    infinities, largest 240; ``float8_e4m3`` is OCP E4M3FN: saturating, largest 448); None
    otherwise."""
    fmt = binary_format(p.format) if p.format not in FORMATS else None
    if fmt is None or p.is_mp:
        return None
    twins = [f for f in FORMATS.values() if (f.exponent_bits, f.mantissa_bits) ==
             (fmt.exponent_bits, fmt.mantissa_bits) and f.max_finite != fmt.max_finite]
    if not twins:
        return None
    named = " or ".join(f"{f.name} (largest {f.max_finite:g}, overflow {f.overflow})"
                        for f in twins)
    return (f"{p.format} is the custom IEEE-style format (infinities, largest "
            f"{fmt.max_finite:g}), not {named}")


def _rounded_format(text: str, spec: str) -> Precision:
    """``FORMAT[:ROUNDING]``."""
    fmt, _, rounding = text.partition(":")
    p = _format(fmt, spec)
    if not rounding:
        return p
    if rounding not in ROUNDINGS:
        raise PrecisionError(f"unknown rounding {rounding!r} in {shown(spec)} "
                             f"(roundings: {', '.join(ROUNDINGS)})")
    return Precision(p.format, p.digits, rounding=rounding)


def parse_spelling(spec: str) -> Precision:
    """Read the grammar of the module docstring into a :class:`Precision` (no check of what
    this version computes; :func:`parse_precision` adds that)."""
    if not isinstance(spec, str):
        raise PrecisionError(f"precision must be a string, got {type(spec).__name__}")
    head, *options = spec.strip().lower().split("+")
    p = _rounded_format(head, spec)
    fields: dict[str, Any] = {"rounding": p.rounding}
    modules: list[tuple[str, Precision]] = []
    for option in options:
        match = _OPTION_RE.match(option)
        if match is None:
            raise PrecisionError(f"unknown precision option {option!r} in {shown(spec)} (options: "
                                 "+acc=FORMAT, +act=FORMAT, +scale=exact|log2, "
                                 "+casts=keep|promote, +seed=N, +mod[GLOB]=FORMAT)")
        key, value, glob, assigned = match.groups()
        if glob is not None:
            modules.append((glob, _rounded_format(assigned, spec)))
        elif key in fields:
            raise PrecisionError(f"precision option '{key}' given twice in {shown(spec)}")
        elif key in ("acc", "act"):
            fields[key] = _format(value, spec)
        elif key == "casts":
            if value not in CAST_POLICIES:
                raise PrecisionError(f"unknown cast policy {value!r} in {shown(spec)} "
                                     f"(policies: {', '.join(CAST_POLICIES)})")
            fields[key] = value
        elif key == "scale":
            if value not in MX_SCALE_RULES:
                raise PrecisionError(f"unknown MX scale rule {value!r} in {shown(spec)} "
                                     f"(rules: {', '.join(MX_SCALE_RULES)})")
            fields[key] = value
        else:
            try:
                fields[key] = parse_whole(value, "the seed", hi=2**32 - 1)
            except NumberError as exc:
                raise PrecisionError(f"{exc} (in {shown(spec)})") from None
    seed = fields.get("seed")
    module_sr = any(q.rounding == "sr" for _, q in modules)
    if seed is not None and p.rounding != "sr" and not module_sr:
        raise PrecisionError(f"{shown(spec)}: '+seed' is only for stochastic rounding (':sr')")
    if seed is not None:   # one seed for every stochastic rounding of the precision (a
        modules = [(g, replace(q, seed=seed) if q.rounding == "sr" else q)  # module's sr
                   for g, q in modules]                                    # without it: 0)
    return Precision(p.format, p.digits, rounding=p.rounding, seed=seed,
                     accumulate=fields.get("acc"), casts=fields.get("casts", "keep"),
                     modules=tuple(modules), activations=fields.get("act"),
                     mx_scale=fields.get("scale", "exact"))


def seeded_by(p: Precision, seed: int) -> Precision:
    """``p`` computed by a run (or command) of seed ``seed``: an unseeded stochastic rounding
    (``float8_e4m3:sr``, :attr:`Precision.unseeded`) takes that seed
    (``float8_e4m3:sr+seed=3`` in a run of seed 3); ``p`` itself otherwise. The stored name
    stays the one spelled: the run's seed is in its record. (A module's ``:sr`` without a
    top-level ``+seed`` keeps seed 0, as stored before.)"""
    return replace(p, seed=seed % 2**32) if p.unseeded else p


def with_casts(p: Precision, casts: str) -> Precision:
    """``p`` with the cast policy ``casts`` (one of :data:`CAST_POLICIES`)."""
    if casts not in CAST_POLICIES:
        raise PrecisionError(f"unknown cast policy {casts!r} (policies: "
                             f"{', '.join(CAST_POLICIES)})")
    return replace(p, casts=casts)


def _check_arithmetic(p: Precision) -> None:
    """PrecisionError unless the float path computes ``p``'s format, rounding and
    accumulation / activation formats (see docs/formats.md)."""
    if p.is_mp:
        if p.rounding != "rne" or p.accumulate is not None or p.activations is not None:
            raise PrecisionError(f"cannot compute in {p.name!r}: mpN rounds to nearest in "
                                 "its own precision (no :ROUNDING, +acc= or +act=)")
        return
    if p.mx_scale != "exact" and p.kind != "mx":
        raise PrecisionError(f"{p.name!r}: '+scale=' is the shared-exponent rule of an MX "
                             f"format ({', '.join(MX_FORMATS)}) only")
    if p.activations is not None and p.kind not in ("mx", "int"):
        raise PrecisionError(f"{p.name!r}: '+act=' names the activation format of an MX or "
                             "integer-weight format only")
    for side, what in ((p.accumulate, "acc"), (p.activations, "act")):
        if side is not None and (side.kind != "float" or side.is_mp):
            raise PrecisionError(f"{p.name!r}: '+{what}=' must be a binary float format "
                                 f"(float32, bfloat16, float8_e4m3, eXmY, ...), not "
                                 f"{side.name!r}")
    if p.format == "float64" and p.is_simulated:
        raise PrecisionError(f"cannot compute in {p.name!r}: float64 has no wider carrier, so "
                             "only round-to-nearest float64 (no :ROUNDING or +acc=) is computed")


def check_computable(p: Precision) -> Precision:
    """``p`` if this version computes in it; PrecisionError naming the option otherwise.

    A simulated format (docs/formats.md) is computed when :func:`_check_arithmetic` accepts it.
    A per-module assignment (``+mod[GLOB]=FORMAT``) is computed
    (:mod:`precision.formats.module_assignment`) when its base and every assigned format are
    computed and are torch formats, mpN or binary formats that fit a float32 carrier (MX,
    integer weights, ``+acc=``/``+act=`` and float32 or float64 under another rounding are not
    assigned per module yet); the mpN formats it names must all be the same mpN (one working
    precision)."""
    own_seed = p.seed if p.rounding == "sr" else None   # a seed only for the modules' sr
    _check_arithmetic(replace(p, modules=(), seed=own_seed))
    if not p.modules:
        return p
    formats = (replace(p, modules=(), casts="keep", seed=own_seed), *(q for _, q in p.modules))
    names_mp = any(q.is_mp for q in formats)
    for q in formats:
        plain = not q.is_simulated and with_casts(q, "keep").is_plain   # a torch format, mpN
        fits = (not names_mp and q.kind == "float" and q.accumulate is None
                and q.element_format is not None and fits_float32(q.element_format))
        if not (plain or fits):
            raise PrecisionError(f"cannot compute in {p.name!r} yet: per-module assignments "
                                 "(+mod[GLOB]=FORMAT) compute the torch formats, mpN, and "
                                 "(without mpN) binary formats narrower than float32 "
                                 f"(float8_e4m3, tf32, bfloat16:sr, ...), not {q.name!r}")
    for _, assigned in p.modules:
        check_computable(assigned)
    digits = {q.digits for q in formats if q.is_mp}
    if len(digits) > 1:
        raise PrecisionError(f"{p.name!r} names {len(digits)} different mpN formats "
                             f"(mp{', mp'.join(str(d) for d in sorted(digits))}): a per-module "
                             "assignment computes in one mpN")
    return p


#: Parsed precisions by text: a spelling as given and the canonical spelling of its value (so
#: reading back what the store holds is not a second parse).
_PARSED: dict[str, Precision] = {}


def parse_precision(spec: str) -> Precision:
    """The :class:`Precision` a user or a store spells as ``spec`` (``"float32"``, ``"fp64"``,
    ``"bf16"``, ``"mp50"``, ...). Each precision is parsed once per process, whichever of
    its spellings comes first (:data:`PARSE_COUNT` counts the parses).

    Raises:
        PrecisionError: for an unknown spelling, listing the valid forms, or one this version
            does not compute.
    """
    global PARSE_COUNT
    if not isinstance(spec, str):
        raise PrecisionError(f"precision must be a string, got {type(spec).__name__}")
    if spec not in _PARSED:
        PARSE_COUNT += 1
        p = check_computable(parse_spelling(spec))
        _PARSED[spec] = _PARSED.setdefault(p.name, p)
    return _PARSED[spec]


def parse_precisions(specs: list[str] | tuple[str, ...] | str) -> list[Precision]:
    """Parse a list (or a comma-separated string) of precision spellings."""
    if isinstance(specs, str):
        specs = [s for s in specs.split(",") if s.strip()]
    return [parse_precision(s) for s in specs]


#: torch dtypes (by their ``str``: no torch import here) -> the precision each names.
TORCH_DTYPE_NAMES = {"torch.float64": "float64", "torch.float32": "float32",
                     "torch.bfloat16": "bfloat16", "torch.float16": "float16",
                     "torch.float8_e4m3fn": "float8_e4m3", "torch.float8_e5m2": "float8_e5m2"}


def as_precision(value: Precision | str | Any) -> Precision:
    """The Python API's edge: a :class:`Precision` as it is, a spelling parsed, a torch
    float dtype as the precision it names (``torch.bfloat16``, ``torch.float8_e4m3fn`` ->
    ``float8_e4m3``: the format whose rounding torch's casts are, bit for bit). Only the
    public entry points (``evaluate``, ``error_decomposition``, ``run_solver``,
    ``run_construction``, ``probes.api``) call it; everything inside takes a Precision."""
    if isinstance(value, Precision):
        return value
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        name = TORCH_DTYPE_NAMES.get(str(value))
        if name is None:
            raise PrecisionError(f"{value} is not a precision (torch dtypes taken: "
                                 f"{', '.join(TORCH_DTYPE_NAMES)})")
        return parse_precision(name)
    return parse_precision(value)
