"""The design card's layout: the top level holds the packages ``precision`` (numerics),
``probes`` (suites, runs, training, the store) and ``reports`` (tables, figures, claims) and
nothing else importable; the install adds no other import name, so a user's own
``results/`` or ``experiments/`` folder cannot shadow the toolkit."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARD = {"precision", "probes", "reports"}


def test_the_top_level_packages_are_the_cards():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages == CARD
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {name.rstrip("*") for name in found} == CARD
    assert project["project"]["scripts"] == {"precision": "precision.cli.entry:main"}


def test_a_users_results_or_experiments_folder_does_not_shadow_the_toolkit(tmp_path):
    for name in ("results", "experiments"):   # the names the toolkit once installed
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("RAISED = 'the user\\'s own'\n")
    code = ("import probes, precision, reports.build, precision.cli.main; "
            "print(probes.runs.__module__, precision.cli.main.main.__module__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["probes.store.frames", "precision.cli.main"]
    listed = subprocess.run([sys.executable, "-m", "precision", "list", "suites"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and "solvers" in listed.stdout, listed.stderr
