"""The precision command: exit codes, one-line errors, an untouched store, kill and resume."""

import csv
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import one_seed_solvers_suite, solver_store

from precision.cli.listing import SECTIONS
from precision.cli.main import main
from probes.run import subsample as _subsample

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "precision", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    return solver_store(tmp_path_factory.mktemp("store"), "ols_normal,ols_qr,cg")


BAD_RUNS = [
    (["run", "nosuch"], "unknown suite 'nosuch'"),
    (["run", "solvers", "--precisions", "mp0"], "unknown precision 'mp0'"),
    (["run", "solvers", "--precisions", "float31"], "unknown precision 'float31'"),
    (["run", "solvers", "--solvers", "gauss_seidel"], "has no solver gauss_seidel"),
    (["run", "solvers", "--profile", "huge"], "no profile 'huge'"),
    (["run", "solvers", "--jobs", "0"], "--jobs must be at least 1"),
]


@pytest.mark.parametrize("args,message", BAD_RUNS)
def test_bad_input_one_line_exit_2_store_untouched(small_store, args, message, capsys):
    before = digest(small_store)
    rc = main([*args, "--db", str(small_store)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert message in err and "\n" not in err and "Traceback" not in err
    assert digest(small_store) == before


def write_suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


MINIMAL = """
name = "mine"
precisions = ["float32"]
[problems.p]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 6
[solvers.gd]
problems = ["p"]
params = { iters = 50 }
"""


@pytest.mark.parametrize(
    "text,message",
    [
        ("name = 'x'\n[problems\n", "malformed suite file"),
        (MINIMAL.replace('precisions = ["float32"]', 'precisions = ["float31"]'),
         "unknown precision 'float31'"),
        (MINIMAL.replace("task = \"least_squares\"", "task = \"inverse\""),
         "solves 'least_squares'"),
        (MINIMAL.replace("problems = [\"p\"]", "problems = [\"q\"]"), "unknown problem 'q'"),
        (MINIMAL.replace("dim = 3", "dim = -1"), "dim must be a positive integer"),
        (MINIMAL.replace("iters = 50", "iterz = 50"), "has no parameter iterz"),
        (MINIMAL.replace("[solvers.gd]", "[solvers.sor]"), "unknown solver 'sor'"),
        (MINIMAL + "\nbogus = 1\n", "unknown key"),
        (MINIMAL.replace("kind = \"gaussian\"", "kind = \"hilbert\""), "unknown problem 'hilbert'"),
    ],
)
def test_bad_suite_files(tmp_path, text, message, capsys):
    suite = write_suite(tmp_path, text)
    db = tmp_path / "results.db"
    rc = main(["run", str(suite), "--db", str(db)])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert message in err and "\n" not in err
    assert not db.exists()


def test_user_suite_file_runs(tmp_path, capsys):
    suite = write_suite(tmp_path, MINIMAL)
    db = tmp_path / "results.db"
    report_dir = tmp_path / "report"
    args = ["run", str(suite), "--db", str(db), "--no-progress", "--report-dir", str(report_dir)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "problem p" in out and "gd" in out
    assert f"report: {report_dir / 'mine' / 'report.md'}" in out
    assert (report_dir / "mine" / "report.html").exists()
    assert main(args) == 0
    assert "0 computed" in capsys.readouterr().out


def test_results_export_matches_store(small_store, tmp_path, capsys):
    out_csv, out_json = tmp_path / "r.csv", tmp_path / "r.json"
    db = str(small_store)
    assert main(["results", "--db", db, "--format", "csv", "--out", str(out_csv)]) == 0
    assert main(["results", "--db", db, "--format", "json", "--out", str(out_json)]) == 0
    rows = json.loads(out_json.read_text())
    con = sqlite3.connect(small_store)
    stored = dict(con.execute("SELECT run_id, mse FROM runs").fetchall())
    assert len(rows) == len(stored) == 3 * 3 * 2  # 3 solvers x 3 problems x 2 precisions
    for r in rows:
        assert r["mse"] == stored[r["run_id"]]
    lines = out_csv.read_text().splitlines()
    assert len(lines) == len(stored) + 1
    # every number in a column of its own: config and result flattened, no JSON text
    with open(out_csv, newline="") as fh:
        table = list(csv.DictReader(fh))
    assert "config_json" not in table[0] and "result_json" not in table[0]
    by_id = {r["run_id"]: r for r in rows}
    for row in table:
        assert float(row["mse"]) == stored[row["run_id"]]
        assert row["config.solver"] == by_id[row["run_id"]]["config"]["solver"]
        assert not any(v.startswith("{") for v in row.values()), row
    # Exports are deterministic.
    again = tmp_path / "again.csv"
    main(["results", "--db", str(small_store), "--format", "csv", "--out", str(again)])
    assert again.read_bytes() == out_csv.read_bytes()


def test_results_without_store_is_one_line(tmp_path, capsys):
    rc = main(["results", "--db", str(tmp_path / "none.db")])
    assert rc == 2 and "no results store" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_not_a_store_is_one_line(tmp_path, capsys):
    bogus = tmp_path / "bogus.db"
    bogus.write_text("this is not sqlite\n" * 100)
    before = digest(bogus)
    rc = main(["run", "solvers", "--db", str(bogus), "--solvers", "ols_qr"])
    assert rc == 2 and "not a precision results store" in capsys.readouterr().err
    assert digest(bogus) == before


def test_list_and_help(capsys):
    res = run_cli("list")     # the installed entry point, as its own process
    assert res.returncode == 0
    assert "solvers" in res.stdout and "newton_schulz" in res.stdout and "mp50" in res.stdout
    for cmd in ([], ["run"], ["results"], ["list"]):   # in process: ~5 s a start saved
        with pytest.raises(SystemExit) as stop:
            main([*cmd, "--help"])
        assert stop.value.code == 0 and "usage" in capsys.readouterr().out.lower()


def _heavy_modules_after(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python, then print ``heavy: [...]``, the heavy modules (torch,
    numpy, flint, matplotlib) it left imported; the process must exit 0."""
    code += ("heavy = sorted(m for m in ('torch', 'numpy', 'flint', 'matplotlib') "
             "if m in sys.modules)\nprint('heavy:', heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert res.returncode == 0, res.stderr
    return res


def test_help_and_version_import_no_torch():
    """``precision --help``, a command's ``--help`` and ``--version`` parse and print without
    importing torch, numpy or flint (each command imports them when it runs: seconds saved at
    every start; a count of modules, not a timing, so it holds on any machine)."""
    code = ("import sys\n"
            "from precision.cli.main import main\n"
            "for argv in (['--help'], ['run', '--help'], ['probe', '--help'], "
            "['localize', '--help'], ['results', '--help'], ['list', '--help']):\n"
            "    try:\n"
            "        main(argv)\n"
            "    except SystemExit as e:\n"
            "        assert e.code == 0, argv\n"
            "assert main(['--version']) == 0\n")
    res = _heavy_modules_after(code)
    assert "heavy: []" in res.stdout, res.stdout[-300:]


@pytest.mark.parametrize("section", [None, *SECTIONS])
def test_every_list_section_imports_no_torch(section):
    """``precision list`` and each of its sections (every choice ``list --help`` offers) print
    from data alone -- suite files, the catalogs of solvers, constructions and studies, the
    format catalog, the claims file -- without importing torch, numpy or flint: each in its
    own process, so no section hides behind another's imports."""
    argv = ["list"] if section is None else ["list", section]
    code = ("import sys\n"
            "from precision.cli.main import main\n"
            f"assert main({argv!r}) == 0\n")
    res = _heavy_modules_after(code)
    assert res.stdout.rstrip().endswith("heavy: []"), res.stdout[-300:]
    assert (section or "suites") in res.stdout.splitlines()[0]   # its heading comes first


def test_list_columns_are_aligned(capsys):
    """Every listing's texts start in one column, whatever its longest name."""
    assert main(["list", "suites"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    starts = {len(line) - len(line[2:].split("  ", 1)[1].lstrip()) for line in lines}
    assert len(lines) >= 10 and len(starts) == 1, starts


def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path, monkeypatch):
    db = tmp_path / "results.db"
    suite = one_seed_solvers_suite(tmp_path)
    # heavy ball and Nesterov: 16 runs of 1200-1500 steps (GD's 7000 cost 5x the time)
    args = ["run", str(suite), "--db", str(db), "--solvers", "heavy_ball,nesterov",
            "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "precision", *args], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    done = 0
    while time.time() < deadline:
        time.sleep(0.2)
        if db.exists():
            try:
                con = sqlite3.connect(db, timeout=5)
                done = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                con.close()
            except sqlite3.OperationalError:
                continue
            if done >= 3:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 3 <= done < 16, "the sweep should be killed mid-way"

    monkeypatch.chdir(tmp_path)     # the resume: in this process (its report goes there)
    assert main(args) == 0
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ids = [r[0] for r in con.execute("SELECT run_id FROM runs")]
    assert len(ids) == len(set(ids)) == 16  # 2 solvers x 2 problems x 4 precisions
    # Every run has its complete trace.
    for run_id, steps in con.execute("SELECT run_id, steps FROM runs"):
        n = con.execute("SELECT COUNT(*) FROM series WHERE run_id = ? AND name = 'log10_mse'",
                        (run_id,)).fetchone()[0]
        assert n == len(_subsample([0.0] * steps))


def test_progress_on_a_log_is_lines_not_a_bar(capsys):
    """Where stderr is not a terminal (a log, a pipe, pytest's capture), the progress is one
    line per tenth of the runs, never a bar's carriage-return updates."""
    from types import SimpleNamespace

    from precision.cli.common import Progress

    record = SimpleNamespace(result={}, subject="gd", precision="float64", task="p")
    progress = Progress(37, shown=True)
    for done in range(1, 38):
        progress(done, 37, record)
    progress.close()
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert 10 <= len(lines) <= 12 and lines[-1] == "precision: 37/37 runs stored", lines
    Progress(5, shown=False)(1, 5, record)
    assert capsys.readouterr().err == ""
