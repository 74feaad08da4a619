"""The typed schema of a store record's ``config`` and ``result``, per run kind: the contract
between the writer (``probes``: each kind's ``compute``) and the readers (``reports``, the
claims check, notebooks), so neither side spells the other's keys.

=====================  ======================  ======================
kind                   config                  result
=====================  ======================  ======================
trained                :class:`TrainedConfig`  :class:`TrainedResult`
solver, construction   :class:`SubjectConfig`  :class:`SubjectResult`
study                  :class:`StudyConfig`    :class:`StudyResult`
length                 :class:`LengthConfig`   :class:`LengthResult`
localize               :class:`LocalizeConfig` :class:`LocalizeResult`
=====================  ======================  ======================

A writer builds a result value and stores its ``to_json()``; the store writes it as canonical
JSON (NaN and infinities become the strings "nan" / "inf" / "-inf"). A reader takes
:func:`config_of` / :func:`result_of` of a stored row (a dict as ``Store.runs`` returns it) and
reads attributes. Reading is lenient, so every store since data version 1 reads: a key a
record lacks (an older version, a hand-written row) is the field's default, a key the schema
does not name is ignored (a study's extra result keys are kept in ``info``). Only what the
reports and claims read is typed here; a record may hold more.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

#: The data version of a stored row whose config has no ``data_version`` (before it was
#: recorded).
UNRECORDED_VERSION = 1

#: Columns of the ``runs`` table a claim may take as its metric (besides ``result.<name>``).
METRIC_COLUMNS = ("floor_log10", "log10_mse", "mse", "rate", "conv_order", "steps")

_T = TypeVar("_T")
_C = TypeVar("_C", bound="RecordConfig")
_R = TypeVar("_R", bound="RecordResult")


def stored_float(x: Any) -> float | None:
    """A number read back from the store: numbers as they are, the JSON strings "-inf" /
    "inf" as infinities (an exact zero is log10 -inf), NaN and anything else None."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _known(cls: type[_T], data: Any, **parsed: Any) -> _T:
    """``cls`` from the keys of ``data`` that are its fields (``parsed`` replaces some)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: v for k, v in data.items() if k in names} if isinstance(data, Mapping) else {}
    return cls(**{**given, **parsed})


@dataclass(frozen=True, kw_only=True)
class RecordConfig:
    """What every kind's config holds: it is hashed into the run id (:mod:`probes.store.canonical`).

    ``version``: the kind's config version; ``data_version``: the version of the problem
    generators the run was computed on (:data:`UNRECORDED_VERSION` when absent)."""

    version: int = 0
    kind: str = ""
    suite: str = ""
    precision: str = ""
    data_version: int = UNRECORDED_VERSION

    @classmethod
    def from_json(cls: type[_C], data: Any) -> _C:
        """The config of a stored ``config`` dict (lenient, see the module docstring)."""
        version = data.get("data_version") if isinstance(data, Mapping) else None
        ok = isinstance(version, int) and not isinstance(version, bool)
        return _known(cls, data, data_version=version if ok else UNRECORDED_VERSION)

    @classmethod
    def key_problem(cls, key: str) -> str | None:
        """What is wrong with a dotted config key (``depth``, ``train.recipe``) for this kind,
        or None: its first part must be a field, and only a table field has parts below."""
        head, dot, _ = key.partition(".")
        types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        if head not in types:
            return f"unknown config key '{head}' (known: {', '.join(sorted(types))})"
        if dot and not types[head].startswith("dict"):
            return f"config key '{head}' is not a table: '{key}' names nothing"
        return None


@dataclass(frozen=True, kw_only=True)
class TrainedConfig(RecordConfig):
    """A trained job's config (``probes.training.job.Job.config``) plus its evaluation
    ``precision``:
    the model (``family`` with ``model_options``, ``depth`` x ``width``), the task
    (``task``, ``task_options``; ``problem_label`` the suite's label of it, ``entry`` its
    model entry, ``solver`` in configs before version 4), the recipe (``train``: recipe,
    steps, batch_size, dtype, ...), ``seed``, ``test_size`` and ``iterate``;
    ``target_version``: how the task's training targets were computed
    (:attr:`precision.tasks.base.Task.target_version`; 1 when absent); ``gradient_error``: the
    training precision's gradient error by module is measured (absent: not)."""

    entry: str = ""
    family: str = ""
    task: str = ""
    problem_label: str = ""
    task_options: dict[str, Any] = field(default_factory=dict)
    model_options: dict[str, Any] = field(default_factory=dict)
    depth: int = 0
    width: int = 0
    train: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    test_size: int = 32
    iterate: int = 0
    target_version: int = 1
    gradient_error: bool = False

    @property
    def layernorm(self) -> bool | None:
        """The model option ``layernorm`` (None: the family's default)."""
        value = self.model_options.get("layernorm")
        return None if value is None else bool(value)

    @property
    def train_steps(self) -> int | None:
        """The training budget in optimizer steps."""
        return self.train.get("steps")

    @property
    def recipe(self) -> str:
        return str(self.train.get("recipe", "paper"))

    @property
    def train_dtype(self) -> str:
        return str(self.train.get("dtype", "float32"))


@dataclass(frozen=True, kw_only=True)
class SubjectConfig(RecordConfig):
    """A solver or construction run's config: ``solver`` (its name) on problem
    ``problem_label`` of ``task`` (``problem``: the generator's arguments and ``seed``) with
    ``params``."""

    solver: str = ""
    task: str = ""
    problem_label: str = ""
    problem: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int | None:
        """The problem seed."""
        seed = self.problem.get("seed")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


@dataclass(frozen=True, kw_only=True)
class StudyConfig(RecordConfig):
    """A study run's config: the registered ``study`` (``study_version``), the suite's
    ``entry`` label, the resolved ``params`` of its grid point, and ``seed``."""

    study: str = ""
    study_version: int = 1
    entry: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class LengthConfig(TrainedConfig):
    """A length record's config: the trained job's config (:class:`TrainedConfig`: the
    model, task, recipe and seed whose trained weights are evaluated) plus the sequence
    ``length`` the weights were evaluated at, the ``reference`` precision (mpN) the error is
    measured against, and ``batch``, the number of seeded input sequences
    (:mod:`precision.lengths`)."""

    length: int = 0
    reference: str = ""
    batch: int = 1


@dataclass(frozen=True, kw_only=True)
class LocalizeConfig(RecordConfig):
    """A localize record's config (``precision localize``, :mod:`probes.localize`): the
    model (``family``: the factory spec, its sizes and ``seed``), the input (``batch`` x
    ``tokens``), the ``precision`` whose error is attributed, the ``reference`` kept units
    compute in, the ``truth``, the ``target`` of the search (None: no search), the units'
    ``unit_depth`` (None: every owning module), ``ops`` (a containing module's own ops as
    units ``PATH::OP``; absent: not) and ``modules`` globs, and the ``unit`` (a module path,
    ``""`` for the model itself, or ``PATH::OP``) the record is about."""

    family: str = ""
    d_in: int | None = None
    d_out: int | None = None
    depth: int | None = None
    width: int | None = None
    tokens: int | None = None
    batch: int | None = None
    seed: int | None = None
    reference: str = ""
    truth: str = ""
    target: float | None = None
    unit_depth: int | None = None
    ops: bool = False
    modules: list[str] | None = None
    unit: str = ""


@dataclass(frozen=True, kw_only=True)
class RecordResult:
    """What every kind's result holds: the task label (``problem_label``), where the run was
    computed (``provenance``, :mod:`precision.provenance`; written by the runner, None in runs
    stored before it was recorded) and the floor detected on its trace (``floor``:
    ``precision.metrics.Floor.to_dict()``; None: none detected, never for a study)."""

    #: Result names a claim may select as ``result.<name>`` (a study: any of its metrics).
    METRICS: ClassVar[tuple[str, ...]] = ()

    problem_label: str = ""
    provenance: dict[str, Any] | None = None
    floor: dict[str, Any] | None = None

    @classmethod
    def from_json(cls: type[_R], data: Any) -> _R:
        """The result of a stored ``result`` dict (lenient, see the module docstring)."""
        return _known(cls, data)

    def metric(self, name: str) -> float | None:
        """The number ``result.<name>`` of a claim (None when the run has none)."""
        return stored_float(getattr(self, name)) if name in self.METRICS else None

    @property
    def floor_reached(self) -> bool:
        """Whether the trace reached its floor (True when no floor is stored)."""
        return bool((self.floor or {}).get("reached", True))

    def _json(self, **keys: Any) -> dict[str, Any]:
        extra = {"floor": self.floor, "provenance": self.provenance}
        return {"problem_label": self.problem_label, **keys,
                **{k: v for k, v in extra.items() if v is not None}}


@dataclass(frozen=True, kw_only=True)
class TrainedResult(RecordResult):
    """One (trained job, evaluation precision): the test-error decomposition
    (``approximation`` / ``rounding``: log10 MSE of the float64 model against the truth and
    of the precision against the float64 model, 001 Sec. 2), ``digits``, ``n_params``; the
    training (``train_status`` / ``train_message``, ``train_steps_done``, ``train_wall_time``,
    ``final_train_loss``, ``train_converged``: the convergence check passed, False = training
    could still lower the error, None = stored before the check; ``train_stop``: why training
    stopped; the check's evidence: ``check_gain``, the factor by which a few Gauss-Newton
    steps from the final weights lowered the held-out MSE, ``grad_norm``, the norm of the
    held-out loss gradient at the final weights, ``check_drift``, the z-score of a nonzero
    expected gradient over independent batches, above 4 on a slope that is not a floor, and
    ``check_curvature``, the held-out loss Hessian's most negative eigenvalue over its largest,
    below -1e-2 at a saddle, and ``check_power``, the residuals per parameter in one of the
    check's Gauss-Newton batches, below 0.02 where the check could not see (its verdict does
    not count); None: stored before it was measured); ``refused_floors``: how
    many plateaus of the held-out curve the check refused as a stop (``until = "floor"``;
    None: stored before it was counted); where the floor came from
    (``floor_source``), a weights file that could not be written (``weights_error``), and how
    many digits of the mp100 reference the decomposition is measured against are certain
    (``truth_digits``: its agreement with mp200 on one test sequence,
    :mod:`precision.reference`; None: stored before it was checked, or no mp reference);
    ``recipe_settings``: the settings the training's recipe fixes (the engine's, say: they
    are not part of the run id, so a record names the ones it was trained with; None:
    stored before they were recorded); ``engine_flops``: the second-order iterations' work
    (:mod:`probes.training.work`; None: none, or stored before it was counted);
    ``check_flops``: the work of the convergence checks training ran on plateaus
    (``until = "floor"``), counted alike (None: none, or stored before it was counted);
    ``start``: where training started when not from the seeded init (``train.start =
    "contained"``: the kept weights of a shallower cell it was embedded from; None: fresh);
    ``gradient_error``: with the config's ``gradient_error``, the relative error of the
    gradient computed in the training precision against mp50, by module, at the initial and
    the final weights (``{"precision": ..., "initial": [[module, error], ...], "final": ...}``,
    :func:`probes.gradient_check.training_gradient_error`; None: not measured)."""

    METRICS: ClassVar[tuple[str, ...]] = ("approximation", "rounding", "digits", "n_params",
                                          "train_steps_done", "final_train_loss",
                                          "truth_digits")

    task: str = ""
    approximation: float | None = None
    rounding: float | None = None
    digits: float | None = None
    n_params: int | None = None
    train_status: str = ""
    train_message: str = ""
    train_steps_done: int | None = None
    train_wall_time: float | None = None
    final_train_loss: float | None = None
    floor_source: str = ""
    train_converged: bool | None = None
    train_stop: str | None = None
    check_gain: float | None = None
    grad_norm: float | None = None
    check_drift: float | None = None
    check_curvature: float | None = None
    check_power: float | None = None
    refused_floors: int | None = None
    weights_error: str | None = None
    truth_digits: float | None = None
    recipe_settings: dict[str, Any] | None = None
    engine_flops: float | None = None
    check_flops: float | None = None
    start: str | None = None
    gradient_error: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Any) -> TrainedResult:
        dec = data.get("decomposition") if isinstance(data, Mapping) else None
        dec = dec if isinstance(dec, Mapping) else {}
        return _known(cls, data, approximation=stored_float(dec.get("approximation")),
                      rounding=stored_float(dec.get("rounding")))

    def to_json(self) -> dict[str, Any]:
        """The stored ``result`` (the decomposition as one table)."""
        return self._json(
            task=self.task,
            decomposition={"approximation": self.approximation, "rounding": self.rounding},
            digits=self.digits, n_params=self.n_params, train_status=self.train_status,
            train_message=self.train_message, train_steps_done=self.train_steps_done,
            train_wall_time=self.train_wall_time, final_train_loss=self.final_train_loss,
            floor_source=self.floor_source, train_converged=self.train_converged,
            train_stop=self.train_stop,
            **({} if self.check_gain is None else {"check_gain": self.check_gain,
                                                    "grad_norm": self.grad_norm}),
            **({} if self.check_drift is None else {"check_drift": self.check_drift}),
            **({} if self.check_curvature is None
               else {"check_curvature": self.check_curvature}),
            **({} if self.check_power is None else {"check_power": self.check_power}),
            **({} if self.refused_floors is None else {"refused_floors": self.refused_floors}),
            **({} if self.weights_error is None else {"weights_error": self.weights_error}),
            **({} if self.truth_digits is None else {"truth_digits": self.truth_digits}),
            **({} if self.recipe_settings is None
               else {"recipe_settings": dict(self.recipe_settings)}),
            **({} if not self.engine_flops else {"engine_flops": self.engine_flops}),
            **({} if self.start in (None, "fresh") else {"start": self.start}),
            **({} if not self.check_flops else {"check_flops": self.check_flops}),
            **({} if self.gradient_error is None
               else {"gradient_error": dict(self.gradient_error)}))


@dataclass(frozen=True, kw_only=True)
class SubjectResult(RecordResult):
    """A solver or construction run: its final error (``max_abs``, ``relative``, ``digits``,
    ``param_mse``: stored together, when the run has a final step, i.e. ``max_abs`` is not
    None) and, for a construction, its largest log10 MSE against the algorithm it implements
    (``max_log10_mse_vs_algorithm``)."""

    METRICS: ClassVar[tuple[str, ...]] = ("max_abs", "relative", "digits", "param_mse",
                                          "max_log10_mse_vs_algorithm")

    max_abs: float | None = None
    relative: float | None = None
    digits: float | None = None
    param_mse: float | None = None
    max_log10_mse_vs_algorithm: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored ``result``."""
        final = {} if self.max_abs is None else {
            "max_abs": self.max_abs, "relative": self.relative, "digits": self.digits,
            "param_mse": self.param_mse}
        if self.max_log10_mse_vs_algorithm is not None:
            final["max_log10_mse_vs_algorithm"] = self.max_log10_mse_vs_algorithm
        return self._json(**final)


@dataclass(frozen=True, kw_only=True)
class StudyResult(RecordResult):
    """A study run: its named ``metrics`` (free-form per study; non-finite ones None), the
    ``primary`` one (stored as the record's MSE), the study's metric order (``columns``) and
    whatever else it reports (``info``, stored as keys of the result beside these)."""

    primary: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> StudyResult:
        names = {f.name for f in dataclasses.fields(cls)}
        info = {k: v for k, v in data.items() if k not in names} \
            if isinstance(data, Mapping) else {}
        metrics = data.get("metrics") if isinstance(data, Mapping) else None
        return _known(cls, data, info=info,
                      metrics=dict(metrics) if isinstance(metrics, Mapping) else {})

    def metric(self, name: str) -> float | None:
        return stored_float(self.metrics.get(name))

    def to_json(self) -> dict[str, Any]:
        """The stored ``result`` (``info`` keys beside the others)."""
        return self._json(primary=self.primary, metrics=self.metrics, columns=self.columns,
                          **self.info)

    @property
    def column_order(self) -> list[str]:
        """The metrics in the study's order (``columns``; the metrics' keys when absent)."""
        return list(self.columns or self.metrics)


@dataclass(frozen=True, kw_only=True)
class LengthResult(RecordResult):
    """One (trained job, sequence length, precision): the relative error of the precision's
    output against the ``reference`` (``relative`` = ||f_p - f_mpN||_2 / ||f_mpN||_2 over every
    output entry; ``digits`` = -log10 of it; ``max_abs`` the largest entry error), the
    reference's certain digits at this length (``truth_digits``, :mod:`precision.reference`),
    and the task the weights were trained on (``task``)."""

    METRICS: ClassVar[tuple[str, ...]] = ("relative", "digits", "max_abs", "truth_digits")

    task: str = ""
    length: int = 0
    reference: str = ""
    relative: float | None = None
    digits: float | None = None
    max_abs: float | None = None
    truth_digits: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored ``result``."""
        return self._json(task=self.task, length=self.length, reference=self.reference,
                          relative=self.relative, digits=self.digits, max_abs=self.max_abs,
                          truth_digits=self.truth_digits)


@dataclass(frozen=True, kw_only=True)
class LocalizeResult(RecordResult):
    """One unit of a localization (:mod:`precision.localize`): its ``block``, the ops and
    floating weight entries it owns, the relative error against the truth with only this unit
    in the low precision (``alone_low``, (a)) and with only this unit in the reference
    (``alone_reference``, (b)), its place in the ranking by (a) (``rank``, 1 = largest), and
    whether the search keeps it in the reference (``kept``; None: no search). Shared by the
    records of one localization: ``all_low`` / ``all_reference`` (every unit in one of them),
    ``units``, ``kept_count`` and ``kept_error`` (the error of the set the search found)."""

    METRICS: ClassVar[tuple[str, ...]] = ("alone_low", "alone_reference", "all_low",
                                          "all_reference", "kept_error")

    unit: str = ""
    block: str = ""
    ops: int = 0
    weights: int = 0
    alone_low: float | None = None
    alone_reference: float | None = None
    rank: int = 0
    kept: bool | None = None
    all_low: float | None = None
    all_reference: float | None = None
    units: int = 0
    kept_count: int | None = None
    kept_error: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored ``result``."""
        return self._json(unit=self.unit, block=self.block, ops=self.ops, weights=self.weights,
                          alone_low=self.alone_low, alone_reference=self.alone_reference,
                          rank=self.rank, kept=self.kept, all_low=self.all_low,
                          all_reference=self.all_reference, units=self.units,
                          kept_count=self.kept_count, kept_error=self.kept_error)


#: The config and result types of each record kind.
SCHEMA: dict[str, tuple[type[RecordConfig], type[RecordResult]]] = {
    "trained": (TrainedConfig, TrainedResult), "solver": (SubjectConfig, SubjectResult),
    "construction": (SubjectConfig, SubjectResult), "study": (StudyConfig, StudyResult),
    "length": (LengthConfig, LengthResult), "localize": (LocalizeConfig, LocalizeResult)}


def config_of(row: Mapping[str, Any]) -> RecordConfig:
    """The typed config of a stored row (a :class:`RecordConfig` for an unknown kind)."""
    cls = SCHEMA.get(str(row.get("kind")), (RecordConfig, RecordResult))[0]
    return cls.from_json(row.get("config") or {})


def result_of(row: Mapping[str, Any]) -> RecordResult:
    """The typed result of a stored row (a :class:`RecordResult` for an unknown kind)."""
    cls = SCHEMA.get(str(row.get("kind")), (RecordConfig, RecordResult))[1]
    return cls.from_json(row.get("result") or {})


def metric_problem(kind: str, metric: Any) -> str | None:
    """What is wrong with a claim's ``metric`` for runs of ``kind``, or None: a column of
    :data:`METRIC_COLUMNS`, or ``result.<name>`` with a name of the kind's result
    (``METRICS``; a study's metrics are its own, so any single name)."""
    if not isinstance(metric, str):
        return f"metric must be text, not {metric!r}"
    if metric in METRIC_COLUMNS:
        return None
    name = metric.removeprefix("result.")
    if name == metric:
        return (f"unknown metric '{metric}' (a column: {', '.join(METRIC_COLUMNS)}; "
                "or result.<name>)")
    result = SCHEMA[kind][1]
    if result is StudyResult:
        return None if name.isidentifier() else f"'{metric}' is not result.<study metric>"
    if name not in result.METRICS:
        return (f"unknown metric '{metric}' of a {kind} run (result.<name>: "
                f"{', '.join(result.METRICS)})")
    return None
