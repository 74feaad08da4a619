"""Shared fixtures: small solver stores filled through the real CLI; the figures a report
module draws, kept open for inspection."""

from pathlib import Path

import pytest
import torch

from precision.cli.main import main

# The models under test are small: one thread per process is faster than two (which spin
# against each other and against any other load on a 2-core machine: 30 ms vs 1.7 s per
# training step of a 2-layer width-64 Transformer measured here under load).
torch.set_num_threads(1)


def tiny_affine_suite(name: str, train: str, depth: str = "1", precisions: str = '"float64"',
                      test_size: int = 8, extra: str = "") -> str:
    """The text of a suite that trains a width-8 BaseConv on AFFINE (D = 3, N = 4) in seconds:
    ``train`` is its inline ``train`` table, ``depth`` a TOML value (``"[1, 2]"``: an axis),
    ``extra`` more TOML appended (another model entry)."""
    return f"""
name = "{name}"
precisions = [{precisions}]
[tasks.affine]
task = "affine"
dim = 3
n = 4
[models.baseconv]
family = "baseconv"
tasks = ["affine"]
depth = {depth}
width = 8
layernorm = false
train = {{ {train} }}
test_size = {test_size}
{extra}"""


def one_seed_solvers_suite(folder: Path) -> Path:
    """The shipped ``solvers`` suite (same name, problems and solvers) with one seed instead of
    five: a fifth of the cost for tests that need its numbers, not its spread."""
    text = (Path(__file__).resolve().parents[1] / "probes" / "suites" / "solvers.toml"
            ).read_text(encoding="utf-8")
    lines = ["seeds = [0]" if line.startswith("seeds = ") else line
             for line in text.splitlines()]
    path = folder / "solvers.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def solver_store(folder: Path, solvers: str) -> Path:
    """A store with ``solvers`` of the shipped suite (one seed) in float32 and mp50."""
    db = folder / "results.db"
    rc = main(["run", str(one_seed_solvers_suite(folder)), "--db", str(db),
               "--solvers", solvers,
               "--precisions", "float32,mp50", "--no-progress", "--no-report"])
    assert rc == 0
    return db


@pytest.fixture
def drawn_from(monkeypatch):
    """``drawn_from(module)``: the list the figures ``module`` draws go into, left open
    (its ``_save`` writes and closes nothing); closed after the test."""
    figures = []

    def keep(fig, path):
        figures.append(fig)
        return path

    def capture(module):
        monkeypatch.setattr(module, "_save", keep)
        return figures

    yield capture
    import matplotlib.pyplot as plt

    for fig in figures:
        plt.close(fig)
