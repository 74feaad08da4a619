"""Report figures (matplotlib, Agg, fixed size and DPI; PNG and SVG without dates).

Every figure is written twice, ``NAME.png`` (150 dpi, embedded in the HTML report) and
``NAME.svg`` (vector, for papers), each atomically. Labels from the store pass through
:func:`label` (no mathtext, no control characters), so no stored name can break a figure.

* :func:`solver_traces` — per problem: log10 MSE per iteration, one panel per iterative
  solver, one line per precision (the layout of 001 Fig. 2 / Fig. 5);
* :func:`solver_floors` — per problem: floor against precision, one line per solver;
* :func:`grid_lines` / :func:`grid_heatmap` — log-MSE against depth (one panel per subject,
  one line per width, 001 Fig. 3 / 4) and the depth x width heatmap, for model runs (Fig. 8).
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator  # noqa: E402

from precision.precisions import parse_precision  # noqa: E402
from reports.files import write_bytes  # noqa: E402
from reports.floor_cells import median  # noqa: E402
from reports.text_table import precision_order  # noqa: E402

#: PNG resolution (the HTML report embeds the PNGs; the SVGs are resolution-free).
DPI = 150
_PNG_META = {"Software": None}
_SVG_META = {"Date": None, "Creator": None}
matplotlib.rcParams["svg.hashsalt"] = "precision-report"   # the same ids every time


def label(text: object, width: int | None = None) -> str:
    """A store value as figure text: control characters (NUL, newlines) become spaces, ``$``
    is a dollar sign (not mathtext), and ``width`` wraps a long label over lines."""
    out = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    out = textwrap.fill(out, width) if width else out
    return out.replace("$", r"\$")


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` as ``path`` (PNG) and beside it as SVG, each atomically; close it."""
    try:   # the tight box (legends outside the axes included) is measured once for both
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
        for target, fmt, meta in ((path, "png", _PNG_META),
                                  (path.with_suffix(".svg"), "svg", _SVG_META)):
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=DPI, metadata=meta, bbox_inches=box)
            write_bytes(target, buf.getvalue())
    finally:
        plt.close(fig)
    return path


def _title_width(cols: int) -> int:
    """Characters per line of a figure title over ``cols`` panels: within the panels."""
    return max(40, 48 * cols)


def figure_legend(fig: Any, handles: list[Any], labels: list[str] | None = None,
                  title: str | None = None, fontsize: float = 8) -> None:
    """One legend for the whole figure, right of its panels, its top level with the top of
    the highest panel (not beside the title); call after ``tight_layout``."""
    if not handles:
        return
    top = max(ax.get_position().y1 for ax in fig.axes if ax.axison)
    if labels is None:
        labels = [h.get_label() for h in handles]
    fig.legend(handles, labels, fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.0, top),
               frameon=False, title=title, title_fontsize=fontsize)


def _legend_outside(ax: Any, fontsize: float = 7, ncol: int = 1) -> None:
    """The legend right of the axes, where it cannot cover data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, ncol=ncol, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0, frameon=False)


def _finish(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, path: Path,
            ncol: int = 1) -> Path:
    """Labels, grid, legend, layout, save: the common end of the line plots."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    _legend_outside(ax, ncol=ncol)
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
        for _, r in it[it["solver"] == solver].sort_values(
                "precision", key=lambda s: s.map(precision_order)).iterrows():
            pts = [(s, v) for s, v in series.get(r["run_id"], []) if v is not None
                   and math.isfinite(v)]
            if pts:   # one line per seed; the figure's legend names the precisions
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, color=colors[r["precision"]], lw=1.0, alpha=0.8)
        ax.set_title(label(solver, 40), fontsize=10)
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations are whole
        ax.set_ylabel("log10 MSE")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(solvers):]:
        ax.axis("off")
    handles = [Line2D([], [], color=colors[p], lw=1.5, label=label(p)) for p in precs]
    fig.suptitle(label(f"{problem}: error per iteration against the certified truth "
                       "(one line per seed)", _title_width(cols)), fontsize=11)
    fig.tight_layout()
    figure_legend(fig, handles, title="precision")
    return _save(fig, path)


def solver_floors(problem: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Floor log10 MSE against precision (ordered by bits), one line per solver: the median
    over seeds, with the seeds' range as error bars."""
    sub = runs[(runs["problem"] == problem) & (runs["status"] == "ok")]
    if sub["precision"].nunique() < 2:   # one precision: the table says it all
        return None
    precs = sorted(sub["precision"].unique(), key=precision_order)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for solver in sorted(sub["solver"].unique()):
        s = sub[sub["solver"] == solver]
        ys, lo, hi = [], [], []
        for p in precs:
            v = s[s["precision"] == p]["floor_log10"]
            v = sorted(float(x) for x in v if x is not None and math.isfinite(float(x)))
            mid = median(v) if v else np.nan
            ys.append(mid)
            lo.append(mid - v[0] if v else 0.0)
            hi.append(v[-1] - mid if v else 0.0)
        ax.errorbar(range(len(precs)), ys, yerr=[lo, hi], marker="o", label=label(solver),
                    lw=1.2, capsize=3)
    ax.set_xticks(range(len(precs)), [label(p) for p in precs])
    return _finish(fig, ax, "precision", "floor: log10 MSE (median over seeds, bars: range)",
                   label(f"{problem}: floor by precision", 60), path,
                   ncol=1 if sub["solver"].nunique() <= 12 else 2)


#: Precisions drawn as reference lines at their rounding level u^2 (the MSE of rounding an
#: output of size 1), when that level lies within this many decades below the data.
_REFERENCE_PRECISIONS = ("float32", "float64")
_REFERENCE_SPAN = 4.0
#: Smallest y range (decades) of a depth x width panel.
_MIN_DECADES = 1.0
#: A precision's line is drawn only where it differs from the reference precision's by more
#: than this many decades (three identical lines would hide each other).
_PRECISION_DIFF = 0.1


def _longest_training(runs: pd.DataFrame) -> pd.DataFrame:
    """Of each subject, the runs at its longest training (``train_steps``), so a depth x width
    figure does not mix budgets (the training-length figure shows the others)."""
    if runs.empty or "train_steps" not in runs or runs["train_steps"].isna().all():
        return runs
    longest = runs.groupby("subject")["train_steps"].transform("max")
    return runs[(runs["train_steps"] == longest) | runs["train_steps"].isna()]


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
    sub = _longest_training(runs[(runs["task"] == task) & (runs["status"] == "ok")])
    if sub.empty:
        return None
    subjects = sorted(sub["subject"].unique())
    cols = min(3, len(subjects))
    rows = math.ceil(len(subjects) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.4 * rows), squeeze=False)
    widths = sorted(sub["width"].unique())
    colors = {w: plt.cm.viridis(0.85 * i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    seen: dict[str, Line2D] = {}   # the figure's legend, one entry per distinct line
    refs: set[str] = set()
    for ax, subject in zip(axes.flat, subjects, strict=False):
        g = sub[sub["subject"] == subject]
        panel = depth_panel(g)
        for w, line in panel["lines"].items():
            ax.plot(line.index, line.values, marker="o", color=colors[w], label=f"width {w}",
                    lw=1.3)
            seen[f"width {w}"] = Line2D([], [], marker="o", color=colors[w], lw=1.3,
                                        label=f"width {w}")
            hollow = panel["hollow"][w]
            if hollow:
                ax.plot(hollow, line.loc[hollow].values, "o", color="white",
                        markeredgecolor=colors[w], ms=6, zorder=3)
                seen["~hollow"] = Line2D([], [], ls="", marker="o", color="white",
                                         markeredgecolor="black", ms=6,
                                         label="training-limited (T)")
        for (w, p), pts in panel["differing"].items():
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, ls="--", marker="x", color=colors[w], lw=1.0)
            seen[f"width {w}, {p}"] = Line2D([], [], ls="--", marker="x", color=colors[w],
                                             lw=1.0, label=f"width {w}, {label(p)}")
        ref = panel["reference"]
        lo = float(np.nanmin(g["log10_mse"].astype(float)))
        for name in _REFERENCE_PRECISIONS:
            level = 2 * math.log10(parse_precision(name).unit_roundoff)
            if level >= lo - _REFERENCE_SPAN:
                ax.axhline(level, ls=":", color="grey", lw=1.0)
                ax.annotate(f"{name} u²", (0.02, level), xycoords=("axes fraction", "data"),
                            fontsize=7, color="grey", va="bottom")
                refs.add(name)
        low, high = ax.get_ylim()
        if high - low < _MIN_DECADES:   # show no less than a decade: flat stays flat
            mid = (low + high) / 2
            ax.set_ylim(mid - _MIN_DECADES / 2, mid + _MIN_DECADES / 2)
        ax.set_title(label(subject, 40), fontsize=10)   # long recipe labels wrap
        ax.set_xlabel("depth")
        ax.set_ylabel(f"log10 test MSE ({label(ref)})")
        ax.set_xticks(sorted(g["depth"].unique()))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(subjects):]:
        ax.axis("off")
    handles = [seen[k] for k in sorted(seen, key=_legend_order)]
    if refs:
        handles.append(Line2D([], [], ls=":", color="grey", lw=1.0,
                              label="rounding level u² of " + " / ".join(sorted(refs))))
    budgets = runs[(runs["task"] == task) & (runs["status"] == "ok")]["train_steps"]
    longest = ", each model at its longest training" if budgets.nunique() > 1 else ""
    fig.suptitle(label(f"{task}: test MSE against depth, one line per width "
                       f"(median over seeds{longest})", _title_width(cols)), fontsize=11)
    fig.tight_layout()
    figure_legend(fig, handles)
    return _save(fig, path)


def _legend_order(key: str) -> tuple[int, int, str]:
    """Widths by number, then widths in other precisions, then the hollow marker."""
    if key.startswith("~"):
        return (2, 0, key)
    width, _, prec = key.removeprefix("width ").partition(", ")
    return (1 if prec else 0, int(width) if width.isdigit() else 0, prec)


def grid_heatmap(task: str, subject: str, precision: str, runs: pd.DataFrame, path: Path
                 ) -> Path | None:
    """Median log10 MSE over depth x width."""
    sub = _longest_training(runs[(runs["task"] == task) & (runs["subject"] == subject)
                                 & (runs["precision"] == precision) & (runs["status"] == "ok")])
    if sub.empty:
        return None
    table = sub.groupby(["depth", "width"])["log10_mse"].median().unstack("width")
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    im = ax.imshow(table.values, origin="lower", aspect="auto", cmap="magma_r")
    finite = table.values[np.isfinite(table.values)]
    mid = float(np.mean([finite.min(), finite.max()])) if finite.size else 0.0
    for (i, j), v in np.ndenumerate(table.values):   # the number in each cell
        if np.isfinite(v):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8,
                    color="black" if v < mid else "white")
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns])
    ax.set_yticks(range(len(table.index)), [str(i) for i in table.index])
    ax.set_xlabel("width")
    ax.set_ylabel("depth")
    fig.colorbar(im, ax=ax, label="log10 test MSE (median over seeds)")
    ax.set_title(label(f"{task} / {subject} / {precision}", 50), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def training_length(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Final log10 MSE against training steps (log scale), one line per subject x precision
    (001 Fig. 9); only runs whose config records ``train_steps``."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok") & runs["train_steps"].notna()]
    if sub.empty or sub["train_steps"].nunique() < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for subject, g in sub.groupby("subject", sort=True):   # its highest precision
        prec = max(g["precision"].unique(), key=precision_order)
        med = g[g["precision"] == prec].groupby("train_steps")["log10_mse"].median()
        ax.plot(med.index, med.values, marker="o", label=label(f"{subject} ({prec})", 40))
    ax.set_xscale("log")
    return _finish(fig, ax, "training steps (log scale)",
                   "log10 test MSE\n(median over depth, width, seed)",
                   label(f"{task}: test MSE against training length", 60), path)
