"""The results store: every computed run and its traces, in one SQLite file (:mod:`.db`).

The lowest part of :mod:`probes`: the runner writes it; ``reports`` and notebooks read it through
:mod:`probes.store.frames` (``probes.runs(path, ...)``, ``probes.series(path, run_id)``) without
importing the runner, the training or the suites.
"""
