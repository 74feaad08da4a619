"""Run kinds: what a suite's tables expand into and how one run is computed.

=============  ======================================  ====================================
kind           suite tables                            one run
=============  ======================================  ====================================
trained        ``[tasks.*]`` + ``[models.*]``          train a job, measure every precision
length         ``lengths`` of a ``[models.*]`` table   train a job, evaluate its weights at
                                                       each length in every precision
study          ``[studies.*]``                         one call of a registered study
solver /       ``[problems.*]`` + ``[solvers.*]`` /    a solver (or constructed model) in
construction   ``[constructions.*]``                   one precision, its trace and floor
=============  ======================================  ====================================

Each is a :class:`~probes.kinds.base.RunKind` (``parse``, ``expand``, ``compute``, ``cost``,
``version``)
defined in its own module; adding a kind is adding a module and a line to :data:`KINDS`.
"""

from __future__ import annotations

from typing import Any

from probes.kinds import length, study, subject, trained
from probes.kinds.base import RunKind, SuiteData
from probes.run import Run

#: Every run kind, in the order a suite's runs are listed.
KINDS: tuple[RunKind, ...] = (trained.KIND, length.KIND, study.KIND, subject.KIND)

_BY_NAME = {name: kind for kind in KINDS for name in kind.names}


def kind_of(run: Run) -> RunKind:
    """The kind that expanded ``run`` (and computes it)."""
    return _BY_NAME[run.kind]


def grid_size(suite: SuiteData) -> int:
    """Store rows the suite expands into, counted arithmetically from its tables (nothing is
    expanded, built or validated; a grid axis above the limit is a SuiteError)."""
    return sum(module.grid_size(suite) for module in (trained, study, subject)
               if any(t in suite.data for t in module.KIND.tables))


def parse_all(suite: SuiteData) -> tuple[Any, ...]:
    """The typed entries of every kind whose tables the suite has, in :data:`KINDS` order; a
    suite with none of them is parsed as a solver suite, whose error names the tables it
    needs."""
    kinds = [kind for kind in KINDS if any(t in suite.data for t in kind.tables)]
    return tuple(e for kind in kinds or [subject.KIND] for e in kind.parse(suite))


def expand_all(suite: SuiteData, entries: tuple[Any, ...]) -> list[Run]:
    """Every run of ``entries`` (each kind expands the entries of its type)."""
    return [run for kind in KINDS
            for run in kind.expand(suite, tuple(e for e in entries
                                                if isinstance(e, kind.entry)))]


__all__ = ["KINDS", "RunKind", "SuiteData", "expand_all", "grid_size", "kind_of", "parse_all"]
