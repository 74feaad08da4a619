"""Paper studies: experiments that are neither a solver trace nor one trained probe task.

A *study* is a registered function ``fn(params, precisions, seed) -> [StudyOutcome, ...]``,
one outcome per precision in the order given -- e.g. 002's ridge baselines on noisy
regression, 003's Memformers against CG, 004's population-loss gradient descent. Suites run
them through ``[studies.<label>]`` tables (:mod:`probes.kinds.study`): one call per (entry,
grid point, seed) covers every precision, so a study that trains a model trains it once and
measures it in each precision (:func:`each_precision`); a study measured per precision
anyway is written ``fn(params, precision, seed) -> StudyOutcome`` under
:func:`per_precision`. Each (entry, grid point, seed, precision) is one store record of kind
``study`` whose ``result`` holds every metric the study measured and whose series hold its
traces (per layer, per iteration, per variance bin ...).

Each module of this package registers its studies with :func:`register_study` when imported
(or holds numerics only they use); :func:`get_study` imports them all, so adding a paper is
adding a file and declaring its studies in :mod:`.catalog` (what ``precision list`` shows,
read without importing them). Parameters are checked by each study's validator
(:func:`check_int`, ...).
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from precision.precisions import Precision
from precision.registry import Registry
from probes.studies.catalog import STUDY_CATALOG


class StudyError(ValueError):
    """Bad study parameters (one line; the suite loader reports it as a SuiteError)."""


@dataclass
class StudyOutcome:
    """What one study run measured.

    ``metrics``: named scalars (stored in the record's ``result``; claims select them as
    ``result.<name>``). ``primary``: the metric stored in the record's ``mse`` column (and
    shown in tables). ``series``: named traces, each a list of values (index = step) or of
    ``(step, value)`` pairs. ``status`` is ``ok``, ``diverged`` or ``failed``.
    """

    metrics: dict[str, float | None]
    primary: str | None = None
    series: dict[str, list[Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None

    @property
    def primary_value(self) -> float | None:
        if self.primary is None:
            return None
        v = self.metrics.get(self.primary)
        return None if v is None or not math.isfinite(v) else float(v)

    @classmethod
    def failed(cls, exc: BaseException) -> StudyOutcome:
        """The outcome of a measurement that raised ``exc``: status ``failed``, its message."""
        return cls(metrics={}, status="failed", error=f"{type(exc).__name__}: {exc}")


#: A study: (resolved params, the run's precisions, seed) -> one outcome per precision.
StudyFn = Callable[[dict[str, Any], tuple[Precision, ...], int], list[StudyOutcome]]


def each_precision(precisions: Sequence[Precision],
                   measure: Callable[[Precision], StudyOutcome]) -> list[StudyOutcome]:
    """``measure(p)`` for each precision; an exception is that precision's ``failed``
    outcome, not the others' (any failure is the record's status, not the sweep's)."""
    outcomes = []
    for p in precisions:
        try:
            outcomes.append(measure(p))
        except Exception as exc:  # noqa: BLE001 -- this precision's status
            outcomes.append(StudyOutcome.failed(exc))
    return outcomes


def per_precision(fn: Callable[[dict[str, Any], Precision, int], StudyOutcome]) -> StudyFn:
    """A study measured independently in each precision, ``fn(params, precision, seed)``, as
    a :data:`StudyFn` (a decorator, under :func:`register_study`)."""

    @functools.wraps(fn)
    def study(params: dict[str, Any], precisions: tuple[Precision, ...], seed: int
              ) -> list[StudyOutcome]:
        return each_precision(precisions, lambda p: fn(params, p, seed))

    return study


@dataclass(frozen=True)
class StudySpec:
    """A registered study: its function, default parameters, optional validator."""

    kind = "study"
    error = StudyError

    name: str
    fn: StudyFn
    defaults: dict[str, Any]
    doc: str
    validate: Callable[[dict[str, Any]], None] | None = None
    #: Part of every run id: bump it when the study's code changes what it measures, so
    #: stored results of the old code are recomputed instead of reused.
    version: int = 1

    def resolve(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``given``; unknown keys and invalid values raise StudyError."""
        unknown = set(given) - set(self.defaults)
        if unknown:
            raise StudyError(f"study '{self.name}' has no parameter(s) "
                             f"{', '.join(sorted(unknown))} (parameters: "
                             f"{', '.join(sorted(self.defaults)) or 'none'})")
        params = {**self.defaults, **given}
        if self.validate is not None:
            try:
                self.validate(params)
            except StudyError:
                raise
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
                # a validator that did not expect this type: still a parameter error
                raise StudyError(f"study '{self.name}': invalid parameters "
                                 f"({type(exc).__name__}: {exc})") from None
        return params


def check_int(params: dict[str, Any], key: str, lo: int, hi: int | None = None) -> int:
    """``params[key]`` if it is an integer (not a bool) in [lo, hi]; StudyError otherwise."""
    v = params[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise StudyError(f"{key} must be an integer {rng}, got {v!r}")
    return v


def check_positive(params: dict[str, Any], key: str) -> None:
    """StudyError unless ``params[key]`` is a finite number > 0 (not a bool)."""
    v = params[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or not math.isfinite(v):
        raise StudyError(f"{key} must be a positive number, got {v!r}")


STUDIES: Registry[StudySpec] = Registry(StudySpec, listing=" (known: {})")


def register_study(
    name: str,
    defaults: dict[str, Any],
    validate: Callable[[dict[str, Any]], None] | None = None,
    version: int = 1,
) -> Callable[[StudyFn], StudyFn]:
    """Decorator: register ``fn`` as study ``name`` with parameter ``defaults`` (``version``:
    bump when the code changes what it measures). A study of this package must be declared
    in :data:`~probes.studies.catalog.STUDY_CATALOG` with its docstring's first line
    (RuntimeError otherwise); one defined elsewhere (a user's, a test's) need not."""

    def wrap(fn: StudyFn) -> StudyFn:
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        if fn.__module__.startswith(f"{__name__}.") and STUDY_CATALOG.get(name) != doc:
            raise RuntimeError(f"study '{name}' of {fn.__module__} is not declared in "
                               f"{__name__}.catalog with its docstring's first line")
        STUDIES.register(StudySpec(name, fn, dict(defaults), doc, validate, version))
        return fn

    return wrap


_loaded = False


def load_studies() -> Registry[StudySpec]:
    """Import every module of this package (each registers its studies); the registry."""
    global _loaded
    if not _loaded:
        for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
            importlib.import_module(f"{__name__}.{mod}")
        _loaded = True
    return STUDIES


def get_study(name: str) -> StudySpec:
    """The study registered as ``name``; StudyError naming the known ones otherwise."""
    return load_studies()[name]
