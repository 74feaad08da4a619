"""Report tables built from store rows only (pandas DataFrames, deterministic order).

* :func:`solver_runs` — one row per solver run (long format, the numbers exactly as stored);
* :func:`solver_pivots` — per problem, solvers down and precisions across (floor MSE, step);
* :func:`grid_pivots` — per task, one table of runs whose config has ``depth`` and
  ``width`` (trained / constructed models): a row per model x depth x width, the test MSE in
  each precision, its approximation and rounding parts, seeds aggregated into median and
  range; a total-MSE cell ends in its limit label (A / T / R, :func:`cell_labels`); a task
  whose records store the convergence check's evidence gets one more table of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from precision.invariants import NONFINITE, inverted_runs
from probes.factory import family_nests_by_depth
from probes.store.frames import runs_frame
from probes.store.records import SubjectConfig, TrainedConfig, TrainedResult, stored_float
from reports.floor_cells import INVERTED_MARK, floor_cell, floor_reached, format_log10, format_mse
from reports.model_table import (
    CONTAINED_LEGEND,
    CONTAINED_MARK,
    NONFINITE_LEGEND,
    TIME_LEGEND,
    TIME_MARK,
    above_contained,
    format_gain,
    format_power,
    limit_label,
    train_dtype,
    train_weights,
    trained_in,
)
from reports.text_table import precision_order

SOLVER_COLUMNS = ["suite", "problem", "solver", "precision", "seed", "status", "floor_log10",
                  "floor_index", "reached", "rate", "conv_order", "mse", "log10_mse", "steps",
                  "inverted", "run_id", "created_at"]
GRID_COLUMNS = ["task", "subject", "precision", "depth", "width", "seed", "train_steps",
                "status", "log10_mse", "approximation", "rounding", "converged", "check_gain",
                "grad_norm", "check_drift", "check_curvature", "check_power", "truth_digits",
                "train_stop", "run_id", "family", "train_precision", "train_weights",
                "nested"]


def solver_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Solver and construction runs, one per row, columns :data:`SOLVER_COLUMNS`, sorted.

    When a suite was re-run with other parameters, the store holds several runs for one
    (problem, solver, precision, seed); the newest is kept (older ones stay in the store).
    """
    chosen = [r for r in rows if r.get("kind") in ("solver", "construction")]
    inverted = inverted_runs(chosen)
    df = runs_frame(chosen).rename(columns={"task": "problem", "subject": "solver"}).assign(
        seed=[SubjectConfig.from_json(r.get("config")).seed for r in chosen],
        reached=[floor_reached(r) for r in chosen],
        inverted=[str(inverted[r["run_id"]]) if r["run_id"] in inverted else ""
                  for r in chosen])[SOLVER_COLUMNS]
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
                 + (INVERTED_MARK if part["inverted"].astype(bool).any() else "")
                 for key, part in group.groupby(["solver", "precision"], sort=False)}
        solvers = sorted(group["solver"].unique())
        frame = pd.DataFrame(
            [[cells.get((s, p), "") for p in precs] for s in solvers],
            index=pd.Index(solvers, name="solver"), columns=precs,
        )
        out.append(Pivot(f"{suite}-{problem}",
                         f"{suite} / {problem}: floor MSE (@ step reached)", frame,
                         {"suite": suite, "problem": problem,
                          "inverted": bool(group["inverted"].astype(bool).any())}))
    return out


def _model_label(subject: str, cfg: TrainedConfig, trained: bool = True) -> str:
    """Subject, LayerNorm (``LN`` / ``no LN``), recipe and training precision (with where its
    weights were kept, :func:`~reports.model_table.trained_in`) where not the default,
    comma-separated: ``baseconv, no LN, gauss-newton, trained in float64`` (it reads the same
    as a file name: ``baseconv-no-ln-gauss-newton-trained-in-float64``); ``trained=False``:
    without the training precision (the model's family on the training-precision figure)."""
    parts = [subject]
    if cfg.layernorm is not None:
        parts.append("LN" if cfg.layernorm else "no LN")
    if cfg.recipe != "paper":
        parts.append(cfg.recipe)
    if cfg.train.get("start", "fresh") != "fresh":
        parts.append(f"from {cfg.train['start']}")
    if trained and (dtype := trained_in(cfg)) != "float32":
        parts.append(f"trained in {dtype}")
    return ", ".join(parts)


def grid_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Trained runs (models: depth x width), one per row, columns :data:`GRID_COLUMNS`."""
    models = [r for r in rows if r.get("kind") == "trained"]
    cfgs = [TrainedConfig.from_json(r.get("config")) for r in models]
    outcomes = [TrainedResult.from_json(r.get("result")) for r in models]
    df = runs_frame(models).assign(
        subject=[_model_label(str(r["subject"]), c) for r, c in zip(models, cfgs, strict=True)],
        family=[_model_label(str(r["subject"]), c, trained=False)
                for r, c in zip(models, cfgs, strict=True)],
        train_precision=[train_dtype(c) for c in cfgs],
        train_weights=[train_weights(c) for c in cfgs],
        depth=[c.depth for c in cfgs], width=[c.width for c in cfgs],
        seed=[c.seed for c in cfgs], train_steps=[c.train_steps for c in cfgs],
        approximation=[res.approximation for res in outcomes],
        rounding=[res.rounding for res in outcomes],
        converged=[res.train_converged for res in outcomes],
        check_gain=[stored_float(res.check_gain) for res in outcomes],
        grad_norm=[stored_float(res.grad_norm) for res in outcomes],
        check_drift=[stored_float(res.check_drift) for res in outcomes],
        check_curvature=[stored_float(res.check_curvature) for res in outcomes],
        check_power=[stored_float(res.check_power) for res in outcomes],
        truth_digits=[stored_float(res.truth_digits) for res in outcomes],
        train_stop=[res.train_stop for res in outcomes],
        nested=[family_nests_by_depth(c.family, c.model_options) for c in cfgs])[GRID_COLUMNS]
    if not df.empty:
        df = df.sort_values(["task", "subject", "precision", "depth", "width", "seed",
                             "run_id"]).reset_index(drop=True)
    return df


def _present(value: Any) -> bool:
    return value is not None and not pd.isna(value)


def cell_labels(runs: pd.DataFrame, contained: bool = False) -> str:
    """The limit labels (:func:`~reports.model_table.limit_label`: A / T / R) of the seeds of
    one grid cell, rows of :func:`grid_runs`: the distinct ones in the order A, T, R, joined by
    ``/`` (``A/T``: the seeds disagree); '' when no run stored its decomposition. A cell
    one of whose trainings was stopped by its wall-clock limit ends in ``time``
    (:data:`~reports.model_table.TIME_MARK`): its number depends on the machine's load.
    ``contained``: a shallower cell it contains floors lower (:func:`contained_above`), so it
    is never ``A`` and ends in :data:`~reports.model_table.CONTAINED_MARK`."""
    labels = {limit_label(bool(r["converged"]) if _present(r["converged"]) else None,
                          float(r["approximation"]), float(r["rounding"]))
              for _, r in runs.iterrows()
              if _present(r["approximation"]) and _present(r["rounding"])}
    if contained:   # a model it contains does better: training, not approximation, limits it
        labels = {"T" if x == "A" else x for x in labels} or {"T"}
    text = "/".join(sorted(labels, key="ATR".index))
    text = (text + TIME_MARK).strip() if stopped_by_clock(runs) else text
    return text + CONTAINED_MARK if contained else text


def stopped_by_clock(runs: pd.DataFrame) -> bool:
    """Whether a training of these rows of :func:`grid_runs` ended on its wall-clock limit."""
    return bool("train_stop" in runs and (runs["train_stop"] == "time limit").any())


def grid_pivots(runs: pd.DataFrame) -> list[Pivot]:
    """Per task, one table of every model, depth and width (:func:`task_pivot`), then, when
    stored, one table of the labels' evidence (:func:`evidence_pivot`)."""
    out: list[Pivot] = []
    if runs.empty:
        return out
    ok = runs[runs["status"] == "ok"]
    shown = runs[runs["status"].isin(["ok", NONFINITE])]   # an overflow is a result, shown
    for task, runs_of in shown.groupby("task", sort=True):
        out.append(task_pivot(str(task), runs_of))
        evidence = evidence_pivot(str(task), ok[ok["task"] == task])
        if evidence is not None:
            out.append(evidence)
    return out


def _median_log10(cell: pd.DataFrame) -> float | None:
    vals = [float(v) for v in cell["log10_mse"] if _present(v)]
    return float(np.median(vals)) if vals else None


def contained_above(runs: pd.DataFrame) -> set[tuple[str, int, int, str]]:
    """(model, depth, width, precision) of every cell (ok rows of :func:`grid_runs`) whose
    median test MSE lies more than :data:`CONTAINED_ABOVE_DECADES` above that of a
    shallower cell of the same model and width in the same precision, where the deeper model
    contains the shallower one exactly (:mod:`precision.models.containment`): the
    containment invariant. Such a cell is training-limited, whatever its check said."""
    nested = runs[runs["nested"].astype(bool)]
    return above_contained([
        ((str(s), int(w), str(p)), int(d), med, (str(s), int(d), int(w), str(p)))
        for (s, d, w, p), cell in nested.groupby(["subject", "depth", "width", "precision"])
        if (med := _median_log10(cell)) is not None])


def _seeds_cell(cell: pd.DataFrame, metric: str, contained: bool = False) -> str:
    """Median [min, max] over the seeds of ``metric`` (log10) in ``cell`` ('' when none);
    the total MSE ends in its limit labels (:func:`cell_labels`; ``contained``: the cell
    floors above a cell it contains, so it is never ``A`` and ends in
    :data:`~reports.model_table.CONTAINED_MARK`)."""
    vals = sorted(float(v) for v in cell[metric] if _present(v))
    if not vals:
        return NONFINITE if metric == "log10_mse" and (cell["status"] == NONFINITE).any() \
            else ""
    text = format_log10(float(np.median(vals)))
    if len(vals) > 1:
        text += f" [{format_log10(vals[0])}, {format_log10(vals[-1])}]"
    labels = cell_labels(cell, contained) if metric == "log10_mse" else ""
    return f"{text} {labels}" if labels else text


def task_pivot(task: str, runs: pd.DataFrame) -> Pivot:
    """One task's table (ok rows of :func:`grid_runs`): a row per model x depth x width; the
    test MSE in each precision (median [min, max] over seeds, with its A / T / R label), the
    approximation part measured with the highest precision's inputs, the rounding part in
    each precision, and the certain digits of the mp100 reference (the fewest over seeds and
    precisions; a column only when stored)."""
    precs = sorted(runs["precision"].unique(), key=precision_order)
    top = precs[-1]
    digits = runs["truth_digits"].map(_present).any()
    above = contained_above(runs)
    rows, index = [], []
    for (subject, depth, width), cell in runs.groupby(["subject", "depth", "width"],
                                                      sort=True):
        by_prec = {p: cell[cell["precision"] == p] for p in precs}
        row = {"depth": int(depth), "width": int(width)}
        row.update({p: _seeds_cell(by_prec[p], "log10_mse",
                                   (str(subject), int(depth), int(width), str(p)) in above)
                    for p in precs})
        row["approximation"] = _seeds_cell(by_prec[top], "approximation")
        row.update({f"rounding {p}": _seeds_cell(by_prec[p], "rounding") for p in precs})
        if digits:
            ds = [float(v) for v in cell["truth_digits"] if _present(v)]
            row["reference digits"] = f"{min(ds):.0f}" if ds else ""
        rows.append(row)
        index.append(str(subject))
    frame = pd.DataFrame(rows, index=pd.Index(index, name="model"))
    frame = frame.loc[:, [c for c in frame.columns
                          if c in ("depth", "width") or (frame[c] != "").any()]]
    clock = f"; {TIME_LEGEND}" if stopped_by_clock(runs) else ""
    if above:
        clock += f"; {CONTAINED_LEGEND}"
    if (runs["status"] == NONFINITE).any():
        clock += f"; {NONFINITE_LEGEND}"
    return Pivot(f"grid-{task}",
                 f"{task}: test MSE by model, depth and width in each precision, its "
                 f"approximation part (measured on {top}'s inputs) and rounding part in each "
                 "precision (median [min, max] over seeds; A approximation-, T training-, "
                 f"R rounding-limited{clock}"
                 + ("; reference digits: the mp100 reference's digits that mp200 confirms "
                    "on one test sequence, the fewest over seeds and precisions" if digits
                    else "") + ")", frame, {"task": task})


def evidence_pivot(task: str, runs: pd.DataFrame) -> Pivot | None:
    """The evidence of the labels on ``task`` (ok rows of :func:`grid_runs`; the evidence is
    stored once per trained job, the same in every precision, so each cell reads one
    precision): per model x depth x width, medians over seeds of the check gain (the factor a
    few Gauss-Newton steps from the final weights lowered the held-out MSE by), the held-out
    gradient norm, the drift, curvature and power of the check; None when no run stored them
    (records from before the check)."""
    if not runs["check_gain"].map(_present).any():
        return None
    top = max(runs["precision"].unique(), key=precision_order)

    def median(cell: pd.DataFrame, col: str) -> float | None:
        vals = [float(v) for v in cell[col] if _present(v)]
        return float(np.median(vals)) if vals else None

    rows, index = [], []
    for (subject, depth, width), cell in runs.groupby(["subject", "depth", "width"],
                                                      sort=True):
        one = cell[cell["precision"] == top]
        gain = median(one, "check_gain")
        if gain is None:
            continue
        norm, drift = median(one, "grad_norm"), median(one, "check_drift")
        curv, power = median(one, "check_curvature"), median(one, "check_power")
        rows.append({"depth": int(depth), "width": int(width),
                     "check gain": format_gain(gain),
                     "|grad|": format_mse(norm) if norm is not None else "-",
                     "drift": f"{drift:.1f}" if drift is not None else "-",
                     "curvature": f"{curv:.1e}" if curv is not None else "-",
                     "power": format_power(power) if power is not None else "-"})
        index.append(str(subject))
    frame = pd.DataFrame(rows, index=pd.Index(index, name="model"))
    return Pivot(f"grid-{task}-evidence",
                 f"{task}: the labels' evidence by model, depth and width (check gain: the "
                 "factor a few Gauss-Newton steps from the final weights lowered the held-out "
                 "MSE by, near 1 when training converged; |grad|: the held-out gradient norm; "
                 "drift: z-score of a nonzero expected gradient, above 4 on a slope; "
                 "curvature: the Hessian's most negative eigenvalue over its largest, below "
                 "-1e-2 at a saddle; power: residuals per parameter in the check's batches, "
                 "below 0.02 where the check cannot see; medians over seeds; '-': not "
                 "stored)", frame, {"task": task})
