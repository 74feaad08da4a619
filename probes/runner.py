"""Execute a suite: compute the runs the store lacks, write each in one transaction.

Workers compute; only this driver process writes the store, one transaction per finished
run. A sweep killed at any point loses at most the runs in flight: their ids are not in the
store, so the next ``precision run`` computes them, and nothing is written twice.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from precision.constructions.registry import run_construction
from precision.provenance import provenance
from precision.solvers.registry import run_solver
from probes.executors import EXECUTORS, ExecutorError, run_dask, run_local_pool, run_serial
from probes.study_suite import study_record
from probes.suite import RunConfig, Suite, expand
from probes.trained_records import trained_records
from results.store import RunRecord, Store

#: Traces longer than this are stored subsampled (first points dense, then every k-th + last).
MAX_SERIES_POINTS = 2000


@dataclass
class SweepSummary:
    """What a sweep did: runs in the suite, already present, computed now, and by status."""

    total: int
    skipped: int
    computed: int
    statuses: dict[str, int]


def _finite_or_none(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x


def _subsample(values: list[float]) -> list[tuple[int, float]]:
    n = len(values)
    if n <= MAX_SERIES_POINTS:
        return list(enumerate(values))
    stride = math.ceil(n / MAX_SERIES_POINTS)
    idx = sorted(set(range(0, n, stride)) | {n - 1})
    return [(i, values[i]) for i in idx]


def compute_records(run: RunConfig) -> list[RunRecord]:
    """Compute one run (in whatever process calls it): its store records (one for a solver or
    construction run, one per evaluation precision for a trained job), each with the
    provenance of the process that computed it (``result["provenance"]``)."""
    if run.config["kind"] == "trained":
        records = trained_records(run)
    elif run.config["kind"] == "study":
        records = [study_record(run)]
    else:
        records = [compute_run(run)]
    where = provenance()
    for record in records:
        record.result["provenance"] = where
    return records


def compute_run(run: RunConfig) -> RunRecord:
    """Compute one solver / construction run and package it as a store record."""
    cfg = run.config
    if cfg["kind"] == "construction":
        res = run_construction(cfg["solver"], cfg["precision"], cfg["problem"], cfg["params"])
    else:
        res = run_solver(cfg["solver"], cfg["precision"], cfg["problem"], cfg["params"])
    final = res.final
    floor = res.floor
    series: dict[str, list[Any]] = {}
    if res.steps:
        series["log10_mse"] = _subsample([s.log10_mse for s in res.steps])
        series["digits"] = _subsample([s.digits for s in res.steps])
    if res.param_mse:
        series["param_mse"] = _subsample(res.param_mse)
    if res.reference:  # constructions: error against the reference algorithm, per layer
        series["log10_mse_vs_algorithm"] = _subsample([s.log10_mse for s in res.reference])
    result: dict[str, Any] = {"problem_label": run.problem_label}
    if final is not None:
        result.update(
            max_abs=final.max_abs, relative=final.relative, digits=final.digits,
            param_mse=res.param_mse[-1] if res.param_mse else None,
        )
    if floor is not None:
        result["floor"] = floor.to_dict()
    if res.reference:
        result["max_log10_mse_vs_algorithm"] = max(s.log10_mse for s in res.reference)
    return RunRecord(
        run_id=run.run_id,
        suite=run.suite,
        kind=cfg["kind"],
        subject=run.solver,
        task=run.problem_label,
        precision=run.precision,
        status=res.status,
        error=res.error,
        mse=final.mse if final else None,
        log10_mse=final.log10_mse if final else None,
        floor_log10=_finite_or_none(floor.log10_level) if floor else None,
        floor_index=floor.index if floor else None,
        rate=floor.rate if floor else None,
        conv_order=floor.order if floor else None,
        steps=len(res.steps),
        wall_time=res.wall_time,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        config=cfg,
        result=result,
        series=series,
    )


def pending_runs(suite: Suite, store: Store) -> tuple[list[RunConfig], int]:
    """Runs of ``suite`` not yet in ``store``, and how many are already there."""
    runs = expand(suite)
    done = store.done_ids()
    todo = [r for r in runs if not all(i in done for i in r.ids)]
    return todo, len(runs) - len(todo)


def run_suite(
    suite: Suite,
    store: Store,
    *,
    jobs: int = 1,
    executor: str = "local",
    address: str | None = None,
    progress: Callable[[int, int, RunRecord], None] | None = None,
) -> SweepSummary:
    """Compute and store every run of ``suite`` missing from ``store``.

    ``executor`` ``local``: in this process (``jobs`` 1) or a pool of ``jobs`` processes;
    ``dask``: a LocalCluster of ``jobs`` workers, or the scheduler at ``address``
    (:mod:`probes.executors`). Whatever computes, this driver alone writes the store.
    """
    todo, skipped = pending_runs(suite, store)
    statuses: dict[str, int] = {}
    done = 0
    if executor == "dask":
        results = run_dask(todo, jobs, address)
    elif executor == "local":
        results = run_serial(todo) if jobs <= 1 or len(todo) <= 1 else \
            run_local_pool(todo, jobs)
    else:
        raise ExecutorError(f"unknown executor '{executor}' (choose from: "
                            f"{', '.join(EXECUTORS)})")
    for _run, records in results:
        store.write_runs(records)
        done += 1
        record = records[0]
        for r in records:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        if progress is not None:
            progress(done, len(todo), record)
    return SweepSummary(total=len(todo) + skipped, skipped=skipped, computed=done,
                        statuses=statuses)
