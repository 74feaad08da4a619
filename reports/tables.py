"""Report tables built from store rows only (pandas DataFrames, deterministic order).

* :func:`solver_runs` — one row per solver run (long format, the numbers exactly as stored);
* :func:`solver_pivots` — per problem, solvers down and precisions across (floor MSE, step);
* :func:`grid_pivots` — per task x subject x precision, MSE over depth x width for runs whose
  config has ``depth`` and ``width`` (trained / constructed models), seeds aggregated into
  median and range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from reports.floor_cells import floor_cell, floor_reached, format_log10
from reports.text_table import precision_order
from results.frames import runs_frame
from results.records import SubjectConfig, TrainedConfig, TrainedResult

SOLVER_COLUMNS = ["suite", "problem", "solver", "precision", "seed", "status", "floor_log10",
                  "floor_index", "reached", "rate", "conv_order", "mse", "log10_mse", "steps",
                  "run_id", "created_at"]
GRID_COLUMNS = ["task", "subject", "precision", "depth", "width", "seed", "train_steps",
                "status", "log10_mse", "approximation", "rounding", "converged",
                "truth_digits", "run_id"]


def solver_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Solver and construction runs, one per row, columns :data:`SOLVER_COLUMNS`, sorted.

    When a suite was re-run with other parameters, the store holds several runs for one
    (problem, solver, precision, seed); the newest is kept (older ones stay in the store).
    """
    chosen = [r for r in rows if r.get("kind") in ("solver", "construction")]
    df = runs_frame(chosen).rename(columns={"task": "problem", "subject": "solver"}).assign(
        seed=[SubjectConfig.from_json(r.get("config")).seed for r in chosen],
        reached=[floor_reached(r) for r in chosen])[SOLVER_COLUMNS]
    if df.empty:
        return df
    df = df.sort_values(["created_at", "run_id"]).drop_duplicates(
        ["suite", "problem", "solver", "precision", "seed"], keep="last")
    df["_p"] = df["precision"].map(precision_order)
    df = df.sort_values(["suite", "problem", "solver", "_p", "run_id"]).drop(columns="_p")
    return df.reset_index(drop=True)


@dataclass(frozen=True)
class Pivot:
    """A titled table: ``frame`` has a named index and string or float cells."""

    key: str
    title: str
    frame: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)  # what the table is about


def solver_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per suite and problem: floor MSE (@ step reached), solvers x precisions; each cell a
    :func:`~reports.floor_cells.floor_cell` over the seeds."""
    out = []
    if runs.empty:
        return out
    for (suite, problem), group in runs.groupby(["suite", "problem"], sort=True):
        precs = sorted(group["precision"].unique(), key=precision_order)
        cells = {key: floor_cell(part.to_dict("records"))
                 for key, part in group.groupby(["solver", "precision"], sort=False)}
        solvers = sorted(group["solver"].unique())
        frame = pd.DataFrame(
            [[cells.get((s, p), "") for p in precs] for s in solvers],
            index=pd.Index(solvers, name="solver"), columns=precs,
        )
        out.append(Pivot(f"{suite}-{problem}",
                         f"{suite} / {problem}: floor MSE (@ step reached)", frame,
                         {"suite": suite, "problem": problem}))
    return out


def _model_label(subject: str, cfg: TrainedConfig) -> str:
    """Subject, LayerNorm (``LN`` / ``no LN``), recipe and training dtype where not the
    default, comma-separated: ``baseconv, no LN, gauss-newton, trained in float64`` (it reads
    the same as a file name: ``baseconv-no-ln-gauss-newton-trained-in-float64``)."""
    parts = [subject]
    if cfg.layernorm is not None:
        parts.append("LN" if cfg.layernorm else "no LN")
    if cfg.recipe != "paper":
        parts.append(cfg.recipe)
    if cfg.train_dtype != "float32":
        parts.append(f"trained in {cfg.train_dtype}")
    return ", ".join(parts)


def grid_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Trained runs (models: depth x width), one per row, columns :data:`GRID_COLUMNS`."""
    models = [r for r in rows if r.get("kind") == "trained"]
    cfgs = [TrainedConfig.from_json(r.get("config")) for r in models]
    outcomes = [TrainedResult.from_json(r.get("result")) for r in models]
    df = runs_frame(models).assign(
        subject=[_model_label(str(r["subject"]), c) for r, c in zip(models, cfgs, strict=True)],
        depth=[c.depth for c in cfgs], width=[c.width for c in cfgs],
        seed=[c.seed for c in cfgs], train_steps=[c.train_steps for c in cfgs],
        approximation=[res.approximation for res in outcomes],
        rounding=[res.rounding for res in outcomes],
        converged=[res.train_converged for res in outcomes],
        truth_digits=[res.truth_digits for res in outcomes])[GRID_COLUMNS]
    if not df.empty:
        df = df.sort_values(["task", "subject", "precision", "depth", "width", "seed",
                             "run_id"]).reset_index(drop=True)
    return df


#: What a grid cell can show: the final total MSE, and its decomposition when stored
#: (``result["decomposition"] = {"approximation": log10, "rounding": log10}``).
GRID_METRICS = {"log10_mse": "MSE", "approximation": "approximation error",
                "rounding": "rounding error",
                "truth_digits": "certain digits of the mp100 reference"}


def grid_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per task x subject x precision (x metric): median (min - max over seeds) by depth x
    width of the total MSE and, when stored, its approximation and rounding parts and the
    certain digits of the reference they are measured against (the fewest over seeds)."""
    out = []
    if runs.empty:
        return out
    ok = runs[runs["status"] == "ok"]
    for (task, subject, prec), group in ok.groupby(["task", "subject", "precision"], sort=True):
        depths = sorted(group["depth"].unique())
        widths = sorted(group["width"].unique())
        for metric, label in GRID_METRICS.items():
            if group[metric].isna().all():
                continue
            body = []
            for d in depths:
                row = []
                for w in widths:
                    vals = group[(group["depth"] == d) & (group["width"] == w)][metric]
                    vals = sorted(float(v) for v in vals if v is not None and not pd.isna(v))
                    if not vals:
                        row.append("")
                        continue
                    if metric == "truth_digits":   # digits, not a log10 error: the fewest
                        row.append(f"{vals[0]:.0f}")
                        continue
                    text = format_log10(float(np.median(vals)))
                    if len(vals) > 1:
                        text += f" [{format_log10(vals[0])}, {format_log10(vals[-1])}]"
                    row.append(text)
                body.append(row)
            frame = pd.DataFrame(body, index=pd.Index(depths, name="depth"),
                                 columns=[f"width {w}" for w in widths])
            suffix = "" if metric == "log10_mse" else f"-{metric}"
            how = "the fewest over seeds" if metric == "truth_digits" else \
                "median [min, max] over seeds"
            out.append(Pivot(f"grid-{task}-{subject}-{prec}{suffix}",
                             f"{task} / {subject} / {prec}: {label} by depth x width "
                             f"({how})", frame,
                             {"task": task, "subject": subject, "precision": prec}))
    return out
