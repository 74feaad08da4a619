"""The results store: every computed run and its traces, in one SQLite file.

The lowest layer above the numerics: ``experiments`` writes it, ``reports`` and notebooks read it
(without importing ``experiments``): ``results.runs(path, ...)`` and ``results.series(path,
run_id)`` give pandas DataFrames (:mod:`results.frames`).
"""

from results.frames import runs, runs_frame, series

__all__ = ["runs", "runs_frame", "series"]
