"""Shared fixtures: small solver stores filled through the real CLI."""

from pathlib import Path

from precision.cli import main


def solver_store(folder: Path, solvers: str) -> Path:
    """A store with ``solvers`` of the shipped suite in float32 and mp50 (no report)."""
    db = folder / "results.db"
    rc = main(["run", "solvers", "--db", str(db), "--solvers", solvers,
               "--precisions", "float32,mp50", "--no-progress", "--no-report"])
    assert rc == 0
    return db
