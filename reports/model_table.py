"""Plain-text tables of trained-model runs from store rows (what ``precision run`` prints).

One table per task: one line per model configuration (subject, depth, width, LayerNorm,
recipe, training dtype, seed), one column per evaluation precision. A cell is the test MSE
followed by what limits it: ``T`` training (the held-out validation curve was still falling
when the training budget ran out: the optimizer had not found what the weights can do, so the
number says nothing about the architecture), else the part of the decomposition that
dominates: ``A`` approximation (training converged and the weights still miss the map) or
``R`` rounding (the precision's arithmetic is the limit).

A label rests on evidence the record stores: ``check_gain``, the factor by which a few
Gauss-Newton steps from the final weights lowered the held-out MSE (near 1: training had
nothing left to find), and ``grad_norm``, the held-out loss gradient's norm at the final
weights, ``check_drift``, the z-score of a nonzero expected gradient over independent
batches (a slope that is not a floor shows it, :mod:`probes.training.convergence_check`),
and ``check_curvature``, the held-out loss Hessian's most negative eigenvalue over its largest
(a saddle shows it), and ``check_power``, the residuals per parameter the check's
Gauss-Newton batches held (too few, and the check cannot see: its verdict does not count).
Where a task's records hold them, its table has five columns more, ``check gain``,
``|grad|``, ``drift``, ``curvature`` and ``power``: one value per trained job, the same in
every evaluation precision (records stored before the check have none: ``-``).
Where the records store it, a column ``ref digits`` says how many digits of the mp100
reference the decomposition is measured against are certain (the fewest over the line's
precisions, :mod:`precision.reference`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from precision.invariants import NONFINITE, inverted_runs
from precision.text_numbers import is_whole
from probes.store.records import TrainedConfig, TrainedResult, stored_float
from probes.training.measure import limit_label
from probes.training.recipe_book import RECIPES
from reports.floor_cells import (
    INVERTED_LEGEND,
    INVERTED_MARK,
    format_log10,
    format_mse,
    invalid_lines,
)
from reports.text_table import precision_order, text_table


def _label(row: dict[str, Any]) -> tuple[str, ...]:
    cfg = TrainedConfig.from_json(row.get("config"))
    ln = cfg.layernorm
    recipe = str(cfg.train.get("recipe", ""))
    if cfg.train.get("start", "fresh") != "fresh":
        recipe += f", from {cfg.train['start']}"
    return (row["subject"], str(cfg.depth), str(cfg.width),
            "" if ln is None else ("yes" if ln else "no"), recipe,
            trained_in(cfg), str(cfg.train.get("steps", "")), str(cfg.seed))


def train_dtype(cfg: TrainedConfig) -> str:
    """The precision the run trained in: float64 for a second-order recipe (which trains in
    float64 whatever its ``dtype`` says), else the stored ``dtype`` (a native dtype or a
    format, :mod:`probes.training.format_training`)."""
    recipe = RECIPES.get(cfg.recipe)
    return "float64" if recipe is not None and recipe.second_order else cfg.train_dtype


#: The native training dtypes (probes.training.train_config.TRAIN_DTYPES, which this
#: torch-free module does not import).
NATIVE = ("float32", "float64", "bfloat16")


def train_weights(cfg: TrainedConfig) -> str:
    """Where a run's weights were kept while it trained: ``""`` (natively, in its training
    dtype), ``"float32 master"`` / ``"float64 master"`` (a format's master weights; float32
    unless set), or ``"no master"`` (in the format itself, ``master_dtype = "none"``)."""
    recipe = RECIPES.get(cfg.recipe)
    master = str(cfg.train.get("master_dtype", "auto"))
    if recipe is not None and recipe.second_order:
        return ""
    if master == "none":
        return "no master"
    if master == "auto":
        return "" if cfg.train_dtype in NATIVE else "float32 master"
    return f"{master} master"


def trained_in(cfg: TrainedConfig) -> str:
    """:func:`train_dtype`, and :func:`train_weights` where not native:
    ``bfloat16:sr, no master``."""
    weights = train_weights(cfg)
    return f"{train_dtype(cfg)}, {weights}" if weights else train_dtype(cfg)


#: What a cell adds when its training was stopped by its wall-clock time limit, and the line
#: that says so under the table: such a number measures the machine's speed and load.
TIME_MARK = " time"
#: A cell that floors above a shallower cell it contains (:data:`CONTAINED_LEGEND`).
CONTAINED_MARK = " <d"
#: How far above a contained cell's median floor a cell may lie before it is marked.
CONTAINED_ABOVE_DECADES = 0.3
NONFINITE_LEGEND = ("nonfinite = the trained model's output in this precision overflowed or "
                    "became NaN (its evaluation, not its training: the weights are finite); "
                    "the record's error names the precision")
CONTAINED_LEGEND = (f"<d = a shallower model this one contains exactly (its extra layers the "
                    f"identity) floors more than {CONTAINED_ABOVE_DECADES:g} decades lower in "
                    "this precision: the cell is training-limited whatever its check said "
                    "(never A), since training could have stayed at that model")
TIME_LEGEND = ("time = training stopped by its wall-clock time limit before its step budget "
               "(the number depends on the machine's speed and load, not only on the budget)")


def stopped_by_time(row: dict[str, Any]) -> bool:
    """True when the record's training ended on its wall-clock time limit."""
    return TrainedResult.from_json(row.get("result")).train_stop == "time limit"


def contained_above_runs(rows: list[dict[str, Any]]) -> set[str]:
    """Run ids of the ok trained ``rows`` whose test MSE lies more than
    :data:`CONTAINED_ABOVE_DECADES` above that of a shallower run they contain exactly (the
    same model, width, options, recipe, seed, task and precision; a family whose deeper
    models contain the shallower ones, :mod:`precision.models.containment`)."""
    from probes.factory import family_nests_by_depth

    entries = []
    for r in rows:
        log10 = stored_float(r.get("log10_mse"))
        if r.get("status") != "ok" or r.get("kind") != "trained" or log10 is None:
            continue
        cfg = TrainedConfig.from_json(r.get("config"))
        if not family_nests_by_depth(cfg.family, cfg.model_options):
            continue
        label = _label(r)
        key = (r.get("task"), r.get("precision"), label[0], *label[2:],
               json.dumps(cfg.model_options, sort_keys=True, default=str))
        entries.append((key, cfg.depth, log10, str(r["run_id"])))
    return above_contained(entries)


def above_contained(entries: list[tuple[Any, int, float, Any]]) -> set[Any]:
    """The containment invariant on ``entries`` (group, depth, log10 MSE, id): the ids whose
    MSE lies more than :data:`CONTAINED_ABOVE_DECADES` above the lowest of a shallower depth
    of the same group (a group: one model, width and options, whose deeper members contain
    the shallower ones exactly)."""
    groups: dict[Any, list[tuple[int, float, Any]]] = defaultdict(list)
    for group, depth, value, ident in entries:
        groups[group].append((depth, value, ident))
    out: set[Any] = set()
    for members in groups.values():
        best: float | None = None
        for depth in sorted({d for d, _, _ in members}):
            at = [(v, ident) for d, v, ident in members if d == depth]
            if best is not None:
                out.update(ident for v, ident in at if v > best + CONTAINED_ABOVE_DECADES)
            low = min(v for v, _ in at)
            best = low if best is None else min(best, low)
    return out


def _cell(row: dict[str, Any], contained: bool = False) -> str:
    if row["status"] != "ok":
        return row["status"]
    log10 = stored_float(row.get("log10_mse"))  # an mpN MSE may lie below float64's range
    text = format_log10(log10) if log10 is not None else format_mse(row.get("mse"))
    res = TrainedResult.from_json(row.get("result"))
    if res.approximation is not None and res.rounding is not None:
        label = limit_label(res.train_converged, res.approximation, res.rounding)
        text += " " + ("T" if contained and label == "A" else label)
    elif contained:
        text += " T"
    return (text + (TIME_MARK if res.train_stop == "time limit" else "")
            + (CONTAINED_MARK if contained else ""))


def _evidence(row: dict[str, Any]) -> tuple[float | None, ...]:
    """The convergence check's (gain, gradient norm, drift, curvature, power) of a record
    (None before it)."""
    res = TrainedResult.from_json(row.get("result"))
    return (stored_float(res.check_gain), stored_float(res.grad_norm),
            stored_float(res.check_drift), stored_float(res.check_curvature),
            stored_float(res.check_power))


def format_drift(drift: float | None) -> str:
    """A drift z-score as text, one decimal (``-`` when not stored)."""
    return "-" if drift is None else f"{drift:.1f}"


def format_curvature(curvature: float | None) -> str:
    """lambda_min / lambda_max as text, two digits (``-`` when not stored)."""
    return "-" if curvature is None else f"{curvature:.1e}"


def format_power(power: float | None) -> str:
    """Residuals per parameter as text, two significant digits (``-`` when not stored)."""
    return "-" if power is None else f"{power:.2g}"


def format_gain(gain: float | None) -> str:
    """A check gain as text, two significant digits (``1.3``, ``37``, ``1.2e+03``)."""
    return "-" if gain is None else f"{gain:.2g}"


def _reference_digits(group: list[dict[str, Any]]) -> dict[tuple[str, ...], str]:
    """Per table line: the fewest certain digits of the mp100 reference over its records
    (lines none of whose records stores it are left out)."""
    fewest: dict[tuple[str, ...], float] = {}
    for r in group:
        v = stored_float(TrainedResult.from_json(r.get("result")).truth_digits)
        if v is not None:
            lab = _label(r)
            fewest[lab] = min(v, fewest.get(lab, v))
    return {lab: f"{v:.0f}" for lab, v in fewest.items()}


def model_tables(rows: list[dict[str, Any]]) -> str:
    """Tables of test MSE per task for the trained runs among ``rows`` ('' when none)."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("kind") == "trained":
            by_task[r["task"]].append(r)
    blocks = []
    inverted = inverted_runs([r for g in by_task.values() for r in g])
    above = contained_above_runs([r for g in by_task.values() for r in g])
    for task in sorted(by_task):
        group = by_task[task]
        precs = sorted({r["precision"] for r in group}, key=precision_order)
        cells = {(_label(r), r["precision"]): _cell(r, r["run_id"] in above)
                 + (INVERTED_MARK if r["run_id"] in inverted else "")
                 for r in sorted(group, key=lambda r: (r["created_at"], r["run_id"]))}
        labels = sorted({_label(r) for r in group},
                        key=lambda t: (t[0], *(int(x) if is_whole(x) else 0 for x in t[1:3]), t))
        head = ["model", "depth", "width", "LN", "recipe", "train", "steps", "seed", *precs]
        body = [[*lab, *[cells.get((lab, p), "") for p in precs]] for lab in labels]
        evidence: dict[tuple[str, ...], tuple[float | None, ...]] = {}
        for r in group:   # one job's evidence is stored with each of its precisions
            if _evidence(r)[0] is not None:
                evidence.setdefault(_label(r), _evidence(r))
        title = (f"task {task}: test MSE (T = training-limited, A = approximation-limited, "
                 "R = rounding-limited)")
        if evidence:
            none = (None, None, None, None, None)
            head += ["check gain", "|grad|", "drift", "curvature", "power"]
            body = [[*line, format_gain(evidence.get(lab, none)[0]),
                     format_mse(evidence.get(lab, none)[1]),
                     format_drift(evidence.get(lab, none)[2]),
                     format_curvature(evidence.get(lab, none)[3]),
                     format_power(evidence.get(lab, none)[4])]
                    for lab, line in zip(labels, body, strict=True)]
            title += ("; check gain = how many times a few Gauss-Newton steps from the final "
                      "weights lowered the held-out MSE, |grad| = its gradient norm there, "
                      "drift = z-score of a nonzero expected gradient (above 4: a slope), "
                      "curvature = the Hessian's most negative eigenvalue over its largest "
                      "(below -1e-2: a saddle), power = residuals per parameter in the "
                      "check's batches (below 0.02: the check cannot see, T)")
        digits = _reference_digits(group)
        if digits:   # stored since the reference is checked: a column beside the results
            head.append("ref digits")
            body = [[*line, digits.get(lab, "")] for line, lab in zip(body, labels, strict=True)]
            title += "; ref digits = certain digits of the mp100 reference"
        blocks.append(text_table(title, head, body))
    if any(stopped_by_time(r) for g in by_task.values() for r in g if r["status"] == "ok"):
        blocks.append(TIME_LEGEND)
    if inverted:
        blocks.append(INVERTED_LEGEND)
    if above:
        blocks.append(CONTAINED_LEGEND)
    if any(r.get("status") == NONFINITE for g in by_task.values() for r in g):
        blocks.append(NONFINITE_LEGEND)
    invalid = invalid_lines([r for g in by_task.values() for r in g])
    if invalid:
        blocks.append(invalid)
    return "\n\n".join(blocks)
