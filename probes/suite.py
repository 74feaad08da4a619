"""Suites are data: load a suite TOML file, validate it, expand it into run configs.

A solver suite (``probes/suites/solvers.toml`` is the shipped example)::

    name = "solvers"
    description = "..."
    precisions = ["float32", "float64", "mp50"]
    seeds = [0]

    [problems.well]            # a labelled problem: task family + generator arguments
    task = "least_squares"
    kind = "controlled"
    dim = 5
    n_samples = 20
    kappa = 10.0

    [solvers.gd]               # a solver, the problems it runs on, its parameters
    problems = ["well"]
    params = { iters = 600 }
    precisions = ["float32"]   # optional: overrides the suite's list for this solver

    [profiles.quick]           # optional: a budget profile overriding top-level keys
    precisions = ["float32", "mp30"]

Every (solver, problem, precision, seed) becomes one run; its resolved config is hashed into
the run id, so re-running a suite skips what the store already holds. Validation happens here,
before anything touches the store: any problem is one :class:`SuiteError` line.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from precision.constructions.registry import get_construction
from precision.precisions import PrecisionError, parse_precision
from precision.solvers.registry import SolverError, get_solver, make_problem, resolve_params
from probes.model_suite import expand_models
from probes.run_config import RunConfig, SuiteError
from probes.study_suite import expand_studies
from results.store import config_hash

#: Bump when the meaning of a run config changes (so old results are not reused).
#: 2: the suite name is part of every run's config (and so of its id).
CONFIG_VERSION = 2

#: A suite name: it names the suite's rows in the store and its report folder.
SUITE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")

_TOP_KEYS = {"name", "description", "precisions", "seeds", "problems", "solvers",
             "constructions", "profiles", "tasks", "models", "studies"}
#: Subject tables of a suite and the run kind each produces.
_SUBJECT_TABLES = {"solvers": "solver", "constructions": "construction"}
_PROBLEM_META = {"task"}
_SOLVER_KEYS = {"problems", "params", "precisions"}


@dataclass(frozen=True)
class Suite:
    """A parsed, validated suite."""

    name: str
    description: str
    path: str
    data: dict[str, Any]


def shipped_suites() -> dict[str, Path]:
    """Names and paths of the suites shipped in ``probes/suites``."""
    root = resources.files("probes") / "suites"
    return {
        Path(str(p)).stem: Path(str(p)) for p in root.iterdir() if str(p).endswith(".toml")
    }


def load_suite(
    name_or_path: str,
    profile: str | None = None,
    *,
    precisions: list[str] | None = None,
    solvers: list[str] | None = None,
) -> Suite:
    """Load a shipped suite by name, or a suite file by path, applying ``profile``.

    ``precisions`` replaces every precision list of the suite; ``solvers`` keeps only those
    solver entries (both are the command line's ``--precisions`` / ``--solvers``).
    """
    shipped = shipped_suites()
    if name_or_path in shipped:
        path = shipped[name_or_path]
    else:
        path = Path(name_or_path)
        if not path.suffix == ".toml" or not path.is_file():
            raise SuiteError(
                f"unknown suite '{name_or_path}'; shipped suites: {', '.join(sorted(shipped))} "
                "(or give the path of a .toml suite file)"
            )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"malformed suite file {path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"cannot read suite file {path}: {exc}") from None
    _check_plain(data, str(path))
    data = _apply_profile(data, profile, path)
    data = _apply_overrides(data, precisions, solvers, path)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SuiteError(f"{path}: 'description' must be a string")
    suite = Suite(
        name=suite_name(data.get("name", path.stem), path),
        description=description,
        path=str(path),
        data=data,
    )
    expand(suite)  # validates everything up front
    return suite


def suite_name(name: Any, path: Path) -> str:
    """``name`` if it is a valid suite name (letters, digits, ``_ . -``; not ``.`` or ``..``):
    it becomes a folder of the report directory, so it must not be a path."""
    if not isinstance(name, str) or not SUITE_NAME.fullmatch(name) or name in (".", ".."):
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise SuiteError(f"{path}: invalid suite name {shown}: use 1-100 letters, digits, "
                         "'_', '.' or '-' (not '.' or '..'), e.g. name = \"my_suite\"")
    return name


def _check_plain(value: Any, where: str) -> None:
    """Suite values are strings, numbers, booleans, lists and tables (no TOML dates)."""
    if isinstance(value, dict):
        for v in value.values():
            _check_plain(v, where)
    elif isinstance(value, list):
        for v in value:
            _check_plain(v, where)
    elif isinstance(value, datetime.date | datetime.time):
        raise SuiteError(f"{where}: dates and times are not suite values (got {value})")


def _table(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SuiteError(f"{what} must be a table")
    return value


def _apply_profile(data: dict[str, Any], profile: str | None, path: Path) -> dict[str, Any]:
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise SuiteError(f"{path}: 'profiles' must be a table")
    if profile is None:
        return data
    if profile not in profiles:
        valid = ", ".join(sorted(profiles)) or "none defined"
        raise SuiteError(f"suite {path.stem} has no profile '{profile}' (profiles: {valid})")
    override = _table(profiles[profile], f"{path}: profile '{profile}'")
    bad = set(override) - {"precisions", "seeds", "solvers", "models", "studies"}
    if bad:
        raise SuiteError(f"{path}: profile '{profile}' cannot override {', '.join(sorted(bad))}")
    merged = {k: v for k, v in data.items()}
    for key in ("precisions", "seeds"):
        if key in override:
            merged[key] = override[key]
    for key in ("solvers", "models", "studies"):
        _table(override.get(key, {}), f"{path}: profile '{profile}' {key}")
        _table(merged.get(key, {}), f"{path}: '{key}'")
    for solver, table in override.get("solvers", {}).items():
        at = f"{path}: profile '{profile}' solver '{solver}'"
        base = dict(_table(merged.get("solvers", {}).get(solver, {}), at))
        if not base:
            raise SuiteError(f"{path}: profile '{profile}' names unknown solver entry '{solver}'")
        table = _table(table, at)
        if "params" in table:
            base["params"] = {**_table(base.get("params", {}), f"{at}: params"),
                              **_table(table["params"], f"{at}: params")}
        for k in ("problems", "precisions"):
            if k in table:
                base[k] = table[k]
        merged["solvers"] = {**merged["solvers"], solver: base}
    for model, table in override.get("models", {}).items():
        base = dict(_table(merged.get("models", {}).get(model, {}),
                           f"{path}: [models.{model}]"))
        if not base or not isinstance(table, dict):
            raise SuiteError(f"{path}: profile '{profile}' names unknown model entry '{model}'")
        for k, v in table.items():
            base[k] = {**_table(base.get(k, {}), f"{path}: [models.{model}] train"), **v} \
                if k == "train" and isinstance(v, dict) else v
        merged["models"] = {**merged["models"], model: base}
    for entry, table in override.get("studies", {}).items():
        base = dict(_table(merged.get("studies", {}).get(entry, {}),
                           f"{path}: [studies.{entry}]"))
        if not base or not isinstance(table, dict):
            raise SuiteError(f"{path}: profile '{profile}' names unknown study entry '{entry}'")
        merged["studies"] = {**merged["studies"], entry: {**base, **table}}
    return merged


def _apply_overrides(
    data: dict[str, Any], precisions: list[str] | None, solvers: list[str] | None, path: Path
) -> dict[str, Any]:
    """``--solvers`` keeps only those subjects (solvers or constructions); ``--precisions``
    replaces every precision list."""
    data = dict(data)
    tables = {t: data[t] for t in (*_SUBJECT_TABLES, "models", "studies")
              if isinstance(data.get(t), dict)}
    if solvers:
        known = sorted(name for table in tables.values() for name in table)
        unknown = [s for s in solvers if s not in known]
        if unknown:
            raise SuiteError(
                f"suite {path.stem} has no solver {', '.join(unknown)} "
                f"(its solvers: {', '.join(known)})"
            )
        tables = {t: {k: v for k, v in table.items() if k in solvers}
                  for t, table in tables.items()}
    if precisions:
        try:
            precisions = [parse_precision(p).name for p in precisions]
        except PrecisionError as exc:
            raise SuiteError(str(exc)) from None
        data["precisions"] = precisions
        tables = {t: {k: {kk: vv for kk, vv in v.items() if kk != "precisions"}
                      if isinstance(v, dict) else v for k, v in table.items()}
                  for t, table in tables.items()}
    data.update(tables)
    return data


def _list_of(value: Any, what: str, where: str, kind: type) -> list[Any]:
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        raise SuiteError(f"{where}: '{what}' must be a non-empty list of {kind.__name__}")
    return value


def expand(suite: Suite) -> list[RunConfig]:
    """All runs of ``suite`` in a deterministic order; raises :class:`SuiteError` if invalid."""
    data, where = suite.data, suite.path
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    precisions = _list_of(data.get("precisions"), "precisions", where, str)
    seeds = _list_of(data.get("seeds", [0]), "seeds", where, int)
    if not all(0 <= s < 2**32 for s in seeds):
        raise SuiteError(f"{where}: seeds must be integers in [0, 2^32), got {seeds}")
    try:
        for p in precisions:
            parse_precision(p)
    except PrecisionError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    runs: list[RunConfig] = []
    if "models" in data or "tasks" in data:
        runs += expand_models(suite.name, data, precisions, seeds, where)
    if "studies" in data:
        runs += expand_studies(suite.name, data, precisions, seeds, where)
    if any(k in data for k in ("problems", *_SUBJECT_TABLES)) or not runs:
        runs += _expand_subjects(suite, precisions, seeds)
    seen: set[str] = set()
    unique = []
    for r in runs:
        if r.run_id not in seen:
            seen.add(r.run_id)
            unique.append(r)
    return unique


def _expand_subjects(suite: Suite, precisions: list[str], seeds: list[int]) -> list[RunConfig]:
    """Runs of the [solvers.*] and [constructions.*] tables over [problems.*]."""
    data, where = suite.data, suite.path
    problems = data.get("problems")
    if not isinstance(problems, dict) or not problems:
        raise SuiteError(f"{where}: needs at least one [problems.<label>] table")
    subjects = []
    for table, kind in _SUBJECT_TABLES.items():
        entries = data.get(table, {})
        if not isinstance(entries, dict):
            raise SuiteError(f"{where}: '{table}' must be a table")
        subjects += [(kind, name, entry) for name, entry in entries.items()]
    if not subjects:
        raise SuiteError(f"{where}: needs at least one [solvers.<name>] or "
                         "[constructions.<name>] table")
    runs: list[RunConfig] = []
    for kind, solver_name, entry in subjects:
        if not isinstance(entry, dict):
            raise SuiteError(f"{where}: [{kind}s.{solver_name}] must be a table")
        bad = set(entry) - _SOLVER_KEYS
        if bad:
            raise SuiteError(f"{where}: [{kind}s.{solver_name}] unknown key(s) {sorted(bad)}")
        try:
            spec = get_solver(solver_name) if kind == "solver" else \
                get_construction(solver_name)
            params = resolve_params(spec, entry.get("params", {}))
        except SolverError as exc:
            raise SuiteError(f"{where}: {exc}") from None
        at = f"{where} [{kind}s.{solver_name}]"
        labels = _list_of(entry.get("problems"), "problems", at, str)
        precs = _list_of(entry.get("precisions", precisions), "precisions", at, str)
        for label in labels:
            if label not in problems:
                raise SuiteError(
                    f"{where}: solver '{solver_name}' names unknown problem '{label}' "
                    f"(defined: {', '.join(sorted(problems))})"
                )
            if not isinstance(problems[label], dict):
                raise SuiteError(f"{where}: [problems.{label}] must be a table")
            prob = dict(problems[label])
            task = prob.pop("task", None)
            if task != spec.task:
                raise SuiteError(
                    f"{where}: solver '{solver_name}' solves '{spec.task}' problems but "
                    f"problem '{label}' has task '{task}'"
                )
            for seed in seeds:
                prob_seeded = {**prob, "seed": seed}
                try:
                    make_problem(task, prob_seeded)
                except SolverError as exc:
                    raise SuiteError(f"{where}: problem '{label}': {exc}") from None
                for prec_text in precs:
                    try:
                        prec = parse_precision(prec_text).name
                    except PrecisionError as exc:
                        raise SuiteError(f"{where}: {exc}") from None
                    config = {
                        "version": CONFIG_VERSION,
                        "suite": suite.name,
                        "kind": kind,
                        "solver": solver_name,
                        "task": task,
                        "problem_label": label,
                        "problem": prob_seeded,
                        "params": params,
                        "precision": prec,
                    }
                    runs.append(RunConfig(
                        run_id=config_hash(config), suite=suite.name, solver=solver_name,
                        problem_label=label, precision=prec, config=config,
                    ))
    return runs
