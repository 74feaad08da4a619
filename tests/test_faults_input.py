"""Inputs that used to be accepted and break later are refused where they enter (issue #26 §3).

Every case asserts its one-line message, exit code 2 (or the API's exception), and that no
store was created or the existing store is unchanged (bytes and row count): names with '/',
'\\', NUL or control characters, empty or too long (suite file, command line, Python API);
a 5000-deep nested TOML value; a suite file, seed list, grid axis or grid above its limit;
``--jobs`` out of range; ``--executor dask`` without ``distributed``; a probed factory whose
label is already a suite entry or a stored model of another factory; precision aliases in
``--help``, ``list`` and errors; the pytest helper run from another working directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torch import nn

import probes.runner
import probes.suite
from precision.cli.main import JOBS_CEILING, JOBS_PER_CPU, build_parser, main, max_jobs
from precision.precisions import ALIASES_TEXT
from probes.api import assert_floor_below, probe
from probes.executors import failed_records
from probes.names import NAME_RULE
from probes.run import SuiteError
from probes.training.job import Job

ROOT = Path(__file__).resolve().parents[1]

TINY = """
name = "tiny"
precisions = ["float32", "float64"]
[problems.{label}]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 6
[solvers.{solver}]
problems = [{label}]
[solvers.ols_qr]
problems = [{label}]
"""

TRAINED = """
name = "trained"
precisions = ["float64"]
[tasks.{task}]
task = "read"
dim = 4
n = 6
[models.{model}]
family = "transformer"
tasks = [{task}]
depth = {depth}
width = {width}
heads = 1
train = {{ recipe = "paper", steps = 2, batch_size = 4 }}
test_size = 4
"""

STUDY = """
name = "study"
precisions = ["float64"]
[studies.{entry}]
study = "noisy_regression.baselines"
noise = [1]
"""


def key(name: str) -> str:
    """``name`` as a TOML quoted key (escapes: NUL, newline, backslash, quote)."""
    return json.dumps(name, ensure_ascii=False)


def tiny(label: str = "p", solver: str = "gd") -> str:
    return TINY.format(label=key(label), solver=key(solver))


def write(folder: Path, text: str, name: str = "suite.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store of the tiny suite (2 solvers x 2 precisions), checkpointed."""
    folder = tmp_path_factory.mktemp("base")
    db = folder / "results.db"
    assert main(["run", str(write(folder, tiny())), "--db", str(db), "--no-progress",
                 "--no-report"]) == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert rows(db) == 4
    return db


def refused(args: list[str], tmp_path: Path, base_store: Path,
            capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``args`` against a missing store and against a copy of the base store: exit 2,
    one line, the same line both times, no store created, the existing one unchanged."""
    fresh = tmp_path / "fresh.db"
    kept = tmp_path / "kept.db"
    shutil.copy(base_store, kept)
    before = digest(kept)
    lines = []
    for db in (fresh, kept):
        capsys.readouterr()
        rc = main([*args, "--db", str(db), "--no-progress", "--report-dir",
                   str(tmp_path / "report")])
        err = capsys.readouterr().err.strip()
        assert rc == 2, err
        assert err and "\n" not in err and "Traceback" not in err, err
        lines.append(err)
    assert lines[0] == lines[1].replace(str(kept), str(fresh))
    assert not fresh.exists() and not Path(f"{fresh}-wal").exists()
    assert digest(kept) == before and rows(kept) == 4
    assert not (tmp_path / "report").exists()
    return lines[0]


# --- 1. names: suite file, command line, Python API ---------------------------------------

BAD_NAMES = [
    ("a/b", "it contains '/'"),
    ("a\\b", "it contains '\\'"),
    ("a\0b", "it contains NUL U+0000"),
    ("a\nb", "it contains the control character U+000A"),
    ("", "it is empty"),
    ("  ", "it is blank"),
    ("..", "it is a path component"),
    ("x" * 101, "it has 101 characters (at most 100)"),
    ("\U0001F600" * 70, "it has 280 bytes as UTF-8 (at most 255)"),
]


def shown(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@pytest.mark.parametrize("name,problem", BAD_NAMES, ids=[f"name{i}" for i in range(9)])
def test_a_bad_problem_label_in_a_suite_file(tmp_path, base_store, capsys, name, problem):
    suite = write(tmp_path, tiny(label=name))
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: {suite}: invalid problem label {shown(name)}: {problem} "
        f"({NAME_RULE})")


@pytest.mark.parametrize("text,what", [
    (tiny(solver="a/b"), "solver name"),
    (TRAINED.format(task=key("a/b"), model=key("m"), depth=1, width=8), "task label"),
    (TRAINED.format(task=key("rd"), model=key("a/b"), depth=1, width=8), "model label"),
    (STUDY.format(entry=key("a/b")), "study entry label"),
    (tiny() + '[profiles."a/b"]\nseeds = [1]\n', "profile name"),
], ids=["solver", "task", "model", "study", "profile"])
def test_every_labelled_table_checks_its_names(tmp_path, base_store, capsys, text, what):
    suite = write(tmp_path, text)
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: {suite}: invalid {what} 'a/b': it contains '/' ({NAME_RULE})")


@pytest.mark.parametrize("option,value,message", [
    ("--solvers", "gd,a/b", "invalid --solvers name 'a/b': it contains '/'"),
    ("--solvers", "gd,a\0b", "invalid --solvers name 'a\\x00b': it contains NUL U+0000"),
    ("--solvers", "x" * 300, f"invalid --solvers name {shown('x' * 300)}: it has 300 "
     "characters (at most 100)"),
    ("--precisions", "float64,fp\nx", "invalid --precisions name 'fp\\nx': it contains the "
     "control character U+000A"),
    ("--profile", "a/b", "invalid profile name 'a/b': it contains '/'"),
    ("--profile", "", "invalid profile name '': it is empty"),
], ids=["slash", "nul", "long", "newline", "profile", "empty-profile"])
def test_bad_names_on_the_command_line(tmp_path, base_store, capsys, option, value, message):
    suite = write(tmp_path, tiny())
    err = refused(["run", str(suite), option, value], tmp_path, base_store, capsys)
    where = f"{suite}: " if option == "--profile" else ""
    assert err == f"precision: error: {where}{message} ({NAME_RULE})"


def test_an_empty_list_option_names_the_option(tmp_path, base_store, capsys):
    suite = write(tmp_path, tiny())
    assert refused(["run", str(suite), "--solvers", " , "], tmp_path, base_store, capsys) == \
        "precision: error: --solvers: empty list (give comma-separated names)"


def small_factory(d_in, d_out, depth, width):
    return nn.Linear(d_in, d_out)


@pytest.mark.parametrize("call,message", [
    (lambda: probe(small_factory, "a/b"), "invalid task name 'a/b': it contains '/'"),
    (lambda: probe(small_factory, ""), "invalid task name '': it is empty"),
    (lambda: probe(f"{__file__}:a\0b", "read"),
     "invalid factory name 'a\\x00b': it contains NUL U+0000"),
    (lambda: assert_floor_below(small_factory, "x" * 101, 1.0),
     f"invalid task name {shown('x' * 101)}: it has 101 characters (at most 100)"),
], ids=["probe-slash", "probe-empty", "factory-nul", "assert-long"])
def test_bad_names_in_the_python_api(monkeypatch, call, message):
    def never(*args, **kwargs):
        raise AssertionError("a bad name reached the model build")

    monkeypatch.setattr(Job, "build", never)
    with pytest.raises(SuiteError) as info:
        call()
    assert str(info.value) == f"{message} ({NAME_RULE})"


def test_the_api_refuses_a_factory_that_is_no_spec():
    with pytest.raises(ValueError, match=r"^factory 'nocolon' must be a callable or a "
                       r"MODULE:FACTORY or path/to/file.py:FACTORY string$"):
        probe("nocolon", "read")


# --- 2. malformed and oversized suite files -------------------------------------------------

@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{a = " * 5000 + "1" + "}" * 5000],
                         ids=["arrays", "inline-tables"])
def test_a_5000_deep_value_is_one_line(tmp_path, base_store, capsys, value):
    suite = write(tmp_path, tiny() + f"deep = {value}\n")
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: malformed suite file {suite}: a value is nested too deeply for "
        "the TOML parser (a suite nests at most 20 levels)")


def test_a_value_deeper_than_the_limit_is_refused_after_parsing(tmp_path, base_store, capsys):
    suite = write(tmp_path, tiny().replace("dim = 3", "dim = 3\nx = " + "[" * 25 + "]" * 25))
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: {suite}: a value is nested more than 20 levels deep (tables and "
        "lists inside each other)")


def test_a_huge_suite_file_is_refused_before_parsing(tmp_path, base_store, capsys):
    seeds = ", ".join(map(str, range(200_000)))  # 1.3 MB; 8.4 million seeds would be 74 MB
    suite = write(tmp_path, tiny().replace("[problems", f"seeds = [{seeds}]\n[problems", 1))
    size = suite.stat().st_size
    start = time.perf_counter()
    err = refused(["run", str(suite)], tmp_path, base_store, capsys)
    assert time.perf_counter() - start < 5
    assert err == (f"precision: error: suite file {suite} is too large: {size:,} bytes (at "
                   "most 1,000,000; a grid is a few lists, not a listing)")


# --- 3. grids above their limits are refused at once ----------------------------------------

@pytest.fixture
def nothing_built(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args, **kwargs):
        raise AssertionError("a model was built before the grid's size was checked")

    monkeypatch.setattr(Job, "build", never)


def test_too_many_seeds(tmp_path, base_store, capsys, nothing_built):
    seeds = ", ".join(map(str, range(10_001)))
    suite = write(tmp_path, tiny().replace("[problems", f"seeds = [{seeds}]\n[problems", 1))
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == \
        f"precision: error: {suite}: 10,001 seeds (at most 10,000)"


def test_a_10000_value_width_axis(tmp_path, base_store, capsys, nothing_built):
    widths = list(range(1, 10_001))
    suite = write(tmp_path, TRAINED.format(task=key("rd"), model=key("m"), depth=1, width=widths))
    start = time.perf_counter()
    err = refused(["run", str(suite)], tmp_path, base_store, capsys)
    assert time.perf_counter() - start < 5
    assert err == (f"precision: error: {suite} [models.m]: grid axis 'width' has 10,000 "
                   "values (at most 1,000)")


def test_a_grid_above_the_limit_names_its_size(tmp_path, base_store, capsys, nothing_built):
    text = TRAINED.format(task=key("rd"), model=key("m"), depth=list(range(1, 9)),
                          width=list(range(8, 808, 8)))
    text = text.replace('precisions = ["float64"]', 'precisions = ["float32", "float64", '
                        f'"mp50"]\nseeds = {list(range(100))}')
    suite = write(tmp_path, text)
    start = time.perf_counter()
    err = refused(["run", str(suite)], tmp_path, base_store, capsys)
    assert time.perf_counter() - start < 5
    assert err == (f"precision: error: {suite}: the grid has 240,000 runs (runs x evaluation "
                   "precisions; at most 100,000): use fewer seeds, precisions or grid values, "
                   "or split the suite")


def test_a_grid_at_the_seed_limit_expands_without_building_per_seed(tmp_path, monkeypatch):
    """10,000 seeds of one trained job: every seed is a job, the model is built once."""
    from probes.suite import load_suite

    built = []
    real = Job.build

    def counting(self):
        built.append(self.seed)
        return real(self)

    monkeypatch.setattr(Job, "build", counting)
    text = TRAINED.format(task=key("rd"), model=key("m"), depth=1, width=8).replace(
        'precisions = ["float64"]', f'precisions = ["float64"]\nseeds = {list(range(10_000))}')
    start = time.perf_counter()
    suite = load_suite(str(write(tmp_path, text)))
    assert time.perf_counter() - start < 30
    assert len(list(suite.runs)) == 10_000 and set(built) == {0}


def test_a_study_grid_label_above_its_limit(tmp_path, base_store, capsys):
    """A study's label is built from its values: a long list value makes a long label."""
    values = "[" + ", ".join(str(i % 7) for i in range(120)) + "]"
    suite = write(tmp_path, STUDY.format(entry="x").replace("noise = [1]",
                                                            f"noise = [{values}, [1, 3]]"))
    label = "noise={" + ",".join(str(i % 7) for i in range(120)) + "}"
    assert refused(["run", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: {suite} [studies.x]: invalid grid-point label (from the values of "
        f"its axes) {shown(label)}: it has 247 characters (at most 200) "
        f"({NAME_RULE.replace('1-100', '1-200')})")


# --- 4. --jobs and --executor dask ----------------------------------------------------------

@pytest.mark.parametrize("jobs", ["0", "-3", "100000"])
def test_jobs_out_of_range(tmp_path, base_store, capsys, jobs, monkeypatch):
    # (probes.suite: run imports load_suite from there when it runs)
    monkeypatch.setattr(probes.suite, "load_suite",
                        lambda *a, **k: pytest.fail("the suite was loaded"))
    suite = write(tmp_path, tiny())
    assert refused(["run", str(suite), "--jobs", jobs], tmp_path, base_store, capsys) == (
        f"precision: error: --jobs must be at least 1 and at most {max_jobs()} "
        f"({JOBS_PER_CPU} per CPU of this machine, at most {JOBS_CEILING}), got {jobs}")


def test_jobs_bound_is_in_the_help():
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"]  # noqa: SLF001
                    .format_help().split())
    assert f"at most {JOBS_PER_CPU} per CPU, {max_jobs()} here, and never above 256" in text
    assert 1 <= max_jobs() <= JOBS_CEILING


def test_dask_without_distributed_is_checked_before_the_store(tmp_path, base_store, capsys,
                                                               monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ImportError
    suite = write(tmp_path, tiny())
    assert refused(["run", str(suite), "--executor", "dask", "--jobs", "2"], tmp_path,
                   base_store, capsys) == (
        "precision: error: --executor dask needs the 'distributed' package, which is not "
        "installed: install the [dask] extra (pip install -e '.[dask]')")


# --- 5. a probed factory named like a suite entry or a stored model ---------------------------

PROBE_SUITE = """
name = "mine"
precisions = ["float64"]
[tasks.rd]
task = "read"
dim = 4
n = 6
[models.baseconv]
family = "baseconv"
tasks = ["rd"]
depth = 1
width = 8
train = { recipe = "paper", steps = 2, batch_size = 4 }
test_size = 4
"""


def baseconv(d_in, d_out, depth, width):
    """A user factory whose name is the suite's model entry."""
    return nn.Linear(d_in, d_out)


def test_a_factory_named_like_a_suite_entry_is_refused(tmp_path, base_store, capsys):
    suite = write(tmp_path, PROBE_SUITE)
    spec = f"{__file__}:baseconv"
    assert refused(["probe", spec, "--suite", str(suite)], tmp_path, base_store, capsys) == (
        f"precision: error: factory '{spec}' would be stored as model 'baseconv', which is "
        "already the entry [models.baseconv] of suite mine: their rows would read as one "
        "model; name the probe with --label")
    assert refused(["probe", spec, "--suite", str(suite), "--label", "a/b"], tmp_path,
                   base_store, capsys) == (
        f"precision: error: invalid --label 'a/b': it contains '/' ({NAME_RULE})")


def test_two_factories_under_one_label_are_refused(tmp_path, capsys, monkeypatch):
    # a stand-in compute: ok records at once (a sweep whose every record failed exits 1)
    monkeypatch.setattr(probes.runner, "compute_records", lambda run, options=None: [
        dataclasses.replace(r, status="ok", error=None)
        for r in failed_records(run, "not computed")])
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "arch.py").write_text("from torch import nn\n\ndef make(d_in, d_out, depth, "
                                        "width):\n    return nn.Linear(d_in, d_out)\n")
    suite, db = write(tmp_path, PROBE_SUITE), tmp_path / "results.db"
    common = ["--suite", str(suite), "--db", str(db), "--no-progress", "--no-report"]
    first, second = f"{tmp_path}/one/arch.py:make", f"{tmp_path}/two/arch.py:make"
    assert main(["probe", first, *common]) == 0
    assert main(["probe", first, *common]) == 0  # the same factory again: reused
    capsys.readouterr()
    before = digest(db)
    assert main(["probe", second, *common]) == 2
    assert capsys.readouterr().err.strip() == (
        f"precision: error: {db} already holds rows of model 'make' in suite mine from "
        f"'{first}', not '{second}': their rows would read as one model; name the probe "
        "with --label")
    assert digest(db) == before and rows(db) == 1
    assert main(["probe", second, *common, "--label", "make_two"]) == 0
    con = sqlite3.connect(db)
    assert sorted(con.execute("SELECT subject FROM runs")) == [("make",), ("make_two",)]
    con.close()


# --- 6. precision aliases are documented where they are accepted ------------------------------

def test_aliases_in_help_list_and_errors(tmp_path, base_store, capsys):
    assert ALIASES_TEXT == ("aliases fp16/half = float16, bf16 = bfloat16, fp32/single = "
                            "float32, fp64/double = float64; any case")
    parser = build_parser()
    helps = {name: " ".join(sub.format_help().split()) for name, sub in
             parser._subparsers._group_actions[0].choices.items()}  # noqa: SLF001
    for command in ("run", "probe", "delete"):
        assert ALIASES_TEXT in helps[command], command
    assert main(["list", "precisions"]) == 0
    assert ALIASES_TEXT in capsys.readouterr().out
    suite = write(tmp_path, tiny())
    err = refused(["run", str(suite), "--precisions", "fp31"], tmp_path, base_store, capsys)
    assert err.startswith("precision: error: unknown precision 'fp31' (did you mean 'fp32'")
    assert "; valid forms: " in err
    assert err.endswith(ALIASES_TEXT)
    kept = tmp_path / "kept.db"
    assert main(["delete", "--db", str(kept), "--precision", "FP32", "--dry-run"]) == 0
    assert "would delete 2 runs (precision float32)" in capsys.readouterr().out
    assert main(["run", str(suite), "--db", str(kept), "--precisions", "Double,single",
                 "--no-progress", "--no-report"]) == 0
    assert "4 runs, 4 already in" in capsys.readouterr().err and rows(kept) == 4


# --- 7. the pytest helper from any working directory ---------------------------------------

USER_TEST = '''
from probes.api import assert_floor_below

KW = dict(depth=1, width=4, train={"recipe": "paper", "steps": 2, "batch_size": 2},
          task_options={"dim": 2, "n": 3}, test_size=2)


def test_file_spec_relative_to_the_project():
    assert assert_floor_below("models/mix.py:make", "read", 1e6, **KW).status == "ok"


def test_module_spec():
    assert assert_floor_below("models.mix:make", "read", 1e6, **KW).status == "ok"
'''


def test_the_pytest_helper_from_another_working_directory(tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "models").mkdir(parents=True)
    (project / "tests").mkdir()
    elsewhere.mkdir()
    (project / "models" / "mix.py").write_text(
        "from torch import nn\n\ndef make(d_in, d_out, depth, width):\n"
        "    return nn.Linear(d_in, d_out)\n")
    (project / "tests" / "test_mine.py").write_text(USER_TEST)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(project / "tests" / "test_mine.py")], cwd=elsewhere,
                          capture_output=True, text=True, timeout=300,
                          # no third-party pytest plugins: one installed on the machine (e.g.
                          # pytest-benchmark's .benchmarks) may write into the directory
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    assert not list(elsewhere.iterdir())


def test_a_factory_whose_truth_is_nan_is_one_line_not_nan_rows(tmp_path, capsys):
    """A module whose output is NaN even in exact arithmetic has no truth to measure
    against: ``evaluate`` says so (exit 2) instead of printing ``nan`` rows with exit 0."""
    from precision.cli.main import main

    factory = tmp_path / "nanfac.py"
    factory.write_text("from torch import nn\n\n"
                       "class NaNy(nn.Module):\n"
                       "    def __init__(self, d_in, d_out):\n"
                       "        super().__init__()\n"
                       "        self.lin = nn.Linear(d_in, d_out)\n\n"
                       "    def forward(self, x):\n"
                       "        return self.lin(x) * float('nan')\n\n\n"
                       "def nany(d_in, d_out, depth, width):\n"
                       "    return NaNy(d_in, d_out)\n")
    code = main(["evaluate", f"{factory}:nany", "--precisions", "float32", "--width", "8",
                 "--depth", "1", "--tokens", "4", "--d-in", "2", "--d-out", "2"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "outputs NaN in mp100+casts=promote on the seeded sample: the truth itself is " \
           "not finite" in captured.err and len(captured.err.strip().splitlines()) == 1
