"""The reference solvers by name, and :func:`run_solver`, which measures one of them.

``run_solver("gd", "float32", problem={...}, params={...})`` generates the seeded problem,
rounds its inputs into the precision, runs the solver there, computes the certified truth from
the *rounded* inputs (a subject is scored on the problem it received), and returns the
per-step error trace with its detected floor. One code path for every solver and precision.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from precision import deterministic, problems
from precision.backends import backend_for
from precision.backends.mp_backend import exact_array
from precision.invariants import INVALID, check_trace
from precision.metrics import ErrorSummary, Floor, detect_floor, error_summary
from precision.params import Param, count, positive
from precision.precisions import Precision, as_precision, seeded_by
from precision.registry import Declared, Registry
from precision.solvers.catalog import SOLVER_CATALOG
from precision.solvers.cg import conjugate_gradient
from precision.solvers.gd import gd, preconditioned_gd
from precision.solvers.momentum import heavy_ball, nesterov
from precision.solvers.newton_logistic import newton_logistic
from precision.solvers.newton_schulz import newton_schulz
from precision.solvers.ols import ols_normal, ols_qr, ols_svd, ridge
from precision.solvers.solver_error import SolverError
from precision.truth import (
    TruthError,
    inverse_truth,
    least_squares_truth,
    logistic_truth,
    matvec,
    truth_bits,
)


@dataclass(frozen=True)
class SolverSpec(Declared):
    """A reference solver: its function, its parameters (default, type and range of each,
    :class:`~precision.params.Param`); its task family and one line of description are
    declared in :data:`~precision.solvers.catalog.SOLVER_CATALOG`."""

    kind = "solver"
    error = SolverError

    name: str
    run: Callable[..., list[Any]]
    params: dict[str, Param]
    iterative: bool = True

    @property
    def task(self) -> str:
        """``least_squares``, ``inverse`` or ``logistic`` (``primitive``: constructions only)."""
        return SOLVER_CATALOG[self.name].task

    @property
    def description(self) -> str:
        """One line, as ``precision list solvers`` shows it."""
        return SOLVER_CATALOG[self.name].description


def _spectrum(H: np.ndarray) -> tuple[float, float]:
    """Smallest and largest eigenvalue of the symmetric part of H, computed without LAPACK
    (:func:`precision.deterministic.eigvalsh`): step sizes, so mpN traces, are the same on
    every machine."""
    ev = deterministic.eigvalsh(H)
    return float(ev[0]), float(ev[-1])


def _gram(Xf: np.ndarray) -> np.ndarray:
    """X^T X / N in float64 without BLAS (:func:`precision.deterministic.matmul`)."""
    return deterministic.matmul(Xf.T, Xf) / Xf.shape[0]


def _ls_spectrum(xp: Any, X: Any) -> tuple[float, float]:
    """Smallest and largest eigenvalue of H = X^T X / N (the symbolic step sizes' source)."""
    return _spectrum(_gram(xp.to_numpy(X)))


def _run_gd(xp: Any, X: Any, y: Any, step: Any = "optimal", iters: int = 200) -> list[Any]:
    lo, hi = _ls_spectrum(xp, X)
    step = 2.0 / (lo + hi) if step == "optimal" else 1.0 / hi if step == "1/L" else step
    return gd(xp, X, y, step=step, iters=iters)


def _run_pgd(xp: Any, X: Any, y: Any, step: Any = "optimal", iters: int = 200) -> list[Any]:
    # Jacobi preconditioner P = diag(H)^{-1}, formed in the working precision.
    n = float(X.shape[0])
    diag_h = xp.sum(X * X, axis=0) / n
    P = xp.diag(1.0 / diag_h)
    if step in ("optimal", "1/L"):
        Xf, Pf = xp.to_numpy(X), xp.to_numpy(P)
        root = np.sqrt(np.diag(Pf))
        lo, hi = _spectrum(root[:, None] * _gram(Xf) * root[None, :])
        step = 2.0 / (lo + hi) if step == "optimal" else 1.0 / hi
    return preconditioned_gd(xp, X, y, P=P, step=float(step), iters=iters)


def _run_heavy_ball(
    xp: Any, X: Any, y: Any, step: Any = "optimal", beta: Any = "optimal", iters: int = 200
) -> list[Any]:
    lo, hi = _ls_spectrum(xp, X)
    if step == "optimal":  # Polyak's tuning for quadratics
        step = 4.0 / (math.sqrt(hi) + math.sqrt(lo)) ** 2
    if beta == "optimal":
        q = (math.sqrt(hi / lo) - 1) / (math.sqrt(hi / lo) + 1)
        beta = q * q
    return heavy_ball(xp, X, y, step=float(step), beta=float(beta), iters=iters)


def _run_nesterov(
    xp: Any, X: Any, y: Any, step: Any = "optimal", beta: Any = "optimal", iters: int = 200
) -> list[Any]:
    lo, hi = _ls_spectrum(xp, X)
    if step == "optimal":
        step = 1.0 / hi
    if beta == "optimal":
        beta = (math.sqrt(hi / lo) - 1) / (math.sqrt(hi / lo) + 1)
    return nesterov(xp, X, y, step=float(step), beta=float(beta), iters=iters)


def _run_cg(xp: Any, X: Any, y: Any, iters: int | None = None) -> list[Any]:
    return conjugate_gradient(xp, X, y, iters=3 * X.shape[1] if iters is None else iters)


#: Step sizes: a number > 0 or a rule resolved from the spectrum of X^T X / N.
_STEP = positive("optimal", "optimal", "1/L")
_MOMENTUM_STEP = positive("optimal", "optimal")
_BETA = Param("optimal", lo=0.0, lt=1.0, words=("optimal",))
_ALPHA = positive(None, optional=True)

SOLVERS: Registry[SolverSpec] = Registry(
    SolverSpec, [
        SolverSpec("ols_normal", lambda xp, X, y: ols_normal(xp, X, y), {}, iterative=False),
        SolverSpec("ols_qr", lambda xp, X, y: ols_qr(xp, X, y), {}, iterative=False),
        SolverSpec("ols_svd", lambda xp, X, y: ols_svd(xp, X, y), {}, iterative=False),
        SolverSpec("ridge", lambda xp, X, y, lam=1e-2: ridge(xp, X, y, lam=lam),
                   {"lam": Param(1e-2, lo=0.0)}, iterative=False),
        SolverSpec("gd", _run_gd, {"step": _STEP, "iters": count(200)}),
        SolverSpec("pgd", _run_pgd, {"step": _STEP, "iters": count(200)}),
        SolverSpec("heavy_ball", _run_heavy_ball,
                   {"step": _MOMENTUM_STEP, "beta": _BETA, "iters": count(200)}),
        SolverSpec("nesterov", _run_nesterov,
                   {"step": _MOMENTUM_STEP, "beta": _BETA, "iters": count(200)}),
        SolverSpec("cg", _run_cg, {"iters": count(None, optional=True)}),
        SolverSpec("newton_schulz",
                   lambda xp, A, iters=30, alpha=None: newton_schulz(xp, A, iters=iters,
                                                                     alpha=alpha),
                   {"iters": count(30), "alpha": _ALPHA}),
        SolverSpec("newton_schulz_p",
                   lambda xp, A, iters=20, order=3, alpha=None: newton_schulz(
                       xp, A, iters=iters, order=order, alpha=alpha),
                   {"iters": count(20), "order": count(3, lo=2, hi=16), "alpha": _ALPHA}),
        SolverSpec("newton",
                   lambda xp, A, y, mu, iters=12: newton_logistic(xp, A, y, mu=mu, iters=iters),
                   {"iters": count(12)}),
        SolverSpec("damped_newton",
                   lambda xp, A, y, mu, iters=20: newton_logistic(xp, A, y, mu=mu, iters=iters,
                                                                  damped=True),
                   {"iters": count(20)}),
    ], declared=SOLVER_CATALOG)

@dataclass
class SolverResult:
    """Outcome of one solver run in one precision.

    ``steps[k]`` is the :class:`ErrorSummary` of iterate k against the truth: for least squares
    the predictions on the problem's query points, for ``inverse`` the matrix entries, for
    ``logistic`` the weight vector. ``param_mse[k]`` is the MSE of the raw iterate.
    """

    solver: str
    precision: str
    status: str  # "ok" | "diverged" | "failed" | "invalid" (precision.invariants)
    steps: list[ErrorSummary] = field(default_factory=list)
    param_mse: list[float] = field(default_factory=list)
    reference: list[ErrorSummary] = field(default_factory=list)  # constructions: vs algorithm
    floor: Floor | None = None
    error: str | None = None
    wall_time: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> ErrorSummary | None:
        return self.steps[-1] if self.steps else None

    def finish(self, t0: float, status: str | None = None, error: str | None = None,
               precision: Precision | None = None) -> SolverResult:
        """Set ``status`` / ``error`` if given (no floor then), else the floor of the trace
        against the truth, and with ``precision`` the trace's invariant
        (:func:`precision.invariants.check_trace`: a trace that rose after its floor makes an
        ``ok`` run ``invalid``, in the Python API as in a sweep); the wall time since ``t0``."""
        if status is not None:
            self.status, self.error = status, error
        else:
            logs = [s.log10_mse for s in self.steps]
            self.floor = detect_floor([s.mse for s in self.steps], log10_trace=logs)
            found = None if precision is None or self.status != "ok" else \
                check_trace(logs, self.floor.log10_level, precision)
            if found is not None:
                self.status, self.error = INVALID, str(found)
        self.wall_time = time.perf_counter() - t0
        return self


def get_solver(name: str) -> SolverSpec:
    """The solver called ``name``; :class:`SolverError` listing the valid names otherwise."""
    return SOLVERS[name]


def resolve_params(spec: Declared, params: dict[str, Any] | None) -> dict[str, Any]:
    """``spec.resolve(params)`` (a solver's or a construction's; :class:`SolverError`)."""
    return spec.resolve(params)


#: The problem kinds each task takes: an SPD matrix to invert, a logistic regression, the
#: primitive ops, the least-squares generators (:mod:`precision.problems`).
TASK_KINDS: dict[str, tuple[str, ...]] = {
    "inverse": ("spd",), "logistic": ("logistic",), "primitive": problems.PRIMITIVE_OPS,
    "least_squares": tuple(problems.PROBLEMS)}


def make_problem(task: str, problem: dict[str, Any]) -> Any:
    """Build the seeded problem described by ``problem`` (a suite's problem table)."""
    spec = dict(problem)
    kind = spec.pop("kind", None) or spec.pop("name", None)
    if kind is None:
        raise SolverError("problem needs a 'kind'")
    if not isinstance(kind, str):
        raise SolverError(f"problem kind must be a name, got {kind!r}")
    try:
        if task == "inverse":
            if kind not in TASK_KINDS["inverse"]:
                raise SolverError(f"task 'inverse' takes problem kind 'spd', not '{kind}'")
            return problems.spd_matrix(**spec)
        if task == "logistic":
            if kind not in TASK_KINDS["logistic"]:
                raise SolverError(f"task 'logistic' takes problem kind 'logistic', not '{kind}'")
            return problems.logistic_regression(**spec)
        if task == "primitive":
            if kind not in TASK_KINDS["primitive"]:
                raise SolverError(f"task 'primitive' takes problem kind "
                                  f"{', '.join(problems.PRIMITIVE_OPS)}, not '{kind}'")
            return problems.primitive_problem(kind, **spec)
        return problems.make_least_squares(kind, **spec)
    except TypeError as exc:
        raise SolverError(f"problem '{kind}': {exc}") from None
    except ValueError as exc:
        if isinstance(exc, SolverError):
            raise
        raise SolverError(f"problem '{kind}': {exc}") from None


def _inputs_and_truth(spec: SolverSpec, xp: Any, prob: Any, prm: dict[str, Any], bits: int
                      ) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray,
                                 Callable[[Any], tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """The problem's inputs rounded into the precision, the certified truth of the rounded
    problem (of the iterate, and of what is scored), the map iterate -> (raw, scored) exact
    values, and the parameters (with ``mu`` for logistic). Scalars that enter the problem
    (ridge ``lam``, logistic ``mu``) are taken as the precision rounds them.
    Raises :class:`~precision.truth.TruthError` when the truth cannot be certified."""
    def as_given(value: float) -> Any:
        return xp.to_exact(xp.asarray([float(value)]))[0]

    def identity(it: Any) -> tuple[np.ndarray, np.ndarray]:
        e = xp.to_exact(it)
        return e, e

    if spec.task == "inverse":
        A = xp.asarray(prob)
        truth = inverse_truth(xp.to_exact(A), bits)
        return (A,), truth, truth, identity, prm
    if spec.task == "logistic":
        A, yv = xp.asarray(prob.X), xp.asarray(prob.y)
        truth = logistic_truth(xp.to_exact(A), xp.to_exact(yv), as_given(prob.mu), bits)
        return (A, yv), truth, truth, identity, {**prm, "mu": prob.mu}
    X, yv = xp.asarray(prob.X), xp.asarray(prob.y)
    lam = as_given(prm["lam"]) if spec.name == "ridge" else 0.0
    w_true = least_squares_truth(xp.to_exact(X), xp.to_exact(yv), bits, ridge=lam)
    q_exact = exact_array(prob.X_query)

    def target(it: Any) -> tuple[np.ndarray, np.ndarray]:
        e = xp.to_exact(it)
        return e, matvec(q_exact, e, bits)

    return (X, yv), w_true, matvec(q_exact, w_true, bits), target, prm


def run_solver(
    name: str,
    precision: Precision | str,
    problem: dict[str, Any],
    params: dict[str, Any] | None = None,
) -> SolverResult:
    """Run solver ``name`` in ``precision`` on the problem described by ``problem``.

    Raises :class:`SolverError` for user errors (unknown solver/problem, bad parameters).
    Numerical breakdown (a non-positive Cholesky pivot, NaN/Inf) is a *result*: status
    ``failed`` / ``diverged`` with the message, never an exception.
    """
    spec = get_solver(name)
    spelled = as_precision(precision)  # the Python API's edge
    p = seeded_by(spelled, int(problem.get("seed", 0)))   # unseeded ':sr': the problem's seed
    prm = spec.resolve(params)
    prob = make_problem(spec.task, problem)
    xp = backend_for(p)
    xp.restart()  # stochastic rounding: reproducible whatever ran before
    bits = truth_bits(p)
    result = SolverResult(solver=name, precision=spelled.name, status="ok", params=prm)
    t0 = time.perf_counter()

    try:
        inputs, truth, truth_pred, target, prm = _inputs_and_truth(spec, xp, prob, prm, bits)
    except TruthError as exc:  # the run's result, not a crash: the sweep goes on
        return result.finish(t0, "failed", str(exc))
    run_params = {k: v for k, v in prm.items() if k != "mu"}
    try:
        iterates = spec.run(xp, *inputs, **run_params) if spec.task != "logistic" else \
            spec.run(xp, *inputs, mu=prm["mu"], **run_params)
    except (ValueError, ArithmeticError, RuntimeError) as exc:
        return result.finish(t0, "failed",
                             str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    for it in iterates:
        if not xp.isfinite(it):
            result.status = "diverged"
            result.error = f"non-finite iterate at step {len(result.steps)}"
            break
        raw, pred = target(it)
        result.steps.append(error_summary(pred, truth_pred))
        result.param_mse.append(error_summary(raw, truth).mse)
    return result.finish(t0, precision=p)

