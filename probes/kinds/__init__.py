"""Run kinds: what a suite's tables expand into and how one run is computed.

=============  ======================================  ====================================
kind           suite tables                            one run
=============  ======================================  ====================================
trained        ``[tasks.*]`` + ``[models.*]``          train a job, measure every precision
study          ``[studies.*]``                         one call of a registered study
solver /       ``[problems.*]`` + ``[solvers.*]`` /    a solver (or constructed model) in
construction   ``[constructions.*]``                   one precision, its trace and floor
=============  ======================================  ====================================

Each is a :class:`~probes.kinds.base.RunKind` (``expand``, ``compute``, ``cost``, ``version``)
defined in its own module; adding a kind is adding a module and a line to :data:`KINDS`.
"""

from __future__ import annotations

from probes.kinds import study, subject, trained
from probes.kinds.base import RunKind, SuiteData
from probes.run import Run

#: Every run kind, in the order a suite's runs are listed.
KINDS: tuple[RunKind, ...] = (trained.KIND, study.KIND, subject.KIND)

_BY_NAME = {name: kind for kind in KINDS for name in kind.names}


def kind_of(run: Run) -> RunKind:
    """The kind that expanded ``run`` (and computes it)."""
    return _BY_NAME[run.kind]


def grid_size(suite: SuiteData) -> int:
    """Store rows the suite expands into, counted arithmetically from its tables (nothing is
    expanded, built or validated; a grid axis above the limit is a SuiteError)."""
    return sum(module.grid_size(suite) for module in (trained, study, subject)
               if any(t in suite.data for t in module.KIND.tables))


def expand_all(suite: SuiteData) -> list[Run]:
    """Every run of every kind whose tables the suite has; a suite with none of them is
    expanded as a solver suite, whose error names the tables it needs."""
    runs = [run for kind in KINDS if any(t in suite.data for t in kind.tables)
            for run in kind.expand(suite)]
    return runs or subject.KIND.expand(suite)


__all__ = ["KINDS", "RunKind", "SuiteData", "expand_all", "grid_size", "kind_of"]
