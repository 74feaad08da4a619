"""Report figures (matplotlib, Agg, fixed size and DPI; PNG metadata without dates).

* :func:`solver_traces` — per problem: log10 MSE per iteration, one panel per iterative
  solver, one line per precision (the layout of 001 Fig. 2 / Fig. 5);
* :func:`solver_floors` — per problem: floor against precision, one line per solver;
* :func:`grid_lines` / :func:`grid_heatmap` — log-MSE against depth (one panel per subject,
  one line per width, 001 Fig. 3 / 4) and the depth x width heatmap, for model runs (Fig. 8).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from precision.precisions import parse_precision  # noqa: E402
from reports.text_table import precision_order  # noqa: E402

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


#: Precisions drawn as reference lines at their rounding level u^2 (the MSE of rounding an
#: output of size 1), when that level lies within this many decades below the data.
_REFERENCE_PRECISIONS = ("float32", "float64")
_REFERENCE_SPAN = 4.0
#: Smallest y range (decades) of a depth x width panel.
_MIN_DECADES = 1.0
#: A precision's line is drawn only where it differs from the reference precision's by more
#: than this many decades (three identical lines would hide each other).
_PRECISION_DIFF = 0.1


def depth_panel(g: pd.DataFrame) -> dict[str, Any]:
    """What one subject's panel of :func:`grid_lines` draws, from its ok runs ``g``:
    ``reference`` (the highest precision), ``lines`` {width: median log10 MSE by depth in
    it}, ``hollow`` {width: depths where a run was training-limited}, and ``differing``
    {(width, precision): [(depth, value)] where that precision's median differs from the
    reference's by more than 0.1 decades}."""
    precs = sorted(g["precision"].unique(), key=precision_order)
    ref = precs[-1]
    med = g.groupby(["precision", "width", "depth"])["log10_mse"].median()
    cut = g.groupby(["precision", "width", "depth"])["converged"].apply(
        lambda c: bool((c == False).any()))  # noqa: E712 (None = not recorded)
    lines: dict[Any, pd.Series] = {}
    hollow: dict[Any, list[Any]] = {}
    differing: dict[tuple[Any, str], list[tuple[Any, float]]] = {}
    for w in sorted(g["width"].unique()):
        if (ref, w) not in med.index.droplevel(2):
            continue
        line = med.loc[(ref, w)]
        lines[w] = line
        hollow[w] = [d for d in line.index if cut.get((ref, w, d), False)]
        for p in precs[:-1]:
            if (p, w) not in med.index.droplevel(2):
                continue
            other = med.loc[(p, w)]
            pts = [(d, float(other[d])) for d in other.index
                   if d in line.index and abs(other[d] - line[d]) > _PRECISION_DIFF]
            if pts:
                differing[(w, p)] = pts
    return {"reference": ref, "lines": lines, "hollow": hollow, "differing": differing}


def grid_lines(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """001 Fig. 3 / 4 style: one panel per subject (family), x = depth, one line per width
    (median log10 MSE over seeds) in the highest evaluation precision; other precisions are
    drawn (dashed) only at depths where they differ from it by more than 0.1 decades; the
    float32 / float64 rounding levels (u^2) are dotted reference lines. Hollow markers are
    training-limited runs (the validation curve was still falling: ``T``)."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok")]
    if sub.empty:
        return None
    subjects = sorted(sub["subject"].unique())
    cols = min(3, len(subjects))
    rows = math.ceil(len(subjects) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.4 * rows), squeeze=False)
    widths = sorted(sub["width"].unique())
    colors = {w: plt.cm.viridis(0.85 * i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    for ax, subject in zip(axes.flat, subjects, strict=False):
        g = sub[sub["subject"] == subject]
        panel = depth_panel(g)
        for w, line in panel["lines"].items():
            ax.plot(line.index, line.values, marker="o", color=colors[w], label=f"width {w}",
                    lw=1.3)
            hollow = panel["hollow"][w]
            if hollow:
                ax.plot(hollow, line.loc[hollow].values, "o", color="white",
                        markeredgecolor=colors[w], ms=6, zorder=3)
        for (w, p), pts in panel["differing"].items():
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, ls="--", marker="x", color=colors[w], lw=1.0,
                    label=f"width {w}, {p}")
        ref = panel["reference"]
        lo = float(np.nanmin(g["log10_mse"].astype(float)))
        for name in _REFERENCE_PRECISIONS:
            level = 2 * math.log10(parse_precision(name).unit_roundoff)
            if level >= lo - _REFERENCE_SPAN:
                ax.axhline(level, ls=":", color="grey", lw=1.0)
                ax.annotate(f"{name} u²", (0.02, level), xycoords=("axes fraction", "data"),
                            fontsize=7, color="grey", va="bottom")
        low, high = ax.get_ylim()
        if high - low < _MIN_DECADES:   # show no less than a decade: flat stays flat
            mid = (low + high) / 2
            ax.set_ylim(mid - _MIN_DECADES / 2, mid + _MIN_DECADES / 2)
        ax.set_title(textwrap.fill(subject, 40), fontsize=10)   # long recipe labels wrap
        ax.set_xlabel("depth")
        ax.set_ylabel(f"log10 MSE ({ref}; median over seeds)")
        ax.set_xticks(sorted(g["depth"].unique()))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(subjects):]:
        ax.axis("off")
    fig.suptitle(f"{task}: MSE against depth and width (hollow: training-limited)",
                 fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


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
