"""The results store: every computed run and its traces, in one SQLite file.

The lowest layer above the numerics: ``probes`` writes it, ``reports`` and notebooks read it
(without importing ``probes``).
"""
