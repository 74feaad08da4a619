"""Execute a suite: compute the runs the store lacks, write each in one transaction.

Workers compute; only this driver process writes the store, one transaction per finished
run. A sweep killed at any point loses at most the runs in flight: their ids are not in the
store, so the next ``precision run`` computes them, and nothing is written twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from precision.provenance import provenance
from probes.executors import EXECUTORS, ExecutorError, run_dask, run_local_pool, run_serial
from probes.kinds import kind_of
from probes.run import Run
from probes.suite import Suite, expand
from results.store import RunRecord, Store


@dataclass
class SweepSummary:
    """What a sweep did: runs in the suite, already present, computed now, and by status."""

    total: int
    skipped: int
    computed: int
    statuses: dict[str, int]


def compute_records(run: Run) -> list[RunRecord]:
    """Compute one run (in whatever process calls it) with its kind's ``compute``: its store
    records (one for a solver, construction or study run, one per evaluation precision for a
    trained job), each with the provenance of the process that computed it
    (``result["provenance"]``, with the device a trained job used)."""
    records = kind_of(run).compute(run)
    where = provenance(run.device)
    for record in records:
        record.result["provenance"] = where
    return records


def pending_runs(suite: Suite, store: Store) -> tuple[list[Run], int]:
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
    compute = compute_records  # looked up now: tests replace it
    if executor == "dask":
        results = run_dask(todo, compute, jobs, address)
    elif executor == "local":
        results = run_serial(todo, compute) if jobs <= 1 or len(todo) <= 1 else \
            run_local_pool(todo, compute, jobs)
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
