"""The interface of a run kind, and the suite data every kind expands.

A run kind is one :class:`RunKind` value: the suite tables it reads, the version of its
configs, and four functions: ``parse`` (suite tables -> typed, validated entries),
``expand`` (entries -> :class:`~probes.run.Run` values), ``compute`` (one run -> its store
records, in whatever process calls it) and ``cost`` (a relative cost, for longest-first
scheduling). Adding a kind is adding a module
that defines one and listing it in ``probes.kinds.KINDS``.

Version policy (one for every kind): a kind's ``version`` is part of every config it expands,
so of every run id; bump it when the meaning of its configs changes and old records are never
reused for new runs. The data the runs are computed on have a version of their own,
:data:`DATA_VERSION` (:mod:`precision.deterministic`: how problems, task data and test sets
are generated), which :func:`probes.run.new_run` writes into every config as
``data_version``: a change of the generators changes every run id, so a store never mixes
rows computed on old data with new ones, and each stored row names its data version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from precision.deterministic import DATA_VERSION as DATA_VERSION  # re-exported: the kinds
from precision.precisions import Precision, PrecisionError, parse_precision
from probes.run import Run, RunOptions, SuiteError
from probes.store.db import RunRecord


@dataclass(frozen=True)
class SuiteData:
    """What a kind expands: a suite's name, its tables (profile and overrides applied), and
    its validated top-level precisions and seeds. ``where`` names the file in messages;
    ``device`` is where trained jobs train (:mod:`precision.devices`)."""

    name: str
    where: str
    data: dict[str, Any]
    precisions: tuple[Precision, ...]
    seeds: tuple[int, ...]
    device: str = "cpu"


@dataclass(frozen=True)
class RunKind:
    """One kind of run (see the module docstring)."""

    #: The ``kind`` values of the runs it expands (a record's ``kind`` column).
    names: tuple[str, ...]
    #: The suite tables it reads; it expands a suite that has any of them.
    tables: tuple[str, ...]
    version: int
    #: The type of the entries ``parse`` returns.
    entry: type
    parse: Callable[[SuiteData], tuple[Any, ...]]
    expand: Callable[[SuiteData, tuple[Any, ...]], list[Run]]
    compute: Callable[[Run, RunOptions], list[RunRecord]]
    cost: Callable[[Run], float]


def entry_precisions(entry: dict[str, Any], suite: SuiteData, at: str
                     ) -> tuple[Precision, ...]:
    """An entry's own ``precisions`` list (replacing the suite's), parsed, or the suite's."""
    if "precisions" not in entry:
        return suite.precisions
    precs = entry["precisions"]
    if not isinstance(precs, list) or not precs or not all(isinstance(p, str) for p in precs):
        raise SuiteError(f"{at}: 'precisions' must be a non-empty list of precision names")
    try:
        return tuple(parse_precision(p) for p in precs)
    except PrecisionError as exc:
        raise SuiteError(f"{at}: {exc}") from None
