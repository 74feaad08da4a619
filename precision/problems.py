"""Seeded problem generators (float64 numpy arrays = the exact inputs before rounding).

Generators never compute solutions: a subject's truth is computed later, in certified high
precision, from the inputs *after* they were rounded into the subject's precision
(:mod:`precision.truth`). Same seed, same arrays, bit for bit, on every machine: draws come
from ``numpy.random.default_rng`` and every product, sum, orthonormalisation and power from
:mod:`precision.deterministic` (never BLAS, LAPACK or a SIMD-dispatched ufunc), so the arrays
do not depend on the CPU kernel or the thread count (data version
:data:`~precision.deterministic.DATA_VERSION`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from precision import deterministic as det
from precision.deterministic import orthonormal
from precision.tasks import TASK_CLASSES, Affine, Multiply, Read


@dataclass(frozen=True)
class LeastSquaresProblem:
    """y = X w_true (+ noise). X: (N, D), y: (N,), w_true: (D,), X_query: (Q, D)."""

    X: np.ndarray
    y: np.ndarray
    w_true: np.ndarray
    X_query: np.ndarray
    noise_std: float
    name: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        return int(self.X.shape[1])


@dataclass(frozen=True)
class LogisticProblem:
    """Regularised logistic regression data of 000 eq. 3.5: A (n, d), labels y in {-1, +1}."""

    X: np.ndarray
    y: np.ndarray
    mu: float
    w_true: np.ndarray
    name: str
    meta: dict[str, Any] = field(default_factory=dict)


#: Most entries of any generated array (N x D design, Q x D queries, D x D covariance): a
#: bigger problem is a one-line error before anything is generated, not exhausted memory.
MAX_ELEMENTS = 1_000_000


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _finite(name: str, value: Any, low: float, what: str) -> None:
    """``value`` a finite number >= ``low`` (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or \
            not math.isfinite(value) or not value >= low:
        raise ValueError(f"{name} must be {what}, got {value!r}")


def _check(dim: int, n_samples: int, n_query: int = 1, noise_std: float = 0.0,
           kappa: float = 1.0, *, rows: str = "n_samples") -> None:
    """Types, ranges and size of the common generator arguments (``rows``: the name of the
    sample count in messages)."""
    _positive_int("dim", dim)
    _positive_int(rows, n_samples)
    _positive_int("n_query", n_query)
    _finite("noise_std", noise_std, 0.0, "a finite number >= 0")
    _finite("kappa", kappa, 1.0, "a finite number >= 1")
    for name, count in ((rows, n_samples), ("n_query", n_query), ("dim", dim)):
        if count * dim > MAX_ELEMENTS:
            raise ValueError(f"problem too large: {name} x dim = {count} x {dim} = "
                             f"{count * dim:.3g} entries (at most {MAX_ELEMENTS:.3g})")


def _overdetermined(dim: int, n_samples: int) -> None:
    """Least squares has one solution, the truth every run is measured against, only when X
    (n_samples x dim) can have full column rank: n_samples >= dim."""
    if n_samples < dim:
        raise ValueError(f"least squares needs n_samples >= dim (the truth is the unique "
                         f"least-squares solution), got n_samples = {n_samples} < dim = {dim}")


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def _targets(rng: np.random.Generator, X: np.ndarray, w: np.ndarray, noise_std: float
             ) -> np.ndarray:
    y = det.matmul(X, w)
    if noise_std > 0:
        y = y + float(noise_std) * rng.standard_normal(y.shape)
    return y


def gaussian_least_squares(dim: int, n_samples: int, *, noise_std: float = 0.0,
                           n_query: int = 32, seed: int = 0) -> LeastSquaresProblem:
    """001 App. D.2: x_i, w ~ N(0, I_D), y_i = w^T x_i (+ N(0, noise_std^2))."""
    _check(dim, n_samples, n_query, noise_std)
    _overdetermined(dim, n_samples)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, dim))
    w = rng.standard_normal(dim)
    y = _targets(rng, X, w, noise_std)
    Xq = rng.standard_normal((n_query, dim))
    return LeastSquaresProblem(X, y, w, Xq, float(noise_std), "gaussian",
                               {"seed": seed, "dim": dim, "n_samples": n_samples})


def population_covariance(dim: int, kappa: float, rng: np.random.Generator
                          ) -> tuple[np.ndarray, np.ndarray]:
    """000 App. D: Sigma = U S U^T with lambda_max ~ U[1, 100], lambda_min = lambda_max/kappa,
    the other eigenvalues uniform in [lambda_min, lambda_max]. Returns (Sigma, eigenvalues)."""
    sigma, ev, _ = _covariance(dim, kappa, rng)
    return sigma, ev


def _covariance(dim: int, kappa: float, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`population_covariance` and a square root R of Sigma (Sigma = R R^T):
    R = U diag(sqrt(lambda)), so x = R z ~ N(0, Sigma) needs no Cholesky factorisation."""
    lam_max = det.uniform(rng, 1.0, 100.0)
    lam_min = lam_max / float(kappa)
    inner = det.uniform(rng, lam_min, lam_max, size=max(dim - 2, 0))
    ev = np.concatenate([[lam_max], inner, [lam_min]])[:dim] if dim > 1 else np.array([lam_max])
    U = orthonormal(rng, dim, dim)
    sigma = det.matmul(U * ev[None, :], U.T)
    return (sigma + sigma.T) / 2, np.sort(ev), U * np.sqrt(ev)[None, :]


def conditioned_least_squares(dim: int, n_samples: int, kappa: float, *,
                              noise_std: float = 0.0, n_query: int = 32, seed: int = 0
                              ) -> LeastSquaresProblem:
    """000 App. D: x_i ~ N(0, Sigma) with cond(Sigma) = kappa; w ~ N(0, I).

    The *population* covariance has condition number kappa; the sample Gram matrix X^T X only
    approximately.
    """
    _check(dim, n_samples, n_query, noise_std, kappa)
    _overdetermined(dim, n_samples)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    sigma, ev, root = _covariance(dim, kappa, rng)
    X = det.matmul(rng.standard_normal((n_samples, dim)), root.T)
    w = rng.standard_normal(dim)
    y = _targets(rng, X, w, noise_std)
    Xq = det.matmul(rng.standard_normal((n_query, dim)), root.T)
    return LeastSquaresProblem(X, y, w, Xq, float(noise_std), "conditioned", {
        "seed": seed, "kappa": kappa, "eigenvalues": ev.tolist(), "sigma": sigma.tolist()})


def design_with_condition(dim: int, n_samples: int, kappa: float, *, seed: int = 0
                          ) -> np.ndarray:
    """X = U diag(s) V^T (N, D), N >= D, with cond(X^T X) = kappa exactly (up to float64).

    Singular values are log-spaced from 1 down to 1/sqrt(kappa), so the Gram matrix spans
    [1/kappa, 1] and cond(X) = sqrt(kappa). Scaled by sqrt(N) so that X^T X / N has
    eigenvalues in [1/kappa, 1].
    """
    _check(dim, n_samples, 1, 0.0, kappa)
    _check_seed(seed)
    if n_samples < dim:
        raise ValueError(f"controlled design needs n_samples >= dim, got {n_samples} < {dim}")
    rng = np.random.default_rng(seed)
    U = orthonormal(rng, n_samples, dim)
    V = orthonormal(rng, dim, dim)
    s = det.geometric(kappa, (-1, 2), dim)        # 1 .. kappa^(-1/2)
    return det.matmul(math.sqrt(n_samples) * (U * s[None, :]), V.T)


def controlled_least_squares(dim: int, n_samples: int, kappa: float, *, noise_std: float = 0.0,
                             n_query: int = 32, seed: int = 0) -> LeastSquaresProblem:
    """Least squares on :func:`design_with_condition` (cond(X^T X) = kappa), w ~ N(0, I);
    query points x_q ~ N(0, I)."""
    _check(dim, n_samples, n_query, noise_std, kappa)
    _check_seed(seed)
    X = design_with_condition(dim, n_samples, kappa, seed=seed)
    rng = np.random.default_rng([seed, 1])
    w = rng.standard_normal(dim)
    y = _targets(rng, X, w, noise_std)
    Xq = rng.standard_normal((n_query, dim))
    return LeastSquaresProblem(X, y, w, Xq, float(noise_std), "controlled",
                               {"seed": seed, "kappa": kappa})


def noniso_least_squares(dim: int = 5, n_samples: int = 20, *, n_query: int = 32,
                         seed: int = 0, eigenvalues: tuple[float, ...] = (1, 1, 0.5, 0.25, 1),
                         noise_std: float = 0.0) -> LeastSquaresProblem:
    """003 Sec. 3.3: Sigma = U^T diag(eigenvalues) U with U random orthogonal,
    x_i ~ N(0, Sigma), w ~ N(0, Sigma^{-1}), y = w^T x."""
    _check(dim, n_samples, n_query, noise_std)
    _overdetermined(dim, n_samples)
    _check_seed(seed)
    if not isinstance(eigenvalues, list | tuple) or len(eigenvalues) != dim:
        raise ValueError(f"eigenvalues must be a list of dim = {dim} positive numbers, "
                         f"got {eigenvalues!r}")
    for v in eigenvalues:
        _finite("every eigenvalue", v, 0.0, "a finite number > 0")
        if v == 0:
            raise ValueError(f"eigenvalues must be > 0, got {eigenvalues!r}")
    rng = np.random.default_rng(seed)
    U = orthonormal(rng, dim, dim)
    ev = np.asarray(eigenvalues, dtype=np.float64)
    sigma = det.matmul(U.T * ev[None, :], U)
    sigma = (sigma + sigma.T) / 2
    # rows x = z diag(sqrt(ev)) U ~ N(0, Sigma); w = z diag(1/sqrt(ev)) U ~ N(0, Sigma^-1)
    root = np.sqrt(ev)[:, None] * U
    inv_root = (1.0 / np.sqrt(ev))[:, None] * U
    X = det.matmul(rng.standard_normal((n_samples, dim)), root)
    w = det.matmul(rng.standard_normal(dim), inv_root)
    y = _targets(rng, X, w, noise_std)
    Xq = det.matmul(rng.standard_normal((n_query, dim)), root)
    return LeastSquaresProblem(X, y, w, Xq, float(noise_std), "noniso",
                               {"seed": seed, "sigma": sigma.tolist()})


def spd_matrix(dim: int, kappa: float, *, seed: int = 0) -> np.ndarray:
    """Symmetric positive-definite (dim, dim) matrix, eigenvalues log-spaced over [1/kappa, 1]
    in a random orthonormal basis; symmetrised so it is exactly symmetric in float64."""
    _check(dim, 1, 1, 0.0, kappa)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    Q = orthonormal(rng, dim, dim)
    ev = det.geometric(kappa, (-1, 1), dim)       # 1 .. 1/kappa
    A = det.matmul(Q * ev[None, :], Q.T)
    return (A + A.T) / 2


def logistic_regression(dim: int = 5, n_samples: int = 26, *, mu: float = 0.1, seed: int = 0,
                        kappa: float | None = None) -> LogisticProblem:
    """000 Sec. 3.2.2 / App. D: covariates a_i (Gaussian, or the App. D covariance when kappa
    is given) scaled to ||a_i|| <= 1 (Assumption 3.2); w_* ~ N(0, I); labels
    y_i = sign(a_i^T w_*) in {-1, +1} as eq. 3.5's text states (ties -> +1)."""
    _check(dim, n_samples)
    _check_seed(seed)
    _finite("mu", mu, 0.0, "a finite number > 0")
    if mu == 0:
        raise ValueError(f"mu must be > 0, got {mu!r}")
    rng = np.random.default_rng(seed)
    if kappa is None:
        A = rng.standard_normal((n_samples, dim))
    else:
        _check(dim, n_samples, kappa=kappa)
        _, _, root = _covariance(dim, kappa, rng)
        A = det.matmul(rng.standard_normal((n_samples, dim)), root.T)
    A = A / max(1.0, float(np.max(np.sqrt(det.tree_sum(A * A, axis=1)))))
    w = rng.standard_normal(dim)
    y = np.where(det.matmul(A, w) >= 0, 1.0, -1.0)
    return LogisticProblem(A, y, float(mu), w, "logistic",
                           {"seed": seed, "kappa": kappa, "mu": mu})


@dataclass(frozen=True)
class PrimitiveProblem:
    """One input u (N, D) of a linear-algebra primitive (001 eq. 41-43) and its task
    (:class:`~precision.tasks.Read`, :class:`~precision.tasks.Affine` or
    :class:`~precision.tasks.Multiply`, which holds the parameters)."""

    u: np.ndarray
    task: Read | Affine | Multiply
    name: str = "primitive"


#: The task options the constructions fix (a problem table gives the others): READ causal
#: (the BaseConv construction is causal: i < j); AFFINE's H ~ N(0, 1) (h_var = 1, where the
#: probes' default is 001 D.3's 3).
FIXED_OPTIONS: dict[str, dict[str, Any]] = {"read": {"causal": True}, "affine": {"h_var": 1.0},
                                            "multiply": {}}
PRIMITIVE_OPS = tuple(FIXED_OPTIONS)


def primitive_problem(op: str, dim: int = 20, seq_len: int = 40, *, seed: int = 0,
                      **params: Any) -> PrimitiveProblem:
    """u ~ N(0, 1)^{N x D} (001 App. D.2.3: D = 20, N = 40 = ``seq_len``), then the
    parameters of task ``op`` (its class's options: READ's i, j, a, b; AFFINE's d_out;
    MULTIPLY's a, b, d_out; :data:`FIXED_OPTIONS` the rest), both drawn from
    ``default_rng([seed, 7])`` in that order.
    """
    _check(dim, seq_len, rows="seq_len")
    _check_seed(seed)
    if op not in PRIMITIVE_OPS:
        raise ValueError(f"unknown primitive '{op}'; choose from: {', '.join(PRIMITIVE_OPS)}")
    rng = np.random.default_rng([seed, 7])
    u = rng.standard_normal((seq_len, dim))
    task = TASK_CLASSES[op](rng, dim=dim, n=seq_len, **FIXED_OPTIONS[op], **params)
    return PrimitiveProblem(u, task)


PROBLEMS: dict[str, Callable[..., LeastSquaresProblem]] = {
    "gaussian": gaussian_least_squares,
    "conditioned": conditioned_least_squares,
    "controlled": controlled_least_squares,
    "noniso": noniso_least_squares,
}


def make_least_squares(name: str, **kwargs: Any) -> LeastSquaresProblem:
    """Build the least-squares problem ``name`` ("gaussian", "conditioned", ...)."""
    if name not in PROBLEMS:
        raise ValueError(f"unknown problem '{name}'; choose from: {', '.join(sorted(PROBLEMS))}")
    return PROBLEMS[name](**kwargs)
