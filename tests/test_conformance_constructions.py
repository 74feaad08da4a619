"""The conformance matrix, constructions: every registered construction on every problem
kind its task accepts (a primitive construction reads one op: it declines the others, a
skip), in float32, float64 and mp30 (:mod:`precision.conformance`). Each run passes the
invariants' rule 1, a finer precision never floors above a coarser one (rule 3), and of each
(finer, coarser) pair the finer either agrees with the coarser at its approximation floor
(within a decade) or floors below the coarser's rounding level."""

from __future__ import annotations

import pytest

from precision.conformance import cells, run_cell, violations
from precision.solvers.measure import SolverError

CONSTRUCTION_CELLS = [c for c in cells() if c.family == "construction"]


@pytest.mark.parametrize("cell", CONSTRUCTION_CELLS, ids=[c.id for c in CONSTRUCTION_CELLS])
def test_construction_floors_conform(cell):
    try:
        results = run_cell(cell)
    except SolverError as exc:
        pytest.skip(f"{cell.name} declines problem kind '{cell.kind}': {exc}")
    assert violations(cell, results) == []
