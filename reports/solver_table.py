"""Plain-text tables of solver floors from store rows (what ``precision run`` prints)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from precision.precisions import parse_precision
from reports.floor_cells import FLOOR_LEGEND, floor_cell, floor_reached, format_mse, run_seed

__all__ = ["format_mse", "solver_tables"]


def _precision_key(name: str) -> tuple[int, int]:
    p = parse_precision(name)
    return (1 if p.is_mp else 0, p.bits)


def solver_tables(rows: list[dict[str, Any]]) -> str:
    """One table per problem label: solvers down, precisions across, one
    :func:`~reports.floor_cells.floor_cell` per cell (median floor MSE over seeds, spread,
    step reached; ``falling`` where no floor was reached).

    The floor is the detected plateau of the per-step MSE trace (for direct solvers, the MSE
    of the solution). When a suite was re-run with other parameters the newest run of each
    seed wins.
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
        newest: dict[tuple[str, str, int | None], dict[str, Any]] = {}
        for r in sorted(group, key=lambda r: (r["created_at"], r["run_id"])):
            newest[(r["subject"], r["precision"], run_seed(r))] = {**r, "reached":
                                                                   floor_reached(r)}
        per_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for (subject, prec, _seed), r in sorted(newest.items(), key=lambda kv: str(kv[0])):
            per_cell[(subject, prec)].append(r)
        n_seeds = max(len(v) for v in per_cell.values())
        head = ["solver", *precs]
        body = [[s, *[floor_cell(per_cell.get((s, p), [])) for p in precs]] for s in solvers]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
        seeds = f", median of {n_seeds} seeds" if n_seeds > 1 else ""
        lines = [f"problem {label}: floor MSE (@ step reached{seeds})"]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        for b in body:
            lines.append("  ".join(str(x).ljust(w) for x, w in zip(b, widths, strict=True)))
        blocks.append("\n".join(lines))
    if blocks:
        blocks.append(FLOOR_LEGEND)
    return "\n\n".join(blocks)
