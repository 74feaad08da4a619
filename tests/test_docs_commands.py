"""Every `precision` command the README and docs show, checked against the code: a doc that
drifts from the command line fails here.

Commands are read from the fenced blocks and the inline code of README.md and docs/*.md.
Each is checked at the level it can be at the quick sizes of a test run:

* a *mention* (``precision run``) or a *synopsis* with placeholders (``precision localize
  FACTORY --precision LOW [--target ERR]``): the command exists and takes every option named;
* a *concrete* command: the real parser accepts it (exit code 0 of the parse) and every name
  it uses resolves -- the suite and its profile, the precisions, the solvers, the factory (a
  file that defines it, an ``hf:`` class transformers has, a built-in family);
* the cheap concrete commands (:data:`EXECUTED`) are run in full, in process, and their exit
  code and a fragment of their output checked.

A command that would compute for minutes to days (a floor profile, a GPU slice) is checked as
concrete, not run: what it computes is tested by the suites' own tests.
"""

from __future__ import annotations

import ast
import importlib.util
import shlex
from pathlib import Path

import pytest

from precision.cli.common import csv_names
from precision.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("documented_commands",
                                               ROOT / "tools/documented_commands.py")
docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs)
PLACEHOLDER, INVENTED = docs.PLACEHOLDER, docs.INVENTED

#: Concrete commands run in full (seconds each), with a fragment their output must hold.
EXECUTED = {
    "precision list suites": "primitives",
    "precision list precisions": "float8_e4m3",
    "precision list claims": "published claims",
    "precision --help": "usage: precision",
    "precision ops examples/gated_mixer.py:gated_mixer": "mp",
    "precision evaluate examples/gated_mixer.py:gated_mixer --precisions float8_e4m3,"
    "mxfp4_e2m1,int4_g32,tf32": "mxfp4_e2m1",
}


COMMANDS = sorted(docs.documented())


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    return words[3:] if words[:3] == ["python", "-m", "precision"] else words[1:]


def _subparsers() -> dict[str, object]:
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: object) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}  # type: ignore[attr-defined]


def test_the_docs_show_commands_of_every_kind():
    kinds = {_argv(c)[0] for _, c in COMMANDS
             if _argv(c) and not _argv(c)[0].startswith("-") and not _argv(c)[0].isupper()}
    assert len(COMMANDS) >= 60, len(COMMANDS)
    assert kinds == set(_subparsers()), kinds ^ set(_subparsers())
    assert set(EXECUTED) <= {c for _, c in COMMANDS}, set(EXECUTED) - {c for _, c in COMMANDS}


@pytest.mark.parametrize("where,command", COMMANDS, ids=[c[:60] for _, c in COMMANDS])
def test_a_documented_command_matches_the_code(where, command):
    argv = _argv(command)
    commands = _subparsers()
    if not argv or argv[0].startswith("-"):   # precision --help, --version
        assert set(argv) <= _options(build_parser()), command
        return
    name = argv[0]
    assert name in commands or name.isupper(), f"{where}: no command '{name}' ({command})"
    if name.isupper():   # precision COMMAND --help
        return
    named = {w.split("=")[0] for w in argv if w.startswith("--")}
    unknown = named - _options(commands[name])
    assert not unknown, f"{where}: '{command}': {name} has no option {sorted(unknown)}"
    if len(argv) == 1 or PLACEHOLDER.search(command) or INVENTED.search(command):
        return   # a mention or a synopsis: the command and its options exist
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:   # --help
        assert stop.code == 0
        return
    _resolves(args, where, command)


def _resolves(args: object, where: str, command: str) -> None:
    """Every name a concrete command uses exists: its suite and profile, precisions,
    solvers and factory."""
    from precision.precisions import parse_precision
    from probes.suite import load_suite

    a = vars(args)
    for option in ("precisions",):
        for spelling in csv_names(a.get(option), f"--{option}") or []:
            parse_precision(spelling)
    for option in ("precision", "reference"):
        if isinstance(a.get(option), str) and a["command"] in ("localize", "evaluate"):
            parse_precision(a[option])
    suite = a.get("suite")
    if a["command"] in ("run", "probe") and suite:
        load_suite(suite, profile=a.get("profile"), solvers=csv_names(a.get("solvers"),
                   "--solvers"), expand=False)
    factory = a.get("factory")
    if factory:
        _factory_exists(factory, f"{where}: '{command}'")


def _factory_exists(spec: str, context: str) -> None:
    from precision.models import MODELS

    if spec.startswith("hf:"):
        import transformers

        assert hasattr(transformers, spec[3:]), f"{context}: transformers has no {spec[3:]}"
        return
    if ":" not in spec:
        assert spec in MODELS, f"{context}: no family {spec}"
        return
    path, name = spec.rsplit(":", 1)
    file = ROOT / path
    assert file.is_file(), f"{context}: no file {path}"
    defined = {n.name for n in ast.parse(file.read_text()).body
               if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assert name in defined, f"{context}: {path} defines no {name}"


@pytest.mark.parametrize("command", sorted(EXECUTED))
def test_a_cheap_documented_command_runs(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        code = main(_argv(command))
    except SystemExit as stop:   # --help
        code = stop.code
    out = capsys.readouterr().out
    assert code == 0, command
    assert EXECUTED[command] in out, (command, out[-500:])
    assert not (ROOT / "results.db").exists() or command.startswith("precision list")


#: Documented commands that read or change a store, run verbatim, in this order, in a folder
#: holding the stores they name (``quick.db``, ``results.db``, ``gpu.db``), each with the
#: exit code and a fragment of its output.
ON_A_STORE = [
    ("precision report --db quick.db --out quick-report", "quick-report/report.md"),
    ("precision delete --suite solvers --status failed --dry-run", "nothing deleted (--dry-run)"),
    ("precision merge gpu.db --db results.db", "merged 1 run from gpu.db into results.db"),
    ("precision delete --suite solvers --status failed", "deleted 1 run"),
    ("precision delete --status failed", "deleted 0 runs"),
    ("precision results", "problem p: floor MSE"),
]


def test_documented_store_commands_run_on_a_store(tmp_path, monkeypatch, capsys):
    """The store workflow of README and docs/cli.md on a small real store (two solvers, one
    run stored as failed by removing it from ``results.db`` and keeping it in ``gpu.db``)."""
    import shutil
    import sqlite3

    documented_commands = {c for _, c in COMMANDS}
    assert {c for c, _ in ON_A_STORE} <= documented_commands
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(
        'name = "solvers"\nprecisions = ["float32", "float64"]\nseeds = [0]\n[problems.p]\n'
        'task = "least_squares"\nkind = "gaussian"\ndim = 3\nn_samples = 6\n'
        '[solvers.ols_qr]\nproblems = ["p"]\n[solvers.gd]\nproblems = ["p"]\n'
        'params = { iters = 30 }\n')
    assert main(["run", "s.toml", "--db", "quick.db", "--no-progress", "--no-report"]) == 0
    con = sqlite3.connect("quick.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("UPDATE runs SET status = 'failed' WHERE run_id = (SELECT MIN(run_id) FROM runs)")
    con.commit()
    failed = con.execute("SELECT run_id FROM runs WHERE status = 'failed'").fetchone()[0]
    con.close()
    shutil.copy("quick.db", "gpu.db")
    shutil.copy("quick.db", "results.db")
    con = sqlite3.connect("results.db")
    con.execute("DELETE FROM series WHERE run_id = ?", (failed,))
    con.execute("DELETE FROM runs WHERE run_id = ?", (failed,))
    con.commit()
    con.close()
    capsys.readouterr()
    for command, fragment in ON_A_STORE:
        assert main(_argv(command)) == 0, command
        out = capsys.readouterr().out
        assert fragment in out, (command, out[-400:])


def _tier():
    spec = importlib.util.spec_from_file_location("run_documented",
                                                  ROOT / "tools/run_documented.py")
    tier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tier)
    return tier


def test_ci_runs_every_concrete_documented_command_or_says_why_not():
    """CI's second tier (tools/run_documented.py) knows every concrete command of the docs:
    each is run (with the fragment its output must hold) or listed as not run with the reason;
    no entry names a command the docs no longer show."""
    tier = _tier()
    rows = tier.plan()
    assert not [c for _, c, what, _ in rows if what == "unknown"]
    shown = {c for _, c, _, _ in rows}
    assert set(tier.EXPECT) <= shown, set(tier.EXPECT) - shown
    assert set(tier.NOT_RUN) <= shown, set(tier.NOT_RUN) - shown
    assert set(EXECUTED) <= set(tier.EXPECT)
    assert all(EXECUTED[c] == tier.EXPECT[c] for c in EXECUTED)
    run = [c for _, c, what, _ in rows if what == "run"]
    assert len(run) >= 35 and "precision run solvers --jobs 2" in run   # the README's main job
    assert "tools/run_documented.py" in (ROOT / ".ci/run").read_text()


def test_a_documented_command_missing_from_the_tier_fails_it(monkeypatch, capsys):
    tier = _tier()
    shown = tier.documented

    monkeypatch.setattr(tier, "documented",
                        lambda pattern: [*shown(pattern), ("x.md", "precision list solvers")])
    assert tier.main(["--list"]) == 1
    out = capsys.readouterr().out
    assert "x.md: 'precision list solvers' is in neither EXPECT nor NOT_RUN" in out
