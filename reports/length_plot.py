"""Error against sequence length: the report's tables and figure of ``length`` records.

A length record (:class:`~probes.store.records.LengthResult`, :mod:`probes.kinds.length`) is
one trained job's weights evaluated at one sequence length in one precision: its relative
error ||f_p - f_mp100||_2 / ||f_mp100||_2 and the reference's certain digits. Here they become

* :func:`length_runs` -- one row per record (columns :data:`LENGTH_COLUMNS`);
* :func:`length_pivots` -- per model configuration: log10 relative error, lengths x
  precisions (median over seeds), and the reference's certain digits per length;
* :func:`length_figure` -- log10 relative error against length (log2 axis), a panel per model
  configuration, a line per precision, the precision's unit roundoff dotted in its colour;
* :func:`length_tables` -- the same numbers as plain text (``precision run`` / ``results``).
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from precision.precisions import PrecisionError, parse_precision  # noqa: E402
from probes.store.records import LengthConfig, LengthResult, stored_float  # noqa: E402
from reports import precision_style  # noqa: E402
from reports.files import write_bytes  # noqa: E402
from reports.model_table import train_dtype
from reports.tables import Pivot  # noqa: E402
from reports.text_table import precision_order, text_table  # noqa: E402

LENGTH_COLUMNS = ["run_id", "suite", "subject", "task", "model", "precision", "status",
                  "error", "length", "seed", "relative", "log10_relative", "truth_digits",
                  "reference"]
#: Line colours of the usual precisions (others: grey).
DPI = 150


def _model(subject: str, cfg: LengthConfig) -> str:
    """A model configuration's label: subject, depth x width, training dtype."""
    return f"{subject} (depth {cfg.depth}, width {cfg.width}, trained in {train_dtype(cfg)})"


def length_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``length`` records among ``rows``, one per row, columns :data:`LENGTH_COLUMNS`
    (sorted by suite, task, model, precision, length, seed)."""
    chosen = [r for r in rows if r.get("kind") == "length"]
    body = []
    for r in chosen:
        cfg = LengthConfig.from_json(r.get("config") or {})
        res = LengthResult.from_json(r.get("result") or {})
        rel = stored_float(res.relative)
        log_rel = None if rel is None else (math.log10(rel) if rel > 0 else -math.inf)
        body.append([r.get("run_id"), r.get("suite"), str(r.get("subject")), r.get("task"),
                     _model(str(r.get("subject")), cfg), r.get("precision"), r.get("status"),
                     r.get("error"), cfg.length or res.length, cfg.seed, rel, log_rel,
                     stored_float(res.truth_digits), res.reference or cfg.reference])
    frame = pd.DataFrame(body, columns=LENGTH_COLUMNS)
    if not frame.empty:
        frame = frame.sort_values(["suite", "task", "model", "precision", "length", "seed",
                                   "run_id"]).reset_index(drop=True)
    return frame


def _log10_text(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return "exact" if v == -math.inf else f"{v:.1f}"


def _median(values: pd.Series) -> float | None:
    vals = [float(v) for v in values if v is not None and not pd.isna(v)]
    return float(np.median(vals)) if vals else None


def length_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per (suite, task, model configuration): log10 relative error by length x precision
    (median over seeds; a length the model does not accept is ``not accepted``) and the
    reference's certain digits (the fewest over seeds and precisions)."""
    out: list[Pivot] = []
    runs = runs[runs["length"] > 0] if not runs.empty else runs  # a run that stopped as a
    if runs.empty:                   # whole (timeout) stores no length: a note, not a row
        return out
    for (suite, task, model), group in runs.groupby(["suite", "task", "model"], sort=True):
        precs = sorted(group["precision"].unique(), key=precision_order)
        lengths = sorted(group["length"].unique())
        body = []
        for n in lengths:
            at = group[group["length"] == n]
            row = []
            for p in precs:
                cell = at[at["precision"] == p]
                ok = cell[cell["status"] == "ok"]
                row.append(_log10_text(_median(ok["log10_relative"])) if not ok.empty
                           else ("not accepted" if (cell["status"] == "failed").any()
                                 else "/".join(sorted(set(cell["status"])))))
            digits = [float(v) for v in at["truth_digits"] if v is not None and not pd.isna(v)]
            row.append(f"{min(digits):.0f}" if digits else "")
            body.append(row)
        reference = next((str(r) for r in group["reference"] if r), "mp100")
        frame = pd.DataFrame(body, index=pd.Index([int(n) for n in lengths], name="length"),
                             columns=[*precs, f"{reference} certain digits"])
        out.append(Pivot(f"length-{suite}-{task}-{model}",
                         f"{task} / {model}: log10 relative error against {reference} by "
                         "sequence length (median over seeds), and the reference's certain "
                         "digits", frame, {"suite": suite, "task": task, "model": model}))
    return out


def _label(text: object) -> str:
    """A store value as figure text (no control characters, no mathtext)."""
    return re.sub(r"[\x00-\x1f\x7f]", " ", str(text)).replace("$", r"\$")


def _unit_roundoff(name: str) -> float | None:
    try:
        p = parse_precision(name)
    except PrecisionError:
        return None
    return None if p.is_mp else p.unit_roundoff


def length_figure(runs: pd.DataFrame, path: Path) -> Path | None:
    """log10 relative error against sequence length: a panel per (task, model
    configuration), a line per precision (median over seeds), the precision's unit roundoff
    u dotted in its colour; None when no record is ``ok``. Written as ``path`` (PNG) and
    beside it as SVG."""
    ok = runs[(runs["status"] == "ok") & runs["log10_relative"].notna()] \
        if not runs.empty else runs
    ok = ok[np.isfinite(ok["log10_relative"].astype(float))] if not ok.empty else ok
    if ok.empty:
        return None
    panels = sorted(ok.groupby(["task", "model"]).groups)
    cols = min(2, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 3.8 * rows), squeeze=False)
    shown: dict[str, Any] = {}
    for ax, (task, model) in zip(axes.flat, panels, strict=False):
        group = ok[(ok["task"] == task) & (ok["model"] == model)]
        for p in sorted(group["precision"].unique(), key=precision_order, reverse=True):
            line = group[group["precision"] == p].groupby("length")["log10_relative"].median()
            colour = precision_style.colour(p)   # the same in every figure
            (h,) = ax.plot(line.index, line.values, marker="o", ms=4, color=colour, label=p)
            shown.setdefault(p, h)
            u = _unit_roundoff(p)
            if u is not None:
                ax.axhline(math.log10(u), color=colour, ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ticks = sorted(int(n) for n in group["length"].unique())
        ax.set_xticks(ticks, [str(n) for n in ticks])
        ax.minorticks_off()
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("log10 relative error vs mp100")
        ax.set_title(_label(f"{task} / {model}"), fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("Error against sequence length (dotted: the precision's unit roundoff u)",
                 fontsize=10)
    fig.tight_layout()
    # The legend lists the precisions as the lines stand, top (least precise) first, in the
    # order of the table's columns.
    handles = [shown[p] for p in sorted(shown, key=precision_order)]
    handles.append(Line2D([], [], color="black", ls=":", lw=1, label="unit roundoff u"))
    fig.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 0.93))
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` as ``path`` (PNG) and beside it as SVG, each atomically, without dates;
    close it."""
    try:
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
        for target, fmt, meta in ((path, "png", {"Software": None}),
                                  (path.with_suffix(".svg"), "svg",
                                   {"Date": None, "Creator": None})):
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=DPI, metadata=meta, bbox_inches=box)
            write_bytes(target, buf.getvalue())
    finally:
        plt.close(fig)
    return path


def length_tables(rows: list[dict[str, Any]]) -> str:
    """The :func:`length_pivots` of ``rows`` as plain text ('' when there are none), with
    the notes of the lengths a model does not accept."""
    runs = length_runs(rows)
    blocks = []
    for pivot in length_pivots(runs):
        frame = pivot.frame
        head = [frame.index.name or "", *[str(c) for c in frame.columns]]
        body = [[str(i), *[str(v) for v in row]] for i, row in zip(frame.index, frame.values,
                                                                    strict=True)]
        blocks.append(text_table(pivot.title, head, body))
    notes = sorted({f"{r.subject} {r.task}: {r.error}" for r in runs.itertuples()
                    if r.status != "ok" and r.error})
    if notes:
        blocks.append("\n".join(notes))
    return "\n\n".join(blocks)
