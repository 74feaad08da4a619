"""Trained runs: ``[tasks.*]`` and ``[models.*]`` tables expanded into training jobs.

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
    gradient_error = false       # the training precision's gradient error by module
    time_limit = 600             # optional: seconds one job may take (else "timeout")

Every combination of grid values (model options and ``train`` values alike) x task x seed is
one *job* (:class:`~probes.training.job.Job`): trained once, measured in every evaluation
precision.
Each (job, precision) is one store record whose id is the hash of the job config plus the
precision, so adding a precision later re-trains (deterministically) and writes only the
missing records. Every record carries the job's training curve (``train_log10_loss``), its
held-out validation curve (``val_log10_mse``) with the wall seconds of each point
(``val_seconds``: time-to-floor curves) and the engine's work done there (``val_flops``),
and, for iterated explicit-gradient runs, its precision's iterate trace (``log10_mse``);
``result`` holds the decomposition (log10 of the approximation and rounding MSE), whether
the validation curve reached its plateau (``train_converged``; False = training-limited),
why training stopped (``train_stop``), the engine's work (``engine_flops``) and that of the
convergence checks it ran on the way (``check_flops``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from precision.formats.module_assignment import AssignmentError, check_globs, module_paths
from precision.lengths import LengthError, check_lengths
from precision.metrics import detect_floor
from precision.models import MODELS
from precision.params import Param, ParamError, count
from precision.precisions import Precision
from precision.tasks import TaskError
from probes.factory import FactoryError, is_factory_spec
from probes.kinds.base import DATA_VERSION, RunKind, SuiteData, entry_precisions
from probes.names import axis_length, list_length
from probes.run import (
    Run,
    RunOptions,
    SuiteError,
    check_time_limit,
    make_record,
    new_run,
    status_records,
)
from probes.store.canonical import config_hash
from probes.store.db import RunRecord
from probes.store.records import TrainedResult
from probes.training.checkpoint import Checkpoint, CheckpointError, Paused
from probes.training.job import Job
from probes.training.measure import run_trained
from probes.training.recipe_book import RECIPES as RECIPE_BOOK
from probes.training.train_config import SECOND_ORDER, TrainConfig, TrainConfigError

#: 4: the resolved train table (every suite-settable TrainConfig field) and the model entry's
#: label under ``entry`` (3: the suite name is part of every job's config).
VERSION = 4

_RESERVED = {"family", "tasks", "train", "test_size", "iterate", "gradient_error",
             "precisions", "time_limit",
             "seeds",
             "lengths"}
#: The keys of a model entry that are not family-specific (what a user factory is given).
ENTRY_KEYS = _RESERVED | {"depth", "width"}
#: Type and range of a model entry's evaluation keys.
ENTRY_PARAMS: dict[str, Param] = {"test_size": count(32, hi=100_000),
                                  "iterate": count(0, lo=0, hi=10_000)}
#: Size bounds checked before a model or task is built (a bigger one would exhaust memory).
MAX_DEPTH, MAX_WIDTH, MAX_TASK_DIM, MAX_TASK_TOKENS = 256, 4096, 1024, 65_536
#: depth x width^2 bound: ~12 weights per width^2 per Transformer layer, float64, plus Adam.
MAX_DEPTH_WIDTH2 = 2**24
#: Entries of one training batch or the test set (batch x tokens x max(d_in, width)).
MAX_BATCH_ELEMENTS = 50_000_000


@dataclass(frozen=True)
class TaskEntry:
    """A ``[tasks.<label>]`` table: its label, task name and options."""

    label: str
    task: str
    options: dict[str, Any]


@dataclass(frozen=True)
class ModelEntry:
    """A ``[models.<label>]`` table, validated: the family (a built-in name or a
    ``MODULE:FACTORY`` spec), its tasks, the grid of model options (``depth``, ``width`` and
    the family's own; each a list of values) and of train configs, and how it is measured."""

    label: str
    family: str
    tasks: tuple[TaskEntry, ...]
    options: tuple[tuple[str, tuple[Any, ...]], ...]
    train: tuple[TrainConfig, ...]
    precisions: tuple[Precision, ...]
    test_size: int = 32
    iterate: int = 0
    gradient_error: bool = False
    time_limit: float | None = None
    #: Sequence lengths its trained weights are evaluated at (:mod:`probes.kinds.length`).
    lengths: tuple[int, ...] = ()
    #: The entry's own seeds (None: the suite's).
    seeds: tuple[int, ...] | None = None

    def jobs(self, suite: SuiteData) -> list[Job]:
        """Every (task, option values, train config, seed) of the entry, as jobs."""
        keys = [k for k, _ in self.options]
        jobs = []
        for task in self.tasks:
            for combo in itertools.product(*(values for _, values in self.options)):
                opts = dict(zip(keys, combo, strict=True))
                depth, width = opts.pop("depth"), opts.pop("width")
                for train in self.train:
                    if depth <= 1 and train.start != "fresh":   # nothing shallower to contain
                        train = replace(train, start="fresh")
                    jobs += [Job(family=self.family, task=task.task, depth=depth, width=width,
                                 train=train, seed=seed, task_options=dict(task.options),
                                 model_options=opts, label=self.label,
                                 problem_label=task.label, suite=suite.name,
                                 test_size=self.test_size, iterate=self.iterate,
                                 gradient_error=self.gradient_error)
                             for seed in self.seeds or suite.seeds]
        return jobs


def record_id(job: dict[str, Any], precision: Precision) -> str:
    """Store id of one (job, evaluation precision) record."""
    return config_hash({**job, "precision": precision.name})


def _axes(table: dict[str, Any], where: str) -> list[tuple[str, tuple[Any, ...]]]:
    """``(key, values)`` of a table whose lists are grid axes, keys sorted."""
    axes = [(k, tuple(v) if isinstance(v, list) else (v,)) for k, v in sorted(table.items())]
    for key, values in axes:
        if not values:
            raise SuiteError(f"{where}: grid axis '{key}' is an empty list")
    return axes


def grid_size(suite: SuiteData) -> int:
    """Store rows (jobs x evaluation precisions) of the [models.*] tables, counted without
    expanding them (a grid axis above :data:`~probes.names.MAX_AXIS_VALUES` values is a
    SuiteError)."""
    models = suite.data.get("models")
    total = 0
    for label, entry in models.items() if isinstance(models, dict) else ():
        if not isinstance(entry, dict):
            continue
        at = f"{suite.where} [models.{label}]"
        train = entry.get("train")
        axes = [axis_length(v, k, at) for k, v in entry.items() if k not in _RESERVED]
        if isinstance(train, dict):
            axes += [axis_length(v, f"train.{k}", at) for k, v in train.items()]
        total += (math.prod(axes) * list_length(entry.get("tasks"), 1) * len(suite.seeds)
                  * list_length(entry.get("precisions"), len(suite.precisions))
                  * (1 + list_length(entry.get("lengths"), 0)))   # + a length record each
    return total


def task_entries(suite: SuiteData, labels: Any, at: str) -> tuple[TaskEntry, ...]:
    tasks = suite.data.get("tasks")
    if not isinstance(labels, list) or not labels or not all(isinstance(t, str) for t in labels):
        raise SuiteError(f"{at}: 'tasks' must be a non-empty list of task labels")
    entries = []
    for tl in labels:
        if tl not in tasks:
            raise SuiteError(f"{at}: unknown task label '{tl}' "
                             f"(defined: {', '.join(sorted(tasks))})")
        if not isinstance(tasks[tl], dict):
            raise SuiteError(f"{suite.where}: [tasks.{tl}] must be a table")
        options = dict(tasks[tl])
        name = options.pop("task", tl)
        if not isinstance(name, str):
            raise SuiteError(f"{suite.where}: [tasks.{tl}] task must be a task name")
        _check_task_size(options, f"{suite.where} [tasks.{tl}]")
        entries.append(TaskEntry(tl, name, options))
    return tuple(entries)


def parse_entry(suite: SuiteData, label: str, entry: Any) -> ModelEntry:
    """The ``[models.<label>]`` table as a :class:`ModelEntry` (one SuiteError line if it is
    not valid; the models themselves are built by :func:`expand`)."""
    at = f"{suite.where} [models.{label}]"
    if not isinstance(entry, dict):
        raise SuiteError(f"{at} must be a table")
    family = entry.get("family", label)
    if not isinstance(family, str) or (family not in MODELS and not is_factory_spec(family)):
        raise SuiteError(f"{at}: unknown model family '{family}' "
                         f"(choose from: {', '.join(sorted(MODELS))})")
    tasks = task_entries(suite, entry.get("tasks"), at)
    train = entry.get("train")
    if not isinstance(train, dict):
        raise SuiteError(f"{at}: needs a 'train' table (recipe, steps, batch_size, ...)")
    measured = {}
    for key, param in ENTRY_PARAMS.items():
        try:
            param.check(key, entry.get(key, param.default))
        except ParamError as exc:
            raise SuiteError(f"{at}: {exc}") from None
        measured[key] = entry.get(key, param.default)
    if not isinstance(entry.get("gradient_error", False), bool):
        raise SuiteError(f"{at}: 'gradient_error' must be true or false")
    measured["gradient_error"] = entry.get("gradient_error", False)
    options = _axes({k: v for k, v in entry.items() if k not in _RESERVED}, at)
    for key in ("depth", "width"):
        if key not in dict(options):
            raise SuiteError(f"{at}: needs '{key}' (an integer or a list of integers)")
    for depth, width in itertools.product(dict(options)["depth"], dict(options)["width"]):
        _check_model_size(depth, width, at)
    train_axes = _axes(train, at)
    configs = []
    for combo in itertools.product(*(values for _, values in train_axes)):
        try:
            configs.append(TrainConfig.from_table(
                dict(zip((k for k, _ in train_axes), combo, strict=True))))
        except TrainConfigError as exc:
            raise SuiteError(f"{at}: train {exc}") from None
    lengths: tuple[int, ...] = ()
    if "lengths" in entry:
        try:
            lengths = check_lengths(entry["lengths"])
        except LengthError as exc:
            raise SuiteError(f"{at}: {exc}") from None
    seeds = entry.get("seeds")
    if seeds is not None and (not isinstance(seeds, list) or not seeds or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**32 for v in seeds)):
        raise SuiteError(f"{at}: 'seeds' must be a non-empty list of integers in [0, 2^32)")
    return ModelEntry(label=label, family=family, tasks=tasks, options=tuple(options),
                      seeds=tuple(seeds) if seeds else None,
                      train=tuple(configs), precisions=entry_precisions(entry, suite, at),
                      time_limit=check_time_limit(entry.get("time_limit"), at),
                      lengths=lengths, **measured)


def parse(suite: SuiteData) -> tuple[ModelEntry, ...]:
    """The suite's [models.*] tables as typed entries (validated; SuiteError otherwise)."""
    tasks, models = suite.data.get("tasks"), suite.data.get("models")
    if not isinstance(tasks, dict) or not tasks:
        raise SuiteError(f"{suite.where}: a suite with [models.*] needs at least one "
                         "[tasks.<label>]")
    if not isinstance(models, dict) or not models:
        raise SuiteError(f"{suite.where}: a suite with [tasks.*] needs at least one "
                         "[models.<name>]")
    return tuple(parse_entry(suite, label, entry) for label, entry in models.items())


def expand(suite: SuiteData, entries: tuple[ModelEntry, ...]) -> list[Run]:
    """The jobs of ``entries`` as runs; each job's first seed builds its task and model once
    (an impossible shape or option is a SuiteError before anything is trained)."""
    runs: list[Run] = []
    for entry in entries:
        at = f"{suite.where} [models.{entry.label}]"
        for job in entry.jobs(suite):
            if job.seed == (entry.seeds or suite.seeds)[0]:  # a seed changes values only
                _validate_job(job, at, entry.precisions)
            config = job_config(job)   # with the data version: the record ids hash it
            runs.append(new_run(
                "trained", entry.label, job.problem_label, entry.precisions,
                {**config, "precisions": [p.name for p in entry.precisions]},
                record_ids=tuple(record_id(config, p) for p in entry.precisions), spec=job))
    return runs


def _check_task_size(options: dict[str, Any], where: str) -> None:
    """A task's dim and n within bounds before anything is built (their types and the
    task-specific rules are :func:`precision.tasks.make_task`'s)."""
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


def _validate_job(job: Job, where: str, precisions: Sequence[Precision] = ()) -> None:
    """Impossible shapes and bad options fail here, before anything is trained or stored;
    so does a per-module assignment (``+mod[GLOB]=...``, in ``precisions`` or the training
    dtype) whose glob matches no module of the built model.
    A user factory is not called here, in the driver: its module is built and checked in a
    child process (:func:`probes.factory.check_factories`) and each run builds it in its own
    child (:mod:`probes.isolation`)."""
    try:
        task, model = (job.build_task(), None) if is_factory_spec(job.family) else job.build()
    except (TaskError, FactoryError) as exc:
        raise SuiteError(f"{where}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 -- any option the family rejects is a user error
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise SuiteError(f"{where}: cannot build model '{job.family}' "
                         f"(depth {job.depth}, width {job.width}): {message}") from None
    if model is not None:
        assigned = [p for p in precisions if p.modules]
        if job.train.precision.modules:
            assigned.append(job.train.precision)
        for p in assigned:
            try:
                check_globs(module_paths(model), p, f"model '{job.family}'")
            except AssignmentError as exc:
                raise SuiteError(f"{where}: {p.name}: {exc}") from None
    tokens = task.n_tokens * max(task.d_in, job.width)
    for key, n in (("batch_size", job.train.batch_size), ("test_size", job.test_size)):
        if n * tokens > MAX_BATCH_ELEMENTS:
            raise SuiteError(f"{where}: {key} {n} x {task.n_tokens} tokens x "
                             f"{max(task.d_in, job.width)} channels = {n * tokens:.3g} "
                             f"entries is too large (at most {MAX_BATCH_ELEMENTS:.3g})")


def job_config(job: Job) -> dict[str, Any]:
    """The stored config of ``job`` with its data version: its hash is the job's id, which
    names its weights file and checkpoint; a record's config adds its precision."""
    return {**job.config(VERSION), "data_version": DATA_VERSION}


def compute(run: Run, options: RunOptions) -> list[RunRecord]:
    """Measure the job of ``run`` (trained once: its stored weights when
    ``options.weights_dir`` holds them); one record per evaluation precision."""
    job: Job = run.spec
    config = job_config(job)
    checkpoint = None if options.checkpoint_dir is None else \
        Checkpoint.in_folder(options.checkpoint_dir, config_hash(config), options.pause_at)
    try:
        outcome = run_trained(job, run.precisions, save_as=config, device=options.device,
                              weights_dir=options.weights_dir, checkpoint=checkpoint)
    except Paused:
        return []      # nothing to store yet: the next run of the command goes on
    except CheckpointError as exc:
        return status_records(run, "failed", str(exc))
    tr = outcome.training
    curve = [(s, math.log10(v) if v > 0 else None) for s, v in tr.curve
             if v is not None and math.isfinite(v)]
    val_curve = [(s, math.log10(v) if v > 0 else None) for s, v in tr.val_curve
                 if v is not None and math.isfinite(v)]
    train_floor = None
    # The floor of training is that of the held-out validation curve when there is one (the
    # training loss of a fixed LM batch can fall below what the model does on new data).
    logs = [v for _, v in (val_curve or curve) if v is not None]
    if len(logs) >= 4:
        train_floor = detect_floor([10.0 ** v for v in logs], log10_trace=logs)
    records = []
    for p, out in zip(run.precisions, outcome.per_precision, strict=True):
        floor = out.floor or train_floor
        series: dict[str, list[Any]] = {"train_log10_loss": curve}
        if val_curve:
            series["val_log10_mse"] = val_curve
        if tr.val_times:   # wall seconds since training began, per validation point
            series["val_seconds"] = [(st, round(t, 3)) for (st, _), t
                                     in zip(tr.val_curve, tr.val_times, strict=False)]
        if any(tr.val_flops):   # the engine's FLOPs done, per validation point
            series["val_flops"] = [(st, f) for (st, _), f
                                   in zip(tr.val_curve, tr.val_flops, strict=False)]
        if tr.lr_trace:
            series["lr"] = list(tr.lr_trace)
        if out.iterate_trace:
            series["log10_mse"] = list(enumerate(out.iterate_trace, start=1))
        result = TrainedResult(
            problem_label=run.label, task=outcome.task, approximation=out.log10_approximation,
            rounding=out.log10_rounding, digits=out.digits, n_params=outcome.n_params,
            train_status=tr.status, train_message=tr.message, train_steps_done=tr.steps,
            train_wall_time=tr.wall_time,
            final_train_loss=tr.curve[-1][1] if tr.curve else None,
            floor_source="iterates" if out.floor else
            ("validation curve" if val_curve else "training curve"),
            train_converged=tr.converged, train_stop=tr.stop_reason,
            engine_flops=tr.engine_flops or None, check_flops=tr.check_flops or None,
            check_gain=None if outcome.check is None else outcome.check.gain,
            grad_norm=None if outcome.check is None else outcome.check.grad_norm,
            check_drift=None if outcome.check is None or math.isnan(outcome.check.drift)
            else outcome.check.drift,
            check_curvature=None if outcome.check is None
            or not math.isfinite(outcome.check.curvature) else outcome.check.curvature,
            check_power=None if outcome.check is None
            or not math.isfinite(outcome.check.power) else outcome.check.power,
            refused_floors=tr.refused_floors,
            floor=floor.to_dict() if floor is not None else None,
            weights_error=outcome.weights_error or None, truth_digits=out.truth_digits,
            start=None if tr.start == "fresh" else tr.start,
            gradient_error=outcome.gradient_error,
            recipe_settings=dict(RECIPE_BOOK[job.train.recipe].settings))
        records.append(make_record(
            run, record_id=record_id(config, p), precision=p, status=out.status,
            error=out.error, mse=out.total, log10_mse=out.log10_total, floor=floor,
            steps=tr.steps, wall_time=outcome.wall_time,
            config={**config, "precision": p.name},
            result={**result.to_json(),
                    **({"provenance": {"trained_by": tr.code}} if tr.code else {})},
            series=series))
    if checkpoint is not None:   # the records go to the store next; the state is not needed
        checkpoint.remove()
    return records


def cost(run: Run) -> float:
    """Adam work (steps x batch x depth x width / 32), Levenberg-Marquardt iterations and one
    evaluation per precision."""
    cfg = run.config
    tr = cfg["train"]
    work = tr["steps"] * tr["batch_size"] * cfg["depth"] * (cfg["width"] / 32)
    lm = tr["second_order_steps"] if tr["recipe"] in SECOND_ORDER else 0
    return work + lm * 2e5 + 1e5 * len(run.precisions)


KIND = RunKind(names=("trained",), tables=("tasks", "models"), version=VERSION,
               entry=ModelEntry, parse=parse, expand=expand, compute=compute, cost=cost)
