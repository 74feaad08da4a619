"""The invariants every run must pass before it is stored, declared once with their reasons.

A measurement that violates one of these rules is not a measurement of the subject: the
arithmetic or the floor detector went wrong. Such a run is stored with status
:data:`INVALID` (its numbers kept, ``error`` naming the rule), shown as ``invalid`` in every
table, listed in the report's checks and ignored by the claims. The rules:

1. **No rise after the floor** (:func:`trace_rise`, per run). An error trace that reached a
   level and then climbed back more than :data:`RISE_DECADES` above it has no floor: its
   plateau is a breakdown, not the precision's limit. In mpN it is a defect of the arithmetic
   (heavy ball in mp30 fell to 1e-54 and climbed back to 1e-1 when matrix products lost their
   digits to operand radii); in a low precision it can be the method's own breakdown
   (Newton-Schulz in float8_e4m3 at kappa 1e4 falls from 1e4 to 1e1 and climbs to 1e5, not
   2 decades above its start, so not ``diverged``). Either way the number is not a floor.
2. **An mpN result holds its digits** (:func:`digits_shortfall`, per run). Where a run
   checks its mpN reference against mp2N (``truth_digits``, :mod:`precision.reference`), the
   reference must be certain to at least :data:`MIN_DIGITS_FRACTION` of its N digits; and a
   model evaluated in an mpN coarser than its reference must agree with it to as many
   (:func:`result_digits`: its rounding part, against the reference), where both compute
   under one cast policy (under ``casts=keep`` a model's own float32 casts round it).
3. **Finer is not worse** (:func:`inversions`, per set). The same subject, problem and seed
   measured in several precisions: a precision that is finer than another (more significand
   bits and at least its exponent range: it represents every number the other does, and
   rounds each op at least as closely) must not floor more than :data:`FINER_ABOVE_DECADES`
   above it. Runs are stored one at a time, so this rule is checked where the set is read
   (tables and report flag the set with ``!``; the claims skip it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from precision.precisions import Precision, PrecisionError, parse_precision
from precision.reference import MODEL_REFERENCE

#: An mpN precision's name (rule 2 reads N from a stored reference name, unparsed; options
#: follow a ``+``, and ``+casts=promote`` is spelled exactly when the casts are promoted).
_MP_NAME = re.compile(r"^mp([0-9]{1,6})(?:\+|$)")  # ASCII digits only
_PROMOTED = "+casts=promote"

#: The status of a run that violates rule 1 or 2.
INVALID = "invalid"
#: The status of a trained model's evaluation whose output is not finite in its precision (an
#: overflow or a NaN of the evaluation; the model trained fine: "diverged" is training's).
NONFINITE = "nonfinite"

#: Rule 1: decades a trace may stand above its own lowest value once it has reached it. A
#: rounding floor jitters within about one decade (float32 GD's period-2 wobble, a float8
#: query's error), so three decades is a breakdown on every kernel; values below the
#: precision's u^2 (an exact hit) count as u^2, since no level below it is ever "reached".
RISE_DECADES = 3.0

#: Rule 2: the fraction of mpN's N digits its result must keep. A forward pass of the models
#: here (bounded inputs, LayerNorm, softmax) loses a few digits to conditioning; losing half
#: of N is a computation that lost its precision, not one that used it.
MIN_DIGITS_FRACTION = 0.5

#: Rule 3: decades by which a finer precision may floor above a coarser one on the same
#: problem and seed. A coarser precision can floor below the exact arithmetic only where its
#: rounding removes an approximation term no larger than itself (1 + eps absorbed): measured
#: up to 1.4 decades, a LayerNorm READ head whose relative error t^2 / (4 K^2) sits at
#: float64's rounding (float64 2.7e-27 against the exact 7.1e-26, which mp50, mp100 and mp200
#: agree on). A defect of the arithmetic shows tens of decades (heavy ball's mp30 at 1e-1,
#: 31 decades above float64), so three decades separate the two.
FINER_ABOVE_DECADES = 3.0


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` its name (``trace_rise``, ``digits``), ``message`` one line
    with the numbers."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"invariant {self.rule}: {self.message}"


def rounding_log10(p: Precision) -> float:
    """log10 of u^2, the MSE of rounding values of order 1 once in ``p``."""
    return 2 * math.log10(p.unit_roundoff)


def trace_rise(log10_trace: Sequence[float], floor_log10: float, p: Precision) -> float:
    """Decades the floor ``floor_log10`` stands above the lowest value of the trace (values
    below ``p``'s u^2, exact zeros included, count as u^2); 0.0 for an empty trace or a
    floor that is not finite. Shapes: ``log10_trace`` (steps,)."""
    if not math.isfinite(floor_log10):
        return 0.0
    low = rounding_log10(p)
    finite = [max(v, low) for v in log10_trace if not math.isnan(v) and v != math.inf]
    return floor_log10 - min(finite) if finite else 0.0


def check_trace(log10_trace: Sequence[float], floor_log10: float | None, p: Precision
                ) -> Violation | None:
    """Rule 1 on one run's trace and detected floor."""
    if floor_log10 is None or not log10_trace:
        return None
    rise = trace_rise(log10_trace, floor_log10, p)
    if rise <= RISE_DECADES:
        return None
    lowest = floor_log10 - rise      # an exact zero reads as u^2 (no lower level is reached)
    return Violation("trace_rise", f"the trace reached 1e{lowest:.0f} and its floor stands "
                     f"{rise:.1f} decades above it, at 1e{floor_log10:.1f} (at most "
                     f"{RISE_DECADES:g} allowed)")


def digits_shortfall(digits: float, reference: str) -> Violation | None:
    """Rule 2: an mpN result (``reference``, its name: ``mp100``) certain to ``digits``
    digits against mp2N; None for a name that is not mpN (only mpN promises digits)."""
    match = _MP_NAME.match(reference)
    if match is None:
        return None
    n = int(match.group(1))
    need = MIN_DIGITS_FRACTION * n
    if digits >= need:
        return None
    return Violation("digits", f"the {reference} reference is certain to {digits:.1f} digits, "
                     f"fewer than {need:g} of its {n}")


def _precision(name: str) -> Precision | None:
    try:
        return parse_precision(name)
    except PrecisionError:
        return None


def result_digits(result: dict[str, Any]) -> float | None:
    """Digits to which a record's result agrees with its mpN reference: a length record's
    ``digits`` (-log10 of the relative distance), else -log10 of the RMS of a trained
    record's rounding part (``decomposition.rounding``, the log10 MSE of f_p - f_ref; the
    tasks' outputs are of order one, so this reads as relative digits); None when the
    result holds neither."""
    if "relative" in result and "reference" in result:
        value = result.get("digits")
    else:
        dec = result.get("decomposition")
        rounding = dec.get("rounding") if isinstance(dec, dict) else None
        value = None if not _is_number(rounding) else -float(rounding) / 2
    return float(value) if _is_number(value) else None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


def check_record(record: Any) -> Violation | None:
    """Rules 1 and 2 on a store record (:class:`~probes.store.db.RunRecord`) of status ``ok``:
    its ``series["log10_mse"]`` ((step, log10) pairs) against its ``floor_log10``; the
    ``truth_digits`` of its result against the reference precision it names
    (:data:`~precision.reference.MODEL_REFERENCE` unless the result says otherwise); and, for
    a record in an mpN coarser than that reference, its own agreement with it
    (:func:`result_digits`)."""
    if record.status != "ok":
        return None
    p = _precision(record.precision)
    trace = (record.series or {}).get("log10_mse")
    if p is not None and trace and record.floor_log10 is not None:
        pairs = [v if isinstance(v, list | tuple) else (k, v) for k, v in enumerate(trace)]
        values = [float(v) for _, v in pairs if isinstance(v, int | float)]
        found = check_trace(values, float(record.floor_log10), p)
        if found is not None:
            return found
    result = record.result or {}
    reference = str(result.get("reference") or MODEL_REFERENCE.name)
    digits = result.get("truth_digits")
    if _is_number(digits):
        found = digits_shortfall(float(digits), reference)
        if found is not None:
            return found
    ref = _MP_NAME.match(reference)
    own = result_digits(result)
    # A result under casts=keep whose reference promotes them differs by the model's own
    # float32 islands (a Bloom's softmax: ~10 digits), by design: only a result computed under
    # the reference's cast policy promises N digits against it.
    same_casts = (p is not None and p.casts == "promote") == (_PROMOTED in reference)
    if p is not None and p.digits is not None and ref is not None and own is not None \
            and p.digits < int(ref.group(1)) and same_casts:
        found = digits_shortfall(own, p.name)
        if found is not None:
            return Violation(found.rule, f"the {p.name} result agrees with the {reference} "
                             f"reference to {own:.1f} digits, fewer than "
                             f"{MIN_DIGITS_FRACTION * p.digits:g} of its {p.digits}")
    return None


def checked(records: Iterable[Any]) -> list[Any]:
    """``records`` with every one that breaks rule 1 or 2 given status :data:`INVALID` and
    the violation as its ``error`` (its numbers are kept)."""
    out = []
    for record in records:
        found = check_record(record)
        out.append(record if found is None else replace(record, status=INVALID,
                                                        error=str(found)))
    return out


def _range(p: Precision) -> tuple[float, float]:
    """(log2 of the smallest positive normal, log2 of the largest finite) of ``p``; mpN's
    exponent range is unbounded."""
    if p.is_mp:
        return -math.inf, math.inf
    fmt = p.element_format
    assert fmt is not None
    return float(fmt.emin), math.log2(fmt.max_finite)


def _comparable(p: Precision) -> bool:
    """A precision whose rounding is one format's, op by op: a float format or mpN with no
    accumulation, activation or per-module options (MX and integer weights have scales of
    their own, so no order of fineness applies to them)."""
    return (p.kind in ("float", "mp") and p.accumulate is None and p.activations is None
            and not p.modules)


def finer(a: Precision, b: Precision) -> bool:
    """``a`` is finer than ``b``: more significand bits and at least ``b``'s exponent range
    (so ``a`` represents every number ``b`` does and rounds each op at least as closely);
    both :func:`_comparable`, with the same rounding mode."""
    if not (_comparable(a) and _comparable(b)) or a.rounding != b.rounding:
        return False
    (a_lo, a_hi), (b_lo, b_hi) = _range(a), _range(b)
    return a.bits > b.bits and a_lo <= b_lo and a_hi >= b_hi


@dataclass(frozen=True)
class Inversion:
    """Rule 3 broken: on one set (same subject, problem, seed), the run ``finer_id`` in
    ``finer`` floors at 1e``finer_log10``, more than :data:`FINER_ABOVE_DECADES` above the
    run ``coarser_id`` in ``coarser`` at 1e``coarser_log10``."""

    finer: str
    coarser: str
    finer_id: str
    coarser_id: str
    finer_log10: float
    coarser_log10: float

    def __str__(self) -> str:
        return (f"{self.finer} floors at 1e{self.finer_log10:.1f}, "
                f"{self.finer_log10 - self.coarser_log10:.1f} decades above the coarser "
                f"{self.coarser} (1e{self.coarser_log10:.1f})")


def inversions(members: Sequence[tuple[str, str, float]]) -> list[Inversion]:
    """Rule 3 on one set: ``members`` are (run id, precision name, log10 floor) of the same
    subject, problem and seed (status ``ok``). Every pair where the finer precision floors
    more than :data:`FINER_ABOVE_DECADES` above the coarser."""
    parsed = [(rid, _precision(name), name, v) for rid, name, v in members
              if math.isfinite(v) or v == -math.inf]
    out = []
    for fid, fp, fname, fv in parsed:
        for cid, cp, cname, cv in parsed:
            if fp is None or cp is None or not finer(fp, cp):
                continue
            if fv > cv + FINER_ABOVE_DECADES:
                out.append(Inversion(fname, cname, fid, cid, fv, cv))
    return out


def _set_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a set shares: kind, subject, task and the config without its precision (the
    problem and its seed, the parameters, a trained job's weights)."""
    config = {k: v for k, v in (row.get("config") or {}).items() if k != "precision"}
    return (row.get("kind"), row.get("subject"), row.get("task"),
            json.dumps(config, sort_keys=True, default=str))


def _floor_of(row: dict[str, Any]) -> float | None:
    for key in ("floor_log10", "log10_mse"):
        v = row.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v):
            return float(v)
    return None


def inverted_runs(rows: Iterable[dict[str, Any]]) -> dict[str, Inversion]:
    """Rule 3 over store rows (dicts with ``run_id``, ``kind``, ``subject``, ``task``,
    ``precision``, ``status``, ``config`` and ``floor_log10`` or ``log10_mse``): every run of a
    set with an inversion, mapped to the (first) inversion it takes part in. Only ``ok`` runs
    count; of several records of one precision in a set, the last in ``rows`` is compared."""
    sets: dict[tuple[Any, ...], dict[str, tuple[str, str, float]]] = {}
    for row in rows:
        level = _floor_of(row)
        if row.get("status") != "ok" or level is None:
            continue
        sets.setdefault(_set_key(row), {})[str(row.get("precision"))] = (
            str(row.get("run_id")), str(row.get("precision")), level)
    out: dict[str, Inversion] = {}
    for members in sets.values():
        if len(members) < 2:
            continue
        found = inversions(list(members.values()))
        for inv in found:
            for rid, _, _ in members.values():
                out.setdefault(rid, inv)
    return out
