"""Tables and figures of study runs (kind ``study``: 002 / 003 / 000 / 004 experiments).

One table per (suite, study entry): one row per (grid point, precision, seed), one column per
metric the study measured (the ``primary`` one first). The same data is a pandas
:class:`~reports.tables.Pivot` for the report, and :func:`study_series_figure` draws a study's
traces (loss per layer, error per iteration), one line per grid point and precision.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from probes.store.records import StudyConfig, StudyResult
from reports.tables import Pivot
from reports.text_table import precision_order, text_table

#: At most this many metric columns per text table (the primary metric, then the others in
#: the order the study lists them); the report's tables and CSV carry every metric.
MAX_COLUMNS = 12
#: A study trace whose positive values span more than this factor is drawn on a log axis.
_LOG_SPAN = 1e3


def format_value(v: Any) -> str:
    """A metric for a table: 4 significant digits, '-' for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v == 0.0:
            return "0"
        return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.3e}"
    return str(v)


def latest_runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Newest run per (suite, entry, task, precision, seed) (re-runs with new params stay
    in the store; the table shows the latest)."""
    keep: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["created_at"], r["run_id"])):
        key = (r["suite"], r["subject"], r["task"], r["precision"], _config(r).seed)
        keep[key] = r
    return list(keep.values())


def _config(row: dict[str, Any]) -> StudyConfig:
    return StudyConfig.from_json(row.get("config"))


def _result(row: dict[str, Any]) -> StudyResult:
    return StudyResult.from_json(row.get("result"))


def _grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in latest_runs([r for r in rows if r.get("kind") == "study"]):
        groups[(r["suite"], r["subject"])].append(r)
    for g in groups.values():
        g.sort(key=lambda r: (_task_key(r["task"]), precision_order(r["precision"]),
                              _config(r).seed))
    return dict(sorted(groups.items()))


def _task_key(task: str) -> tuple[Any, ...]:
    """Grid labels like 'sigma_max=3' sort numerically where they can."""
    out: list[Any] = []
    for part in task.split(","):
        _, _, v = part.partition("=")
        try:
            out.append((0, float(v), ""))
        except ValueError:
            out.append((1, 0.0, part))
    return tuple(out)


def _columns(results: list[StudyResult]) -> list[str]:
    """The primary metrics (sorted), then every other metric in its study's order."""
    cols = sorted({res.primary for res in results} - {None})
    for res in results:
        cols += [k for k in res.column_order if k not in cols]
    return cols


def study_frames(rows: list[dict[str, Any]], max_columns: int | None = None
                 ) -> list[tuple[str, str, pd.DataFrame]]:
    """(suite, entry, frame) per study entry; frame index = grid point / precision / seed;
    the first ``max_columns`` metrics (all when None)."""
    out = []
    for (suite, entry), group in _grouped(rows).items():
        results = [_result(r) for r in group]
        cols = _columns(results)[:max_columns]
        recs = []
        for r, res in zip(group, results, strict=True):
            cells = {c: (r["status"] if r["status"] != "ok" else res.metrics.get(c))
                     for c in cols}
            recs.append({"grid point": r["task"], "precision": r["precision"],
                         "seed": _config(r).seed, **cells})
        frame = pd.DataFrame(recs, columns=["grid point", "precision", "seed", *cols])
        if frame["seed"].nunique() == 1:
            frame = frame.drop(columns="seed")
        if frame["precision"].nunique() == 1:
            frame = frame.drop(columns="precision")
        out.append((suite, entry, frame.set_index("grid point")))
    return out


def study_pivots(rows: list[dict[str, Any]], max_columns: int | None = None) -> list[Pivot]:
    """One report table per study entry (cells formatted like the CLI's)."""
    pivots = []
    for suite, entry, frame in study_frames(rows, max_columns):
        study = next(_config(r).study for r in rows
                     if r.get("kind") == "study" and r["subject"] == entry
                     and r["suite"] == suite)
        shown = frame.map(format_value)
        pivots.append(Pivot(f"study-{suite}-{entry}", f"{suite} / {entry} ({study})", shown,
                            meta={"suite": suite, "entry": entry, "study": study}))
    return pivots


def study_tables(rows: list[dict[str, Any]]) -> str:
    """Plain-text tables of the study runs among ``rows`` ('' when none)."""
    blocks = []
    for pivot in study_pivots(rows, MAX_COLUMNS):
        frame = pivot.frame.reset_index()
        blocks.append(text_table(pivot.title, frame.columns, frame.values.tolist()))
    return "\n\n".join(blocks)


def study_series_figure(entry: str, runs: list[dict[str, Any]],
                        series: dict[str, dict[str, list[tuple[int, Any]]]],
                        path: Path, max_lines: int = 16) -> Path | None:
    """One panel per series name, one line per run (grid point, precision); ``series`` maps
    run_id -> {name: [(step, value)]}. None when the runs have no traces.

    A series named ``sigma`` is an x-axis, not a trace: the series ``sigma_<what>`` of the same
    run are drawn against it (the per-variance profiles of 002 Fig. 3 / 4)."""
    from reports import plots

    names = sorted({n for s in series.values() for n in s if n != "sigma"})[:4]
    if not names:
        return None
    import matplotlib.pyplot as plt

    cols = min(2, len(names))
    rows = math.ceil(len(names) / cols)
    palette = plt.cm.tab10 if min(len(runs), max_lines) <= 10 else plt.cm.tab20
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.3 * rows), squeeze=False)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names, strict=False):
        drawn: list[float] = []
        for i, r in enumerate(runs[:max_lines]):
            traces = series.get(r["run_id"], {})
            pts = traces.get(name, [])
            if name.startswith("sigma_") and pts and len(traces.get("sigma", [])) == len(pts):
                pts = [(x, v) for (_, x), (_, v) in zip(traces["sigma"], pts, strict=True)]
            pts = [(s, v) for s, v in pts if v is not None and math.isfinite(v)]
            if pts:
                xs, ys = zip(*pts, strict=True)
                drawn += ys
                ax.plot(xs, ys, lw=1.1, color=palette(i % palette.N),
                        label=plots.label(f"{r['task']} {r['precision']}", 36))
        ax.set_title(plots.label(name, 40), fontsize=10)
        ax.set_xlabel(_x_label(name))
        if not name.startswith("sigma_"):   # steps and layers are whole numbers
            plots.whole_number_ticks(ax.xaxis)
        ylabel = name.replace("_", " ").replace("mse", "MSE")
        positive = [v for v in drawn if v > 0]
        if positive and min(drawn) >= 0 and max(positive) > _LOG_SPAN * min(positive):
            ax.set_yscale("log")     # a gap that falls to 1e-50 is a line on a log axis
            ylabel += " (log scale)"
        ax.set_ylabel(plots.label(ylabel, 40))
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in list(axes.flat)[1:]:   # one legend for the figure: the union of the panels'
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    shown = min(len(runs), max_lines)
    more = f" (first {shown} of {len(runs)} runs)" if len(runs) > shown else ""
    fig.suptitle(plots.label(f"{entry}: traces, one line per grid point and precision{more}",
                             48 * cols), fontsize=11)
    fig.tight_layout()
    plots.figure_legend(fig, handles, labels, title="grid point, precision", fontsize=7)
    return plots._save(fig, path)


def _x_label(name: str) -> str:
    """What a study trace's steps count: noise level for the per-variance profiles, layers
    for per-layer series, otherwise iterations."""
    if name.startswith("sigma_"):
        return "noise level sigma"
    if "layer" in name:
        return "layer"
    return "iteration"
