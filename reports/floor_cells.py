"""One table cell for a solver's floor over seeds: median, spread, step, and what it means.

A float32 floor is one sample of a rounding process whose summation order depends on the
CPU's kernels (AVX-512, AVX2, MKL's compatible path), so a single number is luck as much as
measurement. A cell therefore shows the **median over the seeds** of the run's floor (taken
on log10 values; for an even number of seeds the mean of the two middle log10 floors, i.e.
the geometric mean of the two middle MSEs: :func:`median`), the
**spread** as half the range of the seeds' log10 floors (``±0.4`` = the seeds lie within
0.4 decades of the middle of their range), and the median step at which the floor was
reached. A trace still falling when its iterations ran out has no floor yet: its cell says
``falling`` (for k of n seeds: ``falling k/n``) instead of passing the last value off as one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from precision.invariants import FINER_ABOVE_DECADES, INVALID, RISE_DECADES
from probes.store.records import config_of, result_of, stored_float

#: Printed under a table of floor cells.
FLOOR_LEGEND = (
    "cells: median floor MSE over seeds (of an even number: the geometric mean of the two "
    "middle ones),\n±half the seeds' range in decades, @ median step reached;\n"
    "'falling' = still converging when the iterations ran out (no floor reached)"
)

#: Appended to a cell whose runs take part in a set where a finer precision floors above a
#: coarser one (:func:`precision.invariants.inverted_runs`), and the legend that says so.
INVERTED_MARK = " !"
INVERTED_LEGEND = ("'!' = on the same problem and seed, a finer precision floors more than "
                   f"{FINER_ABOVE_DECADES:g} decades above a coarser one: an invariant is "
                   "broken (the report's checks list the set; claims skip it)")

#: The legend of a table with a run stored ``invalid`` (:mod:`precision.invariants`).
INVALID_LEGEND = (f"'{INVALID}' = the run broke an invariant, e.g. its trace rose more than "
                  f"{RISE_DECADES:g} decades after reaching lower:\nits floor is no floor (a "
                  "defect in mpN; in a low precision, the method's own breakdown). Why:")

#: At most this many invalid runs are listed under a table (the rest are counted).
MAX_INVALID_LINES = 10


def invalid_lines(rows: Sequence[dict[str, Any]]) -> str:
    """The legend of the ``invalid`` runs among ``rows`` and one line each (subject, task,
    precision, seed: the broken rule), at most :data:`MAX_INVALID_LINES`; '' when none."""
    bad = sorted((r for r in rows if r.get("status") == INVALID),
                 key=lambda r: (str(r.get("subject")), str(r.get("task")),
                                str(r.get("precision")), str(r.get("run_id"))))
    if not bad:
        return ""
    lines = [INVALID_LEGEND]
    for r in bad[:MAX_INVALID_LINES]:
        seed = getattr(config_of(r), "seed", None)
        where = f"{r.get('subject')} {r.get('task')} {r.get('precision')}" + \
            (f" seed {seed}" if seed is not None else "")
        lines.append(f"  {where}: {str(r.get('error') or '').removeprefix('invariant ')}")
    if len(bad) > MAX_INVALID_LINES:
        lines.append(f"  and {len(bad) - MAX_INVALID_LINES} more "
                     "('precision results --status invalid --format csv' has them all)")
    return "\n".join(lines)


def format_mse(value: float | None) -> str:
    """Compact scientific notation for an MSE (``0`` when exact, ``-`` when missing)."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:.1e}"


def format_log10(log10: float | None) -> str:
    """An MSE given by its log10, which may lie outside float64's range (``-2001.7`` is
    ``2.0e-2002``, ``309`` is ``1.0e+309``, in the style of :func:`format_mse`); ``-`` when
    missing."""
    if log10 is None or math.isnan(log10):
        return "-"
    if log10 == -math.inf:
        return "0"
    if log10 == math.inf:
        return "inf"
    if abs(log10) > 300:  # outside float64's normal range: mantissa and exponent from the log10
        exponent = math.floor(log10)
        mantissa = round(10.0 ** (log10 - exponent), 1)
        if mantissa >= 10.0:
            mantissa, exponent = 1.0, exponent + 1
        return f"{mantissa:.1f}e{exponent:+03d}"
    return format_mse(10.0**log10)


def floor_reached(row: dict[str, Any]) -> bool:
    """Whether the run's trace reached its floor (runs of one step, direct solvers, count as
    reached: their result is final)."""
    return (row.get("steps") or 0) <= 1 or result_of(row).floor_reached


def floor_cell(runs: Sequence[dict[str, Any]]) -> str:
    """The cell of one (problem, solver, precision) over its seeds (see the module docstring).

    Each run needs ``status``, ``floor_log10``, ``log10_mse``, ``floor_index``, ``steps`` and
    ``reached`` (:func:`floor_reached`).
    """
    n = len(runs)
    if n == 0:
        return ""
    ok = [r for r in runs if r["status"] == "ok"]
    bad: dict[str, int] = {}
    for r in runs:
        if r["status"] != "ok":
            bad[r["status"]] = bad.get(r["status"], 0) + 1
    if not ok:
        return ", ".join(f"{s} {k}/{n}" if n > 1 else s for s, k in sorted(bad.items()))
    logs = []
    for r in ok:
        v = stored_float(r.get("floor_log10"))
        logs.append(v if v is not None else stored_float(r.get("log10_mse")))
    logs = [v for v in logs if v is not None]
    if not logs:
        return "-"
    text = format_log10(median(logs))
    finite = [v for v in logs if math.isfinite(v)]
    if len(logs) > 1 and len(finite) > 1:
        text += f" ±{(max(finite) - min(finite)) / 2:.1f}"
    falling = sum(not r["reached"] for r in ok)
    iterative = any((r.get("steps") or 0) > 1 for r in ok)
    steps = [int(i) for r in ok if r["reached"] and (i := stored_float(r.get("floor_index")))
             is not None]
    if iterative and steps:
        text += f" @{math.floor(median(steps) + 0.5)}"
    if falling:
        text += " falling" if falling == len(ok) == n else f" falling {falling}/{n}"
    for status, k in sorted(bad.items()):
        text += f" {status} {k}/{n}"
    return text


def median(values: Sequence[float]) -> float:
    """The median: the middle value of an odd count, the mean of the two middle values of an
    even count. Every median of the report uses this rule, on log10 values where the values
    are MSEs (so the median of two seeds' floors 1e-14 and 1e-12 is 1e-13, their geometric
    mean, not the lower one)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return ordered[mid]
    lo, hi = ordered[mid - 1], ordered[mid]
    return lo if lo == hi else (lo + hi) / 2   # lo == hi also keeps -inf (exact) exact
