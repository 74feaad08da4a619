"""Report figures (matplotlib, Agg, fixed size and DPI; PNG metadata without dates).

* :func:`solver_traces` — per problem: log10 MSE per iteration, one panel per iterative
  solver, one line per precision (the layout of 001 Fig. 2 / Fig. 5);
* :func:`solver_floors` — per problem: floor against precision, one line per solver;
* :func:`grid_lines` / :func:`grid_heatmap` — log-MSE against depth (one line per
  subject x precision) and the depth x width heatmap, for model runs (001 Fig. 3 / 8).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from reports.tables import precision_order  # noqa: E402

_META = {"Software": None}


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=100, metadata=_META)
    plt.close(fig)
    return path


def _finish(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, path: Path,
            ncol: int = 1) -> Path:
    """Labels, grid, legend, layout, save: the common end of the line plots."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=ncol)
    fig.tight_layout()
    return _save(fig, path)


def solver_traces(problem: str, runs: pd.DataFrame, series: dict[str, list[tuple[int, float]]],
                  path: Path) -> Path | None:
    """``series`` maps run_id -> [(step, log10_mse)]; direct solvers (1 step) are left out."""
    it = runs[(runs["problem"] == problem) & (runs["steps"].fillna(0) > 1)]
    solvers = sorted(it["solver"].unique())
    if not solvers:
        return None
    cols = min(3, len(solvers))
    rows = math.ceil(len(solvers) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    precs = sorted(it["precision"].unique(), key=precision_order)
    colors = {p: plt.cm.plasma(0.85 * i / max(1, len(precs) - 1)) for i, p in enumerate(precs)}
    for ax, solver in zip(axes.flat, solvers, strict=False):
        labelled: set[str] = set()
        for _, r in it[it["solver"] == solver].sort_values(
                "precision", key=lambda s: s.map(precision_order)).iterrows():
            pts = [(s, v) for s, v in series.get(r["run_id"], []) if v is not None
                   and math.isfinite(v)]
            if pts:   # one line per seed, one legend entry per precision
                xs, ys = zip(*pts, strict=True)
                prec = r["precision"]
                ax.plot(xs, ys, label=prec if prec not in labelled else "_nolegend_",
                        color=colors[prec], lw=1.0, alpha=0.8)
                labelled.add(prec)
        ax.set_title(solver, fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel("log10 MSE")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(solvers):]:
        ax.axis("off")
    fig.suptitle(f"{problem}: error per iteration against the certified truth", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def solver_floors(problem: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Floor log10 MSE against precision (ordered by bits), one line per solver: the median
    over seeds, with the seeds' range as error bars."""
    sub = runs[(runs["problem"] == problem) & (runs["status"] == "ok")]
    if sub.empty:
        return None
    precs = sorted(sub["precision"].unique(), key=precision_order)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for solver in sorted(sub["solver"].unique()):
        s = sub[sub["solver"] == solver]
        ys, lo, hi = [], [], []
        for p in precs:
            v = s[s["precision"] == p]["floor_log10"]
            v = sorted(float(x) for x in v if x is not None and math.isfinite(float(x)))
            mid = v[(len(v) - 1) // 2] if v else np.nan
            ys.append(mid)
            lo.append(mid - v[0] if v else 0.0)
            hi.append(v[-1] - mid if v else 0.0)
        ax.errorbar(range(len(precs)), ys, yerr=[lo, hi], marker="o", label=solver, lw=1.2,
                    capsize=3)
    ax.set_xticks(range(len(precs)), precs)
    return _finish(fig, ax, "precision", "floor: log10 MSE", f"{problem}: floor by precision",
                   path, ncol=2)


def grid_lines(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """log10 MSE (median over seeds and widths' best) against depth, per subject x precision."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok")]
    if sub.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (subject, prec), g in sub.groupby(["subject", "precision"], sort=True):
        med = g.groupby(["depth", "width"])["log10_mse"].median().groupby("depth").min()
        ax.plot(med.index, med.values, marker="o", label=f"{subject} {prec}")
    return _finish(fig, ax, "depth", "log10 MSE (best width, median over seeds)",
                   f"{task}: MSE against depth", path)


def grid_heatmap(task: str, subject: str, precision: str, runs: pd.DataFrame, path: Path
                 ) -> Path | None:
    """Median log10 MSE over depth x width."""
    sub = runs[(runs["task"] == task) & (runs["subject"] == subject)
               & (runs["precision"] == precision) & (runs["status"] == "ok")]
    if sub.empty:
        return None
    table = sub.groupby(["depth", "width"])["log10_mse"].median().unstack("width")
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    im = ax.imshow(table.values, origin="lower", aspect="auto", cmap="magma_r")
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns])
    ax.set_yticks(range(len(table.index)), [str(i) for i in table.index])
    ax.set_xlabel("width")
    ax.set_ylabel("depth")
    fig.colorbar(im, ax=ax, label="log10 MSE")
    ax.set_title(f"{task} / {subject} / {precision}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def training_length(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Final log10 MSE against training steps (log scale), one line per subject x precision
    (001 Fig. 9); only runs whose config records ``train_steps``."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok") & runs["train_steps"].notna()]
    if sub.empty or sub["train_steps"].nunique() < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (subject, prec), g in sub.groupby(["subject", "precision"], sort=True):
        med = g.groupby("train_steps")["log10_mse"].median()
        ax.plot(med.index, med.values, marker="o", label=f"{subject} {prec}")
    ax.set_xscale("log")
    return _finish(fig, ax, "training steps", "log10 MSE (median over seeds)",
                   f"{task}: MSE against training length", path)
