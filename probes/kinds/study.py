"""Study runs: ``[studies.*]`` tables of a suite, each run one call of a registered study.

::

    precisions = ["float64"]
    seeds = [0]

    [studies.baselines]                     # an entry label (the record's subject)
    study = "noisy_regression.baselines"    # a registered study (probes/studies/)
    sigma_max = [0, 1, 2, 3]                # a list is a grid axis, a scalar a fixed value
    sigmas = [[1, 3], [1, 3, 5]]            # a list-valued parameter: a list of lists
    precisions = ["float64", "mp50"]        # optional: replaces the suite's list

Every (entry, grid point, seed) is one run of kind ``study``: one call of the study for all
its precisions (a study that trains a model trains it once), one store record per precision.
A record's task label names the grid point (``sigma_max=3``); its config holds the resolved
parameters and its precision, and the record's id is that config's hash, so a change of a
default is a new record, never a stale reuse. The run's own id (its config with the list of
precisions) only names the run.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

from precision.precisions import Precision
from probes.kinds.base import DATA_VERSION, RunKind, SuiteData, entry_precisions
from probes.names import MAX_LABEL_CHARS, axis_length, check_name, list_length
from probes.run import Run, RunOptions, SuiteError, finite_or_none, make_record, new_run
from probes.store.canonical import config_hash
from probes.store.db import RunRecord
from probes.studies import StudyError, StudyOutcome, StudySpec, get_study

#: 2: the suite name is part of every run's config (and so of its id).
VERSION = 2

_RESERVED = {"study", "precisions"}


def _label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "{" + ",".join(_label(v) for v in value) + "}"
    return str(value)


def grid_size(suite: SuiteData) -> int:
    """Store rows (runs x precisions) of the ``[studies.*]`` tables, counted without
    expanding them (a grid axis above :data:`~probes.names.MAX_AXIS_VALUES` values is a
    SuiteError)."""
    entries = suite.data.get("studies")
    total = 0
    for name, entry in entries.items() if isinstance(entries, dict) else ():
        if isinstance(entry, dict):
            points = math.prod(axis_length(v, k, f"{suite.where} [studies.{name}]")
                               for k, v in entry.items() if k not in _RESERVED)
            total += (points * len(suite.seeds)
                      * list_length(entry.get("precisions"), len(suite.precisions)))
    return total


@dataclass(frozen=True)
class StudyEntry:
    """A ``[studies.<label>]`` table, validated: its registered study, its grid points
    (label, resolved parameters) and its precisions."""

    label: str
    study: StudySpec
    points: tuple[tuple[str, dict[str, Any]], ...]
    precisions: tuple[Precision, ...]


def _entry(suite: SuiteData, entry_name: str, entry: Any) -> StudyEntry:
    at = f"{suite.where} [studies.{entry_name}]"
    if not isinstance(entry, dict) or "study" not in entry:
        raise SuiteError(f"{at}: needs study = \"<registered study>\"")
    try:
        spec = get_study(str(entry["study"]))
    except StudyError as exc:
        raise SuiteError(f"{at}: {exc}") from None
    precisions = entry_precisions(entry, suite, at)
    given = {k: v for k, v in entry.items() if k not in _RESERVED}
    keys = sorted(given)
    axes = [given[k] if isinstance(given[k], list) else [given[k]] for k in keys]
    for k, axis in zip(keys, axes, strict=True):
        if not axis:
            raise SuiteError(f"{at}: grid axis '{k}' is empty")
    # axes name the grid point, also a one-value axis of scalars (a profile's ``noise =
    # [5]``), so a label does not depend on how many values a profile kept; a list-valued
    # parameter given once (``[[1, 3]]``) is a fixed value
    varying = [k for k, a in zip(keys, axes, strict=True) if isinstance(given[k], list)
               and (len(a) > 1 or not isinstance(a[0], list))]
    points = []
    for point in itertools.product(*axes):
        chosen = dict(zip(keys, point, strict=True))
        try:
            params = spec.resolve(chosen)
        except StudyError as exc:
            raise SuiteError(f"{at}: {exc}") from None
        label = ",".join(f"{k}={_label(chosen[k])}" for k in varying) or entry_name
        check_name(label, "grid-point label (from the values of its axes)", at,
                   max_chars=MAX_LABEL_CHARS)
        points.append((label, params))
    return StudyEntry(entry_name, spec, tuple(points), precisions)


def parse(suite: SuiteData) -> tuple[StudyEntry, ...]:
    """The ``[studies.*]`` tables as typed entries (validated; SuiteError otherwise)."""
    entries = suite.data.get("studies", {})
    if not isinstance(entries, dict):
        raise SuiteError(f"{suite.where}: 'studies' must be a table")
    return tuple(_entry(suite, name, entry) for name, entry in entries.items())


@dataclass(frozen=True)
class StudyWork:
    """What a study run computes: the registered study named ``study`` (looked up where the
    run computes) at ``params`` from ``seed``; ``config`` is the stored form a record adds
    its precision to."""

    study: str
    params: dict[str, Any]
    seed: int
    config: dict[str, Any]


def expand(suite: SuiteData, entries: tuple[StudyEntry, ...]) -> list[Run]:
    """Every (entry, grid point, seed) of ``entries`` as one run of all the entry's
    precisions, writing one record per precision."""
    runs: list[Run] = []
    for e in entries:
        for label, params in e.points:
            for seed in suite.seeds:
                # a record's config (and id) is this one with its precision
                config = {"version": VERSION, "kind": "study", "suite": suite.name,
                          "study": e.study.name, "study_version": e.study.version,
                          "entry": e.label, "params": params, "seed": seed,
                          "data_version": DATA_VERSION}
                runs.append(new_run(
                    "study", e.label, label, list(e.precisions),
                    {**config, "precisions": [p.name for p in e.precisions]},
                    record_ids=tuple(config_hash({**config, "precision": p.name})
                                     for p in e.precisions),
                    spec=StudyWork(e.study.name, params, seed, config)))
    return runs


def compute(run: Run, options: RunOptions) -> list[RunRecord]:
    """Run one study for all the run's precisions; one record per precision with its
    outcome: its metrics, its primary metric as the MSE.

    An exception inside the study is the ``failed`` status of every precision (of one
    precision, when the study raised measuring only that one), with the message, not a
    crash of the sweep; non-finite metrics are stored as null. Every record's wall time is
    the run's.
    """
    work: StudyWork = run.spec
    spec, cfg = get_study(work.study), work.config
    start = time.perf_counter()
    try:
        outcomes = spec.fn(dict(work.params), run.precisions, work.seed)
        if len(outcomes) != len(run.precisions):
            raise StudyError(f"study '{spec.name}' returned {len(outcomes)} outcomes for "
                             f"{len(run.precisions)} precisions")
    except Exception as exc:  # noqa: BLE001 -- any failure is this run's status, not the sweep's
        outcomes = [StudyOutcome.failed(exc)] * len(run.precisions)
    wall = time.perf_counter() - start
    return [_record(run, cfg, p, rid, out, wall)
            for p, rid, out in zip(run.precisions, run.ids, outcomes, strict=True)]


def _record(run: Run, cfg: dict[str, Any], precision: Precision, record_id: str,
            out: StudyOutcome, wall: float) -> RunRecord:
    """The store record of one precision's outcome."""
    mse = out.primary_value
    series: dict[str, list[Any]] = {}
    for name, values in out.series.items():
        pts = [v if isinstance(v, tuple | list) else (i, v) for i, v in enumerate(values)]
        series[name] = [(int(s), finite_or_none(v)) for s, v in pts]
    result = {"problem_label": run.label, "primary": out.primary,
              "metrics": {k: finite_or_none(v) for k, v in out.metrics.items()},
              "columns": list(out.metrics), **out.info}  # the study's metric order
    log10_mse = math.log10(mse) if mse and mse > 0 else (-math.inf if mse == 0 else None)
    return make_record(run, record_id=record_id, precision=precision, status=out.status,
                       error=out.error, mse=mse, log10_mse=log10_mse,
                       steps=max((len(v) for v in series.values()), default=0),
                       wall_time=wall, config={**cfg, "precision": precision.name},
                       result=result, series=series)


def cost(run: Run) -> float:
    """A study's cost is not known in advance: every measurement (precision) weighs the
    same."""
    return 1e5 * len(run.precisions)


KIND = RunKind(names=("study",), tables=("studies",), version=VERSION,
               entry=StudyEntry, parse=parse, expand=expand, compute=compute, cost=cost)
