"""Report tables built from store rows only (pandas DataFrames, deterministic order).

* :func:`solver_runs` — one row per solver run (long format, the numbers exactly as stored);
* :func:`solver_pivots` — per problem, solvers down and precisions across (floor MSE, step);
* :func:`grid_pivots` — per task x subject x precision, MSE over depth x width for runs whose
  config has ``depth`` and ``width`` (trained / constructed models), seeds aggregated into
  median and range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from precision.precisions import parse_precision
from reports.floor_cells import floor_cell, floor_reached, format_log10, run_seed, stored_log10

SOLVER_COLUMNS = ["suite", "problem", "solver", "precision", "seed", "status", "floor_log10",
                  "floor_index", "reached", "rate", "conv_order", "mse", "log10_mse", "steps",
                  "run_id", "created_at"]


def precision_order(name: str) -> tuple[int, int]:
    """Sort key: float formats by bits, then mpN by digits."""
    p = parse_precision(name)
    return (1 if p.is_mp else 0, p.bits)


def format_mse(log10: float | None) -> str:
    """An MSE from its log10 (works below the float range: 1e-400); ``-`` when missing."""
    if log10 is None or (isinstance(log10, float) and math.isnan(log10)):
        return "-"
    return format_log10(log10)


def solver_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Solver and construction runs, one per row, columns :data:`SOLVER_COLUMNS`, sorted.

    When a suite was re-run with other parameters, the store holds several runs for one
    (problem, solver, precision, seed); the newest is kept (older ones stay in the store).
    """
    recs = [{
        "suite": r["suite"], "problem": r["task"], "solver": r["subject"],
        "precision": r["precision"], "seed": run_seed(r),
        "status": r["status"], "floor_log10": r["floor_log10"], "floor_index": r["floor_index"],
        "reached": floor_reached(r),
        "rate": r["rate"], "conv_order": r["conv_order"], "mse": r["mse"],
        "log10_mse": r["log10_mse"], "steps": r["steps"], "run_id": r["run_id"],
        "created_at": r["created_at"],
    } for r in rows if r.get("kind") in ("solver", "construction")]
    df = pd.DataFrame(recs, columns=SOLVER_COLUMNS)
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


def grid_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Runs with ``depth`` and ``width`` in their config (models), one per row."""
    recs = []
    for r in rows:
        cfg = r.get("config") or {}
        if r.get("kind") in ("solver", "construction") or "depth" not in cfg \
                or "width" not in cfg:
            continue
        dec = (r.get("result") or {}).get("decomposition") or {}
        label = r["subject"] + ("" if cfg.get("layernorm") is None else
                                (" +LN" if cfg["layernorm"] else " -LN"))
        train = cfg.get("train") or {}
        if train.get("recipe", "paper") != "paper":
            label += f" {train['recipe']}"
        if train.get("dtype", "float32") != "float32":
            label += f" (trained in {train['dtype']})"
        recs.append({"task": r["task"], "subject": label, "precision": r["precision"],
                     "depth": int(cfg["depth"]), "width": int(cfg["width"]),
                     "seed": cfg.get("seed", 0), "train_steps": cfg.get("train_steps"),
                     "status": r["status"], "log10_mse": r["log10_mse"],
                     "approximation": stored_log10(dec.get("approximation")),
                     "rounding": stored_log10(dec.get("rounding")),
                     "converged": (r.get("result") or {}).get("train_converged"),
                     "run_id": r["run_id"]})
    cols = ["task", "subject", "precision", "depth", "width", "seed", "train_steps", "status",
            "log10_mse", "approximation", "rounding", "converged", "run_id"]
    df = pd.DataFrame(recs, columns=cols)
    if not df.empty:
        df = df.sort_values(["task", "subject", "precision", "depth", "width", "seed",
                             "run_id"]).reset_index(drop=True)
    return df


#: What a grid cell can show: the final total MSE, and its decomposition when stored
#: (``result["decomposition"] = {"approximation": log10, "rounding": log10}``).
GRID_METRICS = {"log10_mse": "MSE", "approximation": "approximation error",
                "rounding": "rounding error"}


def grid_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per task x subject x precision (x metric): median (min - max over seeds) by depth x
    width of the total MSE and, when stored, its approximation and rounding parts."""
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
                    text = format_mse(float(np.median(vals)))
                    if len(vals) > 1:
                        text += f" [{format_mse(vals[0])}, {format_mse(vals[-1])}]"
                    row.append(text)
                body.append(row)
            frame = pd.DataFrame(body, index=pd.Index(depths, name="depth"),
                                 columns=[f"width {w}" for w in widths])
            suffix = "" if metric == "log10_mse" else f"-{metric}"
            out.append(Pivot(f"grid-{task}-{subject}-{prec}{suffix}".replace(" ", ""),
                             f"{task} / {subject} / {prec}: {label} by depth x width "
                             "(median [min, max] over seeds)", frame))
    return out
