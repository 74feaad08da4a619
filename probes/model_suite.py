"""Trained-model suites: ``[tasks.*]`` and ``[models.*]`` tables expanded into training jobs.

::

    precisions = ["float32", "float64", "mp50"]   # evaluation precisions
    seeds = [0]

    [tasks.multiply]             # a labelled task instance: task name + its options
    task = "multiply"
    dim = 20
    n = 40

    [models.transformer]         # a model entry: family, tasks, grid axes, training
    family = "transformer"
    tasks = ["multiply"]
    depth = [1, 2]               # a list is a grid axis; a scalar a fixed option
    width = [64]
    layernorm = [true, false]
    heads = 1
    train = { recipe = "paper", steps = 2000, batch_size = 64, dtype = ["float32", "float64"] }
    test_size = 32               # sequences in the fixed seeded test set
    iterate = 0                  # explicit_gradient: iterations of w <- w - eta model(...)

Every combination of grid values (model options and ``train`` values alike) x task x seed is
one *job*: trained once, measured in every evaluation precision. Each (job, precision) is one
store record whose id is the hash of the job config plus the precision, so adding a precision
later re-trains (deterministically) and writes only the missing records.
"""

from __future__ import annotations

import itertools
from typing import Any

from precision.models import MODELS
from precision.params import Param, ParamError, count, positive
from precision.precisions import PrecisionError, parse_precision
from probes.factory import FactoryError, is_factory_spec
from probes.job import build_job
from probes.run_config import RunConfig, SuiteError
from probes.tasks import TaskError
from probes.training import RECIPES, UNTIL
from results.store import config_hash

#: Bump when the meaning of a trained job config changes (3: the suite name is part of it).
MODEL_CONFIG_VERSION = 3

_RESERVED = {"family", "tasks", "train", "test_size", "iterate", "precisions"}
_TRAIN_KEYS = {"recipe", "steps", "batch_size", "lr", "dtype", "step_size", "gamma",
               "second_order_steps", "second_order_batch", "curve_points", "time_limit",
               "warmup", "clip", "until", "validation_size", "validation_points"}
TRAIN_DTYPES = ("float32", "float64", "bfloat16")
#: Type and range of the numeric ``train`` keys (recipe and dtype are names, checked apart).
TRAIN_PARAMS: dict[str, Param] = {
    "steps": count(None, lo=0, hi=100_000_000), "batch_size": count(None, hi=65_536),
    "lr": positive(None), "step_size": count(None, hi=1_000_000_000),
    "gamma": Param(None, gt=0.0, hi=1.0), "second_order_steps": count(None, lo=0),
    "second_order_batch": count(None), "curve_points": count(None),
    "time_limit": positive(None), "warmup": count(None, lo=0, hi=100_000_000),
    "clip": Param(None, lo=0.0),
    "validation_size": count(None, lo=0, hi=65_536), "validation_points": count(None),
}
#: Type and range of a model entry's evaluation keys.
ENTRY_PARAMS: dict[str, Param] = {"test_size": count(32, hi=100_000),
                                  "iterate": count(0, lo=0, hi=10_000)}
#: Size bounds checked before a model or task is built (a bigger one would exhaust memory).
MAX_DEPTH, MAX_WIDTH, MAX_TASK_DIM, MAX_TASK_TOKENS = 256, 4096, 1024, 65_536
#: depth x width^2 bound: ~12 weights per width^2 per Transformer layer, float64, plus Adam.
MAX_DEPTH_WIDTH2 = 2**24
#: Entries of one training batch or the test set (batch x tokens x max(d_in, width)).
MAX_BATCH_ELEMENTS = 50_000_000


def record_id(job: dict[str, Any], precision: str) -> str:
    """Store id of one (job, evaluation precision) record."""
    return config_hash({**job, "precision": precision})


def _axes(table: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    keys = sorted(table)
    return keys, [v if isinstance(v, list) else [v] for v in (table[k] for k in keys)]


def _check_train(train: dict[str, Any], where: str) -> None:
    bad = set(train) - _TRAIN_KEYS
    if bad:
        raise SuiteError(f"{where}: unknown train key(s) {', '.join(sorted(bad))} "
                         f"(known: {', '.join(sorted(_TRAIN_KEYS))})")
    for key in ("recipe", "steps", "batch_size"):
        if key not in train:
            raise SuiteError(f"{where}: train needs '{key}'")
    if not isinstance(train["recipe"], str) or train["recipe"] not in RECIPES:
        raise SuiteError(f"{where}: unknown recipe '{train['recipe']}' "
                         f"(choose from: {', '.join(RECIPES)})")
    if not isinstance(train.get("dtype", "float32"), str) or \
            train.get("dtype", "float32") not in TRAIN_DTYPES:
        raise SuiteError(f"{where}: training dtype must be one of {', '.join(TRAIN_DTYPES)}, "
                         f"not '{train.get('dtype')}'")
    if not isinstance(train.get("until", "steps"), str) or \
            train.get("until", "steps") not in UNTIL:
        raise SuiteError(f"{where}: train until must be one of {', '.join(UNTIL)}, "
                         f"not '{train.get('until')}'")
    for key, param in TRAIN_PARAMS.items():
        if key in train:
            try:
                param.check(key, train[key])
            except ParamError as exc:
                raise SuiteError(f"{where}: train {exc}") from None


def expand_models(suite_name: str, data: dict[str, Any], precisions: list[str],
                  seeds: list[int], where: str) -> list[RunConfig]:
    """Jobs of the suite's [models.*] tables, validated (one :class:`SuiteError` line)."""
    tasks = data.get("tasks")
    models = data.get("models")
    if not isinstance(tasks, dict) or not tasks:
        raise SuiteError(f"{where}: a suite with [models.*] needs at least one [tasks.<label>]")
    if not isinstance(models, dict) or not models:
        raise SuiteError(f"{where}: a suite with [tasks.*] needs at least one [models.<name>]")
    runs: list[RunConfig] = []
    for label, entry in models.items():
        at = f"{where} [models.{label}]"
        if not isinstance(entry, dict):
            raise SuiteError(f"{at} must be a table")
        family = entry.get("family", label)
        if not isinstance(family, str) or (family not in MODELS and not is_factory_spec(family)):
            raise SuiteError(f"{at}: unknown model family '{family}' "
                             f"(choose from: {', '.join(sorted(MODELS))})")
        task_labels = entry.get("tasks")
        if not isinstance(task_labels, list) or not task_labels or \
                not all(isinstance(t, str) for t in task_labels):
            raise SuiteError(f"{at}: 'tasks' must be a non-empty list of task labels")
        train = entry.get("train")
        if not isinstance(train, dict):
            raise SuiteError(f"{at}: needs a 'train' table (recipe, steps, batch_size, ...)")
        precs = entry.get("precisions", precisions)
        if not isinstance(precs, list) or not precs or not all(isinstance(p, str) for p in precs):
            raise SuiteError(f"{at}: 'precisions' must be a non-empty list of precision names")
        try:
            precs = [parse_precision(p).name for p in precs]
        except PrecisionError as exc:
            raise SuiteError(f"{at}: {exc}") from None
        entry_params = {}
        for key, param in ENTRY_PARAMS.items():
            try:
                param.check(key, entry.get(key, param.default))
            except ParamError as exc:
                raise SuiteError(f"{at}: {exc}") from None
            entry_params[key] = entry.get(key, param.default)
        options = {k: v for k, v in entry.items() if k not in _RESERVED}
        for key in ("depth", "width"):
            if key not in options:
                raise SuiteError(f"{at}: needs '{key}' (an integer or a list of integers)")
        okeys, ovals = _axes(options)
        tkeys, tvals = _axes(train)
        for key, values in (*zip(okeys, ovals, strict=True), *zip(tkeys, tvals, strict=True)):
            if not values:
                raise SuiteError(f"{at}: grid axis '{key}' is an empty list")
        for tl in task_labels:
            if tl not in tasks:
                raise SuiteError(f"{at}: unknown task label '{tl}' "
                                 f"(defined: {', '.join(sorted(tasks))})")
            if not isinstance(tasks[tl], dict):
                raise SuiteError(f"{where}: [tasks.{tl}] must be a table")
            topts = dict(tasks[tl])
            task_name = topts.pop("task", tl)
            if not isinstance(task_name, str):
                raise SuiteError(f"{where}: [tasks.{tl}] task must be a task name")
            _check_task_size(topts, f"{where} [tasks.{tl}]")
            for combo in itertools.product(*ovals):
                opts = dict(zip(okeys, combo, strict=True))
                depth, width = opts.pop("depth"), opts.pop("width")
                _check_model_size(depth, width, at)
                for tcombo in itertools.product(*tvals):
                    tr = dict(zip(tkeys, tcombo, strict=True))
                    _check_train(tr, at)
                    for seed in seeds:
                        job = {
                            "version": MODEL_CONFIG_VERSION, "kind": "trained",
                            "solver": label, "family": family, "task": task_name,
                            "problem_label": tl, "task_options": topts,
                            "model_options": opts, "depth": depth, "width": width,
                            **({"layernorm": opts["layernorm"]} if "layernorm" in opts
                               else {}),
                            "train": tr,
                            "train_steps": tr["steps"], "seed": seed,
                            "suite": suite_name, **entry_params,
                        }
                        _validate_job(job, at)
                        runs.append(RunConfig(
                            run_id=config_hash(job), suite=suite_name, solver=label,
                            problem_label=tl, precision=",".join(precs),
                            config={**job, "precisions": precs},
                            record_ids=tuple(record_id(job, p) for p in precs)))
    return runs


def _check_task_size(options: dict[str, Any], where: str) -> None:
    """A task's dim and n within bounds before anything is built (their types and the
    task-specific rules are :func:`probes.tasks.make_task`'s)."""
    for key, top in (("dim", MAX_TASK_DIM), ("n", MAX_TASK_TOKENS)):
        v = options.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > top:
            raise SuiteError(f"{where}: {key} = {v} is too large (at most {top})")


def _check_model_size(depth: Any, width: Any, where: str) -> None:
    """depth and width: positive integers within bounds (a model too large to build is a
    SuiteError before anything is built)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
               for v in (depth, width)):
        raise SuiteError(f"{where}: depth and width must be positive integers, "
                         f"got depth {depth!r}, width {width!r}")
    if depth > MAX_DEPTH or width > MAX_WIDTH or depth * width * width > MAX_DEPTH_WIDTH2:
        raise SuiteError(f"{where}: model too large: depth {depth}, width {width} (at most "
                         f"depth {MAX_DEPTH}, width {MAX_WIDTH}, depth x width^2 "
                         f"{MAX_DEPTH_WIDTH2})")


def _validate_job(job: dict[str, Any], where: str) -> None:
    """Impossible shapes, bad options and broken factories fail here, before anything is
    trained or stored."""

    try:
        task, _model = build_job({**job, "seed": job["seed"]})
    except (TaskError, FactoryError) as exc:
        raise SuiteError(f"{where}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 -- any option the family rejects is a user error
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise SuiteError(f"{where}: cannot build model '{job['family']}' "
                         f"(depth {job['depth']}, width {job['width']}): {message}") from None
    tokens = task.n_tokens * max(task.d_in, job["width"])
    for key in ("batch_size", "test_size"):
        n = job["train"][key] if key == "batch_size" else job[key]
        if n * tokens > MAX_BATCH_ELEMENTS:
            raise SuiteError(f"{where}: {key} {n} x {task.n_tokens} tokens x "
                             f"{max(task.d_in, job['width'])} channels = {n * tokens:.3g} "
                             f"entries is too large (at most {MAX_BATCH_ELEMENTS:.3g})")


def suite_for_factory(base: Any, factory: str, tasks: list[str] | None = None) -> Any:
    """The suite ``base`` with its models replaced by the user's ``factory``.

    The factory gets the grid (depth, width), training, test size and iterations of the
    suite's *first* model entry (not its family-specific options: heads, layernorm, ...) and
    runs every task of the suite's model entries (or only ``tasks``). Its label is the
    factory's name, so its rows sit beside the built-in families in the store and report.
    """
    from probes.suite import Suite, expand

    data = dict(base.data)
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise SuiteError(f"suite {base.name} has no [models.*] to probe a factory with")
    first = next(iter(models.values()))
    entry = {k: v for k, v in first.items() if k in _RESERVED | {"depth", "width"}}
    names = [t for e in models.values() for t in e.get("tasks", [])]
    all_tasks = list(dict.fromkeys(names))
    if tasks:
        unknown = [t for t in tasks if t not in data.get("tasks", {})]
        if unknown:
            raise SuiteError(f"suite {base.name} has no task {', '.join(unknown)} "
                             f"(its tasks: {', '.join(sorted(data.get('tasks', {})))})")
        all_tasks = [t for t in all_tasks if t in tasks] or list(tasks)
    entry.update(family=factory, tasks=all_tasks)
    data["models"] = {factory.rpartition(":")[2]: entry}
    for key in ("problems", "solvers", "constructions", "studies"):
        data.pop(key, None)
    suite = Suite(name=base.name, description=base.description, path=base.path, data=data)
    expand(suite)
    return suite
