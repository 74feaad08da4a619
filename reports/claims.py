"""The published-claims check: every claim of ``claims.toml`` gets a verdict from the store.

A claim with a ``check`` table selects stored runs (suite / subject / task / precision, each a
value or a list, plus an optional ``config`` table of run-config values such as ``depth`` or
``train.recipe``) and a metric column; it *holds* when every selected run's metric lies in
[min, max] (or, with ``aggregate = "best"``, when each task's best run does), *does not
hold* otherwise, and is *not measured* when the store has no such run (the row then names the
command that produces the data). ``min_train_steps`` ignores trained runs with a smaller
budget (a quick profile does not refute a claim made after 1e6 steps). Claims without a
check are listed as not measured, never dropped.

A ``[claim.check.relative_to]`` table turns the check into a comparison of two systems: it
selects partner runs the same way (its subject / task / config replace the check's; suite and
precision are shared) and pairs each selected run with the partner that has the same values
of ``pair_on`` (dotted run-config keys such as ``params.layers`` or ``seed``); min / max then
bound the ratio metric / partner's metric (002 "Diag matches Full": Full / Diag per depth).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

SELECT_KEYS = ("suite", "subject", "task", "precision")


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


def load_claims() -> list[dict[str, Any]]:
    """The claims shipped in ``reports/claims.toml`` (in file order)."""
    text = (resources.files("reports") / "claims.toml").read_text(encoding="utf-8")
    return list(tomllib.loads(text)["claim"])


def _format_metric(metric: str, value: float) -> str:
    if metric in ("floor_log10", "log10_mse"):
        return "MSE 0" if value == -math.inf else f"MSE {10.0**value:.1e}"
    if metric == "conv_order":
        return f"order {value:.2f}"
    if metric == "rate":
        return f"rate {value:.3g}"
    if metric.startswith("result."):
        return f"{metric[len('result.'):]} {value:.4g}"
    return f"{metric} {value:.3g}"


def metric_value(row: dict[str, Any], metric: str) -> Any:
    """A runs-table column (``floor_log10``) or a study metric (``result.<name>``)."""
    if metric.startswith("result."):
        return ((row.get("result") or {}).get("metrics") or {}).get(metric[len("result."):])
    return row.get(metric)


def _matches(value: Any, wanted: Any) -> bool:
    return value in wanted if isinstance(wanted, list) else value == wanted


def config_value(row: dict[str, Any], key: str) -> Any:
    """The run-config value at a dotted key (``train.recipe``, ``params.layers``) or None."""
    value: Any = row.get("config") or {}
    for part in key.split("."):
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
            ) -> list[tuple[dict[str, Any], float]]:
    """(run, metric / partner's metric) for every chosen run that has a partner (see the
    module docstring); the partner is the first matching run in store order."""
    rel = check["relative_to"]
    spec = {k: check[k] for k in ("suite", "precision") if k in check}
    spec |= {k: rel[k] for k in ("subject", "task", "config") if k in rel}
    pair_on = list(rel.get("pair_on", []))
    partners: dict[tuple[Any, ...], float] = {}
    for r in rows:
        value = metric_value(r, check["metric"])
        if _selected(r, spec) and r.get("status") == "ok" and value is not None:
            key = tuple(config_value(r, k) for k in pair_on)
            partners.setdefault(key, float(value))
    out = []
    for r in chosen:
        base = partners.get(tuple(config_value(r, k) for k in pair_on))
        if base:
            out.append((r, float(metric_value(r, check["metric"])) / base))
    return out


def check_claims(rows: list[dict[str, Any]]) -> list[ClaimRow]:
    """Verdicts for every shipped claim against store ``rows`` (dicts from ``Store.runs``)."""
    out = []
    for c in load_claims():
        check = c.get("check")
        base = dict(id=c["id"], paper=c["paper"], where=c["where"], claim=c["claim"],
                    published=c["published"])
        if not check:
            out.append(ClaimRow(**base, measured="-", verdict="not measured",
                                command="needs a suite not built yet"))
            continue
        chosen = [r for r in rows if _selected(r, check)
                  and r.get("status") == "ok" and metric_value(r, check["metric"]) is not None]
        short = [r for r in chosen
                 if (r.get("config") or {}).get("train_steps", math.inf)
                 < check.get("min_train_steps", 0)]
        chosen = [r for r in chosen if r not in short]
        ratios = _ratios(rows, chosen, check) if "relative_to" in check else None
        if ratios is not None:
            chosen = [r for r, _ in ratios]
        if not chosen:
            command = check["command"]
            if short:
                most = max(r["config"]["train_steps"] for r in short)
                command += (f" (stored runs trained {most} steps; the claim needs "
                            f">= {check['min_train_steps']})")
            out.append(ClaimRow(**base, measured="-", verdict="not measured", command=command))
            continue
        if ratios is not None:                      # every pair's ratio must lie in range
            values = sorted(v for _, v in ratios)
            ok = all(check["min"] <= v <= check["max"] for v in values)
            pair_on = check["relative_to"].get("pair_on", [])
            shown = [k for k in pair_on                  # label pairs by what varies
                     if len({repr(config_value(r, k)) for r, _ in ratios}) > 1] or pair_on[:1]
            measured = "ratio " + "; ".join(
                ",".join(f"{k.split('.')[-1]}={config_value(r, k)}" for k in shown)
                + f" {v:.3g}" for r, v in ratios)
        elif check.get("aggregate") == "best":        # each task's best configuration counts
            best: dict[str, float] = {}
            for r in chosen:
                v = float(metric_value(r, check["metric"]))
                best[r["task"]] = min(v, best.get(r["task"], math.inf))
            ok = all(check["min"] <= v <= check["max"] for v in best.values())
            measured = "; ".join(f"{t} {_format_metric(check['metric'], v)}"
                                 for t, v in sorted(best.items()))
            if len(chosen) > len(best):
                measured += f" (best of {len(chosen)} runs)"
        else:                                       # every selected run must lie in range
            values = sorted(float(metric_value(r, check["metric"])) for r in chosen)
            ok = all(check["min"] <= v <= check["max"] for v in values)
            measured = _format_metric(check["metric"], values[len(values) // 2])
            if len(values) > 1:
                measured += f" (median of {len(values)})"
        out.append(ClaimRow(**base, measured=measured,
                            verdict="holds" if ok else "does not hold",
                            command=check["command"]))
    return out
