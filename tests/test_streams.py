"""Streams the command writes onto: a closed standard output is one line and exit 2; a
stream that cannot encode a label (``PYTHONIOENCODING=ascii``, ``LC_ALL=C``) gets a backslash
escape, not a ``UnicodeEncodeError`` after the work is done; a Ctrl-C while the command's
modules import is one line and exit 130, never a traceback."""

from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.store.db import RunRecord, Store

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _precision(args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", f"exec {sys.executable} -m precision {args}"],
                          capture_output=True, text=True, env=env or ENV, timeout=300)


@pytest.mark.parametrize("args", ["list suites", "--version", "results --db nosuch.db"])
def test_a_closed_standard_output_is_one_line(args, tmp_path):
    res = subprocess.run(["sh", "-c", f"cd {tmp_path} && exec {sys.executable} -m precision "
                          f"{args} >&-"], capture_output=True, text=True, env=ENV, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip() == ("precision: error: standard output is closed: give the "
                                  "command somewhere to write (a file, a pipe or /dev/null)")
    assert not (tmp_path / "nosuch.db").exists()


@pytest.fixture
def unicode_store(tmp_path) -> Path:
    db = tmp_path / "u.db"
    with Store(db) as store:
        store.write_run(RunRecord(run_id="r1", suite="s", kind="solver", subject="gd",
                                  task="problème_ü", precision="float32", status="ok",
                                  log10_mse=-3.0, config={"seed": 0}, result={}))
    return db


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"},
                                 {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}])
def test_labels_a_stream_cannot_encode_are_escaped(unicode_store, env):
    res = _precision(f"results --db {unicode_store}", {**ENV, **env})
    assert res.returncode == 0, res.stderr[-500:]
    assert "Traceback" not in res.stderr
    assert "probl\\xe8me_\\xfc" in res.stdout or "problème_ü" in res.stdout


class _Interrupting(importlib.abc.MetaPathFinder):
    """Ctrl-C while ``name`` imports."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname, path, target=None):
        if fullname == self.name:
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_command_imports_is_one_line(monkeypatch, capsys):
    from precision.cli import entry

    monkeypatch.delitem(sys.modules, "precision.cli.main", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Interrupting("precision.cli.main"), *sys.meta_path])
    assert entry.main() == 130
    assert capsys.readouterr().err.strip() == (
        "precision: interrupted before the command started; nothing was done")


def test_ctrl_c_while_a_command_imports_its_modules_is_one_line(monkeypatch, capsys,
                                                                 tmp_path, unicode_store):
    """A stop inside a command's lazy imports (``report`` importing its plotting) ends in
    the stop's one line: no handler that imports (and would import a half-imported module
    again) runs on a stop."""
    from precision.cli.main import main

    monkeypatch.delitem(sys.modules, "reports.build", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Interrupting("reports.build"), *sys.meta_path])
    assert main(["report", "--db", str(unicode_store), "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
