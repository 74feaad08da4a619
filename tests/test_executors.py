"""Executors: Dask and the local pool give the stored numbers of a serial run; killed
workers and drivers lose and duplicate nothing; two drivers can share one store."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from precision.cli.main import main

ROOT = Path(__file__).resolve().parents[1]

# 6 runs of ~1 s each (gradient descent in mp100), long enough to kill a process mid-run.
SLOW = """
name = "slow"
precisions = ["mp100"]
seeds = [0, 1, 2, 3, 4, 5]
[problems.ls]
task = "least_squares"
kind = "gaussian"
dim = 8
n_samples = 30
[solvers.gd]
problems = ["ls"]
params = { iters = 1500 }
"""

FAST = """
name = "fast"
precisions = ["float32", "float64", "mp50"]
seeds = [0, 1]
[problems.ls]
task = "least_squares"
kind = "gaussian"
dim = 5
n_samples = 20
[solvers.gd]
problems = ["ls"]
params = { iters = 300 }
[solvers.cg]
problems = ["ls"]
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "precision", "run", *args, "--no-progress", "--no-report"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _numbers(db: Path) -> dict[str, tuple]:
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute("SELECT run_id, status, mse, floor_log10, floor_index, steps "
                           "FROM runs").fetchall()
        n_series = dict(con.execute("SELECT run_id, COUNT(*) FROM series GROUP BY run_id"))
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids))
    return {r[0]: (*r[1:], n_series.get(r[0], 0)) for r in rows}


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def _wait_for(db: Path, n: int, proc: subprocess.Popen, timeout: float = 240) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        done = _count(db)
        if done >= n:
            return done
        time.sleep(0.1)
    raise AssertionError(f"store never reached {n} runs (driver exit {proc.poll()})")


def _workers(driver: int) -> list[psutil.Process]:
    """The driver's worker processes (pool or Dask workers; not the resource tracker)."""
    out = []
    for p in psutil.Process(driver).children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "resource_tracker" not in cmd:
            out.append(p)
    return out


@pytest.fixture(scope="module")
def slow_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("ref")
    (folder / "slow.toml").write_text(SLOW)
    db = folder / "ref.db"
    # in this process (a python + torch start less); its pool workers compute, as in a CLI's
    assert main(_cli(str(folder / "slow.toml"), "--db", str(db), "--jobs", "2")[3:]) == 0
    return folder / "slow.toml", _numbers(db)


def test_dask_and_local_store_the_serial_numbers(tmp_path: Path) -> None:
    suite = tmp_path / "fast.toml"
    suite.write_text(FAST)
    results = {}
    for name, extra in (("serial", []), ("pool", ["--jobs", "2"]),
                        ("dask", ["--executor", "dask", "--jobs", "2"])):
        db = tmp_path / f"{name}.db"
        res = subprocess.run(_cli(str(suite), "--db", str(db), *extra), env=_env(),
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        results[name] = _numbers(db)
        with sqlite3.connect(db) as con:
            workers = {w for (w,) in con.execute("SELECT worker FROM runs")}
            walls = [w for (w,) in con.execute("SELECT wall_time FROM runs")]
        assert all(w is not None and w >= 0 for w in walls)
        assert 1 <= len(workers) <= (1 if name == "serial" else 2)  # "host:pid" of each
    assert len(results["serial"]) == 12
    assert results["serial"] == results["pool"] == results["dask"]


def test_killed_local_worker_is_retried(tmp_path: Path, slow_reference: tuple[Path, dict]
                                        ) -> None:
    # (Dask's killed worker: test_killed_dask_driver_resumes_and_a_killed_worker_is_retried)
    suite, reference = slow_reference
    db = tmp_path / "r.db"
    proc = subprocess.Popen(_cli(str(suite), "--db", str(db), "--jobs", "2",
                                 "--executor", "local"), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(db, 1, proc)
    victims = _workers(proc.pid)
    assert victims, "no worker processes found"
    victims[0].send_signal(signal.SIGKILL)      # a worker dies mid-run
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _numbers(db) == reference            # every run once, same numbers


def test_killed_dask_driver_resumes_and_a_killed_worker_is_retried(
        tmp_path: Path, slow_reference: tuple[Path, dict]) -> None:
    """A Dask driver killed with its workers, then resumed; in the resumed sweep a worker
    dies mid-run (one sweep with its own cluster for both: a cluster's start is ~15 s)."""
    # (the local executor's driver kill: tests/test_cli.py and tests/test_trained_run.py)
    suite, reference = slow_reference
    db = tmp_path / "r.db"
    cmd = _cli(str(suite), "--db", str(db), "--jobs", "2", "--executor", "dask")
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    done = _wait_for(db, 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)         # driver and its workers die at once
    proc.wait()
    stored = _count(db)
    assert 2 <= done <= stored < 6
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(db, stored + 1, proc)
    victims = _workers(proc.pid)
    assert victims, "no worker processes found"
    victims[0].send_signal(signal.SIGKILL)      # a worker of the resumed sweep dies mid-run
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"{stored} already in" in err
    assert _numbers(db) == reference            # every run once, same numbers


def test_two_drivers_on_one_store(tmp_path: Path, slow_reference: tuple[Path, dict]) -> None:
    suite, reference = slow_reference
    db = tmp_path / "r.db"
    procs = [subprocess.Popen(_cli(str(suite), "--db", str(db)), env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert _numbers(db) == reference            # no corruption, no duplicate rows


def test_bad_executor_arguments(tmp_path: Path) -> None:
    suite = tmp_path / "fast.toml"
    suite.write_text(FAST)
    db = tmp_path / "r.db"
    for extra, msg in ((["--executor", "ray"], "invalid choice: 'ray'"),
                       (["--address", "tcp://127.0.0.1:1"], "--address needs --executor dask")):
        res = subprocess.run(_cli(str(suite), "--db", str(db), *extra), env=_env(),
                             capture_output=True, text=True)
        assert res.returncode == 2 and msg in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert not db.exists()
    # nothing listens there: the command waits Dask's connect timeout (1 s here) for it
    res = subprocess.run(_cli(str(suite), "--db", str(db), "--executor", "dask",
                              "--address", "tcp://127.0.0.1:9"),
                         env={**_env(), "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"},
                         capture_output=True, text=True, timeout=120)
    last = res.stderr.strip().splitlines()[-1]    # after the "suite fast: 12 runs" line
    assert res.returncode == 1 and "cannot start or reach the Dask cluster" in last
    assert _count(db) == 0
