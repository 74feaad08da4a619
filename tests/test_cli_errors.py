"""Bad input never costs a traceback or stored work (issue #14).

Each case is one line on stderr and exit 2; nothing is computed when the error could be
known before computing, and the store is left as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from test_faults_stop import ENTRY, GRID

import probes.runner
import probes.store.db
from precision.cli.main import build_parser, main
from probes.suite import load_suite

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


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(folder: Path, text: str, name: str = "tiny.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run ids the runner computes (the real computation still runs)."""
    calls: list[str] = []
    real = probes.runner.compute_records

    def spy(run, options=None):
        calls.append(run.run_id)
        return real(run, options)

    monkeypatch.setattr(probes.runner, "compute_records", spy)
    return calls


@pytest.fixture
def tiny_store(tmp_path: Path) -> Path:
    db = tmp_path / "results.db"
    assert main(["run", str(write(tmp_path, TINY)), "--db", str(db), "--no-progress",
                 "--no-report"]) == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


def run_args(suite: Path, db: Path, *extra: str) -> list[str]:
    return ["run", str(suite), "--db", str(db), "--no-progress", *extra]


# --- 1. the suite name is part of a run's identity -----------------------------------------

def test_a_copy_under_another_name_computes_its_own_runs(tmp_path, capsys):
    db, reports = tmp_path / "results.db", tmp_path / "report"
    assert main(run_args(write(tmp_path, TINY), db, "--report-dir", str(reports))) == 0
    capsys.readouterr()
    copy = write(tmp_path, TINY.replace('name = "tiny"', 'name = "tiny_copy"'), "copy.toml")
    assert main(run_args(copy, db, "--report-dir", str(reports))) == 0
    captured = capsys.readouterr()
    assert "4 runs, 0 already in" in captured.err
    assert "problem p" in captured.out and "ols_qr" in captured.out
    assert "4 computed" in captured.out
    assert main(["results", "--db", str(db), "--suite", "tiny_copy"]) == 0
    assert "ols_qr" in capsys.readouterr().out
    assert "ols_qr" in (reports / "tiny_copy" / "report.md").read_text()
    con = sqlite3.connect(db)
    assert dict(con.execute("SELECT suite, COUNT(*) FROM runs GROUP BY suite")) == \
        {"tiny": 4, "tiny_copy": 4}
    # The numbers are the same computation: bit-identical between the two suites.
    mse = {}
    for _suite, subject, prec, value in con.execute(
            "SELECT suite, subject, precision, mse FROM runs"):
        mse.setdefault((subject, prec), set()).add(value)
    assert all(len(v) == 1 for v in mse.values())


@pytest.mark.parametrize("suite,profile", [("primitives", "quick"),
                                           ("representations", "quick")])
def test_trained_and_study_run_ids_depend_on_the_suite_name(suite, profile):
    base = load_suite(suite, profile=profile)
    other = dataclasses.replace(base, settings=dataclasses.replace(base.settings,
                                                                   name="renamed"))
    ids = {i for r in list(base.runs) for i in r.ids}
    renamed = {i for r in list(other.runs) for i in r.ids}
    assert ids and len(renamed) == len(ids) and not ids & renamed


# --- 2. tracebacks become one line ---------------------------------------------------------

def test_float_iteration_count_is_one_line_before_the_store(tmp_path, capsys):
    db = tmp_path / "results.db"
    rc = main(run_args(write(tmp_path, TINY.replace("iters = 20", "iters = 1e9")), db))
    assert rc == 2
    assert "iters must be a positive integer" in one_line_error(capsys)
    assert not db.exists()


def test_results_into_a_missing_folder(tiny_store, tmp_path, capsys):
    rc = main(["results", "--db", str(tiny_store), "--out", "/nonexistent/x.csv"])
    assert rc == 2 and "cannot write /nonexistent/x.csv" in one_line_error(capsys)


def test_report_into_an_existing_file(tiny_store, tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep me\n")
    rc = main(["report", "--db", str(tiny_store), "--out", str(target)])
    assert rc == 2 and "cannot write the report" in one_line_error(capsys)
    assert target.read_text() == "keep me\n"


def _damage_runs_table(db: Path) -> None:
    """Overwrite the root page of the ``runs`` table with garbage."""
    con = sqlite3.connect(db)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    con.close()
    with open(db, "r+b") as f:
        f.seek(page * (root - 1))
        f.write(bytes(range(256)) * (page // 256))


@pytest.mark.parametrize("command", ["results", "report", "run", "delete"])
def test_a_damaged_store_is_one_line_and_left_alone(tiny_store, tmp_path, command, capsys,
                                                    computed):
    _damage_runs_table(tiny_store)
    before = digest(tiny_store)
    args = {"results": ["results", "--db", str(tiny_store)],
            "report": ["report", "--db", str(tiny_store), "--out", str(tmp_path / "rep")],
            "run": run_args(write(tmp_path, TINY.replace("float64", "mp30"), "more.toml"),
                            tiny_store, "--no-report"),
            "delete": ["delete", "--db", str(tiny_store), "--status", "failed"]}[command]
    capsys.readouterr()
    assert main(args) == 2
    assert "is damaged" in one_line_error(capsys)
    assert digest(tiny_store) == before
    assert computed == []


def _read_only_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store module open every database read-only (SQLite ``mode=ro``): what a
    write-protected file gives a non-root user (root may write through chmod)."""
    real = sqlite3.connect

    def connect(database, *args, uri=False, **kwargs):
        target = str(database)
        if not uri:
            target = Path(target).absolute().as_uri()
        target = target.split("?")[0] + "?mode=ro"
        return real(target, *args, uri=True, **kwargs)

    monkeypatch.setattr(probes.store.db.sqlite3, "connect", connect)


def test_a_read_only_store_fails_before_computing(tiny_store, tmp_path, monkeypatch, capsys,
                                                  computed):
    before = digest(tiny_store)
    _read_only_sqlite(monkeypatch)
    more = write(tmp_path, TINY.replace("float64", "mp30"), "more.toml")
    capsys.readouterr()
    assert main(run_args(more, tiny_store, "--no-report")) == 2
    assert "not writable" in one_line_error(capsys)
    assert computed == [] and digest(tiny_store) == before
    # Reading a read-only store still works.
    assert main(["results", "--db", str(tiny_store), "--format", "csv"]) == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_chmod_read_only_store_fails_before_computing(tiny_store, tmp_path, what, capsys,
                                                      computed):
    target = tiny_store if what == "file" else tiny_store.parent
    mode = target.stat().st_mode
    target.chmod(0o444 if what == "file" else 0o555)
    try:
        more = write(tmp_path / "..", TINY.replace("float64", "mp30"), "more_ro.toml")
        capsys.readouterr()
        assert main(run_args(more, tiny_store, "--no-report")) == 2
        one_line_error(capsys)
        assert computed == []
    finally:
        target.chmod(mode)


def test_a_store_path_under_a_regular_file(tmp_path, capsys, computed):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    rc = main(run_args(write(tmp_path, TINY), blocker / "results.db", "--no-report"))
    assert rc == 2 and "results store" in one_line_error(capsys)
    assert computed == [] and blocker.read_text() == "x"


def test_an_unwritable_report_dir_fails_before_computing(tiny_store, tmp_path, capsys,
                                                         computed):
    blocker = tmp_path / "report_file"
    blocker.write_text("x")
    before = digest(tiny_store)
    more = write(tmp_path, TINY.replace("float64", "mp30"), "more.toml")
    capsys.readouterr()
    assert main(run_args(more, tiny_store, "--report-dir", str(blocker))) == 2
    assert "cannot write the report" in one_line_error(capsys)
    assert computed == [] and digest(tiny_store) == before


def test_an_impossible_weights_folder_fails_before_computing(tiny_store, tmp_path, capsys,
                                                             computed):
    blocker = tmp_path / "weights_file"
    blocker.write_text("x")
    more = write(tmp_path, TINY.replace("float64", "mp30"), "more.toml")
    capsys.readouterr()
    rc = main(run_args(more, tiny_store, "--no-report", "--save-weights", str(blocker / "w")))
    assert rc == 2 and "--save-weights" in one_line_error(capsys)
    assert computed == []


# --- 3. invalid parameters are never computed or stored ------------------------------------

BAD_VALUES = [
    (TINY.replace("iters = 20", "iters = -5"), "iters must be a positive integer"),
    (TINY.replace("iters = 20", 'step = "fast"'), "step must be a positive number"),
    (TINY.replace("iters = 20", "iters = true"), "iters must be a positive integer"),
    (TINY.replace('[solvers.ols_qr]\nproblems = ["p"]',
                  '[solvers.ridge]\nproblems = ["p"]\nparams = { lam = -100 }'),
     "lam must be a number >= 0"),
    (TINY.replace("dim = 3", "dim = true"), "dim must be a positive integer"),
    (TINY.replace("n_samples = 6", "n_samples = 6\nnoise_std = \"loud\""),
     "noise_std must be a finite number >= 0"),
    (TINY.replace("n_samples = 6", "n_samples = 6\nnoise_std = nan"),
     "noise_std must be a finite number >= 0"),
    (TINY.replace("seeds", "x").replace('precisions = ["float32", "float64"]',
                                        'precisions = ["float32"]\nseeds = [-1]'),
     "seeds must be integers"),
    (TINY.replace("seeds", "x").replace('precisions = ["float32", "float64"]',
                                        'precisions = ["float32"]\nseeds = [true]'),
     "'seeds' must be a non-empty list of int"),
    (TINY + "\nwhen = 1979-05-27\n", "dates and times are not suite values"),
]


@pytest.mark.parametrize("text,message", BAD_VALUES)
def test_invalid_parameters_are_rejected_before_the_store(tmp_path, text, message, capsys):
    db = tmp_path / "results.db"
    assert main(run_args(write(tmp_path, text), db)) == 2
    assert message in one_line_error(capsys)
    assert not db.exists()


@pytest.mark.parametrize("table", ["studies", "models", "solvers"])
def test_a_profile_over_an_entry_that_is_not_a_table(tmp_path, table, capsys):
    """Found by the fuzzer: ``dict()`` of a list entry raised TypeError."""
    text = (f'name = "p"\nprecisions = ["float64"]\n{table} = {{ a = [1] }}\n'
            f'[profiles.quick]\n{table} = {{ a = {{ d = 2 }} }}\n')
    db = tmp_path / "results.db"
    assert main(run_args(write(tmp_path, text), db, "--profile", "quick")) == 2
    assert "must be a table" in one_line_error(capsys)
    assert not db.exists()


MODEL_SUITE = """
name = "models"
precisions = ["float32"]
[tasks.mul]
task = "multiply"
dim = 4
n = 5
[models.bc]
family = "baseconv"
tasks = ["mul"]
depth = 1
width = 8
train = { recipe = "paper", steps = 5, batch_size = 4 }
"""


@pytest.mark.parametrize("change,message", [
    (("depth = 1", "depth = 1\ntest_size = 0"), "test_size must be a positive integer"),
    (("depth = 1", "depth = 1\ntest_size = \"many\""), "test_size must be a positive integer"),
    (("depth = 1", "depth = 1\niterate = -1"), "iterate must be a non-negative integer"),
    (("steps = 5", "steps = 5, lr = -1.0"), "train lr must be a positive number"),
    (("steps = 5", "steps = 5, gamma = 2.0"), "train gamma must be a positive number <= 1"),
    (("depth = 1", "depth = true"), "depth and width must be positive integers"),
])
def test_invalid_model_entries_are_rejected(tmp_path, change, message, capsys):
    db = tmp_path / "results.db"
    text = MODEL_SUITE.replace(*change)
    assert text != MODEL_SUITE
    assert main(run_args(write(tmp_path, text), db)) == 2
    assert message in one_line_error(capsys)
    assert not db.exists()


# --- 5. impossible shapes are a SuiteError before anything is built ------------------------

@pytest.mark.parametrize("text,message", [
    (TINY.replace("n_samples = 6", "n_samples = 100000000"),
     "problem too large: n_samples x dim = 100000000 x 3"),
    (TINY.replace("dim = 3", "dim = 100000"), "problem too large"),
    (MODEL_SUITE.replace("width = 8", "width = 1000000"), "model too large"),
    (MODEL_SUITE.replace("width = 8", "width = 4096").replace("depth = 1", "depth = 64"),
     "model too large"),
    (MODEL_SUITE.replace("n = 5", "n = 1000000"), "n = 1000000 is too large"),
    (MODEL_SUITE.replace("batch_size = 4", "batch_size = 60000").replace("n = 5", "n = 5000"),
     "batch_size 60000"),
])
def test_impossible_shapes_are_one_line(tmp_path, text, message, capsys):
    db = tmp_path / "results.db"
    assert main(run_args(write(tmp_path, text), db)) == 2
    assert message in one_line_error(capsys)
    assert not db.exists()


# --- 6. a suite name is never a path --------------------------------------------------------

@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "", "tab\tname", "ü"])
def test_suite_names_that_are_paths_are_rejected(tmp_path, name, capsys):
    work = tmp_path / "work"
    work.mkdir()
    text = TINY.replace('name = "tiny"', f'name = "{name}"')
    db = work / "results.db"
    rc = main(run_args(write(work, text), db, "--report-dir", str(work / "report")))
    assert rc == 2 and "invalid suite name" in one_line_error(capsys)
    assert not db.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_suite_name_must_be_a_string(tmp_path, capsys):
    assert main(run_args(write(tmp_path, TINY.replace('name = "tiny"', "name = 3")),
                         tmp_path / "r.db")) == 2
    assert "invalid suite name 3" in one_line_error(capsys)


# --- 4. precision delete --------------------------------------------------------------------

def _counts(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(db)
    try:
        return (con.execute("SELECT COUNT(*) FROM runs").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM series").fetchone()[0])
    finally:
        con.close()


def test_delete_selected_runs(tiny_store, tmp_path, capsys):
    db = str(tiny_store)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET status = 'failed' WHERE subject = 'gd' AND "
                "precision = 'float32'")
    con.commit()
    failed_id = con.execute("SELECT run_id FROM runs WHERE status = 'failed'").fetchone()[0]
    con.close()
    runs, series = _counts(tiny_store)
    assert runs == 4 and series > 0

    capsys.readouterr()
    assert main(["delete", "--db", db, "--status", "failed", "--dry-run"]) == 0
    assert "would delete 1 run " in capsys.readouterr().out
    assert _counts(tiny_store) == (runs, series)

    assert main(["delete", "--db", db, "--status", "failed"]) == 0
    assert "deleted 1 run " in capsys.readouterr().out
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM series WHERE run_id = ?",
                       (failed_id,)).fetchone()[0] == 0
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    assert _counts(tiny_store)[0] == 3

    assert main(["delete", "--db", db, "--suite", "tiny", "--subject", "ols_qr",
                 "--precision", "float64"]) == 0
    assert "deleted 1 run " in capsys.readouterr().out
    assert main(["delete", "--db", db, "--suite", "nosuch"]) == 0
    assert "deleted 0 runs" in capsys.readouterr().out
    assert main(["delete", "--db", db, "--run-id", failed_id]) == 0
    assert _counts(tiny_store)[0] == 2

    # The deleted runs are computed again by the next run.
    assert main(run_args(write(tmp_path, TINY), tiny_store, "--no-report")) == 0
    assert "2 computed" in capsys.readouterr().out
    assert _counts(tiny_store)[0] == 4


def test_delete_needs_a_filter_and_a_store(tiny_store, tmp_path, capsys):
    before = digest(tiny_store)
    assert main(["delete", "--db", str(tiny_store)]) == 2
    assert "at least one of --suite" in one_line_error(capsys)
    assert digest(tiny_store) == before
    assert main(["delete", "--db", str(tmp_path / "none.db"), "--suite", "x"]) == 2
    assert "no results store" in one_line_error(capsys)
    assert not (tmp_path / "none.db").exists()
    assert main(["delete", "--db", str(tiny_store), "--status", "weird"]) == 2
    one_line_error(capsys)


# --- list and help without a store or optional dependencies --------------------------------

@pytest.mark.parametrize("what", [[], ["all"], ["suites"], ["solvers"], ["precisions"]])
def test_list_needs_no_store_and_no_optional_deps(tmp_path, monkeypatch, what, capsys):
    monkeypatch.chdir(tmp_path)
    for optional in ("dask", "distributed"):  # import of either now raises ImportError
        monkeypatch.setitem(sys.modules, optional, None)
    assert main(["list", *what]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    if what in ([], ["solvers"]):
        assert "newton_schulz" in out and "lsa_gd" in out
    assert list(tmp_path.iterdir()) == []


def _commands() -> list[list[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [[], *([name] for name in sorted(sub.choices))]


def test_the_commands_are_found():
    assert {"run", "probe", "results", "report", "delete", "list"} <= \
        {c[0] for c in _commands() if c}


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "precision")
def test_every_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    assert "usage: precision" in capsys.readouterr().out


@pytest.mark.parametrize("args", [
    ["results", "--db", "~nosuchuser/x.db"],
    ["results", "--db", "{db}", "--out", "~nosuchuser/x.csv"],
    ["report", "--db", "~nosuchuser/x.db", "--out", "{tmp}/r"],
    ["report", "--db", "{db}", "--out", "~nosuchuser/r"],
    ["run", "{suite}", "--db", "~nosuchuser/x.db", "--no-progress"],
    ["run", "{suite}", "--db", "{db}", "--report-dir", "~nosuchuser/r", "--no-progress"],
    ["run", "{suite}", "--db", "{db}", "--save-weights", "~nosuchuser/w", "--no-progress"],
    ["run", "{suite}", "--db", "{db}", "--checkpoints", "~nosuchuser/c", "--no-progress"],
    ["merge", "~nosuchuser/a.db", "--db", "{db}"],
])
def test_a_home_folder_of_no_user_is_one_line_before_computing(tiny_store, tmp_path, args,
                                                                capsys, computed, monkeypatch):
    """``--db ~nosuchuser/x.db`` or ``--out ~nosuchuser/x.csv`` gave pathlib's
    ``RuntimeError: Could not determine home directory.`` as a traceback; ``--report-dir``
    computed every run first and created a folder named ``~nosuchuser`` here."""
    monkeypatch.chdir(tmp_path)
    more = write(tmp_path, TINY.replace("float64", "mp30"), "more.toml")
    before = digest(tiny_store)
    capsys.readouterr()
    argv = [a.format(db=tiny_store, tmp=tmp_path, suite=more) for a in args]
    assert main(argv) == 2
    assert "no home folder for '~nosuchuser'" in one_line_error(capsys)
    assert computed == [] and digest(tiny_store) == before
    assert not (tmp_path / "~nosuchuser").exists()


#: A valid entry (test_faults_stop's grid) and an entry ``z`` whose assignment globs are wrong.
GLOB_SUITE = GRID.replace("{", "{{").replace("}", "}}") + \
    ENTRY.format(name="a", family="transformer").replace("{", "{{").replace("}", "}}") + """
[models.z]
family = "{family}"
tasks = ["mul"]
depth = 1
width = 8
{line}
train = {{ recipe = "paper", steps = 20, batch_size = 8{train} }}
"""


@pytest.mark.parametrize("family,line,train", [
    ("transformer", 'precisions = ["float64+mod[*.nosuch]=bfloat16"]', ""),
    ("baseconv", "", ', dtype = "float32+mod[nosuch]=float8_e4m3"'),
])
def test_a_module_glob_that_matches_nothing_is_refused_before_the_first_run(
        tmp_path, capsys, computed, family, line, train):
    """A ``+mod[...]`` glob matching no module was refused only when its job trained, after
    the sweep's other runs were computed and stored."""
    suite = write(tmp_path, GLOB_SUITE.format(family=family, line=line, train=train))
    db = tmp_path / "g.db"
    assert main(run_args(suite, db, "--no-report")) == 2
    assert "matches no module of model" in one_line_error(capsys)
    assert computed == [] and not db.exists()


@pytest.mark.parametrize("args,near", [
    (["run", "solver"], "(did you mean 'solvers'?)"),
    (["run", "solvers", "--profile", "quik"], "(did you mean 'quick'?)"),
    (["run", "solvers", "--solvers", "gdd"], "(did you mean 'gd'"),
    (["run", "solvers", "--precisions", "fp8"], "(did you mean 'float8_e4m3' or 'float8_e5m2'?)"),
    (["run", "solvers", "--precisions", "flaot32"], "(did you mean 'float32'"),
    (["probe", "examples/gated_mixer.py:gated_mixr", "--suite", "primitives", "--profile", "quick"],
     "has no callable 'gated_mixr' (did you mean 'gated_mixer'"),
])
def test_a_near_miss_gets_a_suggestion(tmp_path, args, near, capsys, computed, monkeypatch):
    """Near-miss suite, profile, solver, precision and factory names: one line with the
    nearest names (fp8 was refused with a 600-character list and no suggestion)."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    db = tmp_path / "x.db"
    assert main([*args, "--db", str(db), "--no-progress"]) == 2
    assert near in one_line_error(capsys)
    assert computed == [] and not db.exists()


def test_a_custom_format_spelled_like_a_named_one_is_said_before_computing(tmp_path, capsys):
    """``--precisions e4m3`` ran (and stored) the IEEE-style custom format under a column of
    its own where float8_e4m3 was meant: a note says which it is before the first run."""
    db = tmp_path / "x.db"
    assert main(run_args(write(tmp_path, TINY.replace('"float64"', '"e4m3"')), db,
                         "--no-report")) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if line.startswith("precision: note:")]
    assert note == ["precision: note: e4m3 is the custom IEEE-style format (infinities, "
                    "largest 240), not float8_e4m3 (largest 448, overflow saturate) or "
                    "float8_e4m3_nan (largest 448, overflow nan)"]
    assert err.index(note[0]) < err.index("runs stored") if "runs stored" in err else True
