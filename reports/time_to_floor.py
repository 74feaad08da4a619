"""Time to floor: how many wall seconds of training each depth x width cell needed to bring its
held-out MSE to 1e-2, 1e-4, 1e-6, 1e-8 and 1e-12, from the validation curve and the wall time
of each of its points (the ``val_log10_mse`` and ``val_seconds`` series of a trained record).

The final MSE of a cell says where its training ended; the time to each level says how fast it
got there and whether the level was reached inside the budget at all. A cell that did not
reach a level shows ``> T s`` with T its training time, so a reader sees the budget it had.
One row per trained job (its records in every evaluation precision share one training);
records stored before ``val_seconds`` existed are left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

from probes.store.records import TrainedConfig, TrainedResult
from probes.training.recipe_book import RECIPES
from reports.floor_cells import format_log10
from reports.plots import _save, figure_legend, label
from reports.tables import Pivot, _model_label

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: The held-out MSE levels a row gives the time to (log10).
LEVELS = (-2, -4, -6, -8, -12)

#: series(run_id, name) -> [(step, value)]
SeriesOf = Callable[[str, str], list[tuple[int, Any]]]


def time_to(curve: list[tuple[int, Any]], seconds: list[tuple[int, Any]], level: float
            ) -> float | None:
    """Wall seconds at the first point of ``curve`` ((step, log10 MSE)) at or below ``level``,
    read from ``seconds`` ((step, seconds)) at the same step; None when never reached."""
    at = {int(s): float(t) for s, t in seconds if t is not None}
    for step, value in curve:
        if value is not None and float(value) <= level and int(step) in at:
            return at[int(step)]
    return None


def _jobs(rows: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """One record per trained job of ``task`` that finished training: the first by run id."""
    seen: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: str(r["run_id"])):
        if r.get("kind") != "trained" or r.get("task") != task:
            continue
        res = TrainedResult.from_json(r.get("result"))
        if res.train_status != "ok":
            continue
        cfg = dict(r.get("config") or {})
        cfg.pop("precision", None)
        seen.setdefault(repr(sorted(cfg.items(), key=lambda kv: kv[0])), r)
    return list(seen.values())


def curves(rows: list[dict[str, Any]], task: str, series_of: SeriesOf
           ) -> list[dict[str, Any]]:
    """Per trained job of ``task`` with a timed validation curve: its subject label, depth,
    width, seed, why training stopped, the held-out curve and its seconds, and the engine's
    work (FLOPs; None where it was not counted)."""
    out = []
    for r in _jobs(rows, task):
        seconds = series_of(r["run_id"], "val_seconds")
        curve = series_of(r["run_id"], "val_log10_mse")
        if not seconds or not curve:
            continue
        cfg = TrainedConfig.from_json(r.get("config"))
        res = TrainedResult.from_json(r.get("result"))
        out.append({"subject": _model_label(str(r["subject"]), cfg), "depth": cfg.depth,
                    "width": cfg.width, "seed": cfg.seed, "stop": res.train_stop or "",
                    "trained_s": res.train_wall_time, "curve": curve, "seconds": seconds,
                    "second_order": _second_order_pace(cfg, res, seconds),
                    "work": res.engine_flops})
    return sorted(out, key=lambda c: (c["subject"], c["depth"] or 0, c["width"] or 0,
                                      c["seed"] or 0))


def _second_order_pace(cfg: TrainedConfig, res: TrainedResult,
                       seconds: list[tuple[int, Any]]) -> str:
    """``"k x t s"``: the second-order iterations a run did after its Adam steps and their
    mean wall seconds (from the last validation point of the Adam phase: the few Adam steps
    after it are counted with them, an over-estimate); "" for first-order
    recipes or when it cannot be told."""
    recipe = RECIPES.get(cfg.recipe)
    adam = cfg.train_steps
    if recipe is None or not recipe.second_order or adam is None or \
            res.train_steps_done is None or res.train_wall_time is None:
        return ""
    iterations = res.train_steps_done - adam
    adam_end = [float(t) for s, t in seconds if t is not None and int(s) <= adam]
    if iterations <= 0 or not adam_end:
        return "0" if iterations == 0 else ""
    each = (res.train_wall_time - adam_end[-1]) / iterations
    return f"{iterations} x {each:.2g} s" if each < 10 else f"{iterations} x {each:.0f} s"


def _format(seconds: float | None, trained: float | None) -> str:
    if seconds is not None:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if trained is None:
        return "not reached"
    return f"> {trained:.0f} s" if trained >= 10 else f"> {trained:.1f} s"


def time_to_floor_pivots(rows: list[dict[str, Any]], task: str, series_of: SeriesOf
                         ) -> list[Pivot]:
    """One table for ``task`` (none when no job stored its timed curve): a row per model
    (model, LayerNorm, recipe), depth, width and seed, the seconds to each of :data:`LEVELS`,
    the lowest held-out MSE, why training stopped and, for the engine, how many second-order
    iterations it did and their mean wall time (the pace that decides what a time budget can
    reach) and the FLOPs they did (the work a budget in work counts: the same on every
    machine)."""
    jobs = sorted(curves(rows, task, series_of), key=lambda c: c["subject"])  # stable
    if not jobs:
        return []
    paced = any(c["second_order"] for c in jobs)   # a column only for the engine
    counted = any(c["work"] for c in jobs)   # the engine's work, where it was counted
    seeded = any(c["seed"] for c in jobs)
    index, body = [], []
    for c in jobs:
        index.append(c["subject"])
        finite = [float(v) for _, v in c["curve"] if v is not None and math.isfinite(v)]
        body.append([c["depth"], c["width"]] + ([c["seed"] or 0] if seeded else [])
                    + [_format(time_to(c["curve"], c["seconds"], lv), c["trained_s"])
                       for lv in LEVELS]
                    + [format_log10(min(finite)) if finite else "", c["stop"]]
                    + ([c["second_order"]] if paced else [])
                    + ([f"{c['work']:.2g}" if c["work"] else "-"] if counted else []))
    frame = pd.DataFrame(body, index=pd.Index(index, name="model"),
                         columns=["depth", "width"] + (["seed"] if seeded else [])
                         + [f"to 1e{lv}" for lv in LEVELS]
                         + ["lowest held-out MSE", "stopped by"]
                         + (["second-order iterations"] if paced else [])
                         + (["engine FLOPs"] if counted else []))
    return [Pivot(f"time-{task}", f"{task}: wall seconds of training to each held-out MSE",
                  frame, {"task": task})]


def time_to_floor_figure(rows: list[dict[str, Any]], task: str, series_of: SeriesOf,
                         path: Path) -> Path | None:
    """Held-out log10 MSE against wall seconds of training, a panel per subject on one shared
    axis, a line per (depth, width, seed); None when no job stored its timed curve."""
    jobs = curves(rows, task, series_of)
    subjects = sorted({c["subject"] for c in jobs})
    if not subjects:
        return None
    fig, axes = plt.subplots(1, len(subjects), figsize=(4.2 * len(subjects), 3.6),
                             sharey=True, squeeze=False)
    styles: dict[str, Any] = {}
    cmap = plt.get_cmap("viridis")
    keys = sorted({(c["depth"] or 0, c["width"] or 0) for c in jobs})
    for ax, subject in zip(axes[0], subjects, strict=True):
        for c in (c for c in jobs if c["subject"] == subject):
            at = {int(s): float(t) for s, t in c["seconds"] if t is not None}
            pts = [(at[int(s)], float(v)) for s, v in c["curve"]
                   if v is not None and math.isfinite(v) and int(s) in at]
            if not pts:
                continue
            key = (c["depth"] or 0, c["width"] or 0)
            name = f"depth {key[0]}, width {key[1]}"
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2,
                              color=cmap(keys.index(key) / max(len(keys) - 1, 1)),
                              ls="-" if not c["seed"] else ":")
            styles.setdefault(name, line)
        ax.set_title(label(subject, 36), fontsize=9)
        ax.set_xlabel("wall seconds of training")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("log10 held-out MSE")
    fig.suptitle(label(f"{task}: held-out MSE against training time", 48 * len(subjects)),
                 fontsize=11)
    fig.tight_layout()
    figure_legend(fig, list(styles.values()), list(styles))
    return _save(fig, path)
