"""The conformance matrix: every registered solver and construction on every problem kind it
accepts, in float32, float64 and mp30, with the bounds each floor must meet.

Everything is generated from the registries, so a new solver, construction or problem kind
joins the matrix without a line of test code:

* subjects: :data:`~precision.solvers.measure.SOLVERS` and
  :data:`~precision.constructions.measure.CONSTRUCTIONS`, each with its declared ``task``;
* problem kinds: every kind a task takes (:data:`~precision.solvers.measure.TASK_KINDS`:
  the least-squares generators, the primitive ops, ``spd``, ``logistic``); a subject
  *accepts* a kind when :func:`~precision.solvers.measure.make_problem` builds it for the
  subject's task (a construction may still decline it when run: a primitive construction
  reads one op only; :func:`run_cell` raises its ``SolverError`` then);
* problem sizes: :data:`QUICK`, each value passed only where the kind's generator takes it
  (the first of several dims it accepts);
* step counts: a subject's declared defaults; an iterative solver whose trace is still
  falling at its end is run again with its ``iters`` doubled (at most :data:`MAX_DOUBLINGS`
  times), so each floor is measured where it is reached, whatever the problem's conditioning.

:func:`violations` states the bounds (module constants below, each with why it holds on any
CPU kernel) and returns one line per broken bound, so a caller (the tests, or a hand check
with a defect patched in) sees every failing cell at once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from precision import deterministic
from precision.constructions.measure import CONSTRUCTIONS, run_construction
from precision.invariants import (
    check_trace,
    inversions,
    rounding_log10,
)
from precision.precisions import parse_precision
from precision.solvers.measure import (
    SOLVERS,
    TASK_KINDS,
    SolverError,
    SolverResult,
    make_problem,
    run_solver,
)

#: Coarse to fine: each is :func:`~precision.invariants.finer` than the one before it.
PRECISIONS = ("float32", "float64", "mp30")

#: Quick problem sizes (the solvers suite's D = 5, N = 20; a conditioned kind gets
#: cond = 10, so GD needs a few hundred steps to reach mp30's floor). ``dim`` lists the
#: sizes tried in order (noniso's default spectrum needs 5, MULTIPLY an even dim).
QUICK: dict[str, Any] = {"dim": (5, 4), "n_samples": 12, "seq_len": 12, "kappa": 10.0,
                         "seed": 0}

#: Doublings of an iterative solver's ``iters`` while its trace is still falling: 2^5 = 32
#: times the declared default (GD: 6400 steps, enough for cond(X^T X) ~ 100 in mp30).
MAX_DOUBLINGS = 5

#: A solver's floor (it converges to the certified solution of its rounded problem: its
#: floor is rounding, by the registry's definition) relative to the truth's mean square,
#: log10(MSE / mean(truth^2)), lies at most ``2 log10(kappa) + SLACK_DECADES`` above the
#: precision's log10 u^2. Backward-stable solves lose at most kappa (normal equations,
#: Newton-Schulz: kappa of the matrix they invert) in the error, kappa^2 in its square; the
#: rest is the dimension factors of rounding sums of 5-20 terms (<= 20 u per entry: 2.6
#: decades in a square) and the error's spread over the entries. The bound is a worst case
#: for any summation order, so it holds whatever kernel sums the products; measured margins
#: are >= 3 decades (the worst: float32 ridge and normal equations).
SLACK_DECADES = 4.0

#: A construction whose floor is its approximation error (too few layers, a leak exp(-gap),
#: LayerNorm's t^2 / scale^2) floors at that error in every precision fine enough to resolve
#: it: two such precisions agree to well within a decade (the rounding on top of the error
#: is u times smaller). A construction whose floor is rounding instead floors, in the finer
#: precision, below the coarser one's u^2 (relative), which no kernel of the coarser one can
#: reach. One of the two must hold for each (finer, coarser) pair.
AGREE_DECADES = 1.0


@dataclass(frozen=True)
class Cell:
    """One subject on one problem: ``family`` "solver" or "construction"."""

    family: str
    name: str
    task: str
    kind: str
    problem: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.name}-{self.kind}"


def problem_kinds() -> list[str]:
    """Every problem kind some task takes (:data:`~precision.solvers.measure.TASK_KINDS`)."""
    return list(dict.fromkeys(k for kinds in TASK_KINDS.values() for k in kinds))


_UNEXPECTED = re.compile(r"unexpected keyword argument '(\w+)'|has no option ([\w, ]+) \(")


def quick_problem(task: str, kind: str) -> dict[str, Any] | None:
    """The :data:`QUICK` problem of ``kind`` for ``task`` (a problem table), each size
    passed only where the generator takes it; None when ``task`` does not take ``kind``."""
    for dim in QUICK["dim"]:
        spec = {**{k: v for k, v in QUICK.items() if k != "dim"}, "dim": dim}
        while True:
            try:
                make_problem(task, {"kind": kind, **spec})
                return {"kind": kind, **spec}
            except SolverError as exc:
                found = _UNEXPECTED.search(str(exc))
                if found is None:
                    break
                names = (found.group(1) or found.group(2)).split(", ")
                if not any(n in spec for n in names) or "dim" in names:
                    break
                for n in names:
                    spec.pop(n, None)
    return None


def cells() -> list[Cell]:
    """Every (subject, problem kind) the registries give, solvers first."""
    out = []
    for family, registry in (("solver", SOLVERS), ("construction", CONSTRUCTIONS)):
        for name in registry.names():
            task = registry[name].task
            for kind in problem_kinds():
                problem = quick_problem(task, kind)
                if problem is not None:
                    out.append(Cell(family, name, task, kind, problem))
    return out


def conditioning(cell: Cell) -> float:
    """The condition number of what the cell's task solves, in float64 without LAPACK: the
    matrix itself for a square input (``inverse``), X^T X for a design (least squares,
    logistic), 1 for a primitive op (no solve)."""
    prob = make_problem(cell.task, cell.problem)
    X = prob if isinstance(prob, np.ndarray) else getattr(prob, "X", None)
    if X is None:
        return 1.0
    H = X if X.shape[0] == X.shape[1] and np.array_equal(X, X.T) else \
        deterministic.matmul(X.T, X)
    ev = np.abs(deterministic.eigvalsh((H + H.T) / 2))
    return float(ev.max() / ev.min())


def _run_solver(name: str, precision: str, problem: dict[str, Any]) -> SolverResult:
    """``run_solver`` with the declared defaults; while the trace is still falling at its
    end, again with ``iters`` doubled (an iterative solver's step count)."""
    spec = SOLVERS[name]
    result = run_solver(name, precision, problem)
    for _ in range(MAX_DOUBLINGS):
        if not (spec.iterative and "iters" in spec.params and result.status == "ok"
                and result.floor is not None and not result.floor.reached):
            break
        result = run_solver(name, precision, problem, {"iters": 2 * (len(result.steps) - 1)})
    return result


def run_cell(cell: Cell) -> dict[str, SolverResult]:
    """The cell's run in each of :data:`PRECISIONS` (store-free). A construction that
    declines the cell's problem raises its :class:`SolverError`."""
    if cell.family == "solver":
        return {p: _run_solver(cell.name, p, cell.problem) for p in PRECISIONS}
    return {p: run_construction(cell.name, p, cell.problem) for p in PRECISIONS}


def truth_scale_log10(results: dict[str, SolverResult]) -> float:
    """log10 of the truth's mean square (what a floor is relative to), from any final step
    with a finite, non-zero error: MSE / relative^2 = ||truth||^2 / entries."""
    for p in PRECISIONS:
        r = results.get(p)
        step = r.final if r is not None else None
        if step is not None and 0 < step.relative < math.inf and math.isfinite(step.log10_mse):
            return step.log10_mse - 2 * math.log10(step.relative)
    return 0.0


def violations(cell: Cell, results: dict[str, SolverResult]) -> list[str]:
    """Every bound the cell breaks, one line each (empty: the cell conforms)."""
    out: list[str] = []
    floors: dict[str, float] = {}
    for p, r in results.items():
        if r.status != "ok" or r.floor is None:
            out.append(f"{cell.id} {p}: status {r.status} ({r.error})")
            continue
        floors[p] = r.floor.log10_level
        found = check_trace([s.log10_mse for s in r.steps], r.floor.log10_level,
                            parse_precision(p))
        if found is not None:
            out.append(f"{cell.id} {p}: {found}")
    for inv in inversions([(p, p, v) for p, v in floors.items()]):
        out.append(f"{cell.id}: finer is worse: {inv}")
    scale = truth_scale_log10(results)
    rel = {p: v - scale for p, v in floors.items()}
    if cell.family == "solver":
        kappa = conditioning(cell)
        for p, v in rel.items():
            r = results[p]
            if r.floor is not None and not r.floor.reached:
                out.append(f"{cell.id} {p}: floor not reached in {len(r.steps) - 1} steps "
                           f"(last 1e{floors[p]:.1f})")
            bound = rounding_log10(parse_precision(p)) + 2 * math.log10(kappa) + SLACK_DECADES
            if v > bound:
                out.append(f"{cell.id} {p}: relative floor 1e{v:.1f} above its rounding "
                           f"bound 1e{bound:.1f} (u^2 kappa^2 10^{SLACK_DECADES:g}, "
                           f"kappa {kappa:.3g})")
        return out
    for fine, coarse in zip(PRECISIONS[1:], PRECISIONS[:-1], strict=True):
        if fine not in rel or coarse not in rel:
            continue
        agree = abs(floors[fine] - floors[coarse]) <= AGREE_DECADES
        below = rel[fine] <= rounding_log10(parse_precision(coarse))
        if not (agree or below):
            out.append(f"{cell.id}: {fine} floors at 1e{floors[fine]:.1f}, neither at "
                       f"{coarse}'s approximation floor 1e{floors[coarse]:.1f} (within "
                       f"{AGREE_DECADES:g} decade) nor below {coarse}'s rounding level "
                       f"(relative 1e{rel[fine]:.1f})")
    return out
