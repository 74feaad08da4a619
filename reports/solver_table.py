"""Plain-text tables of solver floors from store rows (what ``precision run`` prints)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from precision.precisions import parse_precision


def _precision_key(name: str) -> tuple[int, int]:
    p = parse_precision(name)
    return (1 if p.is_mp else 0, p.bits)


def format_mse(value: float | None) -> str:
    """Compact scientific notation for an MSE (``0`` when exact, ``-`` when missing)."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:.1e}"


def _cell(row: dict[str, Any]) -> str:
    if row["status"] == "failed":
        return "failed"
    if row["status"] == "diverged":
        return "diverged"
    log10 = row.get("floor_log10")
    if log10 is None:
        log10 = row.get("log10_mse")
    if log10 is None:
        return "-"
    if log10 == -math.inf:
        text = "0"
    elif log10 < -300:
        text = f"1e{log10:.0f}"
    else:
        text = format_mse(10.0**log10)
    steps = row.get("steps") or 0
    if steps > 1 and row.get("floor_index") is not None:
        text += f" @{row['floor_index']}"
    return text


def solver_tables(rows: list[dict[str, Any]]) -> str:
    """One table per problem label: solvers down, precisions across, cells = floor MSE @ step.

    The floor is the detected plateau of the per-step MSE trace (for direct solvers, the MSE
    of the solution); ``@k`` is the step at which it is reached.
    """
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("kind") in ("solver", "construction"):
            by_problem[r["task"]].append(r)
    blocks = []
    for label in sorted(by_problem):
        group = by_problem[label]
        precs = sorted({r["precision"] for r in group}, key=_precision_key)
        solvers = sorted({r["subject"] for r in group})
        # Newest run wins when a suite was re-run with other parameters.
        cells = {(r["subject"], r["precision"]): _cell(r)
                 for r in sorted(group, key=lambda r: (r["created_at"], r["run_id"]))}
        head = ["solver", *precs]
        body = [[s, *[cells.get((s, p), "") for p in precs]] for s in solvers]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
        lines = [f"problem {label}: floor MSE (@ step reached)"]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        for b in body:
            lines.append("  ".join(str(x).ljust(w) for x, w in zip(b, widths, strict=True)))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
