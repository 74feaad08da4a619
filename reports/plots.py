"""Report figures (matplotlib, Agg, fixed size and DPI; PNG and SVG without dates).

Every figure is written twice, ``NAME.png`` (150 dpi, embedded in the HTML report) and
``NAME.svg`` (vector, for papers), each atomically. Labels from the store pass through
:func:`label` (no mathtext, no control characters), so no stored name can break a figure.

* :func:`solver_traces` — per problem: log10 MSE per iteration, one panel per iterative
  solver, one line per precision (the layout of 001 Fig. 2 / Fig. 5);
* :func:`solver_floors` — per problem: floor against precision, one line per solver;
* :func:`grid_lines` / :func:`grid_heatmap` — log-MSE against depth (one panel per subject on
  one shared axis, one line per width, the float32 / float64 rounding levels as reference
  lines, 001 Fig. 3 / 4) and the depth x width heatmap (each cell's value and A / T / R
  label, one colour scale per task), for model runs (Fig. 8);
* :func:`training_precision` — floor against the precision the models trained in, one line
  per model x depth x width x where its weights were kept.
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

from precision.invariants import NONFINITE  # noqa: E402
from precision.precisions import parse_precision  # noqa: E402
from precision.text_numbers import is_whole
from reports import precision_style  # noqa: E402
from reports.files import write_bytes  # noqa: E402
from reports.floor_cells import format_log10, median  # noqa: E402
from reports.tables import cell_labels  # noqa: E402
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


def whole_number_ticks(axis: Any) -> None:
    """At most 6 whole-number ticks on ``axis`` (iterations, steps, layers): matplotlib's
    default of up to 11 ran 4-digit labels together on a 4-inch panel (``0 800
    1600240032004000``)."""
    axis.set_major_locator(MaxNLocator(nbins=5, integer=True, steps=[1, 2, 2.5, 5, 10]))


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
    colors = {p: precision_style.colour(p) for p in precs}   # the same in every figure
    for ax, solver in zip(axes.flat, solvers, strict=False):
        for _, r in it[it["solver"] == solver].sort_values(
                "precision", key=lambda s: s.map(precision_order)).iterrows():
            pts = [(s, v) for s, v in series.get(r["run_id"], []) if v is not None
                   and math.isfinite(v)]
            if pts:   # one line per seed; the figure's legend names the precisions
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, color=colors[r["precision"]], lw=1.0, alpha=0.8,
                        ls=precision_style.trace_line(r["precision"]))
        ax.set_title(label(solver, 40), fontsize=10)
        ax.set_xlabel("iteration")
        whole_number_ticks(ax.xaxis)
        ax.set_ylabel("log10 MSE")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(solvers):]:
        ax.axis("off")
    handles = [Line2D([], [], color=colors[p], lw=1.5, ls=precision_style.trace_line(p),
                      label=label(p)) for p in precs]
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


#: Precisions whose rounding level is drawn as a reference line on the depth figures.
_REFERENCE_PRECISIONS = ("float32", "float64")
#: A rounding level is drawn when it lies at most this many decades below the lowest value of
#: the figure (further down it would squeeze the data into a sliver; the legend names it).
_REFERENCE_SPAN = 14.0
#: Marker of each width (in order) on the depth figures, so equal values stay told apart.
_MARKERS = ("o", "s", "^", "D", "v", "P")
#: Smallest y range (decades) of a depth figure.
_MIN_DECADES = 1.0
#: A precision's line is drawn only where it differs from the reference precision's by more
#: than this many decades (three identical lines would hide each other).
_PRECISION_DIFF = 0.1


def rounding_level(precision: str) -> float:
    """log10 of the MSE that rounding alone gives in ``precision``: ``u^2``, the mean squared
    error of rounding an output of size 1 to the format (unit roundoff ``u``, 001 Sec. 2).
    The one definition of the reference lines of :func:`grid_lines`."""
    return 2 * math.log10(parse_precision(precision).unit_roundoff)


def _rounding_levels(precisions: Any) -> dict[str, float]:
    """The rounding levels a depth figure draws: float32's and float64's, and those of the
    other float formats its runs were evaluated in (``float8_e4m3``, ``mxfp8_e4m3``, ...;
    not mpN), formats of one level named together ("float8_e4m3, mxfp8_e4m3")."""
    names = list(_REFERENCE_PRECISIONS)
    for name in sorted(set(precisions) - set(names), key=precision_order):
        try:
            if not parse_precision(name).is_mp:
                rounding_level(name)
                names.append(name)
        except (ValueError, AttributeError):   # no unit roundoff to draw
            continue
    by_level: dict[float, list[str]] = {}
    for name in names:
        by_level.setdefault(rounding_level(name), []).append(name)
    return {", ".join(group): level for level, group in sorted(by_level.items(), reverse=True)}


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


def _figure_range(values: list[float], levels: list[float]) -> tuple[float, float]:
    """y limits covering ``values`` and ``levels`` (log10), a margin above and below, and no
    less than :data:`_MIN_DECADES` (a flat line stays flat)."""
    lo, hi = min(values + levels), max(values + levels)
    if hi - lo < _MIN_DECADES:
        mid = (lo + hi) / 2
        lo, hi = mid - _MIN_DECADES / 2, mid + _MIN_DECADES / 2
    pad = max(0.3, 0.04 * (hi - lo))
    return lo - pad, hi + pad


def _finite(values: Any) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def grid_lines(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """001 Fig. 3 / 4 style: one panel per subject (family), x = depth, one line per width
    (median log10 MSE over seeds) in the subject's highest evaluation precision; other
    precisions are drawn (dashed) only at depths where they differ from it by more than 0.1
    decades. Every panel has ONE y-axis (``sharey``, one range covering every subject and
    precision), so the panels compare across families. The float32 / float64 rounding levels
    (:func:`rounding_level`) are labelled reference lines when they lie within
    :data:`_REFERENCE_SPAN` decades below the data (the legend names those further down).
    Hollow markers are training-limited runs (the convergence check failed: ``T``). A model
    whose output is not finite in a precision (``nonfinite``: an overflow or NaN of that
    evaluation) is an ``x`` in that precision's colour at the top of its panel."""
    sub = _longest_training(runs[(runs["task"] == task) & (runs["status"] == "ok")])
    broken = runs[(runs["task"] == task) & (runs["status"] == NONFINITE)]
    if sub.empty:
        return None
    subjects = sorted(sub["subject"].unique())
    panels = {s: depth_panel(sub[sub["subject"] == s]) for s in subjects}
    values = [v for p in panels.values() for line in p["lines"].values()
              for v in _finite(line.values)]
    values += [v for p in panels.values() for pts in p["differing"].values()
               for v in _finite(y for _, y in pts)]
    if not values:
        return None
    levels = _rounding_levels(sub["precision"].unique())
    drawn = {n: lv for n, lv in levels.items() if lv >= min(values) - _REFERENCE_SPAN}
    low, high = _figure_range(values, list(drawn.values()))
    cols = min(3, len(subjects))
    rows = math.ceil(len(subjects) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.7 * cols, 3.7 * rows), squeeze=False,
                             sharey=True)
    widths = sorted(sub["width"].unique())
    colors = {w: plt.cm.viridis(0.85 * i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    styles = {name: precision_style.dash(name.split(", ")[0]) for name in levels}
    refs = {p["reference"] for p in panels.values()}
    markers = {w: _MARKERS[i % len(_MARKERS)] for i, w in enumerate(widths)}
    depths = sorted(sub["depth"].unique())
    gap = min((b - a for a, b in zip(depths, depths[1:], strict=False)), default=1)
    dodge = {w: 0.07 * gap * (i - (len(widths) - 1) / 2) for i, w in enumerate(widths)}
    seen: dict[str, Line2D] = {}   # the figure's legend, one entry per distinct line
    for ax, subject in zip(axes.flat, subjects, strict=False):
        panel = panels[subject]
        for w, line in panel["lines"].items():   # widths side by side: equal ones stay seen
            xs = [d + dodge[w] for d in line.index]
            ax.plot(xs, line.values, marker=markers[w], color=colors[w], lw=1.3, ms=6)
            seen[f"width {w}"] = Line2D([], [], marker=markers[w], color=colors[w], lw=1.3,
                                        ms=6, label=f"width {w}")
            hollow = panel["hollow"][w]
            if hollow:
                ax.plot([d + dodge[w] for d in hollow], line.loc[hollow].values, markers[w],
                        color="white", markeredgecolor=colors[w], ms=6, zorder=3)
                seen["~hollow"] = Line2D([], [], ls="", marker="o", color="white",
                                         markeredgecolor="black", ms=6,
                                         label="hollow: training-limited (T)")
        for (w, p), pts in panel["differing"].items():
            xs, ys = zip(*pts, strict=True)
            # colour: the width; marker and dash: the precision (one look per precision)
            look = {"ls": precision_style.dash(p), "marker": precision_style.marker(p),
                    "color": colors[w], "lw": 1.0, "mfc": "none"}
            ax.plot([x + dodge[w] for x in xs], ys, **look)
            seen[f"width {w}, {p}"] = Line2D([], [], **look, label=f"width {w}, {label(p)}")
        for (d, w, p), _ in broken[broken["subject"] == subject].groupby(
                ["depth", "width", "precision"]):
            look = {"ls": "", "marker": "x", "color": precision_style.colour(p), "ms": 8,
                    "mew": 2}
            ax.plot([d + dodge.get(w, 0.0)], [high], clip_on=False, zorder=4, **look)
            seen[f"~~nonfinite {p}"] = Line2D([], [], **look,
                                              label=f"not finite in {label(p)} (at the top)")
        for name, level in drawn.items():
            ax.axhline(level, ls=styles[name], color="dimgrey", lw=1.0, zorder=1)
            ax.annotate(f"{name} rounding", (0.98, level), xycoords=("axes fraction", "data"),
                        xytext=(0, 2), textcoords="offset points", ha="right", va="bottom",
                        fontsize=8, color="dimgrey")
        title = label(subject, 40)   # long recipe labels wrap
        if len(refs) > 1:
            title += f"\n(lines: {label(panel['reference'])})"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("depth")
        ax.set_xticks(sorted(sub[sub["subject"] == subject]["depth"].unique()))
        ax.set_xlim(depths[0] - 0.3 * gap, depths[-1] + 0.3 * gap)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylim(low, high)   # shared: every panel of the figure
    axes[0, 0].yaxis.set_major_locator(MaxNLocator(integer=True))
    ylabel = "log10 test MSE" + (f", evaluated in {label(next(iter(refs)))}"
                                 if len(refs) == 1 else "")
    for row in axes:
        row[0].set_ylabel(ylabel)
    for ax in list(axes.flat)[len(subjects):]:
        ax.axis("off")
    handles = [seen[k] for k in sorted(seen, key=_legend_order)]
    for name, level in levels.items():
        where = "" if name in drawn else " (below the axis)"
        handles.append(Line2D([], [], ls=styles[name] if name in drawn else "none",
                              color="dimgrey", lw=1.0,
                              label=f"{name} rounding level u² = {format_log10(level)}{where}"))
    budgets = runs[(runs["task"] == task) & (runs["status"] == "ok")]["train_steps"]
    longest = ", each model at its longest training" if budgets.nunique() > 1 else ""
    fig.suptitle(label(f"{task}: test MSE against depth, one line per width "
                       f"(median over seeds{longest}); one y-axis for every model",
                       _title_width(cols)), fontsize=11)
    fig.tight_layout()
    legend_below(fig, handles, ncol=cols)
    return _save(fig, path)


def legend_below(fig: Any, handles: list[Any], ncol: int, fontsize: float = 9) -> None:
    """One legend for the whole figure, centred under its panels (below their axis labels),
    in ``ncol`` columns (one per column of panels, at most three): the figure stays as narrow
    as its panels; call after ``tight_layout``."""
    renderer = fig.canvas.get_renderer()
    to_figure = fig.transFigure.inverted()
    bottom = min(ax.get_tightbbox(renderer).transformed(to_figure).y0
                 for ax in fig.axes if ax.axison)
    fig.legend(handles, [h.get_label() for h in handles], fontsize=fontsize,
               loc="upper center", bbox_to_anchor=(0.5, bottom - 0.01),
               ncol=max(1, min(3, ncol, len(handles))), frameon=False)


def _legend_order(key: str) -> tuple[int, int, str]:
    """Widths by number, then widths in other precisions, then the hollow marker."""
    if key.startswith("~"):
        return (2, 0, key)
    width, _, prec = key.removeprefix("width ").partition(", ")
    return (1 if prec else 0, int(width) if is_whole(width) else 0, prec)


def _task_runs(task: str, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of ``task`` a heatmap draws: ok, each subject at its longest training."""
    return _longest_training(runs[(runs["task"] == task) & (runs["status"] == "ok")])


def heatmap_range(task: str, runs: pd.DataFrame) -> tuple[float, float]:
    """The colour range (vmin, vmax) of every heatmap of ``task``: the lowest and highest
    cell (median log10 MSE over seeds) of any subject and precision, out to whole decades,
    so one colour is one MSE in all of the task's heatmaps."""
    sub = _task_runs(task, runs)
    cells = _finite(sub.groupby(["subject", "precision", "depth", "width"])["log10_mse"]
                    .median().values) if not sub.empty else []
    if not cells:
        return (-1.0, 0.0)
    lo, hi = math.floor(min(cells)), math.ceil(max(cells))
    return (float(lo), float(max(hi, lo + 1)))


def heatmap_cells(task: str, subject: str, precision: str, runs: pd.DataFrame
                  ) -> dict[tuple[Any, Any], tuple[float, str, int]]:
    """What each cell of :func:`grid_heatmap` shows: {(depth, width): (median log10 MSE over
    seeds, its labels, the number of seeds)}; the labels are the seeds' A / T / R, distinct
    ones joined by ``/`` (:func:`~reports.tables.cell_labels`)."""
    task_runs = _task_runs(task, runs)
    sub = task_runs[(task_runs["subject"] == subject) & (task_runs["precision"] == precision)]
    out = {}
    for (d, w), g in sub.groupby(["depth", "width"], sort=True):
        vals = _finite(g["log10_mse"])
        if vals:
            out[(d, w)] = (float(median(sorted(vals))), cell_labels(g), len(vals))
    return out


def grid_heatmap(task: str, subject: str, precision: str, runs: pd.DataFrame, path: Path
                 ) -> Path | None:
    """Median log10 MSE over depth x width; each cell prints its value and its limit label
    (A approximation-, T training-, R rounding-limited); the colour scale is
    :func:`heatmap_range`, the same for every heatmap of the task, with a colourbar. None
    when there is no cell, or one only (a 1x1 heatmap says less than the table's cell)."""
    cells = heatmap_cells(task, subject, precision, runs)
    if len(cells) < 2:
        return None
    depths = sorted({d for d, _ in cells})
    widths = sorted({w for _, w in cells})
    values = np.full((len(depths), len(widths)), np.nan)
    for (d, w), (v, _, _) in cells.items():
        values[depths.index(d), widths.index(w)] = v
    vmin, vmax = heatmap_range(task, runs)
    cmap = plt.get_cmap("magma_r").with_extremes(bad="white")
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    im = ax.imshow(values, origin="lower", aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax)
    for (d, w), (v, lab, seeds) in cells.items():   # the number and the label in each cell
        r, g, b, _ = cmap(im.norm(v))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        text = "\n".join([f"{v:.1f}", *([lab] if lab else []),
                          *([f"{seeds} seeds"] if seeds > 1 else [])])
        ax.text(widths.index(w), depths.index(d), text,
                ha="center", va="center", fontsize=9, linespacing=1.3,
                color="white" if dark else "black")
    ax.set_xticks(range(len(widths)), [str(c) for c in widths])
    ax.set_yticks(range(len(depths)), [str(i) for i in depths])
    ax.set_xlabel("width")
    ax.set_ylabel("depth")
    bar = fig.colorbar(im, ax=ax, label="log10 test MSE (median over seeds)")
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    clock = any(lab.endswith("time") for _, lab, _ in cells.values())
    ax.set_title(label(f"{task} / {subject} / {precision}", 50), fontsize=10,
                 pad=26 if clock else 16)
    ax.text(0.5, 1.01, "A approximation-, T training-, R rounding-limited; "
            "colours shared by the task's heatmaps"
            + ("\ntime: training stopped by its wall-clock limit" if clock else ""),
            transform=ax.transAxes, ha="center", va="bottom", fontsize=7, color="dimgrey")
    fig.tight_layout()
    return _save(fig, path)


def training_length(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Final log10 MSE against training steps (log scale), one line per subject x precision
    (001 Fig. 9); only runs whose config records ``train_steps``, and only subjects trained
    at two lengths or more (a subject at one length, such as the engine after its fixed Adam
    phase, is no line against length: its held-out curve is 001's Fig. 9 side by side)."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok") & runs["train_steps"].notna()]
    lengths = sub.groupby("subject")["train_steps"].nunique()
    sub = sub[sub["subject"].isin(lengths[lengths >= 2].index)]
    if sub.empty:
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


#: Line style of each way of keeping the weights on the training-precision figure.
_WEIGHT_DASH = {"": "-", "float32 master": "-", "float64 master": "-.", "no master": "--"}


def training_precision(task: str, runs: pd.DataFrame, path: Path) -> Path | None:
    """Floor against training precision: x = the precision each model trained in (widest
    first), y = its median log10 test MSE over seeds in the task's highest evaluation
    precision (bars: the seeds' range), one line per model x depth x width x where its
    weights were kept (solid: native or master weights, dashed: none, the weights in the
    format); hollow markers are training-limited runs (``T``). Only tasks trained in two
    precisions or more."""
    sub = runs[(runs["task"] == task) & (runs["status"] == "ok")]
    if sub.empty or sub["train_precision"].nunique() < 2:
        return None
    top = max(sub["precision"].unique(), key=precision_order)
    sub = sub[sub["precision"] == top]
    xs = sorted(sub["train_precision"].unique(),
                key=lambda n: (-precision_order(n)[1], precision_order(n)[2]))
    lines = list(sub.groupby(["family", "depth", "width", "train_weights"], sort=True))
    cells = sorted({key[:3] for key, _ in lines})
    colors = {c: plt.cm.tab10(i % 10) for i, c in enumerate(cells)}
    fig, ax = plt.subplots(figsize=(max(6.4, 1.1 * len(xs) + 3.0), 4.4))
    handles = []
    for (family, depth, width, weights), g in lines:
        pts = []
        for i, x in enumerate(xs):
            cell = g[g["train_precision"] == x]
            vals = _finite(cell["log10_mse"])
            if vals:
                limited = cell["converged"].map(lambda v: v is False or v == 0).any()
                pts.append((i, median(vals), min(vals), max(vals), bool(limited)))
        if not pts:
            continue
        color = colors[(family, depth, width)]
        dash = _WEIGHT_DASH.get(weights, ":")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], dash, color=color, lw=1.4)
        for i, y, lo, hi, limited in pts:
            if hi > lo:
                ax.plot([i, i], [lo, hi], color=color, lw=0.9)
            ax.plot([i], [y], "o", ms=6, color=color,
                    markerfacecolor="white" if limited else color)
        name = f"{family}, depth {depth}, width {width}" + (f", {weights}" if weights else "")
        handles.append(Line2D([], [], color=color, ls=dash, marker="o", label=label(name, 60)))
    drawn = [v for line in ax.get_lines() for v in _finite(line.get_ydata())]
    ax.set_ylim(*_figure_range(drawn, []))   # at least the depth figures' span of decades
    ax.set_xticks(range(len(xs)), [label(x, 16) for x in xs], rotation=20, ha="right")
    ax.set_xlim(-0.4, len(xs) - 0.6)
    ax.set_xlabel("training precision")
    ax.set_ylabel(f"log10 test MSE in {label(top)}\n(median over seeds)")
    ax.set_title(label(f"{task}: test MSE against training precision (hollow: "
                       f"training-limited)", 70), fontsize=11)
    ax.grid(alpha=0.3)
    legend_below(fig, handles, ncol=1 if len(handles) <= 4 else 2, fontsize=8)
    return _save(fig, path)
