"""Plain-text tables of solver floors from store rows (what ``precision run`` prints)."""

from __future__ import annotations

from typing import Any

from reports.floor_cells import FLOOR_LEGEND, INVERTED_LEGEND, invalid_lines
from reports.tables import solver_pivots, solver_runs
from reports.text_table import text_table

__all__ = ["solver_tables"]


def solver_tables(rows: list[dict[str, Any]]) -> str:
    """One table per problem label: solvers down, precisions across, one
    :func:`~reports.floor_cells.floor_cell` per cell (median floor MSE over seeds, spread,
    step reached; ``falling`` where no floor was reached): the report's
    :func:`~reports.tables.solver_pivots`, one per problem whichever suite ran it.

    The floor is the detected plateau of the per-step MSE trace (for direct solvers, the MSE
    of the solution). When a suite was re-run with other parameters the newest run of each
    seed wins.
    """
    runs = solver_runs([{**r, "suite": ""} for r in rows])
    blocks = []
    pivots = solver_pivots(runs)
    for pivot in pivots:
        problem = pivot.meta["problem"]
        n_seeds = runs[runs["problem"] == problem].groupby(["solver", "precision"]).size().max()
        seeds = f", median of {n_seeds} seeds" if n_seeds > 1 else ""
        blocks.append(text_table(f"problem {problem}: floor MSE (@ step reached{seeds})",
                                 ["solver", *pivot.frame.columns],
                                 pivot.frame.reset_index().values.tolist()))
    if blocks:
        legend = FLOOR_LEGEND
        if any(p.meta["inverted"] for p in pivots):
            legend += "\n" + INVERTED_LEGEND
        invalid = invalid_lines([r for r in rows if r.get("kind") in ("solver", "construction")])
        if invalid:
            legend += "\n" + invalid
        blocks.append(legend)
    return "\n\n".join(blocks)
