"""Execute a suite: compute the runs the store lacks, write each in one transaction.

Workers compute; only this driver process writes the store, one transaction per finished
run, after checking each record against the invariants every run must pass
(:mod:`precision.invariants`: a record that breaks one is stored as ``invalid``). A sweep
killed at any point loses at most the runs in flight: their ids are not in the store, so the
next ``precision run`` computes them, and nothing is written twice.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial

from precision.invariants import INVALID, checked
from precision.provenance import provenance
from probes.executors import (
    EXECUTORS,
    ExecutorError,
    run_dask,
    run_local_pool,
    run_serial,
    status_records,
)
from probes.factory import is_factory_spec
from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated
from probes.kinds import kind_of
from probes.run import Run, RunOptions
from probes.store.db import RunRecord, Store
from probes.suite import Suite

#: Statuses of a run that produced no measurement (what "every cell failed" counts).
FAILED_STATUSES = ("failed", "timeout")
#: Statuses whose reasons the sweep lists: no measurement, or one that broke an invariant.
REASON_STATUSES = (*FAILED_STATUSES, INVALID)
#: Distinct failure reasons a summary keeps.
MAX_REASONS = 5


@dataclass
class SweepSummary:
    """What a sweep did: runs in the suite, already present, computed now, by status, and the
    first distinct reasons of its failed / timed-out records (``reasons``, one line each)."""

    total: int
    skipped: int
    computed: int
    statuses: dict[str, int]
    reasons: list[str] = field(default_factory=list)
    #: runs whose training paused at the end of the slice (``--slice``): nothing stored yet
    paused: int = 0

    @property
    def all_failed(self) -> bool:
        """True when runs were computed and every record of them failed or timed out."""
        n = sum(self.statuses.values())
        return n > 0 and sum(self.statuses.get(s, 0) for s in FAILED_STATUSES) == n


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C or SIGTERM: ``stored`` of ``todo`` runs were written (each
    whole, in its own transaction), ``signum`` the signal that stopped it."""

    def __init__(self, stored: int, todo: int, signum: int = signal.SIGINT) -> None:
        super().__init__(f"interrupted after {stored} of {todo} runs")
        self.stored, self.todo, self.signum = stored, todo, signum


def is_user_code(run: Run) -> bool:
    """True for a run of a user's model factory (``MODULE:FACTORY``): its factory, forward
    and training are user code, computed in a child process."""
    family = run.config.get("family") if run.kind in ("trained", "length") else None
    return isinstance(family, str) and is_factory_spec(family)


def time_limit_of(run: Run, options: RunOptions) -> float | None:
    """The run's time limit: ``--time-limit`` or its suite's (``options``), else
    :data:`~probes.isolation.DEFAULT_USER_TIME_LIMIT` for user code, else none."""
    limit = options.limit_for(run)
    if limit is not None:
        return limit
    return DEFAULT_USER_TIME_LIMIT if is_user_code(run) else None


def _warm_for_children(run: Run) -> None:
    """Import in this process what a trained run imports lazily (``torch._dynamo`` with the
    optimizers, ``torch.export`` for the mpN interpreter: seconds each), once, so that every
    forked child starts with them instead of importing them again."""
    if run.kind in ("trained", "length"):
        import torch._dynamo  # noqa: F401
        import torch.export  # noqa: F401


def compute_records(run: Run, options: RunOptions | None = None) -> list[RunRecord]:
    """Compute one run (in whatever process calls it) with its kind's ``compute`` and the
    sweep's ``options`` (default: :class:`~probes.run.RunOptions`'s): its store
    records (one for a solver or construction run, one per precision for a trained job or a
    study grid point), each with the provenance of the process that computed it
    (``result["provenance"]``, with the device a trained job used).

    User code and any run with a time limit compute in a child process
    (:mod:`probes.isolation`): an exception, an exit, a crash or a hang there is this run's
    ``failed`` / ``timeout`` records, and the sweep goes on."""
    options = options or RunOptions()
    limit = time_limit_of(run, options)
    if limit is None:
        records = kind_of(run).compute(run, options)
    else:
        _warm_for_children(run)
        try:
            records = call_isolated(kind_of(run).compute, run, options, time_limit=limit)
        except ChildFailure as exc:
            records = status_records(run, exc.status, exc.message)
    where = provenance(options.device)
    for record in records:   # a kind's own entries (who trained kept weights) kept
        record.result["provenance"] = {**where, **record.result.get("provenance", {})}
    return records


def pending_runs(suite: Suite, store: Store) -> tuple[list[Run], int]:
    """Runs of ``suite`` not yet in ``store``, and how many are already there."""
    runs = suite.runs
    done = store.done_ids()
    todo = [r for r in runs if not all(i in done for i in r.ids)]
    return todo, len(runs) - len(todo)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (a run's transaction is written whole
    and counted); in the main thread, elsewhere a no-op.

    The Python-level handlers are swapped for one that only records the signal, and the
    recorded one goes to the previous handler after the block. (Blocking the signals with
    ``pthread_sigmask`` is not enough: the mask is per thread, so the kernel hands the signal
    to another thread, the executor's manager thread, and Python still runs its handler in
    the main thread inside the block, between the store's commit and the count.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    # (a handler not installed from Python reads as None and cannot be put back: left alone)
    old = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)
           if signal.getsignal(s) is not None}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if held:
            handler = old[held[0]]
            if callable(handler):
                handler(held[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(held[0])


def run_suite(
    suite: Suite,
    store: Store,
    *,
    progress: Callable[[int, int, RunRecord], None] | None = None,
    options: RunOptions | None = None,
) -> SweepSummary:
    """Compute and store every run of ``suite`` missing from ``store``.

    Whatever computes (``options.executor``), this driver alone writes the store.
    ``options``: how each run computes (:class:`~probes.run.RunOptions`; its device and
    per-run time limits are the suite's, filled in here): a run whose training
    paused at the end of its slice (``--slice``) returns no records and is counted in
    ``paused``. Ctrl-C or SIGTERM stops the workers and raises :class:`SweepInterrupted`; the
    runs written so far are whole.
    """
    todo, skipped = pending_runs(suite, store)
    options = replace(options or RunOptions(), device=suite.settings.device,
                      time_limits=suite.time_limits())
    paused = 0
    statuses: dict[str, int] = {}
    reasons: list[str] = []
    reasons_seen: set[str] = set()
    done = 0
    compute = partial(compute_records, options=options)  # looked up now: tests replace it
    jobs = options.jobs
    if options.executor == "dask":
        results = run_dask(todo, compute, jobs, options.address)
    elif options.executor == "local":
        results = run_serial(todo, compute) if jobs <= 1 or len(todo) <= 1 else \
            run_local_pool(todo, compute, jobs)
    else:
        raise ExecutorError(f"unknown executor '{options.executor}' (choose from: "
                            f"{', '.join(EXECUTORS)})")
    try:
        for _run, records in results:
            if not records:   # paused at the end of the slice: its state is checkpointed
                paused += 1
                continue
            records = checked(records)   # the invariants, before anything is stored
            with _signals_deferred():
                store.write_runs(records)
                done += 1
            record = records[0]
            for r in records:
                statuses[r.status] = statuses.get(r.status, 0) + 1
                why = r.error or r.status
                if r.status in REASON_STATUSES and why not in reasons_seen and \
                        len(reasons) < MAX_REASONS:
                    reasons_seen.add(why)
                    reasons.append(f"{r.subject} {r.task}: {why}")
            if progress is not None:
                progress(done, len(todo), record)
    except KeyboardInterrupt as exc:
        results.close()   # the executor stops its workers
        raise SweepInterrupted(done, len(todo), getattr(exc, "signum", signal.SIGINT)) \
            from None
    finally:
        results.close()
    return SweepSummary(total=len(todo) + skipped, skipped=skipped, computed=done,
                        statuses=statuses, reasons=reasons, paused=paused)
