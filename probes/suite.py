"""Suites are data: load a suite TOML file, validate it, expand it into run configs.

A solver suite (``probes/suites/solvers.toml`` is the shipped example)::

    name = "solvers"
    description = "..."
    precisions = ["float32", "float64", "mp50"]
    seeds = [0]
    time_limit = 600           # optional: seconds a run may take, else stored as "timeout"

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

The run kinds (``probes.kinds``) expand the suite's tables: every (solver, problem, precision,
seed) becomes one run, every model grid point x task x seed one trained job, every study grid
point x seed x precision one study run. A run's resolved config is hashed into its id, so
re-running a suite skips what the store already holds. Validation happens here, before
anything touches the store: any problem is one :class:`SuiteError` line. Every label is a
valid name and the suite stays within its limits (file size, nesting, seeds, values per grid
axis, runs of the whole grid; :mod:`probes.names`), the grid's size counted before anything is
expanded.
"""

from __future__ import annotations

import datetime
import functools
import re
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from precision.devices import DeviceError, resolve_device
from precision.lengths import LengthError, check_lengths
from precision.precisions import PrecisionError, parse_precision, with_casts
from precision.suggest import did_you_mean
from precision.text_numbers import MAX_DIGITS
from probes.factory import is_factory_spec
from probes.kinds import SuiteData, expand_all, grid_size, parse_all, trained
from probes.kinds.subject import SUBJECT_TABLES
from probes.names import (
    MAX_GRID_RUNS,
    MAX_NESTING,
    MAX_SEEDS,
    MAX_SUITE_BYTES,
    check_name,
    shown,
)
from probes.run import Run, SuiteError, check_time_limit

#: A suite name: it names the suite's rows in the store and its report folder.
SUITE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")

_TOP_KEYS = {"name", "description", "precisions", "seeds", "problems", "solvers",
             "constructions", "profiles", "tasks", "models", "studies", "device",
             "time_limit"}
#: Tables whose keys are labels that name stored rows (``probes.names`` checks them).
_LABEL_TABLES = {"problems": "problem label", "solvers": "solver name",
                 "constructions": "construction name", "tasks": "task label",
                 "models": "model label", "studies": "study entry label",
                 "profiles": "profile name"}


#: Expansions of a suite into its runs in this process (each :class:`Suite` expands once).
EXPANSIONS = 0


@dataclass(frozen=True)
class Suite:
    """A parsed, validated suite: its settings (name, file, precisions, seeds, device,
    tables), its typed entries (:class:`~probes.kinds.trained.ModelEntry`,
    :class:`~probes.kinds.study.StudyEntry`, :class:`~probes.kinds.subject.SubjectEntry`)
    and,
    expanded once on first use, its runs."""

    name: str
    description: str
    path: str
    settings: SuiteData
    entries: tuple[Any, ...]
    time_limit: float | None = None

    @functools.cached_property
    def runs(self) -> tuple[Run, ...]:
        """Every run, in a deterministic order, each id once (an impossible model or task is
        a SuiteError here)."""
        global EXPANSIONS
        EXPANSIONS += 1
        seen: set[str] = set()
        unique = []
        for r in expand_all(self.settings, self.entries):
            if r.run_id not in seen:
                seen.add(r.run_id)
                unique.append(r)
        return tuple(unique)

    def time_limits(self) -> dict[str, float]:
        """Seconds each run may take, by run id, where the suite gives a limit: its model
        entry's ``time_limit`` for a trained or length run, else the suite's."""
        entry_limit = {e.label: e.time_limit for e in self.models}
        limits = {}
        for r in self.runs:
            limit = entry_limit.get(r.subject) if r.kind in ("trained", "length") else None
            limit = limit if limit is not None else self.time_limit
            if limit is not None:
                limits[r.run_id] = limit
        return limits

    @property
    def models(self) -> tuple[trained.ModelEntry, ...]:
        """The model entries (``[models.*]``)."""
        return tuple(e for e in self.entries if isinstance(e, trained.ModelEntry))


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
    device: str | None = None,
    casts: str | None = None,
    expand: bool = True,
) -> Suite:
    """Load a shipped suite by name, or a suite file by path, applying ``profile``.

    ``precisions`` replaces every precision list of the suite; ``solvers`` keeps only those
    solver entries; ``device`` replaces the suite's ``device``; ``casts`` gives every
    precision that cast policy (:func:`~precision.precisions.with_casts`; the suite's own
    top-level list when ``precisions`` is not given, which then replaces every list) (the
    command line's ``--precisions`` / ``--solvers`` / ``--device`` / ``--casts``). Everything
    is validated here; with ``expand`` (the default) the runs are expanded too, so an
    impossible model fails here (``expand=False``: the entries only, e.g. for a suite that
    only lends its settings).
    """
    shipped = shipped_suites()
    if name_or_path in shipped:
        path = shipped[name_or_path]
    else:
        path = Path(name_or_path)
        if not path.suffix == ".toml" or not path.is_file():
            raise SuiteError(
                f"unknown suite '{name_or_path}'{did_you_mean(str(name_or_path), shipped)}; "
                f"shipped suites: {', '.join(sorted(shipped))} (or give the path of a .toml "
                "suite file)"
            )
    data = _parse(path)
    data = _apply_profile(data, profile, path)
    data = _apply_overrides(data, solvers, path)
    own = data.get("precisions")
    if casts is not None and not precisions and isinstance(own, list) and \
            all(isinstance(p, str) for p in own):   # (a bad list is reported below)
        precisions = own
    if precisions:  # replaces every precision list of the suite
        try:
            parsed = [parse_precision(p) for p in precisions]
        except PrecisionError as exc:
            raise SuiteError(str(exc)) from None
        data["precisions"] = tuple(parsed if casts is None else
                                   (with_casts(p, casts) for p in parsed))
        data.update({t: {k: {kk: vv for kk, vv in v.items() if kk != "precisions"}
                         if isinstance(v, dict) else v for k, v in data[t].items()}
                     for t in (*SUBJECT_TABLES, "models", "studies")
                     if isinstance(data.get(t), dict)})
    if device is not None:
        data["device"] = device
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SuiteError(f"{path}: 'description' must be a string")
    suite = _typed(suite_name(data.get("name", path.stem), path), description, str(path), data)
    if expand:
        suite.runs  # noqa: B018 -- expanded (and so validated) once, here
    return suite


def suite_name(name: Any, path: Path) -> str:
    """``name`` if it is a valid suite name (letters, digits, ``_ . -``; not ``.`` or ``..``):
    it becomes a folder of the report directory, so it must not be a path."""
    if not isinstance(name, str) or not SUITE_NAME.fullmatch(name) or name in (".", ".."):
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise SuiteError(f"{path}: invalid suite name {shown}: use 1-100 letters, digits, "
                         "'_', '.' or '-' (not '.' or '..'), e.g. name = \"my_suite\"")
    return name


def _parse(path: Path) -> dict[str, Any]:
    """The TOML data of the suite file ``path``: at most :data:`MAX_SUITE_BYTES` bytes, nested
    at most :data:`MAX_NESTING` levels, plain values only (one :class:`SuiteError` line)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SUITE_BYTES + 1)
        if len(raw) > MAX_SUITE_BYTES:
            size = path.stat().st_size
            raise SuiteError(f"suite file {path} is too large: {size:,} bytes (at most "
                             f"{MAX_SUITE_BYTES:,}; a grid is a few lists, not a listing)")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"cannot read suite file {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"malformed suite file {path}: {exc}") from None
    except ValueError:  # a number of more than 4300 digits: Python's int() refuses it
        raise SuiteError(f"malformed suite file {path}: a number in it has more digits than "
                         f"Python reads (a whole number has at most {MAX_DIGITS})") from None
    except RecursionError:  # the parser recurses once per level of a nested value
        raise SuiteError(f"malformed suite file {path}: a value is nested too deeply for the "
                         f"TOML parser (a suite nests at most {MAX_NESTING} levels)") from None
    _check_plain(data, str(path))
    return data


def _check_plain(data: dict[str, Any], where: str) -> None:
    """Suite values are strings, numbers, booleans, lists and tables (no TOML dates), nested
    at most :data:`MAX_NESTING` levels (walked without recursion); a whole number has at most
    :data:`~precision.text_numbers.MAX_DIGITS` digits (the rule of every number read from
    text)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_NESTING:
                raise SuiteError(f"{where}: a value is nested more than {MAX_NESTING} levels "
                                 "deep (tables and lists inside each other)")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
        elif isinstance(value, datetime.date | datetime.time):
            raise SuiteError(f"{where}: dates and times are not suite values (got {value})")
        elif isinstance(value, int) and not isinstance(value, bool) and \
                len(str(abs(value))) > MAX_DIGITS:
            raise SuiteError(f"{where}: a whole number has at most {MAX_DIGITS} digits "
                             f"(got one of {len(str(abs(value)))})")


def _check_labels(data: dict[str, Any], where: str) -> None:
    """Every key of the labelled tables is a valid name (:mod:`probes.names`)."""
    for table, what in _LABEL_TABLES.items():
        entries = data.get(table)
        if isinstance(entries, dict):
            for key in entries:
                check_name(key, what, where)


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
    check_name(profile, "profile name", str(path))
    if profile not in profiles:
        valid = ", ".join(sorted(profiles)) or "none defined"
        raise SuiteError(f"suite {path.stem} has no profile '{profile}'"
                         f"{did_you_mean(profile, profiles)} (profiles: {valid})")
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
        if not isinstance(table, dict) or (not base and "family" not in table):
            raise SuiteError(f"{path}: profile '{profile}' names unknown model entry '{model}' "
                             "(a profile's new entry names its 'family')")
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


def _apply_overrides(data: dict[str, Any], solvers: list[str] | None, path: Path
                     ) -> dict[str, Any]:
    """``--solvers`` keeps only those subjects (solvers or constructions)."""
    data = dict(data)
    tables = {t: data[t] for t in (*SUBJECT_TABLES, "models", "studies")
              if isinstance(data.get(t), dict)}
    if solvers:
        known = sorted(name for table in tables.values() for name in table)
        unknown = [s for s in solvers if s not in known]
        if unknown:
            raise SuiteError(
                f"suite {path.stem} has no solver {', '.join(unknown)}"
                f"{did_you_mean(unknown[0], known)} (its solvers: {', '.join(known)})"
            )
        tables = {t: {k: v for k, v in table.items() if k in solvers}
                  for t, table in tables.items()}
    data.update(tables)
    return data


def _list_of(value: Any, what: str, where: str, kind: type) -> list[Any]:
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        raise SuiteError(f"{where}: '{what}' must be a non-empty list of {kind.__name__}")
    return value


def _typed(name: str, description: str, where: str, data: dict[str, Any]) -> Suite:
    """The suite of the tables ``data``: its settings and typed entries, validated (one
    SuiteError line); the runs are expanded on first use."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    _check_labels(data, where)
    seeds = _list_of(data.get("seeds", [0]), "seeds", where, int)
    if len(seeds) > MAX_SEEDS:
        raise SuiteError(f"{where}: {len(seeds):,} seeds (at most {MAX_SEEDS:,})")
    if not all(0 <= s < 2**32 for s in seeds):
        raise SuiteError(f"{where}: seeds must be integers in [0, 2^32), got {seeds}")
    precisions = data.get("precisions")
    if not isinstance(precisions, tuple):  # a tuple: --precisions, parsed already
        try:
            precisions = tuple(parse_precision(p) for p in
                               _list_of(precisions, "precisions", where, str))
        except PrecisionError as exc:
            raise SuiteError(f"{where}: {exc}") from None
    device = data.get("device", "cpu")
    try:
        resolve_device(device)   # a GPU the machine lacks fails here, before any work
    except DeviceError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    limit = check_time_limit(data.get("time_limit"), where)  # an entry's own one wins
    settings = SuiteData(name, where, data, precisions, tuple(seeds), device)
    size = grid_size(settings)  # arithmetic: nothing is built before the size is known
    if size > MAX_GRID_RUNS:
        raise SuiteError(f"{where}: the grid has {size:,} runs (runs x evaluation precisions; "
                         f"at most {MAX_GRID_RUNS:,}): use fewer seeds, precisions or grid "
                         "values, or split the suite")
    return Suite(name, description, where, settings, parse_all(settings), limit)


def suite_for_factory(base: Suite, factory: str, tasks: list[str] | None = None,
                      label: str | None = None, depths: list[int] | None = None,
                      widths: list[int] | None = None) -> Suite:
    """The suite ``base`` with its entries replaced by one model entry for the user's
    ``factory``.

    The factory gets the grid (depth, width), training, test size and iterations of the
    suite's *first* model entry (not its family-specific options: heads, layernorm, ...) and
    runs every task of the suite's model entries (or only ``tasks``). Its label (the model
    name of its rows) is ``label``, by default the factory's name (``FACTORY`` of
    ``MODULE:FACTORY``), so its rows sit beside the built-in families in the store and
    report. A label that is already an entry of ``base`` (a model, solver, construction or
    study) is refused: the rows of both would read as one model. ``depths`` / ``widths``
    replace the grid's depths / widths (``probe --depths 1,2 --widths 32``).
    """
    if not base.models:
        raise SuiteError(f"suite {base.name} has no [models.*] to probe a factory with")
    first = base.models[0]
    chosen = list({t.label: t for e in base.models for t in e.tasks}.values())
    if tasks:
        defined = base.settings.data.get("tasks", {})
        unknown = [t for t in tasks if t not in defined]
        if unknown:
            raise SuiteError(f"suite {base.name} has no task {', '.join(unknown)} "
                             f"(its tasks: {', '.join(sorted(defined))})")
        chosen = [t for t in chosen if t.label in tasks] or \
            list(trained.task_entries(base.settings, list(tasks), base.path))
    if not is_factory_spec(factory):
        raise SuiteError(f"factory {shown(factory)} must be MODULE:FACTORY or "
                         "path/to/file.py:FACTORY")
    name = factory.rpartition(":")[2] if label is None else label
    what = "--label" if label is not None else f"probe label (from factory {shown(factory)})"
    check_name(name, what)
    entries = [t for t in ("models", *SUBJECT_TABLES, "studies")
               if isinstance(base.settings.data.get(t), dict) and name in base.settings.data[t]]
    if entries:
        raise SuiteError(f"factory '{factory}' would be stored as model '{name}', which is "
                         f"already the entry [{entries[0]}.{name}] of suite {base.name}: "
                         "their rows would read as one model; name the probe with --label")
    grid = {"depth": depths, "width": widths}
    tops = {"depth": trained.MAX_DEPTH, "width": trained.MAX_WIDTH}
    for key, values in grid.items():
        if values is not None and not (values and all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= tops[key]
                for v in values)):
            raise SuiteError(f"--{key}s must be whole numbers in [1, {tops[key]}], not "
                             f"{values!r:.60}")
    options = tuple((k, tuple(grid[k]) if grid[k] is not None else v)
                    for k, v in first.options if k in ("depth", "width"))
    entry = replace(first, label=name, family=factory, tasks=tuple(chosen), options=options)
    return replace(base, entries=(entry,))


def suite_with_lengths(suite: Suite, lengths: list[int] | None) -> Suite:
    """``suite`` with every model entry's ``lengths`` replaced by ``lengths`` (``--lengths``;
    None: the suite as it is): each job is also evaluated at those sequence lengths
    (:mod:`probes.kinds.length`). A suite without model entries is a SuiteError."""
    if lengths is None:
        return suite
    if not suite.models:
        raise SuiteError(f"--lengths: suite {suite.name} has no [models.*] whose trained "
                         "weights could be evaluated at other lengths")
    try:
        chosen = check_lengths(lengths)
    except LengthError as exc:
        raise SuiteError(f"--lengths: {exc}") from None
    entries = tuple(replace(e, lengths=chosen) if isinstance(e, trained.ModelEntry) else e
                    for e in suite.entries)
    return replace(suite, entries=entries)
