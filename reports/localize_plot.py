"""Which modules limit the error: the report's tables and figure of ``localize`` records.

A localize record (:class:`~probes.store.records.LocalizeResult`, :mod:`probes.localize`) is
one unit of one localization (a model, a low precision, a reference, a target): the relative
error against the truth with only that unit in the low precision (a) and with only that unit
in the reference (b), and whether the search keeps it in the reference. Here they become

* :func:`localize_runs` -- one row per record (columns :data:`LOCALIZE_COLUMNS`);
* :func:`localize_pivots` -- per localization: the units sorted by (a), their block, ops, (a),
  (b) and whether they are kept;
* :func:`localize_figure` -- per localization a panel: (a) and (b) per unit as points on a log
  axis (largest (a) on top), the error with every unit low, the target and the error of the
  set the search keeps as vertical lines, the kept units' names in bold.
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
from matplotlib.ticker import NullFormatter  # noqa: E402

from precision.localize import unit_labels  # noqa: E402
from probes.store.records import LocalizeConfig, LocalizeResult, stored_float  # noqa: E402
from reports.length_plot import _label, _save  # noqa: E402
from reports.tables import Pivot  # noqa: E402

LOCALIZE_COLUMNS = ["run_id", "suite", "subject", "setting", "precision", "reference", "truth",
                    "target", "unit", "block", "ops", "weights", "alone_low",
                    "alone_reference", "rank", "kept", "all_low", "all_reference",
                    "kept_count", "kept_error"]


def _setting(subject: str, cfg: LocalizeConfig) -> str:
    """One localization's label: model, sizes, precisions, target and granularity."""
    text = (f"{subject} (depth {cfg.depth}, width {cfg.width}, {cfg.batch}x{cfg.tokens} tokens, "
            f"seed {cfg.seed}): {cfg.precision} vs {cfg.reference}")
    if cfg.target is not None:
        text += f", target {cfg.target:.0e}"
    if cfg.unit_depth is not None:
        text += f", units at depth {cfg.unit_depth}"
    if cfg.ops:
        text += ", own ops by op"
    if cfg.modules:
        text += f", modules {','.join(cfg.modules)}"
    return text


def localize_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``localize`` records among ``rows`` (status ok), one per row, columns
    :data:`LOCALIZE_COLUMNS` (sorted by setting and rank)."""
    body = []
    for r in rows:
        if r.get("kind") != "localize" or r.get("status") != "ok":
            continue
        cfg = LocalizeConfig.from_json(r.get("config") or {})
        res = LocalizeResult.from_json(r.get("result") or {})
        body.append([r.get("run_id"), r.get("suite"), str(r.get("subject")),
                     _setting(str(r.get("subject")), cfg), cfg.precision, cfg.reference,
                     cfg.truth, cfg.target, res.unit, res.block, res.ops, res.weights,
                     stored_float(res.alone_low), stored_float(res.alone_reference), res.rank,
                     res.kept, stored_float(res.all_low), stored_float(res.all_reference),
                     res.kept_count, stored_float(res.kept_error)])
    frame = pd.DataFrame(body, columns=LOCALIZE_COLUMNS)
    if not frame.empty:
        frame = frame.sort_values(["suite", "setting", "rank", "unit"]).reset_index(drop=True)
        for _, group in frame.groupby(["suite", "setting"]):
            names = unit_labels([str(u) for u in group["unit"]])
            frame.loc[group.index, "unit"] = [names[str(u)] for u in group["unit"]]
    return frame


def _e(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2e}"


def localize_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per localization: one row per unit, sorted by (a)."""
    out: list[Pivot] = []
    if runs.empty:
        return out
    for (suite, setting), group in runs.groupby(["suite", "setting"], sort=True):
        first = group.iloc[0]
        low, ref = first["precision"], first["reference"]
        searched = group["kept"].notna().any()
        columns = ["block", "ops", f"(a) alone in {low}", f"(b) alone in {ref}"]
        body = []
        for r in group.itertuples():
            row = [r.block or "-", int(r.ops), _e(r.alone_low), _e(r.alone_reference)]
            if searched:
                row.append("yes" if r.kept else "")
            body.append(row)
        frame = pd.DataFrame(body, index=pd.Index(list(group["unit"]), name="module"),
                             columns=[*columns, f"kept in {ref}"] if searched else columns)
        title = (f"{setting}: relative error against {first['truth']} with one unit alone in "
                 f"{low} (a) and alone in {ref} (b); all in {low}: {_e(first['all_low'])}, "
                 f"all in {ref}: {_e(first['all_reference'])}")
        if searched:
            title += (f"; the search keeps {int(first['kept_count'])} of {len(group)} units in "
                      f"{ref}: {_e(first['kept_error'])}")
        out.append(Pivot(f"localize-{suite}-{setting}", title, frame,
                         {"suite": suite, "setting": setting}))
    return out


def localize_figure(runs: pd.DataFrame, path: Path) -> Path | None:
    """(a) and (b) per unit as points on a log axis, a panel per localization (see
    the module docstring); None when there is nothing to draw. Written as ``path`` (PNG) and
    beside it as SVG."""
    if runs.empty:
        return None
    settings = sorted(runs.groupby(["suite", "setting"]).groups)
    heights = [max(2.5, 0.26 * int((runs["setting"] == s).sum()) + 1.6) for _, s in settings]
    fig, axes = plt.subplots(len(settings), 1, figsize=(8.0, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (suite, setting) in zip(axes[:, 0], settings, strict=True):
        group = runs[(runs["suite"] == suite) & (runs["setting"] == setting)]
        first = group.iloc[0]
        low, ref = first["precision"], first["reference"]
        pos = np.arange(len(group))[::-1]        # the largest (a) on top
        a = group["alone_low"].astype(float).to_numpy()
        b = group["alone_reference"].astype(float).to_numpy()
        ax.plot(a, pos, "o", color="tab:red", ms=5, label=f"(a) only this unit in {low}")
        ax.plot(b, pos, "s", color="tab:blue", ms=4, label=f"(b) only this unit in {ref}")
        shown = [v for v in (*a, *b) if v > 0 and math.isfinite(v)]
        lines = [(first["all_low"], "--", f"all in {low}"), (first["target"], "-", "target"),
                 (first["kept_error"], "-.", "kept set found")]
        for value, style, text in lines:
            if value is not None and not pd.isna(value) and value > 0:
                ax.axvline(float(value), color="black", ls=style, lw=1, label=text)
                shown.append(float(value))
        if shown:   # at least two powers of ten in view: labelled major ticks, no minor labels
            hi = max(shown) * 2
            ax.set_xlim(min(min(shown) / 2, 10.0 ** (math.floor(math.log10(hi)) - 1)), hi)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks(pos, [_label(u) for u in group["unit"]], fontsize=7)
        ax.set_ylim(-0.7, len(group) - 0.3)
        for tick, kept in zip(ax.get_yticklabels(), group["kept"], strict=True):
            if isinstance(kept, bool | np.bool_) and kept:
                tick.set_fontweight("bold")
        ax.set_xlabel(f"relative error against {first['truth']} (all in {ref}: "
                      f"{_e(first['all_reference'])})")
        note = f" (bold: kept in {ref})" if group["kept"].notna().any() else ""
        ax.set_title(_label(setting) + note, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Which modules limit the error", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)
