"""One run of a suite (:class:`Run`), its one exception (:class:`SuiteError`), and the one
builder of its store records (:func:`make_record`).

Every run kind (``probes.kinds``) expands suite tables into :class:`Run` values and computes a
run into records with :func:`make_record`, so the store's columns mean the same for every
kind: ``mse`` / ``log10_mse`` the run's final error, ``floor_*`` its detected floor,
``steps`` the length of its trace.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from precision.deterministic import DATA_VERSION
from precision.metrics import Floor
from precision.precisions import Precision
from probes.store.canonical import config_hash
from probes.store.db import RunRecord
from probes.store.records import stored_float
from probes.suite_error import SuiteError as SuiteError  # (the suite code's, re-exported)

#: Traces longer than this are stored subsampled (first points dense, then every k-th + last).
MAX_SERIES_POINTS = 2000


@dataclass(frozen=True)
class Run:
    """One run of a suite: its typed work and its id.

    ``spec`` is the kind's typed description of the work (a trained run's
    :class:`~probes.training.job.Job`), made once when the suite is expanded; ``config`` is
    its stored form (plain JSON data, derived once by :func:`new_run`), whose hash is
    ``run_id``. ``precisions`` are parsed once, when the suite is expanded: one for a solver or
    construction run; every precision of a trained job or a study grid point, which writes one
    record per precision (``record_ids``, in the same order). How a run is computed (device,
    time limit, weights and checkpoint folders) is not part of it: :class:`RunOptions`.
    """

    run_id: str
    suite: str
    kind: str
    subject: str
    label: str
    precisions: tuple[Precision, ...]
    config: dict[str, Any] = field(hash=False)
    record_ids: tuple[str, ...] = ()
    spec: Any = field(default=None, compare=False, hash=False)

    @property
    def ids(self) -> tuple[str, ...]:
        """The store ids this run writes."""
        return self.record_ids or (self.run_id,)

    @property
    def precision(self) -> Precision:
        """The precision of a one-precision run (solver, construction)."""
        return self.precisions[0]


@dataclass(frozen=True)
class RunOptions:
    """How a sweep computes its runs, never part of a run or its id: ``executor`` ``local``
    (this process, or a pool of ``jobs`` processes) or ``dask`` (a LocalCluster of ``jobs``
    workers, or the scheduler at ``address``; :mod:`probes.executors`); ``device`` where trained
    jobs train and evaluate their float precisions (:mod:`precision.devices`); ``time_limit``
    seconds a run may take before it is stored as ``timeout`` (``--time-limit``: replaces
    every run's; ``time_limits``: the suite's per run id, where ``time_limit`` is None);
    ``weights_dir`` the folder of trained jobs' weights, read before training and written
    after (``<job id>.safetensors``: a job is trained once, then measured from its weights);
    ``checkpoint_dir`` where trained jobs keep their training state (``--checkpoints``,
    :mod:`probes.training.checkpoint`) and ``pause_at`` the wall-clock time at which their
    training pauses (``--slice``)."""

    executor: str = "local"
    jobs: int = 1
    address: str | None = None
    device: str = "cpu"
    time_limit: float | None = None
    time_limits: dict[str, float] = field(default_factory=dict, hash=False)
    weights_dir: str | None = None
    checkpoint_dir: str | None = None
    pause_at: float | None = None

    def limit_for(self, run: Run) -> float | None:
        """The time limit of ``run``: ``--time-limit``, else its suite's, else None."""
        return self.time_limit if self.time_limit is not None else \
            self.time_limits.get(run.run_id)


def weights_folder(db: str | os.PathLike[str]) -> str:
    """The folder of a store's trained weights (``results.db`` -> ``results.weights``): a
    trained job's weights live there under its job id, so that any later measurement of the
    job (another precision, a length sweep, a localize) reads them instead of training."""
    return str(Path(db).with_suffix(".weights"))


def checkpoints_folder(db: str | os.PathLike[str]) -> str:
    """The folder of a store's training checkpoints (``results.db`` ->
    ``results.checkpoints``): where trainings save their state unless told otherwise, so that
    a killed or interrupted sweep goes on where its trainings were when it runs again."""
    return str(Path(db).with_suffix(".checkpoints"))


def check_time_limit(value: Any, where: str) -> float | None:
    """A suite's ``time_limit`` (seconds, a positive number; None when absent), or a one-line
    :class:`SuiteError`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value <= 0:
        raise SuiteError(f"{where}: time_limit must be a positive number of seconds, "
                         f"got {value!r}")
    return float(value)


def new_run(kind: str, subject: str, label: str, precisions: list[Precision],
            config: dict[str, Any], record_ids: tuple[str, ...] = (), spec: Any = None) -> Run:
    """A :class:`Run` whose id is the hash of ``config`` (which holds the suite's name).

    ``config`` gets the ``data_version`` of the problem generators
    (:data:`~precision.deterministic.DATA_VERSION`) when it has none, so every run id and
    every stored config names the data its numbers were computed from (a kind that derives
    ``record_ids`` from its config puts it there first)."""
    config = {**config, "data_version": config.get("data_version", DATA_VERSION)}
    return Run(run_id=config_hash(config), suite=config["suite"], kind=kind, subject=subject,
               label=label, precisions=tuple(precisions), config=config,
               record_ids=record_ids, spec=spec)


def finite_or_none(x: Any) -> float | None:
    """``x`` as a float when it is a finite number, else None (what the store's REAL columns
    and the reports expect for "no value")."""
    v = stored_float(x)
    return v if v is not None and math.isfinite(v) else None


def subsample(values: list[Any]) -> list[tuple[int, Any]]:
    """``(step, value)`` pairs of a trace, at most :data:`MAX_SERIES_POINTS` of them (every
    k-th point and the last)."""
    n = len(values)
    if n <= MAX_SERIES_POINTS:
        return list(enumerate(values))
    stride = math.ceil(n / MAX_SERIES_POINTS)
    idx = sorted(set(range(0, n, stride)) | {n - 1})
    return [(i, values[i]) for i in idx]


def make_record(run: Run, *, status: str, error: str | None = None,
                precision: Precision | None = None, record_id: str | None = None,
                mse: float | None = None, log10_mse: float | None = None,
                floor: Floor | None = None, steps: int | None = None,
                wall_time: float | None = None, config: dict[str, Any] | None = None,
                result: dict[str, Any] | None = None,
                series: dict[str, list[Any]] | None = None) -> RunRecord:
    """The store record of ``run`` (or of one of its precisions, for a trained job).

    A floor level of -inf (an exact zero: no error at all) is stored as such, NaN as null;
    the worker is this host and process.
    """
    level = floor.log10_level if floor else None
    return RunRecord(
        run_id=record_id or run.run_id, suite=run.suite, kind=run.kind, subject=run.subject,
        task=run.label, precision=(precision or run.precision).name, status=status,
        error=error, mse=mse, log10_mse=log10_mse,
        floor_log10=None if level is None or math.isnan(level) else level,
        floor_index=floor.index if floor else None, rate=floor.rate if floor else None,
        conv_order=floor.order if floor else None, steps=steps, wall_time=wall_time,
        worker=f"{socket.gethostname()}:{os.getpid()}", config=config or run.config,
        result=result or {}, series=series or {})


def status_records(run: Run, status: str, message: str) -> list[RunRecord]:
    """Store records saying ``run`` produced no measurement (one per record id):
    ``status`` ``failed`` or ``timeout``, ``message`` why (one line)."""
    return [RunRecord(run_id=rid, suite=run.suite, kind=run.kind, subject=run.subject,
                      task=run.label, precision=p.name, status=status, error=message,
                      config={**run.config, "precision": p.name}, result={})
            for rid, p in zip(run.ids, run.precisions, strict=True)]
