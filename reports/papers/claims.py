"""The published-claims check: every claim of ``claims.toml`` gets a verdict from the store.

A claim with a ``check`` table selects stored runs of one ``kind`` (suite / subject / task /
precision, each a value or a list, plus an optional ``config`` table of run-config values such
as ``depth`` or ``train.recipe``) and a metric (a runs column, or ``result.<name>``); it
*holds* when every selected run's metric lies in
[min, max] (or, with ``aggregate = "best"``, when each task's best run does), *does not
hold* otherwise, and is *not measured* when the store has no such run (the row then names the
command that produces the data). ``min_train_steps`` ignores trained runs with a smaller
budget (a quick profile does not refute a claim made after 1e6 steps). Claims without a
check are listed as not measured, never dropped.

A ``[claim.check.relative_to]`` table turns the check into a comparison of two systems: it
selects partner runs the same way (its subject / task / config replace the check's; suite and
precision are shared) and pairs each selected run with the partner that has the same values
of ``pair_on`` (dotted run-config keys such as ``params.layers`` or ``seed``); min / max then
bound the ratio metric / partner's metric (002 "Diag matches Full": Full / Diag per depth),
or, with ``compare = "difference"``, metric - partner's metric (on a log10 metric: how many
orders of magnitude apart, 001 "BaseConv ~2 orders worse than the Transformer").

Metrics and config keys are those of the kind's record schema (:mod:`probes.store.records`), checked
when the file is loaded: a typo is a one-line :class:`ClaimsError` naming the claim, not a
check that silently selects nothing.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from typing import Any

from precision.invariants import INVALID, NONFINITE, inverted_runs
from probes.store.records import (
    SCHEMA,
    TrainedConfig,
    TrainedResult,
    config_of,
    metric_problem,
    result_of,
)
from probes.training.recipe_book import RECIPES
from reports.floor_cells import floor_reached, format_log10, median

SELECT_KEYS = ("kind", "suite", "subject", "task", "precision")
CHECK_KEYS = {*SELECT_KEYS, "metric", "min", "max", "aggregate", "min_train_steps", "command",
              "config", "relative_to", "paper_size"}
#: The model sizes a trained claim's ``paper_size`` may name (the paper's depth and width).
SIZE_KEYS = ("depth", "width")
RELATIVE_KEYS = {"subject", "task", "config", "pair_on", "compare"}
#: How a ``relative_to`` check compares a run with its partner: the ratio of the metrics, or
#: their difference (for log10 metrics: orders of magnitude).
COMPARES = ("ratio", "difference")
#: A trained run whose rounding part (log10 MSE of the precision against the mp100 model) is
#: at least this many decades above its approximation part (log10 MSE of the mp100 model
#: against the truth) is at its floor in that precision whatever its convergence check said.
ROUNDING_MARGIN = 1.0


class ClaimsError(ValueError):
    """A claim whose check the record schema does not allow (one line naming the claim)."""


@dataclass(frozen=True)
class ClaimRow:
    """One line of the claims table."""

    id: str
    paper: str
    where: str
    claim: str
    published: str
    measured: str
    verdict: str  # "holds" | "does not hold" | "not measured"
    command: str
    engine_measured: str = "-"   # trained claims: the same check over the engine's runs
    engine_verdict: str = "-"


def load_claims(text: str | None = None) -> list[dict[str, Any]]:
    """The claims shipped in ``reports/papers/claims.toml`` (or in ``text``), in file order, each
    check validated against the record schema (:class:`ClaimsError` otherwise)."""
    if text is None:
        text = (resources.files("reports.papers") / "claims.toml").read_text(encoding="utf-8")
    claims = list(tomllib.loads(text)["claim"])
    for c in claims:
        problem = check_problem(c["check"]) if "check" in c else None
        if problem:
            raise ClaimsError(f"claims.toml: claim '{c.get('id')}': {problem}")
    return claims


def check_problem(check: dict[str, Any]) -> str | None:
    """What is wrong with a claim's check, or None: unknown keys, a kind without a record
    schema, a metric or config key its kind's records do not hold."""
    unknown = sorted(set(check) - CHECK_KEYS) or sorted(
        set(check.get("relative_to", {})) - RELATIVE_KEYS)
    if unknown:
        return f"unknown check key '{unknown[0]}'"
    kind = check.get("kind")
    if kind not in SCHEMA:
        return f"kind must be one of {', '.join(SCHEMA)}, not {kind!r}"
    missing = [k for k in ("metric", "min", "max", "command") if k not in check]
    if missing:
        return f"the check needs '{missing[0]}'"
    if "min_train_steps" in check and kind != "trained":
        return "min_train_steps applies to trained runs only"
    size = check.get("paper_size", {})
    if size and (kind != "trained" or not isinstance(size, dict) or set(size) - set(SIZE_KEYS)
                 or not all(isinstance(v, int) and v > 0 for v in size.values())):
        return "paper_size is a table of depth / width (positive integers) of trained claims"
    rel = check.get("relative_to", {})
    if rel.get("compare", "ratio") not in COMPARES:
        return f"relative_to compare must be one of {', '.join(COMPARES)}"
    keys = [*check.get("config", {}), *rel.get("config", {}), *rel.get("pair_on", [])]
    return metric_problem(kind, check["metric"]) or next(
        (p for key in keys if (p := SCHEMA[kind][0].key_problem(key))), None)


def _format_metric(metric: str, value: float) -> str:
    if metric in ("floor_log10", "log10_mse"):
        return f"MSE {format_log10(value)}"
    if metric == "conv_order":
        return f"order {value:.2f}"
    if metric == "rate":
        return f"rate {value:.3g}"
    if metric.startswith("result."):
        return f"{metric[len('result.'):]} {value:.4g}"
    return f"{metric} {value:.3g}"


def metric_value(row: dict[str, Any], metric: str) -> Any:
    """A runs-table column (``floor_log10``) or ``result.<name>`` of the row's result (a
    study's metric, a trained run's ``rounding``: :meth:`RecordResult.metric
    <probes.store.records.RecordResult.metric>`)."""
    if metric.startswith("result."):
        return result_of(row).metric(metric[len("result."):])
    return row.get(metric)


def _matches(value: Any, wanted: Any) -> bool:
    return value in wanted if isinstance(wanted, list) else value == wanted


def config_value(row: dict[str, Any], key: str) -> Any:
    """The run-config value at a dotted key (``depth``, ``params.layers``: a field of the
    row's typed config, then keys of that table) or None."""
    head, _, rest = key.partition(".")
    value = getattr(config_of(row), head, None)
    for part in rest.split(".") if rest else ():
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _selected(row: dict[str, Any], check: dict[str, Any]) -> bool:
    """Row matches the check's suite/subject/task/precision (a value or a list of values) and
    its ``config`` table (keys of the run config; ``train.recipe`` style dotted keys)."""
    if not all(_matches(row.get(k), check[k]) for k in SELECT_KEYS if k in check):
        return False
    return all(_matches(config_value(row, key), wanted)
               for key, wanted in check.get("config", {}).items())


def _ratios(rows: list[dict[str, Any]], chosen: list[dict[str, Any]], check: dict[str, Any]
            ) -> tuple[list[tuple[dict[str, Any], float]], list[str]]:
    """(run, metric / partner's metric, or their difference) for every chosen run that has a
    partner (see the module docstring; the partner is the first matching ok run in store
    order), and a note
    for each chosen run without one (a missing pair leaves the comparison incomplete)."""
    rel = check["relative_to"]
    spec = {k: check[k] for k in ("kind", "suite", "precision") if k in check}
    spec |= {k: rel[k] for k in ("subject", "task", "config") if k in rel}
    pair_on = list(rel.get("pair_on", []))
    partners: dict[tuple[Any, ...], float] = {}
    unusable: dict[tuple[Any, ...], str] = {}
    for r in rows:
        if not _selected(r, spec):
            continue
        key = tuple(config_value(r, k) for k in pair_on)
        value = metric_value(r, check["metric"])
        if r.get("status") == "ok" and value is not None:
            partners.setdefault(key, float(value))
        else:
            unusable.setdefault(key, str(r.get("status")))
    out, missing = [], []
    for r in chosen:
        key = tuple(config_value(r, k) for k in pair_on)
        base = partners.get(key)
        value = float(metric_value(r, check["metric"]))
        if base is not None and rel.get("compare") == "difference":
            out.append((r, value - base))
        elif base:
            out.append((r, value / base))
        else:
            label = ",".join(f"{k.split('.')[-1]}={v}" for k, v in zip(pair_on, key,
                                                                        strict=True))
            why = f"partner {unusable[key]}" if key in unusable else (
                "partner metric 0" if base == 0 else "no partner run")
            missing.append(f"{label or 'run'}: {why}")
    return out, missing


def rounding_limited(row: dict[str, Any]) -> bool:
    """The run's error in its precision is the precision's own rounding, not the weights:
    the decomposition total = approximation + rounding (001 Sec. 2) has its rounding part at
    least :data:`ROUNDING_MARGIN` decades above the approximation part. Training lowers only
    the approximation part, so a run stopped while still training (a ``T`` label) already
    measures this precision's floor of these weights, and a claim about this precision may
    use it."""
    res = TrainedResult.from_json(row.get("result"))
    return (res.rounding is not None and res.approximation is not None
            and math.isfinite(res.rounding) and math.isfinite(res.approximation)
            and res.rounding >= res.approximation + ROUNDING_MARGIN)


def _count(runs: list[dict[str, Any]], what: str) -> str:
    return f"{len(runs)} run{'s' if len(runs) > 1 else ''} {what}"


def _second_order(row: dict[str, Any]) -> bool:
    """The run was trained by a second-order recipe (the engine)."""
    recipe = RECIPES.get(TrainedConfig.from_json(row.get("config")).recipe)
    return recipe is not None and recipe.second_order


def check_claims(rows: list[dict[str, Any]], suites: list[str] | None = None) -> list[ClaimRow]:
    """Verdicts for every shipped claim against store ``rows`` (dicts from ``Store.runs``);
    with ``suites``, only the claims whose check selects one of those suites.

    Every selected run counts, whatever its status: a **diverged** run makes the claim *not
    hold* (the error grew instead of reaching a floor); a **failed** run, a floor that was
    **not reached** (the trace was still falling when the iterations ran out), a trained run
    whose convergence check did not pass (training-limited; except one whose error in its
    precision is that precision's rounding, :func:`rounding_limited`), or a ``relative_to`` run
    **without a partner** leave the verdict *not measured* unless another run already
    refutes the claim, and the measured column says which and how many. So does a run that
    breaks an invariant (:mod:`precision.invariants`: stored ``invalid``, or in a set where a
    finer precision floors above a coarser one): it is skipped, never read as a measurement.

    A claim about trained runs gets two verdicts: ``verdict`` from first-order recipes (the
    paper's Adam, held to ``min_train_steps``: what the paper's budget reaches) and
    ``engine_verdict`` from the second-order engine (any budget: whether the architecture
    reaches the published level at all). Other claims have one verdict (engine columns "-").
    """
    out = []
    inverted = set(inverted_runs(rows))
    for c in load_claims():
        check = c.get("check")
        if suites is not None and not (check and set(_as_list(check.get("suite")))
                                       & set(suites)):
            continue
        base = dict(id=c["id"], paper=c["paper"], where=c["where"], claim=c["claim"],
                    published=c["published"])
        if not check:
            out.append(ClaimRow(**base, measured="-", verdict="not measured",
                                command="needs a suite not built yet"))
            continue
        selected = [r for r in rows if _selected(r, check)]
        if check["kind"] != "trained":
            out.append(ClaimRow(**base, **_verdict(check, selected, rows, 0, inverted)))
            continue
        steps = check.get("min_train_steps", 0)
        paper = _verdict(check, [r for r in selected if not _second_order(r)], rows, steps,
                         inverted)
        if paper["verdict"] == "not measured" and paper["measured"] == "-" and steps:
            paper["measured"] = f"needs the paper budget (>= {steps} Adam steps)"
        engine_runs = [r for r in selected if _second_order(r)]
        engine = _verdict(check, engine_runs, rows, 0, inverted)
        if engine["verdict"] == "not measured" and engine["measured"] == "-":
            engine["measured"] = f"no engine run of {_selection_text(check)}"
        for verdict, runs in ((paper, [r for r in selected if not _second_order(r)]),
                              (engine, engine_runs)):
            smaller = _smaller_than_paper(check, runs)
            if smaller and verdict["verdict"] in ("holds", "does not hold"):
                verdict["measured"] += f"; {smaller}"
        out.append(ClaimRow(**base, **paper, engine_measured=engine["measured"],
                            engine_verdict=engine["verdict"]))
    return out


def _smaller_than_paper(check: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """``"its runs include width 32, below the paper's 64"`` when ok ``runs`` of a trained
    claim include models shallower or narrower than the paper's (``paper_size``), else
    ``""``: a verdict drawn from smaller cells says so in its row."""
    size = check.get("paper_size") or {}
    parts = []
    for key in SIZE_KEYS:
        if key not in size:
            continue
        values = sorted({int(v) for r in runs if r.get("status") == "ok"
                         and (v := getattr(TrainedConfig.from_json(r.get("config")), key))})
        below = [v for v in values if v < size[key]]
        if below:
            shown = ", ".join(map(str, below))
            parts.append(f"{key} {shown}, below the paper's {size[key]}")
    return "its runs include " + "; ".join(parts) if parts else ""


def _selection_text(check: dict[str, Any]) -> str:
    """What a check selects, in words: ``transformer on multiply, depth 8, float32``."""
    words = (f"{' / '.join(map(str, _as_list(check.get('subject', 'any model'))))} on "
             f"{' / '.join(map(str, _as_list(check.get('task', 'any task'))))}")
    extra = [f"{k.split('.')[-1]} {v}" for k, v in (check.get("config") or {}).items()]
    extra += [" / ".join(map(str, _as_list(check["precision"])))] if "precision" in check else []
    return ", ".join([words, *extra])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _verdict(check: dict[str, Any], selected: list[dict[str, Any]], rows: list[dict[str, Any]],
             min_train_steps: int, inverted: Collection[str] = ()) -> dict[str, str]:
    """measured / verdict / command of ``check`` over its ``selected`` runs (``rows``: the
    whole store, for ``relative_to`` partners; trained runs below ``min_train_steps`` steps do
    not count; runs stored ``invalid`` and the ids in ``inverted``, sets where a finer
    precision floors above a coarser one, are skipped: :mod:`precision.invariants`)."""
    metric = check["metric"]
    short = {id(r): steps for r in selected if r.get("kind") == "trained"   # id: budget
             and (steps := TrainedConfig.from_json(r.get("config")).train_steps) is not None
             and steps < min_train_steps}
    selected = [r for r in selected if id(r) not in short]
    # a training that diverged, or a trained model whose output overflows in the claim's
    # precision: the claimed accuracy is not reached there
    diverged = [r for r in selected if r.get("status") in ("diverged", NONFINITE)]
    broken = [r for r in selected if r.get("status") == INVALID
              or (r.get("status") == "ok" and r.get("run_id") in inverted)]
    failed = [r for r in selected if r.get("status") not in ("ok", "diverged", NONFINITE,
                                                              INVALID)]
    skip = {id(r) for r in broken}
    ok_runs = [r for r in selected if r.get("status") == "ok" and id(r) not in skip
               and metric_value(r, metric) is not None]
    unreached = [r for r in ok_runs if metric == "floor_log10" and not floor_reached(r)]
    limited = [r for r in ok_runs if r not in unreached and r.get("kind") == "trained"
               and TrainedResult.from_json(r.get("result")).train_converged is False]
    at_rounding = [r for r in limited if rounding_limited(r)]
    budget_cut = [r for r in limited if r not in at_rounding]
    chosen = [r for r in ok_runs if r not in unreached and r not in budget_cut]
    notes = []
    if diverged:
        kinds = sorted({str(r.get("status")) for r in diverged})
        notes.append(_count(diverged, " or ".join(
            "not finite in its precision" if k == NONFINITE else k for k in kinds)))
    if failed:
        reason = str(failed[0].get("error") or "").splitlines()[0:1]
        notes.append(_count(failed, "failed") + (f" ({reason[0]})" if reason else ""))
    if broken:
        notes.append(_count(broken, "skipped: an invariant is broken (the report's checks)"))
    if unreached:
        notes.append(_count(unreached, "still falling (no floor reached)"))
    if at_rounding:
        notes.append(_count(at_rounding, "training-limited but at its precision's rounding "
                            "floor (counted)"))
    if budget_cut:
        notes.append(_count(budget_cut, "training-limited (convergence check not passed)"))
    ratios, missing = None, []
    if "relative_to" in check:
        ratios, missing = _ratios(rows, chosen, check)
        chosen = [r for r, _ in ratios]
        notes += missing
    if not chosen and not diverged:
        command = check["command"]
        if short:
            most = max(short.values())
            command += (f" (stored runs trained {most} steps; the claim needs "
                        f">= {min_train_steps})")
        return dict(measured="-" if not notes else "; ".join(notes), verdict="not measured",
                    command=command)
    ok, measured = _judge(check, chosen, ratios)
    if diverged:
        ok = False
    inconclusive = bool(failed or broken or unreached or budget_cut
                        or (ratios is not None and missing))
    if not ok and not diverged and check.get("aggregate") == "best" and ratios is None:
        ok = not _best_refuted(check, chosen, [*failed, *broken, *unreached, *budget_cut])
    verdict = "does not hold" if not ok else ("not measured" if inconclusive else "holds")
    if notes:
        measured = "; ".join(m for m in (measured, *notes) if m)
    return dict(measured=measured, verdict=verdict, command=check["command"])


def _best_refuted(check: dict[str, Any], chosen: list[dict[str, Any]],
                  pending: list[dict[str, Any]]) -> bool:
    """With ``aggregate = "best"``, whether the usable runs ``chosen`` refute the claim
    whatever the ``pending`` runs (still training, failed) of the same tasks would reach:
    a task's best below ``min`` does (more training only lowers a best), a best above
    ``max`` only when no run of that task is pending (one of them may still reach the
    window)."""
    open_tasks = {r["task"] for r in pending}
    return any(v < check["min"] or (v > check["max"] and t not in open_tasks)
               for t, v in _best_per_task(check["metric"], chosen).items())


def _best_per_task(metric: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each task's lowest ``metric`` over ``runs``."""
    best: dict[str, float] = {}
    for r in runs:
        best[r["task"]] = min(float(metric_value(r, metric)), best.get(r["task"], math.inf))
    return best


def _judge(check: dict[str, Any], chosen: list[dict[str, Any]],
           ratios: list[tuple[dict[str, Any], float]] | None) -> tuple[bool, str]:
    """Whether the usable runs lie in [min, max], and the measured text (empty when none)."""
    metric = check["metric"]
    if not chosen:
        return True, ""
    if ratios is not None:                          # every pair's ratio must lie in range
        values = sorted(v for _, v in ratios)
        ok = all(check["min"] <= v <= check["max"] for v in values)
        pair_on = check["relative_to"].get("pair_on", [])
        shown = [k for k in pair_on                      # label pairs by what varies
                 if len({repr(config_value(r, k)) for r, _ in ratios}) > 1] or pair_on[:1]
        word = "difference" if check["relative_to"].get("compare") == "difference" else "ratio"
        measured = word + " " + "; ".join(
            ",".join(f"{k.split('.')[-1]}={config_value(r, k)}" for k in shown)
            + f" {v:.3g}" for r, v in ratios)
        return ok, measured
    if check.get("aggregate") == "best":            # each task's best configuration counts
        best = _best_per_task(metric, chosen)
        ok = all(check["min"] <= v <= check["max"] for v in best.values())
        measured = "; ".join(f"{t} {_format_metric(metric, v)}" for t, v in sorted(best.items()))
        if len(chosen) > len(best):
            measured += f" (best of {len(chosen)} runs)"
        return ok, measured
    scored = [(r, float(metric_value(r, metric))) for r in chosen]
    values = sorted(v for _, v in scored)
    outside = sorted({f"{r['subject']} {r['task']} {r['precision']}"     # every run must lie
                      for r, v in scored if not check["min"] <= v <= check["max"]})  # in range
    measured = _format_metric(metric, median(values))
    if len(values) > 1:
        measured += (f" (median of {len(values)}; range {_format_metric(metric, values[0])}"
                     f" .. {_format_metric(metric, values[-1])})")
        if outside:        # which runs the verdict turned on
            measured += "; outside the published range: " + ", ".join(outside)
    return not outside, measured
