"""Shared fixtures: small solver stores filled through the real CLI."""

from pathlib import Path

import torch

from precision.cli import main

# The models under test are small: one thread per process is faster than two (which spin
# against each other and against any other load on a 2-core machine: 30 ms vs 1.7 s per
# training step of a 2-layer width-64 Transformer measured here under load).
torch.set_num_threads(1)


def solver_store(folder: Path, solvers: str) -> Path:
    """A store with ``solvers`` of the shipped suite in float32 and mp50 (no report)."""
    db = folder / "results.db"
    rc = main(["run", "solvers", "--db", str(db), "--solvers", solvers,
               "--precisions", "float32,mp50", "--no-progress", "--no-report"])
    assert rc == 0
    return db
