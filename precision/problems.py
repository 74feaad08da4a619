"""Seeded problem generators: the float64 "exact inputs" of every measurement.

Each generator returns float64 numpy arrays in a frozen dataclass. It never computes a
solution: later code rounds the arrays into each precision and computes the truth in high
precision from the *rounded* values (:mod:`precision.truth`).

Seeding. Every generator calls ``numpy.random.default_rng(seed)`` once and spawns independent
child streams from it, one per ingredient (population / design, weights, query points, noise,
labels). Hence the same seed gives identical arrays bit for bit, and changing one ingredient's
size or switching the noise on leaves the other ingredients unchanged (e.g. a noisy problem has
exactly the design matrix of its noiseless twin).

Generators and the paper sections they implement:

* :func:`gaussian_least_squares` -- 001 App. D.2 (x, w ~ N(0, I_D), y = w^T x, noiseless).
* :func:`conditioned_least_squares` -- 000 App. D (ill-conditioned population covariance).
* :func:`design_with_condition` / :func:`controlled_least_squares` -- not from a paper: a design
  whose Gram matrix has condition number exactly kappa (for solver tests at a given kappa).
* :func:`noniso_least_squares` -- 003 Sec. 3.3 (Sigma = U^T D U, D = diag(1, 1, .5, .25, 1)).
* :func:`spd_matrix` -- SPD matrices for Newton-Schulz inversion (000 eq. 3.3-3.4).
* :func:`logistic_regression` -- 000 Sec. 3.2.2 eq. 3.5, Sec. 6 and App. D.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "PROBLEMS",
    "LeastSquaresProblem",
    "LogisticProblem",
    "conditioned_least_squares",
    "controlled_least_squares",
    "design_with_condition",
    "gaussian_least_squares",
    "logistic_regression",
    "make_least_squares",
    "noniso_least_squares",
    "spd_matrix",
]


# --------------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------------


def _require_float64(name: str, arr: np.ndarray, ndim: int) -> None:
    if not isinstance(arr, np.ndarray) or arr.dtype != np.float64 or arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D float64 numpy array")


# eq=False: the generated __eq__/__hash__ would compare/hash numpy arrays, which raises.
@dataclass(frozen=True, eq=False)
class LeastSquaresProblem:
    """A linear least-squares problem ``y = X w_true (+ noise)``.

    Attributes:
        X: (N, D) design matrix, one sample per row.
        y: (N,) targets.
        w_true: (D,) weights that generated ``y`` (not the least-squares solution when noisy or
            underdetermined; solutions are computed later from the rounded inputs).
        X_query: (Q, D) held-out query inputs on which predictions are compared.
        noise_std: standard deviation of the Gaussian noise added to ``y`` (0 = noiseless).
        name: generator name (a key of :data:`PROBLEMS`).
        meta: generator parameters and drawn quantities (seed, kappa, lambda_max, ...), as
            plain Python numbers and (nested) lists.
    """

    X: np.ndarray
    y: np.ndarray
    w_true: np.ndarray
    X_query: np.ndarray
    noise_std: float
    name: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_float64("X", self.X, 2)
        _require_float64("y", self.y, 1)
        _require_float64("w_true", self.w_true, 1)
        _require_float64("X_query", self.X_query, 2)
        n, d = self.X.shape
        if self.y.shape != (n,) or self.w_true.shape != (d,) or self.X_query.shape[1] != d:
            raise ValueError(
                f"inconsistent shapes: X {self.X.shape}, y {self.y.shape}, "
                f"w_true {self.w_true.shape}, X_query {self.X_query.shape}"
            )

    @property
    def n_samples(self) -> int:
        """Number of samples N (rows of ``X``)."""
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        """Feature dimension D (columns of ``X``)."""
        return int(self.X.shape[1])


@dataclass(frozen=True, eq=False)
class LogisticProblem:
    """Data of the mu-regularised logistic regression loss of 000 eq. 3.5.

    ``f(w) = 1/n sum_i log(1 + exp(-y_i w^T a_i)) + mu/2 ||w||^2``, so the labels are in
    **{-1, +1}** (000 Sec. 3.2.2), stored as float64 ``-1.0`` / ``+1.0``.

    Attributes:
        X: (n, d) covariates a_i, one per row.
        y: (n,) labels in {-1.0, +1.0}.
        mu: regularisation parameter (> 0).
        w_true: (d,) weights that generated the labels (not the minimiser of eq. 3.5).
        name: ``"logistic"``.
        meta: generator parameters and drawn quantities.
    """

    X: np.ndarray
    y: np.ndarray
    mu: float
    w_true: np.ndarray
    name: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_float64("X", self.X, 2)
        _require_float64("y", self.y, 1)
        _require_float64("w_true", self.w_true, 1)
        n, d = self.X.shape
        if self.y.shape != (n,) or self.w_true.shape != (d,):
            raise ValueError(
                f"inconsistent shapes: X {self.X.shape}, y {self.y.shape}, "
                f"w_true {self.w_true.shape}"
            )

    @property
    def n_samples(self) -> int:
        """Number of samples n."""
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        """Feature dimension d."""
        return int(self.X.shape[1])


# --------------------------------------------------------------------------------------------
# Validation and shared helpers
# --------------------------------------------------------------------------------------------


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_kappa(kappa: Any, dim: int) -> float:
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Real):
        raise ValueError(f"kappa must be a real number >= 1, got {kappa!r}")
    k = float(kappa)
    if not (math.isfinite(k) and k >= 1.0):
        raise ValueError(f"kappa must be a finite number >= 1, got {kappa!r}")
    if dim == 1 and k != 1.0:
        raise ValueError(f"kappa must be 1 when dim = 1, got {kappa!r}")
    return k


def _check_nonneg(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number >= 0, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _streams(seed: int, count: int) -> list[np.random.Generator]:
    """``count`` independent child generators of ``default_rng(seed)``."""
    return np.random.default_rng(seed).spawn(count)


def _haar_orthogonal(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """(n, k) matrix with orthonormal columns, Haar distributed: QR of an n x k Gaussian
    matrix with the signs of R's diagonal moved into Q (so the factorisation is unique)."""
    q, r = np.linalg.qr(rng.standard_normal((n, k)))
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    return q * signs[None, :]


def _spectrum(top: float, kappa: float, dim: int) -> np.ndarray:
    """``dim`` values geometrically spaced from ``top`` down to exactly ``top / kappa``."""
    if dim == 1:
        return np.array([top])
    vals = np.geomspace(top, top / kappa, dim)
    vals[0], vals[-1] = top, top / kappa  # endpoints exact, not 10**log10(.)
    return vals


def _symmetric(basis: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    """basis diag(eigenvalues) basis^T, made exactly symmetric in float64."""
    m = (basis * eigenvalues[None, :]) @ basis.T
    return (m + m.T) / 2


def _targets(X: np.ndarray, w: np.ndarray, noise_std: float, rng: np.random.Generator
             ) -> np.ndarray:
    """y = X w, plus N(0, noise_std^2) noise when noise_std > 0 (noiseless y is exactly X @ w)."""
    y = X @ w
    if noise_std > 0:
        y = y + noise_std * rng.standard_normal(y.shape[0])
    return y


def _gram_cond(X: np.ndarray) -> float:
    """cond(X^T X) from the singular values of X (a diagnostic stored in meta)."""
    s = np.linalg.svd(X, compute_uv=False)
    return float((s[0] / s[-1]) ** 2) if s[-1] > 0 and X.shape[0] >= X.shape[1] else math.inf


def _app_d_population(rng: np.random.Generator, dim: int, kappa: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ill-conditioned population covariance of 000 App. D.

    Paper: "sample a random matrix A and create its SVD A = U S V^T; lambda_max ~ U[1, 100];
    lambda_min = lambda_max / kappa; the rest of the eigenvalues uniformly random in
    [lambda_min, lambda_max]; Sigma = U S U^T". A is taken square (dim x dim) Gaussian (the
    paper does not say which distribution); lambda_max and lambda_min are placed explicitly so
    the population condition number is kappa up to float64 rounding.

    Returns (Sigma, eigenvalues in descending order, factor F = U diag(sqrt(eigenvalues)))
    with Sigma = F F^T, so x = F z, z ~ N(0, I) is a draw from N(0, Sigma).
    """
    A = rng.standard_normal((dim, dim))
    U, _, _ = np.linalg.svd(A)  # column signs are irrelevant: U S U^T is invariant to them
    lam_max = float(rng.uniform(1.0, 100.0))
    lam_min = lam_max / kappa
    inner = rng.uniform(lam_min, lam_max, size=max(dim - 2, 0))
    ev = np.concatenate([[lam_max], np.sort(inner)[::-1], [lam_min]])[:dim]
    return _symmetric(U, ev), ev, U * np.sqrt(ev)[None, :]


# --------------------------------------------------------------------------------------------
# Least-squares generators
# --------------------------------------------------------------------------------------------


def gaussian_least_squares(dim: int, n_samples: int, *, noise_std: float = 0.0,
                           n_query: int = 32, seed: int = 0) -> LeastSquaresProblem:
    """Isotropic Gaussian least squares (001 App. D.2, the setup of Garg et al. 2022).

    x_i ~ N(0, I_D), w ~ N(0, I_D), y_i = w^T x_i (+ N(0, noise_std^2)); query points
    x_q ~ N(0, I_D). The paper's main regime is noiseless with N >= D (fully determined);
    N < D is allowed here too (001 Fig. 1, left).
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    n_query = _check_count("n_query", n_query)
    noise_std = _check_nonneg("noise_std", noise_std)
    r_x, r_w, r_q, r_noise = _streams(seed, 4)
    X = r_x.standard_normal((n_samples, dim))
    w = r_w.standard_normal(dim)
    Xq = r_q.standard_normal((n_query, dim))
    y = _targets(X, w, noise_std, r_noise)
    meta = {"seed": seed, "dim": dim, "n_samples": n_samples, "n_query": n_query,
            "noise_std": noise_std, "source": "001 App. D.2"}
    return LeastSquaresProblem(X, y, w, Xq, noise_std, "gaussian", meta)


def conditioned_least_squares(dim: int, n_samples: int, kappa: float, *,
                              noise_std: float = 0.0, n_query: int = 32, seed: int = 0
                              ) -> LeastSquaresProblem:
    """Least squares with an ill-conditioned population covariance (000 App. D).

    Sigma = U S U^T with U from the SVD of a random Gaussian matrix, S = diag(lambda_max,
    ..., lambda_min): lambda_max ~ U[1, 100], lambda_min = lambda_max / kappa (both placed
    exactly), the other dim - 2 eigenvalues ~ U[lambda_min, lambda_max]. Samples and query
    points x ~ N(0, Sigma); w ~ N(0, I) (000 App. D leaves w unspecified; 000 Sec. 6 only says
    y_i = w_*^T x_i); y = X w (+ noise).

    cond(Sigma) = kappa (the population); the *sample* Gram matrix X^T X has condition number
    only approximately kappa (recorded as ``meta["gram_cond"]``). Use
    :func:`controlled_least_squares` when cond(X^T X) itself must equal kappa.

    meta: seed, kappa, lambda_max, lambda_min, eigenvalues (descending), sigma (nested list),
    gram_cond.
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    n_query = _check_count("n_query", n_query)
    kappa = _check_kappa(kappa, dim)
    noise_std = _check_nonneg("noise_std", noise_std)
    r_pop, r_x, r_w, r_q, r_noise = _streams(seed, 5)
    sigma, ev, F = _app_d_population(r_pop, dim, kappa)
    X = r_x.standard_normal((n_samples, dim)) @ F.T
    w = r_w.standard_normal(dim)
    Xq = r_q.standard_normal((n_query, dim)) @ F.T
    y = _targets(X, w, noise_std, r_noise)
    meta = {"seed": seed, "dim": dim, "n_samples": n_samples, "n_query": n_query,
            "noise_std": noise_std, "kappa": kappa, "lambda_max": float(ev[0]),
            "lambda_min": float(ev[-1]), "eigenvalues": ev.tolist(), "sigma": sigma.tolist(),
            "gram_cond": _gram_cond(X), "source": "000 App. D"}
    return LeastSquaresProblem(X, y, w, Xq, noise_std, "conditioned", meta)


def _controlled_factors(rng: np.random.Generator, dim: int, n_samples: int, kappa: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    U = _haar_orthogonal(rng, n_samples, dim)
    V = _haar_orthogonal(rng, dim, dim)
    s = _spectrum(1.0, math.sqrt(kappa), dim)  # 1 ... 1/sqrt(kappa), endpoints exact
    return U, s, V


def design_with_condition(dim: int, n_samples: int, kappa: float, *, seed: int = 0
                          ) -> np.ndarray:
    """(N, D) design with exactly controlled singular values, cond(X^T X) = kappa.

    Not from the papers (they control the population covariance, 000 App. D); this is for
    testing solvers at a prescribed condition number. X = sqrt(N) U diag(s) V^T with U (N x D)
    and V (D x D) Haar-random orthonormal (QR of Gaussian matrices, sign-fixed) and s
    geometrically spaced from 1 down to 1/sqrt(kappa). Hence cond(X) = sqrt(kappa),
    cond(X^T X) = kappa, and the normalised Gram matrix H = X^T X / N has eigenvalues
    geometrically spaced over exactly [1/kappa, 1] (rows have O(1) entries, like N(0, I) data).
    Both hold up to float64 rounding of the product. Requires N >= D.
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    kappa = _check_kappa(kappa, dim)
    if n_samples < dim:
        raise ValueError(f"a design with controlled condition needs n_samples >= dim, "
                         f"got n_samples={n_samples} < dim={dim}")
    (r_design,) = _streams(seed, 1)
    U, s, V = _controlled_factors(r_design, dim, n_samples, kappa)
    return math.sqrt(n_samples) * (U * s[None, :]) @ V.T


def controlled_least_squares(dim: int, n_samples: int, kappa: float, *,
                             noise_std: float = 0.0, n_query: int = 32, seed: int = 0
                             ) -> LeastSquaresProblem:
    """Least squares on :func:`design_with_condition` (cond(X^T X) = kappa within rounding).

    X = design_with_condition(dim, n_samples, kappa, seed=seed) (the same array), w ~ N(0, I),
    y = X w (+ noise). Query points are in-distribution: x_q ~ N(0, X^T X / N), i.e.
    x_q = V diag(s) z. meta: seed, kappa, singular_values (of X / sqrt(N)), gram_cond.
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    n_query = _check_count("n_query", n_query)
    kappa = _check_kappa(kappa, dim)
    noise_std = _check_nonneg("noise_std", noise_std)
    X = design_with_condition(dim, n_samples, kappa, seed=seed)
    # Re-derive V and s from the same child stream design_with_condition used.
    r_design, r_w, r_q, r_noise = _streams(seed, 4)
    _, s, V = _controlled_factors(r_design, dim, n_samples, kappa)
    w = r_w.standard_normal(dim)
    Xq = r_q.standard_normal((n_query, dim)) @ (V * s[None, :]).T
    y = _targets(X, w, noise_std, r_noise)
    meta = {"seed": seed, "dim": dim, "n_samples": n_samples, "n_query": n_query,
            "noise_std": noise_std, "kappa": kappa, "singular_values": s.tolist(),
            "gram_cond": _gram_cond(X), "source": "constructed (not from a paper)"}
    return LeastSquaresProblem(X, y, w, Xq, noise_std, "controlled", meta)


def noniso_least_squares(dim: int = 5, n_samples: int = 20, *, n_query: int = 32,
                         seed: int = 0,
                         eigenvalues: tuple[float, ...] = (1, 1, 0.5, 0.25, 1),
                         noise_std: float = 0.0) -> LeastSquaresProblem:
    """Non-isotropic least squares of 003 Sec. 3.3.

    Paper: d = 5, n = 20, x^(i) ~ N(0, Sigma), w* ~ N(0, Sigma^{-1}), Sigma = U^T D U with U a
    uniformly random orthogonal matrix and D = diag(1, 1, 0.5, 0.25, 1); noiseless (the loss
    2.11 is R(w) = 1/(2n) ||X^T w - X^T w*||^2). U is Haar (sign-fixed QR of a Gaussian
    matrix). Query points come from the same N(0, Sigma) ("test data is independently sampled
    from the same distribution", 003 Fig. 2). ``noise_std`` is an extension (default 0).

    meta: seed, eigenvalues, sigma and sigma_inv (nested lists).
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    n_query = _check_count("n_query", n_query)
    noise_std = _check_nonneg("noise_std", noise_std)
    ev = np.asarray(eigenvalues, dtype=np.float64)
    if ev.ndim != 1 or ev.shape[0] != dim:
        raise ValueError(f"need exactly dim={dim} eigenvalues, got {len(eigenvalues)}")
    if not (np.all(np.isfinite(ev)) and np.all(ev > 0)):
        raise ValueError(f"eigenvalues must be finite and > 0, got {tuple(eigenvalues)}")
    r_u, r_x, r_w, r_q, r_noise = _streams(seed, 5)
    U = _haar_orthogonal(r_u, dim, dim)
    B = U.T  # Sigma = U^T D U = B D B^T
    sigma = _symmetric(B, ev)
    sigma_inv = _symmetric(B, 1.0 / ev)
    F = B * np.sqrt(ev)[None, :]  # Sigma = F F^T
    X = r_x.standard_normal((n_samples, dim)) @ F.T
    w = (B * (1.0 / np.sqrt(ev))[None, :]) @ r_w.standard_normal(dim)  # ~ N(0, Sigma^{-1})
    Xq = r_q.standard_normal((n_query, dim)) @ F.T
    y = _targets(X, w, noise_std, r_noise)
    meta = {"seed": seed, "dim": dim, "n_samples": n_samples, "n_query": n_query,
            "noise_std": noise_std, "eigenvalues": ev.tolist(), "sigma": sigma.tolist(),
            "sigma_inv": sigma_inv.tolist(), "source": "003 Sec. 3.3"}
    return LeastSquaresProblem(X, y, w, Xq, noise_std, "noniso", meta)


# --------------------------------------------------------------------------------------------
# Matrix inversion and logistic regression
# --------------------------------------------------------------------------------------------


def spd_matrix(dim: int, kappa: float, *, seed: int = 0) -> np.ndarray:
    """Symmetric positive-definite (dim, dim) matrix for Newton-Schulz inversion (000 eq. 3.3,
    3.4; the eigenvalue layout is our choice, the papers give none for this test).

    A = Q diag(lambda) Q^T with Q Haar-random orthogonal and lambda geometrically
    (log-)spaced from 1 down to 1/kappa, endpoints exact; symmetrised as (A + A^T) / 2 so it is
    exactly symmetric in float64. Its eigenvalues equal lambda up to float64 rounding of the
    product (absolute error ~1e-16), so cond(A) = kappa with relative error ~1e-16 * kappa.
    """
    dim = _check_count("dim", dim)
    kappa = _check_kappa(kappa, dim)
    (r_q,) = _streams(seed, 1)
    Q = _haar_orthogonal(r_q, dim, dim)
    return _symmetric(Q, _spectrum(1.0, kappa, dim))


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def logistic_regression(dim: int = 5, n_samples: int = 26, *, mu: float = 0.1, seed: int = 0,
                        kappa: float | None = None,
                        labels: Literal["bernoulli", "sign"] = "bernoulli",
                        unit_ball: bool = False) -> LogisticProblem:
    """Data for the mu-regularised logistic loss of 000 eq. 3.5; labels in {-1, +1}.

    Paper (000): d = 5, n = 26, mu = 0.1 (Sec. 6); covariates from the App. D covariance
    (App. D: "for both the task of linear and logistic regression"); Sec. 3.2.2 states the
    labels as y_i = sign(a_i^T w_*) in {-1, +1}; Assumption 3.2 (||a_i|| <= 1) is used by the
    theory. Unspecified by the paper: the distribution of w_* (chosen: N(0, I)), the kappa of
    the logistic experiments (chosen: kappa=None gives isotropic a_i ~ N(0, I); a number
    uses the App. D covariance as in :func:`conditioned_least_squares`), and whether the
    experiments enforce Assumption 3.2.

    Choices:
        labels="bernoulli" (default): y_i = +1 with probability sigmoid(w_*^T a_i), else -1 --
            the model whose negative log-likelihood is eq. 3.5 without the penalty.
            labels="sign": y_i = sign(a_i^T w_*) exactly as Sec. 3.2.2 writes (sign(0) = +1).
        unit_ball=True: divide all rows by one common factor max(1, max_i ||a_i||) so that
            Assumption 3.2 holds (a global scale keeps the covariance's condition number);
            labels are drawn from the scaled a_i. Default False (raw App. D / Gaussian data).

    meta: seed, mu, kappa, labels, unit_ball, scale (the factor applied), and with kappa the
    drawn lambda_max, eigenvalues and sigma.
    """
    dim = _check_count("dim", dim)
    n_samples = _check_count("n_samples", n_samples)
    if isinstance(mu, bool) or not isinstance(mu, numbers.Real) or not (
            math.isfinite(float(mu)) and float(mu) > 0):
        raise ValueError(f"mu must be a finite number > 0, got {mu!r}")
    if labels not in ("bernoulli", "sign"):
        raise ValueError(f"labels must be 'bernoulli' or 'sign', got {labels!r}")
    kappa_f = None if kappa is None else _check_kappa(kappa, dim)
    r_pop, r_x, r_w, r_y = _streams(seed, 4)
    meta: dict[str, Any] = {"seed": seed, "dim": dim, "n_samples": n_samples, "mu": float(mu),
                            "kappa": kappa_f, "labels": labels, "unit_ball": bool(unit_ball),
                            "source": "000 Sec. 3.2.2 eq. 3.5, Sec. 6, App. D"}
    Z = r_x.standard_normal((n_samples, dim))
    if kappa_f is None:
        A = Z
    else:
        sigma, ev, F = _app_d_population(r_pop, dim, kappa_f)
        A = Z @ F.T
        meta.update(lambda_max=float(ev[0]), lambda_min=float(ev[-1]), eigenvalues=ev.tolist(),
                    sigma=sigma.tolist())
    scale = 1.0
    if unit_ball:
        scale = 1.0 / max(1.0, float(np.max(np.linalg.norm(A, axis=1))))
        A = A * scale
    meta["scale"] = scale
    w = r_w.standard_normal(dim)
    margin = A @ w
    if labels == "sign":
        y = np.where(margin >= 0, 1.0, -1.0)
    else:
        prob_plus = np.exp(_log_sigmoid(margin))  # sigmoid(margin), no overflow
        y = np.where(r_y.uniform(size=n_samples) < prob_plus, 1.0, -1.0)
    return LogisticProblem(A, y, float(mu), w, "logistic", meta)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

#: Least-squares generators by name (the ``kind`` of a suite's problem table).
PROBLEMS: dict[str, Callable[..., LeastSquaresProblem]] = {
    "gaussian": gaussian_least_squares,
    "conditioned": conditioned_least_squares,
    "controlled": controlled_least_squares,
    "noniso": noniso_least_squares,
}


def make_least_squares(name: str, **kwargs: Any) -> LeastSquaresProblem:
    """Build the least-squares problem ``name`` (a key of :data:`PROBLEMS`) from ``kwargs``.

    Raises ValueError for an unknown name (listing the valid ones) and, from the generator, a
    one-line ValueError for impossible parameters (dim, n_samples or n_query < 1, kappa < 1,
    noise_std < 0, ...). Unknown keyword arguments raise TypeError as usual.
    """
    try:
        generator = PROBLEMS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown problem '{name}'; choose from: {', '.join(sorted(PROBLEMS))}"
        ) from None
    return generator(**kwargs)
