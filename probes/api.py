"""Python API for testing an architecture inside a user's own test suite (no store needed).

    from probes.api import probe, assert_floor_below

    def test_my_mixer_multiplies_precisely():
        assert_floor_below(make_mixer, "multiply", 1e-6, precision="float64",
                           depth=1, width=32, train={"recipe": "engine", "steps": 500,
                                                     "batch_size": 32})

``probe`` trains the factory's module on a task with a recipe and returns what each
evaluation precision measured (test MSE and its approximation / rounding split), exactly as
``precision probe`` does for the store. Before it trains, it evaluates the fresh module on one
sample in every precision: a precision it cannot be evaluated in is ``failed`` with the op,
graph node and module path, and when that is every precision nothing is trained. The factory,
its module's forward and its training run in a child process (:mod:`probes.isolation`):
a factory that raises, exits, crashes or runs past ``time_limit`` gives outcomes with status
``failed`` / ``timeout`` and the reason, and the calling test process goes on.

Both work from any working directory (pytest run from another folder): a factory spec
``path/to/file.py:FACTORY`` or ``package.module:FACTORY`` is found relative to the working
directory, else relative to the folder of the calling file (the test) or one of its parents;
an absolute path is used as it is.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from precision.devices import resolve_device
from precision.precisions import Precision, parse_precision, parse_precisions
from probes.factory import FactoryError, is_factory_spec
from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated
from probes.names import check_name
from probes.sample_check import check_sample, sample_input
from probes.store.atomic import expand_user
from probes.training.job import Job
from probes.training.measure import PrecisionOutcome, limit_label, run_trained
from probes.training.train_config import TrainConfig

#: A small default budget of the second-order engine (about a minute on 2 CPU cores for a
#: small module; probes.training.recipe_book).
DEFAULT_TRAIN = {"recipe": "engine", "steps": 300, "batch_size": 32, "second_order_steps": 15,
                 "second_order_batch": 8, "until": "floor"}


class FloorAssertionError(AssertionError):
    """A module's measured floor is above the bound (message: expected / measured / where)."""


def _caller_dir() -> Path | None:
    """The folder of the file that called into this module (None from a prompt)."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename.startswith("<"):
        return None
    return Path(frame.f_code.co_filename).resolve().parent


def resolve_factory(factory: str | Callable[..., nn.Module], caller: Path | None = None
                    ) -> str | Callable[..., nn.Module]:
    """``factory`` made independent of the working directory: a callable as it is; a
    ``file.py:FACTORY`` spec with the file's absolute path; for a ``module:FACTORY`` spec the
    folder holding the module is put on ``sys.path`` (as the working directory is). A
    relative name is looked up in the working directory, then in ``caller`` and its parents.

    Raises:
        FactoryError: not a callable or a ``MODULE:FACTORY`` string, or a file not found.
    """
    if callable(factory):
        return factory
    if not isinstance(factory, str) or ":" not in factory:
        raise FactoryError(f"factory {factory!r} must be a callable or a MODULE:FACTORY or "
                           "path/to/file.py:FACTORY string")
    module, _, attr = factory.rpartition(":")
    check_name(attr, "factory name")
    bases = [Path.cwd(), *((caller, *caller.parents) if caller else ())]
    if module.endswith(".py"):
        path = expand_user(module)
        if path.is_absolute():
            return factory
        for base in bases:
            if (base / path).is_file():
                return f"{(base / path).resolve()}:{attr}"
        where = f" or to {caller} and its parents" if caller else ""
        raise FactoryError(f"factory file {module} not found relative to the working "
                           f"directory {Path.cwd()}{where}")
    top = module.split(".")[0]
    try:
        found = bool(top) and importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        for base in bases:
            if (base / f"{top}.py").is_file() or (base / top).is_dir():  # or a namespace
                if str(base) not in sys.path:
                    sys.path.insert(0, str(base))
                break
    return factory


def probe(factory: str | Callable[..., nn.Module], task: str, *, depth: int = 1,
          width: int = 32, train: dict[str, Any] | None = None,
          precisions: tuple[str, ...] = ("float32", "float64", "mp50"), seed: int = 0,
          task_options: dict[str, Any] | None = None, model_options: dict[str, Any] | None = None,
          test_size: int = 16, device: str = "cpu",
          time_limit: float | None = DEFAULT_USER_TIME_LIMIT) -> dict[str, PrecisionOutcome]:
    """Train ``factory``'s module on ``task`` and measure it in each precision.

    ``factory``: a callable ``(d_in, d_out, depth, width, **model_options) -> nn.Module`` or a
    ``MODULE:FACTORY`` spec. Returns {precision: PrecisionOutcome} (``total`` is the test MSE,
    ``log10_approximation`` / ``log10_rounding`` its decomposition, ``status``, ``label`` T /
    A / R with ``converged`` and the convergence ``check``'s evidence, as the tables print).
    ``device``: where it trains and evaluates its float precisions (``"cuda"`` on a GPU; mpN
    on the CPU).
    Bad arguments (an unknown precision, a task name that is not a name, a factory that
    cannot be found) raise a ``ValueError`` with one line before anything is built.
    A ``MODULE:FACTORY`` spec runs in a child process stopped after ``time_limit`` seconds
    (None: no limit); its failure is every outcome's ``status`` (``failed`` / ``timeout``) and
    ``error``. A callable runs in this process.
    """
    factory = resolve_factory(factory, _caller_dir())
    check_name(task, "task name")
    parsed = parse_precisions(precisions)
    resolve_device(device)
    job = Job(family=factory, task=task, depth=depth, width=width,
              train=TrainConfig.from_table({**DEFAULT_TRAIN, **(train or {})}), seed=seed,
              task_options=dict(task_options or {}), model_options=dict(model_options or {}),
              test_size=test_size)
    precs = list(parsed)
    try:  # one sample in every precision first: what cannot evaluate fails in seconds
        if is_factory_spec(factory):
            failing = call_isolated(_sample_failures, job, precs, time_limit=time_limit)
        else:
            failing = _sample_failures(job, precs)
        failed = {p.name: PrecisionOutcome(p.name, "failed", failing[p.name])
                  for p in precs if p.name in failing}
        rest = [p for p in precs if p.name not in failing]
        if not rest:
            return failed
        if is_factory_spec(factory):
            outcome = call_isolated(run_trained, job, rest, device=device,
                                    time_limit=time_limit)
        else:
            outcome = run_trained(job, rest, device=device)
    except ChildFailure as exc:
        return {p.name: PrecisionOutcome(p.name, exc.status, exc.message) for p in precs}
    measured = {o.precision: o for o in outcome.per_precision}
    for o in measured.values():   # the label and its evidence, as the tables print them
        o.converged, o.check = outcome.training.converged, outcome.check
        if o.status == "ok" and o.log10_approximation is not None \
                and o.log10_rounding is not None:
            o.label = limit_label(o.converged, o.log10_approximation, o.log10_rounding)
    return {p.name: failed.get(p.name) or measured[p.name] for p in precs}


def _sample_failures(job: Job, precisions: list[Precision]) -> dict[str, str]:
    """The freshly built model of ``job`` evaluated on one sample in every precision before
    it trains (:mod:`probes.sample_check`): {precision name: its failure in one line}
    for those it cannot be evaluated in."""
    task, model = job.build()
    model.eval()
    x = sample_input(task.d_in, task.n_tokens)
    failures = {}
    for p in precisions:
        problem = check_sample(model, x, [p], islands=False,
                               label=f"'{job.family}' on {task.name}").problem
        if problem:
            failures[p.name] = problem
    return failures


def assert_floor_below(factory: str | Callable[..., nn.Module], task: str, bound: float, *,
                       precision: str = "float64", **kwargs: Any) -> PrecisionOutcome:
    """Fail (pytest-style: expected / measured / where) unless the trained module's test MSE
    on ``task`` in ``precision`` is at most ``bound``; the message says what limited the
    measurement (its label: training-limited ``T`` with the check's evidence,
    approximation ``A``, rounding ``R``), and pytest shows the caller's frame, not this
    library's. Returns the outcome when it holds."""
    __tracebackhide__ = True   # pytest: the failure points at the user's test
    name = parse_precision(precision).name
    factory = resolve_factory(factory, _caller_dir())
    result = probe(factory, task, precisions=(name,), **kwargs)[name]
    where = (f"{getattr(factory, '__qualname__', factory)} on {task}, depth "
             f"{kwargs.get('depth', 1)}, width {kwargs.get('width', 32)}, evaluated in {name}")
    if result.status != "ok":
        raise FloorAssertionError(f"expected test MSE <= {bound:.1e}, measured: {result.status} "
                                  f"({result.error}); where: {where}")
    if not result.total <= bound:
        split = ""
        if result.log10_approximation is not None and result.log10_rounding is not None:
            split = (f" (approximation 1e{result.log10_approximation:.1f}, "
                     f"rounding 1e{result.log10_rounding:.1f})")
        raise FloorAssertionError(f"expected test MSE <= {bound:.1e}, measured "
                                  f"{result.total:.2e}{split}, {_limited_by(result)}; "
                                  f"where: {where}")
    return result


def _limited_by(result: PrecisionOutcome) -> str:
    """What limited a measurement, in words: its label and, training-limited, why."""
    if result.label == "R":
        return "label R: rounding-limited (the precision is the limit)"
    if result.label == "A":
        return "label A: approximation-limited (training converged; the model is the limit)"
    c = result.check
    why = "" if c is None else (f" (the convergence check: gain {c.gain:.3g}, drift "
                                f"{c.drift:.3g}, curvature {c.curvature:.2g}, power "
                                f"{c.power:.2g}: more training can lower it)")
    return f"label T: training-limited{why}"
