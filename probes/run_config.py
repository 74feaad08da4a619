"""What a suite expands into (:class:`RunConfig`) and its one exception (:class:`SuiteError`).

Its own module so every part of suite handling (solver/construction subjects in
``probes.suite``, trained models in ``probes.model_suite``) can build and raise them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SuiteError(ValueError):
    """A suite that cannot be found, parsed or run (one line, for the CLI)."""


@dataclass(frozen=True)
class RunConfig:
    """One run of a suite: everything needed to compute it, and its id."""

    run_id: str
    suite: str
    solver: str
    problem_label: str
    precision: str
    config: dict[str, Any]
    #: Store ids this run writes: its own id, or one per evaluation precision (trained jobs).
    record_ids: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        return self.record_ids or (self.run_id,)
