"""The report's table of broken invariants (:mod:`precision.invariants`).

Two kinds of line: a run stored as ``invalid`` (rule 1 or 2, checked before the store write:
its ``error`` names the rule) and a run in a set where a finer precision floors above a
coarser one (rule 3, checked here, on the rows read). Claims skip both.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from precision.invariants import (
    FINER_ABOVE_DECADES,
    INVALID,
    MIN_DIGITS_FRACTION,
    RISE_DECADES,
    inverted_runs,
)
from probes.store.records import config_of
from reports.tables import Pivot
from reports.text_table import precision_order

#: The section's paragraph: the rules with their thresholds.
CHECKS_TEXT = (
    "Every run is checked before it is stored (its trace must not rise more than "
    f"{RISE_DECADES:g} decades above its own lowest value; an mpN result, and the mpN "
    f"reference errors are measured against, must be certain to {MIN_DIGITS_FRACTION:.0%} of "
    "their N digits), and every set of one subject, problem and seed in several precisions "
    "when it is read (a finer precision must not floor more than "
    f"{FINER_ABOVE_DECADES:g} decades above a coarser one). These runs do not measure their "
    "subject.")


def checks_pivot(rows: list[dict[str, Any]]) -> Pivot | None:
    """One line per run that breaks an invariant (subject, task, precision, seed, rule and
    what was measured), sorted; None when every run passes."""
    inverted = inverted_runs(rows)
    lines = []
    for r in rows:
        if r.get("status") == INVALID:
            rule, _, what = str(r.get("error") or "").removeprefix("invariant ").partition(": ")
        elif r.get("run_id") in inverted:
            rule, what = "finer_above", str(inverted[r["run_id"]])
        else:
            continue
        lines.append((str(r.get("subject")), str(r.get("task")), str(r.get("precision")),
                      str(getattr(config_of(r), "seed", None)), rule, what))
    if not lines:
        return None
    lines.sort(key=lambda t: (t[0], t[1], precision_order(t[2]), t[3]))
    frame = pd.DataFrame([list(t[1:]) for t in lines],
                         index=pd.Index([t[0] for t in lines], name="subject"),
                         columns=["task", "precision", "seed", "rule", "measured"])
    return Pivot("invariants", "Runs that break an invariant (stored as 'invalid', or in a set "
                 "where a finer precision floors above a coarser one: '!' in the tables); "
                 "claims skip them", frame)
