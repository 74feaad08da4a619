"""The published-claims check: every claim of ``claims.toml`` gets a verdict from the store.

A claim with a ``check`` table selects stored runs (suite / subject / task / precision) and a
metric column; it *holds* when every selected run's metric lies in [min, max], *does not
hold* otherwise, and is *not measured* when the store has no such run (the row then names
the command that produces the data). Claims without a check are listed as not measured,
never dropped.
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
    return f"{metric} {value:.3g}"


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
        chosen = [r for r in rows
                  if all(r.get(k) == check[k] for k in SELECT_KEYS if k in check)
                  and r.get("status") == "ok" and r.get(check["metric"]) is not None]
        if not chosen:
            out.append(ClaimRow(**base, measured="-", verdict="not measured",
                                command=check["command"]))
            continue
        values = sorted(float(r[check["metric"]]) for r in chosen)
        ok = all(check["min"] <= v <= check["max"] for v in values)
        measured = _format_metric(check["metric"], values[len(values) // 2])
        if len(values) > 1:
            measured += f" (median of {len(values)})"
        out.append(ClaimRow(**base, measured=measured,
                            verdict="holds" if ok else "does not hold",
                            command=check["command"]))
    return out
