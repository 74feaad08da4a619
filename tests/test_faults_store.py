"""Faults around the results store, its outputs and weights files (issue #26, sections 1, 3, 5).

Every case asserts the exact one-line message, the exit code and what is on disk afterwards
(the store's bytes and row counts, the previous output file): an output that is one of the
command's inputs, a full disk (a 64 KiB tmpfs, or RLIMIT_FSIZE where mounting is not
allowed), stdout on /dev/full, read-only folders (a read-only tmpfs; an unprivileged user in
a chmod 555 folder), malformed rows, a store missing a column or failing quick_check, and
weights files whose metadata is malformed or names code to import.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import probes
from precision.cli.main import main
from probes.store.atomic import atomic_write, same_file
from probes.store.db import Store, StoreError
from probes.training.job import Job
from probes.training.weights import WeightsError, load_trained_model, load_weights, save_weights
from reports.floor_cells import format_log10

TINY = """
name = "tiny"
precisions = ["float32", "float64"]
[problems.p]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 6
[solvers.gd]
problems = ["p"]
params = { iters = 20 }
[solvers.ols_qr]
problems = ["p"]
"""
N_RUNS = 4  # 2 solvers x 2 precisions


# --- helpers -----------------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def counts(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return (con.execute("SELECT COUNT(*) FROM runs").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM series").fetchone()[0])
    finally:
        con.close()


def one_line(text: str) -> str:
    text = text.strip()
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


def cli(*args: str, stdout: object = subprocess.PIPE, user: int | None = None,
        fsize: int | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m precision ARGS`` in a child (as ``user``, or under RLIMIT_FSIZE)."""
    cmd = [sys.executable, "-m", "precision", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]

    def limit() -> None:
        if fsize is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
                          preexec_fn=limit if fsize is not None else None, env=env,
                          cwd=cwd)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store of the tiny suite (checkpointed: one file, no -wal)."""
    folder = tmp_path_factory.mktemp("built")
    suite = folder / "tiny.toml"
    suite.write_text(TINY)
    db = folder / "results.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert counts(db)[0] == N_RUNS
    return db


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    shutil.copy(built, path)
    return path


@contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (skips where mounting is not allowed)."""
    folder = Path(tempfile.mkdtemp(prefix="precision-tmpfs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        folder.rmdir()


def remount_read_only(folder: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def can_mount() -> bool:
    folder = Path(tempfile.mkdtemp(prefix="precision-probe-"))
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
                            capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", str(folder)], capture_output=True)
        return ok
    except OSError:
        return False
    finally:
        folder.rmdir()


# --- 1. an output that is one of the inputs ---------------------------------------------


@pytest.mark.parametrize("spelling", ["same", "symlink", "relative", "wal", "hardlink"])
def test_results_out_onto_the_store_is_refused(db, tmp_path, spelling, capsys, monkeypatch):
    before, rows = digest(db), counts(db)
    if spelling == "symlink":
        out = tmp_path / "link.csv"
        out.symlink_to(db)
    elif spelling == "hardlink":
        out = tmp_path / "hard.csv"
        os.link(db, out)
    elif spelling == "relative":
        monkeypatch.chdir(tmp_path)
        out = Path("sub/../results.db")
        (tmp_path / "sub").mkdir()
    elif spelling == "wal":
        out = Path(f"{db}-wal")
    else:
        out = db
    capsys.readouterr()
    assert main(["results", "--db", str(db), "--format", "csv", "--out", str(out)]) == 2
    err = one_line(capsys.readouterr().err)
    assert err == (f"precision: error: --out {out} is the results store {db} itself; "
                   "refusing to overwrite it (give another path)")
    assert digest(db) == before and counts(db) == rows


@pytest.mark.parametrize("inside", [False, True])
def test_report_out_onto_or_into_the_store_is_refused(db, tmp_path, inside, capsys):
    before = digest(db)
    out = db / "rep" if inside else db
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--out", str(out)]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"precision: error: --out {out} is the results store {db} itself")
    assert digest(db) == before and db.is_file()


@pytest.mark.parametrize("extra, message", [
    (["--db", "{suite}"], "{suite} is not a precision results store (file is not a database)"),
    (["--db", "{db}", "--report-dir", "{suite}"],
     "cannot write the report to {suite}/tiny: Not a directory (use --report-dir or "
     "--no-report)"),
    (["--db", "{db}", "--report-dir", "{db}"],
     "cannot write the report to {db}/tiny: Not a directory (use --report-dir or --no-report)"),
    (["--db", "{db}", "--save-weights", "{suite}", "--no-report"],
     "--save-weights {suite} is not a folder"),
])
def test_run_outputs_onto_its_inputs_are_refused(db, tmp_path, extra, message, capsys):
    suite = tmp_path / "more.toml"
    suite.write_text(TINY.replace('"float64"', '"mp30"'))
    before = (digest(suite), digest(db), counts(db))
    names = {"suite": suite, "db": db}
    capsys.readouterr()
    assert main(["run", str(suite), "--no-progress",
                 *(a.format(**names) for a in extra)]) == 2
    assert one_line(capsys.readouterr().err) == "precision: error: " + message.format(**names)
    assert (digest(suite), digest(db), counts(db)) == before


def test_same_file_sees_through_spellings(tmp_path, monkeypatch):
    f = tmp_path / "a.db"
    f.write_text("x")
    (tmp_path / "l").symlink_to(f)
    monkeypatch.chdir(tmp_path)
    assert same_file("a.db", f) and same_file(tmp_path / "l", "./a.db")
    assert same_file("new/../a.db", f) and not same_file("b.db", f)


def test_results_out_is_written_atomically(db, tmp_path, capsys):
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    assert main(["results", "--db", str(db), "--format", "csv", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("run_id,suite,") and len(lines) == 1 + N_RUNS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "results.db"]


def test_atomic_write_keeps_the_old_file_on_error(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write("half")
        raise RuntimeError("stop")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


# --- full disk, read-only folders -------------------------------------------------------


def test_results_out_onto_a_full_disk(db, tmp_path, capsys):
    if can_mount():
        with tmpfs("64k") as folder:
            out = folder / "out.json"
            out.write_text("keep me\n")
            fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
            try:  # fill the disk to the last byte
                while True:
                    os.write(fd, b"\0" * 1024)
            except OSError:
                pass
            finally:
                os.close(fd)
            capsys.readouterr()
            assert main(["results", "--db", str(db), "--format", "json", "--out",
                         str(out)]) == 2
            assert one_line(capsys.readouterr().err) == (
                f"precision: error: cannot write {out}: No space left on device; {out} is "
                "unchanged")
            assert out.read_text() == "keep me\n"
            assert sorted(p.name for p in folder.iterdir()) == ["filler", "out.json"]
    else:  # no mount: the same error through RLIMIT_FSIZE (EFBIG)
        out = tmp_path / "out.json"
        out.write_text("keep me\n")
        done = cli("results", "--db", str(db), "--format", "json", "--out", str(out),
                   fsize=2048)
        assert done.returncode == 2
        assert one_line(done.stderr) == (f"precision: error: cannot write {out}: File too "
                                         f"large; {out} is unchanged")
        assert out.read_text() == "keep me\n"
    assert counts(db)[0] == N_RUNS


@pytest.fixture
def read_only_store(built: Path) -> Iterator[Path]:
    """The tiny store in a read-only filesystem (read-only even for root)."""
    with tmpfs("2m") as folder:
        path = folder / "results.db"
        shutil.copy(built, path)
        remount_read_only(folder)
        yield path


def test_a_store_on_a_read_only_filesystem_can_be_read(read_only_store, tmp_path, capsys):
    db = read_only_store
    before = digest(db)
    assert main(["results", "--db", str(db)]) == 0
    assert "ols_qr" in capsys.readouterr().out
    assert main(["results", "--db", str(db), "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + N_RUNS
    assert main(["delete", "--db", str(db), "--suite", "tiny", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(f"would delete {N_RUNS} runs (suite tiny)")
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0
    capsys.readouterr()
    frame = probes.runs(db)
    assert len(frame) == N_RUNS
    assert len(probes.series(db, frame["run_id"][0])) > 0
    # Writing is one line, and leaves the store as it was.
    assert main(["delete", "--db", str(db), "--suite", "tiny"]) == 2
    assert "is not writable" in one_line(capsys.readouterr().err)
    out = db.parent / "out.csv"
    assert main(["results", "--db", str(db), "--out", str(out)]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"precision: error: cannot write {out}: Read-only file system; nothing was written")
    assert digest(db) == before and sorted(p.name for p in db.parent.iterdir()) == [
        "results.db"]


AS_NOBODY = """
import contextlib, io, json, sys
import probes
from precision.cli.main import main
db = sys.argv[1]
got = {}
for name, args in [("results", ["results", "--db", db, "--format", "csv"]),
                   ("dry-run", ["delete", "--db", db, "--suite", "tiny", "--dry-run"]),
                   ("report", ["report", "--db", db, "--out", "/tmp/precision-report-65534"]),
                   ("delete", ["delete", "--db", db, "--suite", "tiny"])]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    got[name] = [code, out.getvalue(), err.getvalue()]
frame = probes.runs(db)
got["api"] = [len(frame), len(probes.series(db, frame["run_id"][0]))]
print(json.dumps(got))
"""


def test_a_read_only_store_with_pending_wal_writes_is_refused(built, tmp_path, capsys):
    work = tmp_path / "w.db"
    shutil.copy(built, work)
    con = sqlite3.connect(work)               # a writer holding a delete in its -wal file
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("DELETE FROM series")
    con.commit()
    with tmpfs("2m") as folder:
        for suffix in ("", "-wal"):
            shutil.copy(f"{work}{suffix}", folder / f"results.db{suffix}")
        con.close()
        remount_read_only(folder)
        db = folder / "results.db"
        capsys.readouterr()
        assert main(["results", "--db", str(db)]) == 2
        assert one_line(capsys.readouterr().err) == (
            f"precision: error: cannot read results store {db}: it is read-only here and "
            "results.db-wal holds writes not yet in the store (open it once where it can be "
            "written)")


ROOT_DIR = Path(__file__).resolve().parents[1]


def test_an_unprivileged_user_reads_a_store_in_a_chmod_555_folder(built):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a child as the unprivileged user 65534")
    top = Path(tempfile.mkdtemp(prefix="precision-ro-"))      # /tmp: user 65534 may enter
    folder = top / "ro"
    folder.mkdir()
    db = folder / "results.db"
    shutil.copy(built, db)
    for p in (top, folder):
        p.chmod(0o555)
    db.chmod(0o444)
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-c", "import numpy, flint, torch; "
                            f"open({str(folder / 'x')!r}, 'w')"],
                           capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT_DIR)})
    if "PermissionError" not in probe.stderr:  # e.g. a virtual environment in a 0700 folder
        pytest.skip("user 65534 can write the folder, or cannot run this environment's "
                    f"Python and packages: {probe.stderr.strip().splitlines()[-1:]}")
    try:
        before = digest(db)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-c", AS_NOBODY, str(db)], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.splitlines()[-1])
        assert got["results"][0] == 0 and len(got["results"][1].splitlines()) == 1 + N_RUNS
        assert got["dry-run"][0] == 0
        assert got["dry-run"][1].startswith(f"would delete {N_RUNS} runs")
        assert got["report"][0] == 0, got["report"]
        assert got["delete"][0] == 2 and one_line(got["delete"][2]) == (
            f"precision: error: results store {db} is not writable (its file is read-only); "
            "nothing was written")
        assert got["api"][0] == N_RUNS and got["api"][1] > 0
        assert digest(db) == before and [p.name for p in folder.iterdir()] == ["results.db"]
    finally:
        shutil.rmtree("/tmp/precision-report-65534", ignore_errors=True)
        for p in (top, folder):
            p.chmod(0o755)
        shutil.rmtree(top)


FULL = "precision: error: cannot write to standard output: No space left on device"


def test_stdout_on_dev_full_is_one_line_up_to_the_exit():
    with open("/dev/full", "w") as full:     # a real process: also the interpreter's exit
        done = cli("list", stdout=full)
    assert done.returncode == 2 and one_line(done.stderr) == FULL


@pytest.mark.parametrize("args", [["list", "precisions"], ["--version"],
                                  ["results", "--db", "{db}"],
                                  ["results", "--db", "{db}", "--format", "json"],
                                  ["delete", "--db", "{db}", "--suite", "tiny", "--dry-run"],
                                  ["run", "{suite}", "--db", "{db}", "--no-progress",
                                   "--no-report"]])
def test_stdout_on_dev_full_is_one_line(db, tmp_path, args, capsys, monkeypatch):
    suite = tmp_path / "more.toml"
    suite.write_text(TINY.replace('"float64"', '"float64", "mp30"'))
    before = counts(db)
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = main([a.format(db=db, suite=suite) for a in args])
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == FULL
    if args[0] == "run":                     # the computed runs are stored all the same
        assert counts(db)[0] == N_RUNS + 2
    else:
        assert counts(db) == before and len(err.strip().splitlines()) == 1


# --- malformed stores ---------------------------------------------------------------------


def _allow_nulls(db: Path) -> None:
    """Drop the NOT NULL constraints of ``runs`` (as a store written by another tool might
    lack them); the data and the file's integrity are unchanged."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA writable_schema = ON")
    con.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') "
                "WHERE name = 'runs'")
    con.commit()
    con.close()


BAD_ROWS = {
    "null": ("subject = NULL", "subject is NULL, not text"),
    "non-json": ("result_json = '{broken'", "result_json is not JSON ('{broken')"),
    "json-list": ("config_json = '[1, 2]'", "config_json is JSON list, not an object"),
    "text-in-real": ("mse = 'abc'", "mse is 'abc', not a number"),
    "real-in-int": ("steps = 2.5", "steps is 2.5, not an integer"),
    "nested": ("""result_json = '{"floor": 3}'""", "result.floor is 3, not a JSON object"),
    "precision": ("precision = 'float99'", "precision is 'float99', not a precision"),
}


@pytest.fixture(params=sorted(BAD_ROWS))
def bad_row(request, db: Path) -> tuple[Path, str, str]:
    """The tiny store with one run's row damaged; (store, that run's id, the message)."""
    change, message = BAD_ROWS[request.param]
    _allow_nulls(db)
    con = sqlite3.connect(db)
    run_id = con.execute("SELECT run_id FROM runs WHERE subject = 'gd' AND "
                         "precision = 'float64'").fetchone()[0]
    con.execute(f"UPDATE runs SET {change} WHERE run_id = ?", (run_id,))
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db, run_id, message


def _warning(db: Path, run_id: str, message: str) -> str:
    return (f"precision: warning: results store {db}: skipping run {run_id}: {message} "
            f"(precision delete --run-id {run_id})")


def test_a_malformed_row_is_skipped_and_named(bad_row, tmp_path, capsys):
    db, run_id, message = bad_row
    before = digest(db)
    capsys.readouterr()
    assert main(["results", "--db", str(db), "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert one_line(captured.err) == _warning(db, run_id, message)
    lines = captured.out.splitlines()
    assert len(lines) == N_RUNS and not any(run_id in line for line in lines)
    assert main(["results", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert one_line(captured.err) == _warning(db, run_id, message) and "ols_qr" in captured.out
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0
    assert _warning(db, run_id, message) in capsys.readouterr().err
    frame = probes.runs(db)
    assert len(frame) == N_RUNS - 1 and run_id not in set(frame["run_id"])
    assert one_line(capsys.readouterr().err) == _warning(db, run_id, message)
    assert digest(db) == before


def test_run_serves_the_rest_of_a_store_with_a_malformed_row(db, tmp_path, capsys):
    con = sqlite3.connect(db)
    run_id = con.execute("SELECT run_id FROM runs WHERE subject = 'gd' AND "
                         "precision = 'float64'").fetchone()[0]
    con.execute("UPDATE runs SET result_json = '{broken' WHERE run_id = ?", (run_id,))
    con.commit()
    con.close()
    message = BAD_ROWS["non-json"][1]
    suite = tmp_path / "more.toml"
    suite.write_text(TINY.replace('"float64"', '"float64", "mp30"'))
    capsys.readouterr()
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    captured = capsys.readouterr()
    assert _warning(db, run_id, message) in captured.err and "Traceback" not in captured.err
    assert counts(db)[0] == N_RUNS + 2                       # the two mp30 runs were added


def test_a_malformed_trace_point_is_left_out(db, capsys):
    con = sqlite3.connect(db)
    run_id, name = con.execute("SELECT run_id, name FROM series LIMIT 1").fetchone()
    n = con.execute("SELECT COUNT(*) FROM series WHERE run_id = ?", (run_id,)).fetchone()[0]
    con.execute("UPDATE series SET value = 'x' WHERE run_id = ? AND step = "
                "(SELECT MIN(step) FROM series WHERE run_id = ? AND name = ?) AND name = ?",
                (run_id, run_id, name, name))
    con.commit()
    con.close()
    capsys.readouterr()
    frame = probes.series(db, run_id)
    assert len(frame) == n - 1 and frame["value"].dtype == "float64"
    assert one_line(capsys.readouterr().err) == (
        f"precision: warning: results store {db}: skipping run {run_id}: 1 malformed trace "
        f"point(s) (a NULL or non-numeric name, step or value) left out of its series "
        f"(precision delete --run-id {run_id})")


@pytest.mark.parametrize("command", ["results", "run", "delete", "api"])
def test_a_store_missing_a_column_is_refused_before_any_work(db, tmp_path, command, capsys):
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE runs DROP COLUMN worker")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before, rows = digest(db), counts(db)
    message = (f"results store {db} lacks column runs.worker (damaged or not written by "
               "precision); nothing was read or written")
    capsys.readouterr()
    if command == "api":
        with pytest.raises(StoreError) as info:
            probes.runs(db)
        assert str(info.value) == message
    else:
        suite = tmp_path / "more.toml"
        suite.write_text(TINY.replace('"float64"', '"mp30"'))
        args = {"results": ["results", "--db", str(db)],
                "run": ["run", str(suite), "--db", str(db), "--no-progress", "--no-report"],
                "delete": ["delete", "--db", str(db), "--suite", "tiny"]}[command]
        assert main(args) == 2
        assert one_line(capsys.readouterr().err) == f"precision: error: {message}"
    assert digest(db) == before and counts(db) == rows


def _damage_index(db: Path) -> None:
    """Overwrite the ``runs_suite`` index's page: the tables still read, quick_check fails."""
    con = sqlite3.connect(db)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs_suite'"
                       ).fetchone()[0]
    con.close()
    with open(db, "r+b") as f:
        f.seek(page * (root - 1))
        f.write(b"\x0a" + bytes(page - 1))


@pytest.mark.parametrize("command", ["delete", "results", "dry-run"])
def test_a_store_failing_quick_check_is_refused(db, command, capsys):
    _damage_index(db)
    before = digest(db)
    args = {"delete": ["delete", "--db", str(db), "--suite", "tiny"],
            "dry-run": ["delete", "--db", str(db), "--suite", "tiny", "--dry-run"],
            "results": ["results", "--db", str(db)]}[command]
    capsys.readouterr()
    assert main(args) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"precision: error: results store {db} is damaged (quick_check: ")
    assert err.endswith("); nothing was read or written")
    assert digest(db) == before


# --- CLI options ------------------------------------------------------------------------


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("precision ") and out.count("\n") == 1


def test_results_filters(db, capsys):
    def rows(*args: str) -> list[str]:
        assert main(["results", "--db", str(db), "--format", "csv", *args]) == 0
        return capsys.readouterr().out.splitlines()[1:]

    assert len(rows()) == N_RUNS
    assert len(rows("--precision", "float64")) == 2 == len(rows("--precision", "FP64"))
    assert len(rows("--model", "gd")) == 2 == len(rows("--subject", "gd"))
    assert len(rows("--model", "gd", "--precision", "float32", "--status", "ok")) == 1
    assert len(rows("--suite", "tiny", "--task", "p")) == N_RUNS
    assert main(["results", "--db", str(db), "--model", "nobody"]) == 2
    assert one_line(capsys.readouterr().err).endswith("match --model nobody; nothing was written")
    out = db.parent / "none.csv"
    assert main(["results", "--db", str(db), "--status", "failed", "--out", str(out)]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"precision: error: no runs in {db} match --status failed; nothing was written")
    assert not out.exists()


@pytest.mark.parametrize("option", ["--suite", "--model", "--task", "--precision", "--status",
                                    "--out"])
def test_results_empty_option_is_an_error(db, option, capsys):
    assert main(["results", "--db", str(db), option, ""]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"precision: error: {option} is empty (give a value, or leave the option out)")


def test_report_out_empty_is_an_error(db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["report", "--db", str(db), "--out", ""]) == 2
    assert one_line(capsys.readouterr().err) == (
        "precision: error: --out is empty (give a value, or leave the option out)")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_values_below_the_float64_range_print_with_their_mantissa():
    assert format_log10(-2001.7) == "2.0e-2002"
    assert format_log10(-2002.0) == "1.0e-2002"
    assert format_log10(-400.0) == "1.0e-400"
    assert format_log10(-308.2) == "6.3e-309"
    assert format_log10(-999.99) == "1.0e-1000"          # rounding carries into the exponent
    assert format_log10(-14.0) == "1.0e-14"


def test_a_tiny_log10_is_stored_and_read_back_exactly(tmp_path):
    from probes.store.db import RunRecord

    with Store(tmp_path / "r.db") as s:
        s.write_run(RunRecord(run_id="x", suite="s", kind="solver", subject="ols_qr", task="t",
                              precision="mp100", status="ok", mse=0.0, log10_mse=-2001.7,
                              floor_log10=-2001.7))
    row = probes.runs(tmp_path / "r.db").iloc[0]
    assert row["log10_mse"] == -2001.7 and format_log10(row["floor_log10"]) == "2.0e-2002"


# --- weights ------------------------------------------------------------------------------

JOB = {"family": "baseconv", "task": "multiply", "task_options": {"dim": 4, "n": 4},
       "model_options": {"layernorm": False}, "depth": 1, "width": 4, "seed": 0,
       "train": {"recipe": "paper", "steps": 5, "batch_size": 4}}


def _model() -> torch.nn.Module:
    return Job.from_config(JOB).build()[1]


def make_small(d_in: int, d_out: int, depth: int, width: int, **options: object
               ) -> torch.nn.Module:
    """A user factory passed explicitly by the caller."""
    return _model()


MARKER_MODULE = """
from pathlib import Path
Path({marker!r}).write_text("imported")
def make_small(d_in, d_out, depth, width, max_len=0):
    raise SystemExit("must never run")
"""


@pytest.mark.parametrize("how", ["module", "file"])
def test_loading_never_imports_the_factory_the_file_names(tmp_path, monkeypatch, how):
    marker = tmp_path / "code-ran"
    code = MARKER_MODULE.format(marker=str(marker))
    (tmp_path / "evil_precision_factory.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    family = ("evil_precision_factory:make_small" if how == "module"
              else f"{tmp_path / 'evil_precision_factory.py'}:make_small")
    path = save_weights(_model(), tmp_path / "w.safetensors", {**JOB, "family": family})
    with pytest.raises(WeightsError) as info:
        load_trained_model(path)
    assert str(info.value) == (
        f"{path} holds a model of the factory '{family}', which loading never imports: "
        "pass the factory yourself, load_trained_model(path, factory=...)")
    tensors, job = load_weights(path)
    assert job["family"] == family and set(tensors) == set(_model().state_dict())
    model, job = load_trained_model(path, factory=make_small)  # the caller's own factory
    assert job["family"] == family
    for k, v in _model().state_dict().items():
        assert torch.equal(model.state_dict()[k].double(), v)
    assert not marker.exists() and "evil_precision_factory" not in sys.modules


def test_weights_load_from_any_folder(tmp_path, monkeypatch):
    sub = tmp_path / "home" / "w"
    path = save_weights(_model(), sub / "m.safetensors", JOB)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for spelling in ("home/w/m.safetensors", "~/w/m.safetensors", str(path)):
        model, job = load_trained_model(spelling)
        assert job == {**JOB} and isinstance(model, torch.nn.Module)


def _raw_safetensors(path: Path, header: dict, data: bytes = b"") -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


MALFORMED_JOBS = {
    "width-text": ({**JOB, "width": "8"}, "job config field 'width' is '8', not an integer "
                   "in [0, 1000000]"),
    "no-task": ({k: v for k, v in JOB.items() if k != "task"},
                "the job config in its metadata lacks 'task'"),
    "options-list": ({**JOB, "model_options": [1]}, "job config field 'model_options' is "
                     "[1], not a table"),
    "deep": ({**JOB, "depth": 10**7}, "job config field 'depth' is 10000000, not an integer "
             "in [0, 10000]"),
    "huge-dim": ({**JOB, "task_options": {"dim": 10**12, "n": 4}}, "job config "
                 "task_options.dim is 1000000000000, not an integer in [0, 1000000]"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_JOBS))
def test_malformed_job_metadata_is_one_line(tmp_path, case):
    job, message = MALFORMED_JOBS[case]
    path = save_weights(_model(), tmp_path / "m.safetensors", job)
    with pytest.raises(WeightsError) as info:
        load_trained_model(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_job_asking_for_a_huge_model_is_refused_before_allocating(tmp_path):
    # width 100000: the transformer would need ~10^11 parameters (~800 GB); checked on meta.
    job = {"family": "transformer", "task": "multiply", "task_options": {"dim": 4, "n": 4},
           "model_options": {}, "depth": 4, "width": 100_000, "seed": 0, "train": JOB["train"]}
    path = save_weights(_model(), tmp_path / "m.safetensors", job)
    with pytest.raises(WeightsError, match=r"does not fit the model of its job config: "
                                           r"missing "):
        load_trained_model(path)


def test_a_header_asking_for_40_gb_is_refused_before_allocating(tmp_path):
    meta = {"job": json.dumps(JOB)}
    shape = [100_000, 100_000]                                       # 40 GB of float32
    lying = _raw_safetensors(tmp_path / "lying.safetensors", {
        "__metadata__": meta, "w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 8]}},
        bytes(8))
    with pytest.raises(WeightsError) as info:
        load_trained_model(lying)
    assert str(info.value) == (f"{lying}: malformed safetensors header: tensor 'w' declares "
                               "shape (100000, 100000) of F32 (40000000000 bytes) but holds "
                               "8 bytes")
    sparse = tmp_path / "sparse.safetensors"
    _raw_safetensors(sparse, {"__metadata__": meta,
                              "w": {"dtype": "F32", "shape": shape,
                                    "data_offsets": [0, 40_000_000_000]}})
    with open(sparse, "r+b") as f:                       # a 40 GB sparse file: no disk used
        f.truncate(sparse.stat().st_size + 40_000_000_000)
    with pytest.raises(WeightsError) as info:
        load_trained_model(sparse)
    assert str(info.value) == f"{sparse}: its tensors would take more than 4 GiB; refused " \
                              "before reading"


@pytest.mark.parametrize("header, message", [
    ({"w": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}},
     "tensor 'w' has dtype 'F99' (known: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)"),
    ({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}},
     "tensor 'w' has shape [-2], not a list of non-negative integers"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}},
     "tensor 'w' has data_offsets [0, 800] outside the file's 8 data bytes"),
    ({"w": [1, 2]}, "tensor 'w' lacks dtype, shape or data_offsets"),
])
def test_a_malformed_header_entry_is_one_line(tmp_path, header, message):
    path = _raw_safetensors(tmp_path / "m.safetensors",
                            {"__metadata__": {"job": json.dumps(JOB)}, **header}, bytes(8))
    with pytest.raises(WeightsError) as info:
        load_weights(path)
    assert str(info.value) == f"{path}: malformed safetensors header: {message}"


def test_a_header_that_is_not_json_or_has_bad_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"{{{{")
    with pytest.raises(WeightsError, match="is not a safetensors weights file .its header is "
                                           "not JSON.; only safetensors is loaded"):
        load_weights(path)
    _raw_safetensors(path, {"__metadata__": {"job": 3}})
    with pytest.raises(WeightsError, match="malformed safetensors metadata"):
        load_weights(path)
    _raw_safetensors(path, {"__metadata__": {"job": "[1]"}})
    with pytest.raises(WeightsError, match="the job config in its metadata is not a JSON "
                                           "object"):
        load_weights(path)
