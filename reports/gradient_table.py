"""How far each training precision bends each module's gradient: the report's tables of the
trained runs whose entry sets ``gradient_error = true`` (the ``train_precision`` suite).

Each such job stores, beside its MSE, the relative error of its training loss's gradient
computed in its training precision against mp50, module by module, at its seeded initial
weights and at its trained weights (:func:`probes.gradient_check.training_gradient_error`).
Per (suite, model entry, task, depth, width, seed) and for each of the two, a table: a row per
module (``(all)``: every parameter), a column per training precision (with its weights:
``no master`` kept in the format, ``float32 master``), each cell that relative error.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from probes.store.records import TrainedConfig, config_of
from reports.model_table import train_dtype, train_weights
from reports.tables import Pivot


def _column(cfg: TrainedConfig) -> str:
    weights = train_weights(cfg)
    return train_dtype(cfg) + (f", {weights}" if weights else "")


def gradient_jobs(rows: list[dict[str, Any]]
                  ) -> dict[tuple[Any, ...], dict[str, dict[str, Any]]]:
    """(suite, entry, task, depth, width, seed) -> training precision's column label -> the
    stored ``gradient_error`` (``initial`` / ``final``: module -> relative error, in the
    model's order)."""
    jobs: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        measured = (r.get("result") or {}).get("gradient_error")
        if r.get("kind") != "trained" or r.get("status") != "ok" or not measured:
            continue
        cfg = config_of(r)
        assert isinstance(cfg, TrainedConfig)
        key = (r["suite"], r["subject"], r.get("problem") or cfg.task, cfg.depth, cfg.width,
               cfg.seed)
        jobs.setdefault(key, {})[_column(cfg)] = {   # a job's records share it
            when: dict(measured[when]) for when in ("initial", "final")}
    return dict(sorted(jobs.items(), key=str))


def job_title(key: tuple[Any, ...]) -> str:
    """How a table or figure names the cell ``key`` of :func:`gradient_jobs`."""
    suite, subject, task, depth, width, seed = key
    return f"{suite}: {subject} on {task}, depth {depth}, width {width}, seed {seed}"


def gradient_pivots(rows: list[dict[str, Any]]) -> list[Pivot]:
    """The tables of the module docstring (none when no row measured the gradient)."""
    out = []
    for key, columns in gradient_jobs(rows).items():
        suite, subject, task, depth, width, seed = key
        for when in ("initial", "final"):
            frame = pd.DataFrame({name: pd.Series(m[when], dtype=float)
                                  for name, m in columns.items()})
            modules = [*dict.fromkeys(k for m in columns.values() for k in m[when])]
            order = [m for m in modules if m != "(all)"] + ["(all)"]   # the model's order
            frame = frame.reindex(order).map(lambda v: f"{v:.2e}" if pd.notna(v) else "-")
            frame.index.name = "module"
            out.append(Pivot(
                f"gradient-{suite}-{subject}-{task}-d{depth}-w{width}-s{seed}-{when}",
                f"{job_title(key)}: "
                f"relative error of the training loss's gradient in each training precision "
                f"against mp50, by module, at the {when} weights", frame))
    return out
