"""The conformance matrix, solvers: every registered solver on every problem kind its task
accepts, in float32, float64 and mp30 (:mod:`precision.conformance` generates the cells from
the registries and states the bounds). Each run passes the invariants' rule 1 (no rise after
its floor), reaches its floor, floors within u^2 kappa^2 10^4 of its own rounding level
(relative to the truth's mean square), and a finer precision never floors above a coarser
one (rule 3). Commit 1685864's defect (mp products keeping their operands' radii) breaks
heavy ball and Nesterov here."""

from __future__ import annotations

import pytest

from precision.conformance import cells, run_cell, violations
from precision.constructions.measure import CONSTRUCTIONS
from precision.solvers.measure import SOLVERS

CELLS = cells()
SOLVER_CELLS = [c for c in CELLS if c.family == "solver"]


def test_every_registered_subject_has_a_cell():
    covered = {(c.family, c.name) for c in CELLS}
    assert {("solver", n) for n in SOLVERS} <= covered
    assert {("construction", n) for n in CONSTRUCTIONS} <= covered


@pytest.mark.parametrize("cell", SOLVER_CELLS, ids=[c.id for c in SOLVER_CELLS])
def test_solver_floors_conform(cell):
    results = run_cell(cell)
    assert violations(cell, results) == []
