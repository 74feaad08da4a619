"""Solver and construction runs: ``[solvers.*]`` and ``[constructions.*]`` over ``[problems.*]``.

::

    [problems.well]            # a labelled problem: task family + generator arguments
    task = "least_squares"
    kind = "controlled"
    dim = 5
    n_samples = 20
    kappa = 10.0

    [solvers.gd]               # a solver, the problems it runs on, its parameters
    problems = ["well"]
    params = { iters = 600 }
    precisions = ["float32"]   # optional: replaces the suite's list for this solver

Every (subject, problem, seed, precision) is one run; computing it runs the solver (or the
constructed model, layer by layer) and stores its per-step error trace and detected floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from precision.constructions.measure import get_construction, run_construction
from precision.precisions import Precision
from precision.solvers.measure import (
    SolverError,
    get_solver,
    make_problem,
    resolve_params,
    run_solver,
)
from probes.kinds.base import RunKind, SuiteData, entry_precisions
from probes.names import list_length
from probes.run import Run, RunOptions, SuiteError, make_record, new_run, subsample
from probes.store.db import RunRecord
from probes.store.records import SubjectResult

#: 2: the suite name is part of every run's config (and so of its id).
VERSION = 2

#: Subject tables of a suite and the run kind each produces.
SUBJECT_TABLES = {"solvers": "solver", "constructions": "construction"}
_ENTRY_KEYS = {"problems", "params", "precisions"}


def _labels(value: Any, at: str) -> list[str]:
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, str) for v in value):
        raise SuiteError(f"{at}: 'problems' must be a non-empty list of str")
    return value


def grid_size(suite: SuiteData) -> int:
    """Runs the subject tables expand into, counted without expanding them."""
    total = 0
    for table in SUBJECT_TABLES:
        entries = suite.data.get(table)
        for entry in entries.values() if isinstance(entries, dict) else ():
            if isinstance(entry, dict):
                total += (list_length(entry.get("problems"), 1) * len(suite.seeds)
                          * list_length(entry.get("precisions"), len(suite.precisions)))
    return total


@dataclass(frozen=True)
class SubjectEntry:
    """A ``[solvers.<name>]`` or ``[constructions.<name>]`` table, validated: the subject's
    kind and name, its resolved parameters, the problems it runs on (label, task, generator
    arguments) and its precisions."""

    kind: str
    name: str
    params: dict[str, Any]
    problems: tuple[tuple[str, str, dict[str, Any]], ...]
    precisions: tuple[Precision, ...]


def _entry(suite: SuiteData, kind: str, name: str, entry: Any,
           problems: dict[str, Any], generated: set[str]) -> SubjectEntry:
    where, at = suite.where, f"{suite.where} [{kind}s.{name}]"
    if not isinstance(entry, dict):
        raise SuiteError(f"{where}: [{kind}s.{name}] must be a table")
    bad = set(entry) - _ENTRY_KEYS
    if bad:
        raise SuiteError(f"{where}: [{kind}s.{name}] unknown key(s) {sorted(bad)}")
    try:
        spec = get_solver(name) if kind == "solver" else get_construction(name)
        params = resolve_params(spec, entry.get("params", {}))
    except SolverError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    chosen = []
    for label in _labels(entry.get("problems"), at):
        if label not in problems:
            raise SuiteError(f"{where}: solver '{name}' names unknown problem '{label}' "
                             f"(defined: {', '.join(sorted(problems))})")
        if not isinstance(problems[label], dict):
            raise SuiteError(f"{where}: [problems.{label}] must be a table")
        problem = dict(problems[label])
        task = problem.pop("task", None)
        if task != spec.task:
            raise SuiteError(f"{where}: solver '{name}' solves '{spec.task}' problems but "
                             f"problem '{label}' has task '{task}'")
        if label not in generated:  # once per problem: a seed changes values only
            try:
                make_problem(task, {**problem, "seed": suite.seeds[0]})
            except SolverError as exc:
                raise SuiteError(f"{where}: problem '{label}': {exc}") from None
            generated.add(label)
        chosen.append((label, task, problem))
    return SubjectEntry(kind, name, params, tuple(chosen), entry_precisions(entry, suite, at))


def parse(suite: SuiteData) -> tuple[SubjectEntry, ...]:
    """The [solvers.*] and [constructions.*] tables as typed entries (validated, each problem
    generated once)."""
    problems = suite.data.get("problems")
    if not isinstance(problems, dict) or not problems:
        raise SuiteError(f"{suite.where}: needs at least one [problems.<label>] table")
    subjects = []
    for table, kind in SUBJECT_TABLES.items():
        entries = suite.data.get(table, {})
        if not isinstance(entries, dict):
            raise SuiteError(f"{suite.where}: '{table}' must be a table")
        subjects += [(kind, name, entry) for name, entry in entries.items()]
    if not subjects:
        raise SuiteError(f"{suite.where}: needs at least one [solvers.<name>] or "
                         "[constructions.<name>] table")
    generated: set[str] = set()
    return tuple(_entry(suite, kind, name, entry, problems, generated)
                 for kind, name, entry in subjects)


def expand(suite: SuiteData, entries: tuple[SubjectEntry, ...]) -> list[Run]:
    """Every (subject, problem, seed, precision) of ``entries`` as one run."""
    runs: list[Run] = []
    for e in entries:
        for label, task, problem in e.problems:
            for seed in suite.seeds:
                seeded = {**problem, "seed": seed}
                for p in e.precisions:
                    config = {"version": VERSION, "suite": suite.name, "kind": e.kind,
                              "solver": e.name, "task": task, "problem_label": label,
                              "problem": seeded, "params": e.params, "precision": p.name}
                    runs.append(new_run(e.kind, e.name, label, [p], config))
    return runs


def compute(run: Run, options: RunOptions) -> list[RunRecord]:
    """Run the solver (or construction) and store its trace: per-step errors against the
    truth (``log10_mse``, ``digits``, ``param_mse``) and, for a construction, against the
    algorithm it implements, per layer."""
    cfg = run.config
    fn = run_construction if run.kind == "construction" else run_solver
    res = fn(run.subject, run.precision, cfg["problem"], cfg["params"])
    final = res.final
    series: dict[str, list[Any]] = {}
    if res.steps:
        series["log10_mse"] = subsample([s.log10_mse for s in res.steps])
        series["digits"] = subsample([s.digits for s in res.steps])
    if res.param_mse:
        series["param_mse"] = subsample(res.param_mse)
    if res.reference:  # constructions: error against the reference algorithm, per layer
        series["log10_mse_vs_algorithm"] = subsample([s.log10_mse for s in res.reference])
    final_error = {} if final is None else {
        "max_abs": final.max_abs, "relative": final.relative, "digits": final.digits,
        "param_mse": res.param_mse[-1] if res.param_mse else None}
    result = SubjectResult(
        problem_label=run.label, **final_error,
        floor=res.floor.to_dict() if res.floor is not None else None,
        max_log10_mse_vs_algorithm=max(s.log10_mse for s in res.reference)
        if res.reference else None)
    return [make_record(run, status=res.status, error=res.error,
                        mse=final.mse if final else None,
                        log10_mse=final.log10_mse if final else None, floor=res.floor,
                        steps=len(res.steps), wall_time=res.wall_time,
                        result=result.to_json(), series=series)]


def cost(run: Run) -> float:
    """Iterations of the solver (a direct solver: 100)."""
    iters = run.config["params"].get("iters")
    return float(iters) if isinstance(iters, int | float) else 100.0


KIND = RunKind(names=tuple(SUBJECT_TABLES.values()), tables=("problems", *SUBJECT_TABLES),
               version=VERSION, entry=SubjectEntry, parse=parse, expand=expand,
               compute=compute, cost=cost)
