"""The tables a terminal shows: after a sweep (``precision run`` / ``probe``) and from
``precision results``, the solver, model, study and length tables of a store's rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reports.length_plot import length_tables
from reports.model_table import model_tables
from reports.solver_table import solver_tables
from reports.study_table import study_tables


def floor_tables(rows: Sequence[dict[str, Any]]) -> str:
    """The solver, model, study and length tables of ``rows`` (those with rows), one blank
    line apart."""
    tables = (solver_tables(rows), model_tables(rows), study_tables(rows), length_tables(rows))
    return "\n\n".join(t for t in tables if t)
