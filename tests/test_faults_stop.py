"""Stopping and user code: Ctrl-C, SIGTERM and kill -9 of a sweep's driver stop its workers and
lose nothing; a hostile model factory (an exception, ``os._exit``, a segfault, an endless
loop, ``sys.exit`` at import) costs one cell, stored with its reason; ``--save-weights`` into
a read-only folder or onto a full disk."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from precision.cli.main import main
from probes.api import probe
from probes.store.db import Store
from probes.suite import SuiteError, load_suite

ROOT = Path(__file__).resolve().parents[1]

# 4 runs of ~1 s each (gradient descent in mp100): long enough to stop a sweep mid-run.
SLOW = """
name = "slow"
precisions = ["mp100"]
seeds = [0, 1, 2, 3]
[problems.ls]
task = "least_squares"
kind = "gaussian"
dim = 8
n_samples = 30
[solvers.gd]
problems = ["ls"]
params = { iters = 2000 }
"""

# A user's module that misbehaves only while it trains (grad enabled) at width 16 (or at
# every width: the *_all factories), so that a sweep over width [8, 16] has one good cell.
HOSTILE = '''
import ctypes, os
import torch
from torch import nn


class Hostile(nn.Module):
    def __init__(self, d_in, d_out, width, how):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)
        self.width, self.how = width, how

    def forward(self, x):
        every = self.how.endswith("_all")
        if torch.is_grad_enabled() and self.how and (self.width == 16 or every):
            how = self.how.removesuffix("_all")
            if how == "raise":
                raise RuntimeError("hostile forward\\nsecond line")
            if how == "exit":
                os._exit(3)
            if how == "segv":
                ctypes.string_at(0)
            if how == "loop":
                while True:
                    pass
        return self.lin(x)


def _make(how):
    return lambda d_in, d_out, depth, width: Hostile(d_in, d_out, width, how)


ok, raises, exits, segv, loops = (_make(h) for h in ("", "raise", "exit", "segv", "loop"))
raises_all = _make("raise_all")
'''

GRID = """
name = "hostile"
precisions = ["float64"]
seeds = [0]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
"""

ENTRY = """
[models.{name}]
family = "{family}"
tasks = ["mul"]
depth = 1
width = [8, 16]
train = {{ recipe = "paper", steps = 20, batch_size = 8 }}
test_size = 4
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "precision", "run", *args, "--no-progress", "--no-report"]


def _rows(db: Path) -> list[tuple]:
    """Every stored run (id, status, error), after an integrity check; ids unique."""
    with sqlite3.connect(db, timeout=10) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute("SELECT run_id, status, error FROM runs").fetchall()
    assert len({r[0] for r in rows}) == len(rows)
    return rows


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def _descendants(pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(pid).children(recursive=True)
            if "resource_tracker" not in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _alive(procs: list[psutil.Process], within: float = 5.0) -> list[int]:
    """Pids of ``procs`` still running after ``within`` seconds (zombies count as gone)."""
    deadline = time.time() + within
    while True:
        left = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        if not left or time.time() > deadline:
            return left
        time.sleep(0.1)


def _start_slow(tmp_path: Path, *extra: str, stored: int = 0
                ) -> tuple[subprocess.Popen, Path, list[psutil.Process], list[str]]:
    """A ``--jobs 2`` sweep of the slow suite in its own process group, once it has two
    workers computing (and ``stored`` runs in the store); the worker processes."""
    suite = tmp_path / "slow.toml"
    suite.write_text(SLOW)
    db = tmp_path / "r.db"
    cmd = _cli(str(suite), "--db", str(db), "--jobs", "2", *extra)
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.time() + 180
    workers: list[psutil.Process] = []
    while time.time() < deadline and proc.poll() is None:
        workers = _descendants(proc.pid)
        if len(workers) >= 2 and _count(db) >= stored:
            break
        time.sleep(0.1)
    assert proc.poll() is None and len(workers) >= 2, "the sweep never had two workers"
    time.sleep(0.5)                      # the workers are computing
    return proc, db, _descendants(proc.pid), cmd


# --- stopping a sweep ------------------------------------------------------------------------

def test_ctrl_c_stops_the_pool_and_a_rerun_resumes(tmp_path: Path, capsys) -> None:
    proc, db, workers, cmd = _start_slow(tmp_path, stored=1)
    os.killpg(proc.pid, signal.SIGINT)   # what a terminal sends: driver and workers
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)   # a second Ctrl-C during the shutdown
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "interrupted;" in last and "re-run the same command to resume" in last
    stored = _count(db)
    assert f"{stored} of 4 runs stored" in last and 1 <= stored < 4
    assert _alive(workers) == []         # no worker keeps computing
    assert all(status == "ok" for _, status, _ in _rows(db))
    capsys.readouterr()
    rc = main(cmd[3:])                   # the rerun: in this process (a python start less)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert f"{stored} already in" in err
    assert len(_rows(db)) == 4


def test_a_stop_during_a_store_write_waits_for_the_count() -> None:
    """A Ctrl-C inside the write of a run goes off after the block, even with another thread
    running (a per-thread signal mask let the kernel hand it to that thread, and the handler
    ran in the main thread between the store's commit and the count)."""
    import threading

    from probes.runner import _signals_deferred

    # Python's own Ctrl-C handler, whatever this process inherited (a job started in the
    # background by a non-interactive shell starts with SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    steps: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with _signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(50):           # bytecode, where a pending handler would run
                    time.sleep(0.002)
                steps.append("block done")
        steps.append("raised after")
    finally:
        stop.set()
        other.join()
        restored = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, inherited)
    assert steps == ["block done", "raised after"]
    assert restored is signal.default_int_handler


def test_sigterm_of_the_driver_is_a_clean_stop(tmp_path: Path) -> None:
    proc, db, workers, _ = _start_slow(tmp_path)
    proc.send_signal(signal.SIGTERM)     # the driver alone
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM);" in err and "Traceback" not in err
    assert _alive(workers) == []
    assert all(status == "ok" for _, status, _ in _rows(db)) if db.exists() else True


def test_kill_9_of_the_driver_takes_its_workers(tmp_path: Path) -> None:
    proc, db, workers, _ = _start_slow(tmp_path)
    before = _count(db)
    proc.send_signal(signal.SIGKILL)     # no handler runs in the driver
    proc.communicate(timeout=30)
    assert _alive(workers) == []         # PR_SET_PDEATHSIG: they die with it
    time.sleep(1)
    assert _count(db) == before          # nothing written after the driver died
    assert all(status == "ok" for _, status, _ in _rows(db)) if db.exists() else True


def test_ctrl_c_stops_a_dask_cluster_without_worker_tracebacks(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    # (a Ctrl-C while the cluster starts is ignored: its workers are still importing)
    proc, db, workers, _ = _start_slow(tmp_path, "--executor", "dask", stored=1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted;" in err.strip().splitlines()[-1]
    assert _alive(workers, within=15.0) == []  # a nanny's worker may take a moment longer


# --- hostile user code -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "hostile.py").write_text(HOSTILE)
    (folder / "exit_at_import.py").write_text("import sys\nsys.exit(0)\n"
                                              "def f(d_in, d_out, depth, width): pass\n")
    (folder / "loop_at_import.py").write_text("while True:\n    pass\n")
    return folder


def _suite(folder: Path, text: str) -> Path:
    path = folder / f"s{abs(hash(text))}.toml"
    path.write_text(text)
    return path


def test_each_hostile_factory_costs_one_cell(hostile: Path, tmp_path: Path, capsys) -> None:
    entries = "".join(ENTRY.format(name=h, family=f"{hostile}/hostile.py:{h}")
                      for h in ("raises", "exits", "segv", "loops"))
    # the last entry's (loops) own limit: room for a loaded machine to start the good cell's
    # child (import torch, train 20 steps), which took over 4 s under a load of 4
    entries += "time_limit = 10\n"
    suite = _suite(tmp_path, GRID + entries)
    db = tmp_path / "r.db"
    rc = main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"])
    out = capsys.readouterr()
    assert rc == 0, out.err                              # the sweep went on to the end
    assert "8 computed (failed 3, ok 4, timeout 1)" in out.out
    with Store(db, create=False) as store:
        cells = {(r["subject"], r["config"]["width"]): (r["status"], r["error"])
                 for r in store.runs()}
    assert len(cells) == 8
    assert all(cells[(h, 8)] == ("ok", None) for h in ("raises", "exits", "segv", "loops"))
    assert cells[("raises", 16)] == ("failed", "RuntimeError: hostile forward")
    assert cells[("exits", 16)] == ("failed", "exited with code 3")
    assert cells[("segv", 16)] == ("failed", "killed by signal SIGSEGV")
    assert cells[("loops", 16)][0] == "timeout" and "after 10 s" in cells[("loops", 16)][1]
    assert "Traceback" not in out.err and "raises mul: RuntimeError: hostile forward" in out.err


def test_every_cell_failing_exits_1_with_the_reason(hostile: Path, tmp_path: Path,
                                                    capsys) -> None:
    suite = _suite(tmp_path, GRID + ENTRY.format(name="base", family="baseconv"))
    db = tmp_path / "r.db"
    rc = main(["probe", f"{hostile}/hostile.py:raises_all", "--suite", str(suite), "--db",
               str(db), "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "raises_all mul: RuntimeError: hostile forward" in err
    assert "every computed run failed or timed out (2 records" in err
    assert "Traceback" not in err
    assert sorted(s for _, s, _ in _rows(db)) == ["failed", "failed"]


@pytest.mark.parametrize("spec,flags,message", [
    ("exit_at_import.py:f", [], "cannot be built: exited with code 0 (sys.exit)"),
    ("loop_at_import.py:f", ["--time-limit", "2"], "cannot be built: timed out after 2 s"),
])
def test_a_factory_that_cannot_be_imported_is_one_line_before_any_work(
        hostile: Path, tmp_path: Path, capsys, spec: str, flags: list[str],
        message: str) -> None:
    suite = _suite(tmp_path, GRID + ENTRY.format(name="base", family="baseconv"))
    db = tmp_path / "r.db"
    rc = main(["probe", f"{hostile}/{spec}", "--suite", str(suite), "--db", str(db),
               "--no-progress", "--no-report", *flags])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and "\n" not in err
    assert not db.exists()                               # nothing computed, nothing stored


def test_api_probe_survives_a_crashing_factory(hostile: Path) -> None:
    sys.path.insert(0, str(hostile))
    try:
        import hostile as module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(hostile))
    opts = dict(width=16, task_options={"dim": 4, "n": 6}, test_size=2,
                train={"steps": 10, "batch_size": 4}, precisions=("float64",))
    assert probe(module.exits, "multiply", **opts)["float64"].error == "exited with code 3"
    out = probe(module.loops, "multiply", time_limit=1, **opts)["float64"]
    assert out.status == "timeout" and "after 1 s" in out.error
    assert probe(module.ok, "multiply", **opts)["float64"].status == "ok"


@pytest.mark.parametrize("value", ["0", "-1", "true", '"1h"', "nan"])
def test_bad_time_limit_is_one_line(tmp_path: Path, value: str) -> None:
    text = GRID.replace('seeds = [0]', f'seeds = [0]\ntime_limit = {value}') + \
        ENTRY.format(name="base", family="baseconv")
    with pytest.raises(SuiteError, match="time_limit must be a positive number of seconds"):
        load_suite(str(_suite(tmp_path, text)))


def test_time_limits_of_the_suite_and_of_an_entry(tmp_path: Path, capsys) -> None:
    text = GRID.replace('seeds = [0]', 'seeds = [0]\ntime_limit = 600') + \
        ENTRY.format(name="base", family="baseconv") + \
        ENTRY.format(name="short", family="baseconv").replace("test_size = 4",
                                                               "test_size = 4\ntime_limit = 5")
    suite = load_suite(str(_suite(tmp_path, text)))
    limits = suite.time_limits()
    assert {(r.subject, limits[r.run_id]) for r in suite.runs} == \
        {("base", 600.0), ("short", 5.0)}
    assert main(["run", str(_suite(tmp_path, text)), "--time-limit", "-3"]) == 2
    assert "--time-limit must be a positive number" in capsys.readouterr().err


def test_time_limit_stops_built_in_runs_in_the_pool(tmp_path: Path, capsys) -> None:
    suite = _suite(tmp_path, SLOW.replace("seeds = [0, 1, 2, 3]", "seeds = [0, 1]"))
    db = tmp_path / "r.db"
    rc = main(["run", str(suite), "--db", str(db), "--jobs", "2", "--time-limit", "0.3",
               "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert rc == 1                       # every computed run timed out
    assert "  gd ls: timed out after 0.3 s" in err
    assert "every computed run failed or timed out (2 records" in err
    assert [s for _, s, _ in _rows(db)] == ["timeout", "timeout"]


def test_delete_accepts_the_timeout_status(tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.db"
    with Store(db):
        pass
    assert main(["delete", "--db", str(db), "--status", "timeout", "--dry-run"]) == 0
    assert "would delete 0 runs (status timeout)" in capsys.readouterr().out


# --- --save-weights into a read-only folder, onto a full disk --------------------------------

def _mount_ns_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    res = subprocess.run(["unshare", "-r", "-m", "sh", "-c",
                          "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return res.returncode == 0


needs_mounts = pytest.mark.skipif(not _mount_ns_works(),
                                  reason="needs unshare -r -m (a private tmpfs mount)")

WEIGHTS_SUITE = GRID + ENTRY.format(name="base", family="baseconv")


@needs_mounts
@pytest.mark.parametrize("mount,expect_rc", [
    ("mount -t tmpfs -o ro,size=64k tmpfs {w}", 2),                     # read-only folder
    ("mount -t tmpfs -o size=64k tmpfs {w} && "
     "(head -c 1000000 /dev/zero > {w}/fill || true)", 0),              # a full disk
])
def test_save_weights_into_a_read_only_folder_or_onto_a_full_disk(
        tmp_path: Path, mount: str, expect_rc: int) -> None:
    suite = _suite(tmp_path, WEIGHTS_SUITE)
    db, weights = tmp_path / "r.db", tmp_path / "w"
    weights.mkdir()
    run = " ".join(_cli(str(suite), "--db", str(db), "--save-weights", str(weights)))
    res = subprocess.run(["unshare", "-r", "-m", "sh", "-c",
                          f"{mount.format(w=weights)} && exec {run}"],
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == expect_rc, res.stderr
    assert "Traceback" not in res.stderr
    if expect_rc == 2:                   # checked before anything is computed
        assert res.stderr.strip().splitlines() == [
            f"precision: error: --save-weights {weights}: cannot write into the folder: "
            "Read-only file system"]
        assert not db.exists()
        return
    warnings = [line for line in res.stderr.splitlines() if "warning" in line]
    assert warnings[0].startswith("precision: warning: weights not saved to")
    assert "No space left on device" in warnings[0]
    with Store(db, create=False) as store:                # every result is still stored
        rows = store.runs()
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert all("No space left on device" in r["result"]["weights_error"] for r in rows)


@needs_mounts
def test_checkpoints_onto_a_full_disk_are_one_line_and_store_the_run(tmp_path: Path) -> None:
    """``--checkpoints`` on a full disk: a SafetensorError traceback. Now the save fails in
    one line naming the checkpoint, nothing half-written is left in the folder, and the
    job's record says why (the store, on another disk, stays consistent)."""
    suite = _suite(tmp_path, WEIGHTS_SUITE)
    db, ck = tmp_path / "r.db", tmp_path / "ck"
    ck.mkdir()
    run = " ".join(_cli(str(suite), "--db", str(db), "--checkpoints", str(ck)))
    fill = f"mount -t tmpfs -o size=64k tmpfs {ck} && (head -c 1000000 /dev/zero > {ck}/fill " \
        "|| true)"
    res = subprocess.run(["unshare", "-r", "-m", "sh", "-c", f"{fill} && {run}; "
                          f"echo rc=$?; ls -a {ck}"],
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in res.stderr, res.stderr
    assert "rc=1" in res.stdout, res.stdout + res.stderr   # failed runs: exit 1
    left = set(res.stdout.split("rc=1")[1].split())
    assert left == {".", "..", "fill"}, left                 # no temporary file left behind
    rows = _rows(db)
    assert len(rows) == 2 and all(status == "failed" for _, status, _ in rows)
    assert all("not saved: No space left on device" in error for _, _, error in rows)


def test_a_killed_write_leaves_nothing_the_next_write_of_it_keeps(tmp_path: Path) -> None:
    """``kill -9`` between a weights file's write and its rename left ``<id>.tmp<pid>``
    forever (one full copy per kill). The next write of the same file removes the leftovers
    of writers that no longer run; a live writer's temporary file is never touched."""
    import torch

    from probes.store.owned import temporary_name
    from probes.training.weights import save_weights

    target = tmp_path / "0123456789abcdef.safetensors"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    mine = temporary_name(target)
    killed = mine.with_name(mine.name.rsplit(".", 1)[0] + f".{pid}")
    legacy = target.with_suffix(f".tmp{pid}")                  # the name earlier code used
    live = mine.with_name(mine.name.rsplit(".", 1)[0] + f".{os.getppid()}")
    other = tmp_path / "fedcba9876543210.tmp1"                 # another file's: not ours
    for path in (killed, legacy, live, other):
        path.write_bytes(b"half a weights file")
    save_weights(torch.nn.Linear(2, 2), target, {"family": "x"})
    assert target.is_file()
    assert not killed.exists() and not legacy.exists()
    assert live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [target.name, live.name, other.name])


def test_a_reader_that_leaves_early_never_ends_the_work(tmp_path: Path) -> None:
    """``precision run ... 2>&1 | head -2`` ended the sweep after a few of its runs with
    exit 0 (the first write to the closed pipe raised BrokenPipeError: 1 of 12 stored). What
    is written to a closed stream is now dropped and every run is computed and stored."""
    db = tmp_path / "r.db"
    run = " ".join([sys.executable, "-m", "precision", "run", "solvers", "--profile", "quick",
                    "--solvers", "gd", "--db", str(db), "--no-report"])
    res = subprocess.run(["bash", "-c", f"{run} 2>&1 | head -1; echo rc=${{PIPESTATUS[0]}}"],
                         env=_env(), capture_output=True, text=True, timeout=300)
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and lines[-1] == "rc=0", res.stdout + res.stderr
    rows = _rows(db)
    assert len(rows) == 12 and all(status in ("ok", "failed") for _, status, _ in rows)
