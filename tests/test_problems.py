"""Tests for precision.problems: seeding, shapes, exact spectra, paper conventions, errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from precision import problems as P

# name -> builder(seed) for every generator, to check reproducibility uniformly.
BUILDERS: dict[str, Callable[[int], Any]] = {
    "gaussian": lambda s: P.gaussian_least_squares(4, 12, noise_std=0.1, seed=s),
    "conditioned": lambda s: P.conditioned_least_squares(4, 12, 1e3, noise_std=0.1, seed=s),
    "controlled": lambda s: P.controlled_least_squares(4, 12, 1e3, noise_std=0.1, seed=s),
    "noniso": lambda s: P.noniso_least_squares(seed=s),
    "logistic": lambda s: P.logistic_regression(seed=s, kappa=10.0),
    "spd": lambda s: P.spd_matrix(4, 1e2, seed=s),
    "design": lambda s: P.design_with_condition(4, 12, 1e2, seed=s),
}

ARRAY_FIELDS = ("X", "y", "w_true", "X_query")


def _arrays(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    return [getattr(obj, f) for f in ARRAY_FIELDS if hasattr(obj, f)]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_same_seed_identical_different_seed_differs(name: str) -> None:
    a, b, c = BUILDERS[name](7), BUILDERS[name](7), BUILDERS[name](8)
    for x, y in zip(_arrays(a), _arrays(b), strict=True):
        assert x.dtype == np.float64
        assert x.tobytes() == y.tobytes()  # bit for bit
    assert not np.array_equal(_arrays(a)[0], _arrays(c)[0])
    if not isinstance(a, np.ndarray):
        assert a.meta == b.meta


@pytest.mark.parametrize("name", sorted(P.PROBLEMS))
def test_shapes_and_noiseless_targets(name: str) -> None:
    kwargs: dict[str, Any] = {"dim": 5, "n_samples": 20, "n_query": 7, "seed": 1}
    if name in ("conditioned", "controlled"):
        kwargs["kappa"] = 50.0
    p = P.make_least_squares(name, **kwargs)
    assert isinstance(p, P.LeastSquaresProblem) and p.name == name
    assert p.X.shape == (20, 5) and p.y.shape == (20,) and p.w_true.shape == (5,)
    assert p.X_query.shape == (7, 5)
    assert (p.n_samples, p.dim, p.noise_std) == (20, 5, 0.0)
    assert p.meta["seed"] == 1
    np.testing.assert_allclose(p.y, p.X @ p.w_true, rtol=1e-14, atol=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "other"  # type: ignore[misc]


def test_make_least_squares_matches_direct_call() -> None:
    a = P.make_least_squares("controlled", dim=3, n_samples=9, kappa=10.0, seed=4)
    b = P.controlled_least_squares(3, 9, 10.0, seed=4)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert set(P.PROBLEMS) == {"gaussian", "conditioned", "controlled", "noniso"}


def test_noise_is_independent_of_design() -> None:
    clean = P.gaussian_least_squares(3, 4000, seed=5)
    noisy = P.gaussian_least_squares(3, 4000, noise_std=0.5, seed=5)
    assert np.array_equal(clean.X, noisy.X) and np.array_equal(clean.w_true, noisy.w_true)
    assert np.array_equal(clean.X_query, noisy.X_query)
    resid = noisy.y - noisy.X @ noisy.w_true
    assert np.std(resid) == pytest.approx(0.5, rel=0.05)
    assert noisy.noise_std == 0.5


def test_gaussian_is_standard_normal() -> None:
    p = P.gaussian_least_squares(4, 20000, seed=0)
    np.testing.assert_allclose(p.X.T @ p.X / 20000, np.eye(4), atol=0.03)


@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e6])
def test_controlled_gram_condition_number(kappa: float) -> None:
    p = P.controlled_least_squares(5, 20, kappa, seed=1)
    assert np.linalg.cond(p.X.T @ p.X) == pytest.approx(kappa, rel=0.01)
    H = np.linalg.eigvalsh(p.X.T @ p.X / 20)
    assert H[-1] == pytest.approx(1.0, rel=1e-10)
    assert H[0] == pytest.approx(1.0 / kappa, rel=1e-6)
    assert np.array_equal(p.X, P.design_with_condition(5, 20, kappa, seed=1))
    assert p.meta["gram_cond"] == pytest.approx(kappa, rel=1e-6)


def test_controlled_singular_values_and_query_distribution() -> None:
    X = P.design_with_condition(4, 10, 1e4, seed=2)
    s = np.linalg.svd(X / np.sqrt(10), compute_uv=False)
    np.testing.assert_allclose(s, np.geomspace(1.0, 1e-2, 4), rtol=1e-12)
    p = P.controlled_least_squares(4, 10, 1e4, n_query=20000, seed=2)
    np.testing.assert_allclose(p.X_query.T @ p.X_query / 20000, p.X.T @ p.X / 10, atol=0.05)


def test_spd_matrix_spectrum_and_symmetry() -> None:
    for kappa in (1.0, 1e2, 1e4):
        A = P.spd_matrix(6, kappa, seed=3)
        assert A.shape == (6, 6) and A.dtype == np.float64
        assert np.array_equal(A, A.T)  # exactly symmetric
        ev = np.linalg.eigvalsh(A)
        assert ev[0] == pytest.approx(1.0 / kappa, rel=1e-10)
        assert ev[-1] == pytest.approx(1.0, rel=1e-10)
        assert np.all(ev > 0)
    assert np.array_equal(P.spd_matrix(1, 1.0), np.ones((1, 1)))


def test_conditioned_population_covariance() -> None:
    p = P.conditioned_least_squares(6, 50, 1e3, seed=2)
    sigma = np.array(p.meta["sigma"])
    assert np.array_equal(sigma, sigma.T)
    ev = np.linalg.eigvalsh(sigma)
    assert ev[-1] / ev[0] == pytest.approx(1e3, rel=1e-10)
    lam_max, lam_min = p.meta["lambda_max"], p.meta["lambda_min"]
    assert 1.0 <= lam_max <= 100.0 and lam_min == lam_max / 1e3
    listed = p.meta["eigenvalues"]
    assert listed[0] == lam_max and listed[-1] == lam_min
    assert all(lam_min <= e <= lam_max for e in listed)
    np.testing.assert_allclose(ev, sorted(listed), rtol=1e-10)
    # the sample Gram matrix is only approximately kappa-conditioned
    assert p.meta["gram_cond"] == pytest.approx(np.linalg.cond(p.X.T @ p.X), rel=1e-6)


def test_conditioned_samples_follow_sigma() -> None:
    p = P.conditioned_least_squares(3, 40000, 10.0, n_query=40000, seed=6)
    sigma = np.array(p.meta["sigma"])
    tol = 0.05 * p.meta["lambda_max"]
    np.testing.assert_allclose(p.X.T @ p.X / 40000, sigma, atol=tol)
    np.testing.assert_allclose(p.X_query.T @ p.X_query / 40000, sigma, atol=tol)


def test_noniso_covariance_and_weight_distribution() -> None:
    p = P.noniso_least_squares(seed=0)
    assert p.X.shape == (20, 5)
    sigma, sigma_inv = np.array(p.meta["sigma"]), np.array(p.meta["sigma_inv"])
    assert np.array_equal(sigma, sigma.T)
    np.testing.assert_allclose(np.linalg.eigvalsh(sigma), [0.25, 0.5, 1, 1, 1], atol=1e-12)
    np.testing.assert_allclose(sigma @ sigma_inv, np.eye(5), atol=1e-12)
    assert not np.allclose(sigma, np.diag(np.diag(sigma)))  # rotated, not diagonal
    # w ~ N(0, Sigma^{-1})  =>  w^T Sigma w ~ chi^2_5, mean 5 (std of the mean ~0.16 here)
    q = [P.noniso_least_squares(n_samples=1, n_query=1, seed=s) for s in range(400)]
    stat = [x.w_true @ np.array(x.meta["sigma"]) @ x.w_true for x in q]
    assert np.mean(stat) == pytest.approx(5.0, abs=0.6)


def test_logistic_default_matches_paper_sizes() -> None:
    p = P.logistic_regression(seed=0)
    assert isinstance(p, P.LogisticProblem)
    assert p.X.shape == (26, 5) and p.y.shape == (26,) and p.w_true.shape == (5,)
    assert (p.mu, p.n_samples, p.dim, p.name) == (0.1, 26, 5, "logistic")


def test_logistic_bernoulli_labels() -> None:
    p = P.logistic_regression(5, 2000, mu=0.1, seed=0)
    assert set(np.unique(p.y)) == {-1.0, 1.0}  # 000 eq. 3.5 convention
    agree = np.mean(np.where(p.X @ p.w_true >= 0, 1.0, -1.0) == p.y)
    assert 0.7 < agree < 1.0  # correlated with the sign, but noisy
    # frequency of +1 matches the logistic model within 4 standard errors
    prob = 1.0 / (1.0 + np.exp(-(p.X @ p.w_true)))
    se = np.sqrt(np.sum(prob * (1 - prob)))
    assert abs(np.sum(p.y == 1.0) - np.sum(prob)) < 4 * se


def test_logistic_sign_labels_and_unit_ball() -> None:
    p = P.logistic_regression(5, 500, seed=1, kappa=100.0, labels="sign", unit_ball=True)
    assert np.array_equal(p.y, np.where(p.X @ p.w_true >= 0, 1.0, -1.0))
    assert np.max(np.linalg.norm(p.X, axis=1)) <= 1.0 + 1e-15  # 000 Assumption 3.2
    raw = P.logistic_regression(5, 500, seed=1, kappa=100.0, labels="sign")
    np.testing.assert_allclose(p.X, raw.X * p.meta["scale"], rtol=1e-15)
    ev = np.linalg.eigvalsh(np.array(p.meta["sigma"]))
    assert ev[-1] / ev[0] == pytest.approx(100.0, rel=1e-10)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"dim": 0, "n_samples": 5}, "dim"),
        ({"dim": True, "n_samples": 5}, "dim"),
        ({"dim": 2.5, "n_samples": 5}, "dim"),
        ({"dim": 2, "n_samples": 0}, "n_samples"),
        ({"dim": 2, "n_samples": 5, "n_query": 0}, "n_query"),
        ({"dim": 2, "n_samples": 5, "noise_std": -1.0}, "noise_std"),
        ({"dim": 2, "n_samples": 5, "noise_std": float("nan")}, "noise_std"),
    ],
)
def test_bad_shapes(kwargs: dict[str, Any], match: str) -> None:
    for name in P.PROBLEMS:
        extra = {"kappa": 10.0} if name in ("conditioned", "controlled") else {}
        if name == "noniso":
            extra = {"eigenvalues": (1.0, 2.0)}
        with pytest.raises(ValueError, match=match) as exc:
            P.make_least_squares(name, **kwargs, **extra)
        assert "\n" not in str(exc.value)  # one-line message


@pytest.mark.parametrize("call", [
    lambda: P.conditioned_least_squares(3, 5, 0.5),
    lambda: P.controlled_least_squares(3, 5, float("inf")),
    lambda: P.design_with_condition(3, 5, float("nan")),
    lambda: P.spd_matrix(3, 0.9),
    lambda: P.spd_matrix(1, 10.0),
    lambda: P.logistic_regression(kappa=0.0),
])
def test_bad_kappa(call: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="kappa"):
        call()


def test_other_errors() -> None:
    with pytest.raises(ValueError) as exc:
        P.make_least_squares("hilbert", dim=2, n_samples=2)
    assert str(exc.value) == (
        "unknown problem 'hilbert'; choose from: conditioned, controlled, gaussian, noniso")
    with pytest.raises(ValueError, match="n_samples >= dim"):
        P.controlled_least_squares(5, 4, 10.0)
    with pytest.raises(ValueError, match="eigenvalues"):
        P.noniso_least_squares(dim=4)
    with pytest.raises(ValueError, match="eigenvalues"):
        P.noniso_least_squares(dim=2, eigenvalues=(1.0, 0.0))
    with pytest.raises(ValueError, match="mu"):
        P.logistic_regression(mu=0.0)
    with pytest.raises(ValueError, match="labels"):
        P.logistic_regression(labels="probit")  # type: ignore[arg-type]
