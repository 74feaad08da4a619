"""Distributed sweep: ``--executor dask`` with 2 workers against one worker, same numbers.

Runs one suite three times, each into a fresh store:
  (a) ``--executor local`` with 1 job (this process computes: the reference numbers),
  (b) ``--executor dask --jobs 1`` (one Dask worker),
  (c) ``--executor dask --jobs 2`` (two Dask workers on a LocalCluster),
checks that (b) and (c) stored exactly the numbers of (a) (status, MSE, floor, steps of every
run id) and prints wall times and the speed-up (b)/(c) and (a)/(c).

Default: the quick primitives suite (``--solvers`` selects model entries, e.g. ``baseconv``
for a shorter bench). Run: ``python bench/bench_distributed.py [--solvers baseconv]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(suite: str, profile: str, solvers: str | None, db: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "precision", "run", suite, "--profile", profile, "--db",
           str(db), "--no-progress", "--no-report", *extra]
    if solvers:
        cmd += ["--solvers", solvers]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def _numbers(db: Path) -> dict[str, tuple]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT run_id, status, mse, floor_log10, steps FROM runs")
        return {r[0]: r[1:] for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="primitives")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--solvers", default=None, help="model entries to keep (default all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        times = {}
        for name, extra in (("local, 1 process", ["--jobs", "1"]),
                            ("dask, 1 worker", ["--executor", "dask", "--jobs", "1"]),
                            ("dask, 2 workers", ["--executor", "dask", "--jobs", "2"])):
            db = folder / f"{name.replace(', ', '-').replace(' ', '')}.db"
            times[name] = (_run(args.suite, args.profile, args.solvers, db, extra), db)
            print(f"{name:<18} {times[name][0]:8.1f} s", flush=True)
        ref = _numbers(times["local, 1 process"][1])
        same = all(_numbers(db) == ref for _, db in times.values())
        print(f"runs: {len(ref)}; identical numbers in all three stores: {same}")
        t1 = times["dask, 1 worker"][0]
        t2 = times["dask, 2 workers"][0]
        t0 = times["local, 1 process"][0]
        print(f"speed-up dask 2 workers vs 1 worker: {t1 / t2:.2f}x; "
              f"vs local 1 process: {t0 / t2:.2f}x")


if __name__ == "__main__":
    main()
