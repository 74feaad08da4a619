"""Probes: the suites, tasks, runs, training and store of the toolkit (the layer above the
numerics of :mod:`precision`).

The store as pandas DataFrames, for notebooks (:mod:`probes.store.frames`)::

    import probes
    runs = probes.runs("results.db", suite="solvers", precision="float32")
    traces = probes.series("results.db", runs["run_id"][0])
"""

from typing import Any

__all__ = ["runs", "runs_frame", "series"]


def __getattr__(name: str) -> Any:
    """``runs`` / ``runs_frame`` / ``series``, imported on first use (pandas is not loaded by
    ``import probes.x`` for the command line's sake)."""
    if name in __all__:
        from probes.store import frames
        return getattr(frames, name)
    raise AttributeError(f"module 'probes' has no attribute {name!r}")
