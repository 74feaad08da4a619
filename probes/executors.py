"""Where a sweep's runs are computed: in the driver, a local process pool, or Dask.

Every executor receives the runs and the function that computes one run into its records
(``compute``, a module-level function so that it pickles by name), and yields
``(run, records)`` as runs finish; only the driver (:func:`probes.runner.run_suite`) writes
the store, one transaction per run, so a worker never
touches SQLite. What happens when a worker dies:

* ``local`` (``--jobs N``, a ``ProcessPoolExecutor``): a killed worker breaks the pool; the
  runs that had not finished are resubmitted to a fresh pool (at most
  :data:`MAX_POOL_RESTARTS` times per sweep), finished runs are already stored;
* ``dask`` (``distributed``): the scheduler reschedules the tasks of a lost worker on the
  others and the cluster's nanny restarts it; a run that kills
  ``distributed.scheduler.allowed-failures`` + 1 workers is stored as ``failed``.

What stops them: workers ignore Ctrl-C (the terminal sends it to every process of the
foreground group) and die with their driver (:func:`probes.isolation.die_with_parent`: Linux's
``PR_SET_PDEATHSIG``, so even ``kill -9`` of the driver leaves no worker computing). When the
driver is interrupted (Ctrl-C, SIGTERM: a ``KeyboardInterrupt`` in it), the executor kills its
workers at once, drops the runs in flight and re-raises; nothing half-done reaches the store.

Why Dask and not Ray: ``distributed`` is pure Python (2.5 MB, installs in seconds here where a
Ray wheel is 79 MB of native code), its ``LocalCluster`` gives real worker processes with a
nanny that restarts killed workers, the same client code reaches a remote scheduler
(``--address tcp://host:8786``), and futures complete in any order, which is all a sweep of
independent runs needs.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from precision.provenance import code_version
from probes.executor_error import ExecutorError
from probes.isolation import die_with_parent, process_context
from probes.kinds import kind_of
from probes.run import Run, status_records
from probes.store.db import RunRecord

#: Computes one run into its store records (``probes.runner.compute_records``).
Compute = Callable[[Run], list[RunRecord]]

#: A local pool broken by dying workers is rebuilt at most this many times per sweep.
MAX_POOL_RESTARTS = 3

EXECUTORS = ("local", "dask")

#: Dask settings for long, CPU-bound tasks on few cores: no statistical profiler sampling the
#: worker's stack every 10 ms, no work stealing, slow monitors (each costs CPU the runs need:
#: with the defaults the driver alone took ~11% of a core on a 2-worker sweep).
#: The environment variable of Dask's connect timeout (``distributed.comm.timeouts.connect``),
#: which ``--address`` waits for a scheduler (10 s when it is unset).
CONNECT_TIMEOUT_ENV = "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"
_DASK_CONFIG = {
    "distributed.worker.daemon": False,
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.tick.limit": "1h",
    "distributed.worker.memory.monitor-interval": "5s",
    "distributed.logging.distributed": "error",
    # The nanny's default worker environment (one BLAS thread, MALLOC_TRIM_THRESHOLD_=64k)
    # made the high-precision recipe's Levenberg-Marquardt phase 1.8x slower than in a
    # local pool worker (34 s vs 21 s on a small job); workers get the driver's environment
    # like the pool's (torch is pinned to one thread in ``compute_in_worker`` either way).
    "distributed.nanny.pre-spawn-environ": {},
    # Each worker runs this module's ``dask_setup`` when it starts: it ignores Ctrl-C.
    "distributed.worker.preload": ["probes.executors"],
}


def compute_in_worker(compute: Compute, run: Run) -> list[RunRecord]:
    """What a worker process runs: one run's records, torch pinned to one thread (workers
    are the parallelism; two intra-op threads per worker thrash a small machine)."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return compute(run)


def worker_init(driver_pid: int, code: str | None = None) -> None:
    """Initializer of a local pool worker: Ctrl-C is the driver's to handle (it kills the
    workers), SIGTERM kills, and the worker dies with its driver; its records name the code
    the driver started with (``code``: :func:`precision.provenance.pin_code_version`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(driver_pid)
    if code is not None:
        from precision.provenance import pin_code_version

        pin_code_version(code)


def dask_setup(worker: Any) -> None:
    """Preload of a Dask worker (``distributed.worker.preload``): ignore Ctrl-C, which the
    driver handles by closing the cluster (no worker traceback on the terminal)."""
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def failed_records(run: Run, message: str) -> list[RunRecord]:
    """Store records saying ``run`` could not be computed (one per record id)."""
    return status_records(run, "failed", message)


def longest_first(todo: list[Run]) -> list[Run]:
    """``todo`` sorted by decreasing cost (each kind's ``cost``; stable: ties keep suite
    order): a long job submitted last would leave the other workers idle at the end."""
    return sorted(todo, key=lambda run: kind_of(run).cost(run), reverse=True)


def run_serial(todo: list[Run], compute: Compute) -> Iterator[tuple[Run, list[RunRecord]]]:
    """Compute in the driver process, in order."""
    for run in todo:
        yield run, compute(run)


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: SIGKILL its workers (their runs in flight are dropped), cancel the
    rest, do not wait for anything."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        try:
            proc.kill()
        except (OSError, ValueError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.join(5)


def run_local_pool(todo: list[Run], compute: Compute, jobs: int
                   ) -> Iterator[tuple[Run, list[RunRecord]]]:
    """Compute in ``jobs`` local worker processes; resubmit the unfinished runs when a dead
    worker breaks the pool. An interrupt (or closing this generator) kills the workers."""
    pending = longest_first(todo)
    restarts = 0
    while pending:
        broken = False
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=worker_init,
                                   initargs=(os.getpid(), code_version()),
                                   mp_context=process_context())
        try:
            futures = {pool.submit(compute_in_worker, compute, run): run for run in pending}
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    run = futures.pop(fut)
                    try:
                        records = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    pending.remove(run)
                    yield run, records
                if broken:
                    break
        except BaseException:   # Ctrl-C, SIGTERM, the consumer stopping: kill, do not wait
            _kill_pool(pool)
            raise
        pool.shutdown(wait=True)
        if broken:
            restarts += 1
            if restarts > MAX_POOL_RESTARTS:
                raise ExecutorError(f"worker processes died {restarts} times; "
                                    f"{len(pending)} runs left for the next 'precision run'")


def run_dask(todo: list[Run], compute: Compute, jobs: int, address: str | None = None
             ) -> Iterator[tuple[Run, list[RunRecord]]]:
    """Compute on a Dask cluster: a LocalCluster of ``jobs`` single-threaded worker processes,
    or the scheduler at ``address``."""
    try:
        from distributed import Client, LocalCluster, as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker
    except ImportError:
        raise ExecutorError("--executor dask needs the 'distributed' package: "
                            "pip install -e '.[dask]'") from None
    import dask

    cluster: Any = None
    quiet: dict[str, int] | None = None
    with dask.config.set(_DASK_CONFIG):
        try:
            if address:
                # Dask's own setting, from the environment as Dask reads it; 10 s if unset
                client = Client(address, timeout=os.environ.get(CONNECT_TIMEOUT_ENV, "10s"))
            else:
                cluster = _start_local_cluster(LocalCluster, jobs)
                client = Client(cluster)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ExecutorError(f"cannot start or reach the Dask cluster"
                                f"{' at ' + address if address else ''}: {exc}") from None
        try:
            futures = {client.submit(compute_in_worker, compute, run, key=f"run-{run.run_id}",
                                     pure=False): run for run in longest_first(todo)}
            for fut in as_completed(list(futures)):
                run = futures[fut]
                try:
                    records = fut.result()
                except KilledWorker as exc:
                    records = failed_records(run, f"worker died while computing this run "
                                                  f"({exc.__class__.__name__})")
                except FutureCancelledError:
                    continue
                yield run, records
        except BaseException:   # Ctrl-C, SIGTERM, the consumer stopping: kill, do not wait
            quiet = _silence_dask_logs()
            if cluster is not None:
                _kill_local_workers(cluster)
            else:
                client.cancel(list(futures))
            raise
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
            if quiet is not None:
                _restore_logs(quiet)


def _silence_dask_logs() -> dict[str, int]:
    """Silence the ``distributed`` (and ``tornado``) loggers of this process, the in-process
    scheduler's and the client's, while an interrupted sweep tears its cluster down: killing
    the workers makes their open connections fail, and on a loaded machine the scheduler's
    batched sender logged that as a traceback after the Ctrl-C. Returns the levels to
    restore (:func:`_restore_logs`)."""
    names = [n for n in list(logging.root.manager.loggerDict)
             if n.split(".")[0] in ("distributed", "tornado")]
    levels = {n: logging.getLogger(n).level for n in ["distributed", "tornado", *names]}
    for n in levels:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    return levels


def _restore_logs(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _start_local_cluster(local_cluster: Any, jobs: int) -> Any:
    """A LocalCluster of ``jobs`` single-threaded workers, started with Ctrl-C ignored: the
    worker processes it spawns inherit that (a worker still importing would otherwise die of
    a Ctrl-C with a traceback; ``dask_setup`` keeps it ignored in restarted ones). A Ctrl-C
    in these seconds is lost; once the cluster runs, the driver handles it."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return local_cluster(n_workers=jobs, threads_per_worker=1, processes=True,
                             dashboard_address=None, memory_limit=0, silence_logs=50)
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return local_cluster(n_workers=jobs, threads_per_worker=1, processes=True,
                             dashboard_address=None, memory_limit=0, silence_logs=50)
    finally:
        signal.signal(signal.SIGINT, handler)


def _kill_local_workers(cluster: Any) -> None:
    """SIGKILL the worker processes of a LocalCluster (a run in flight is dropped; closing
    the cluster gracefully would wait for it)."""
    for nanny in list(getattr(cluster, "workers", {}).values()):
        pid = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
