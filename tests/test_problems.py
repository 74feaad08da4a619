import numpy as np
import pytest

from precision import problems


def test_seeded_and_reproducible():
    a = problems.gaussian_least_squares(5, 20, seed=3)
    b = problems.gaussian_least_squares(5, 20, seed=3)
    c = problems.gaussian_least_squares(5, 20, seed=4)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)
    assert a.X.shape == (20, 5) and a.X_query.shape == (32, 5)
    assert np.allclose(a.y, a.X @ a.w_true, rtol=1e-14)


@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e6])
def test_controlled_gram_condition_number(kappa):
    p = problems.controlled_least_squares(5, 20, kappa, seed=1)
    assert np.linalg.cond(p.X.T @ p.X) == pytest.approx(kappa, rel=0.01)
    ev = np.linalg.eigvalsh(p.X.T @ p.X / 20)
    assert ev[-1] == pytest.approx(1.0, rel=1e-10)


def test_conditioned_population_covariance():
    p = problems.conditioned_least_squares(6, 50, 100.0, seed=2)
    ev = np.linalg.eigvalsh(np.array(p.meta["sigma"]))
    assert ev[-1] / ev[0] == pytest.approx(100.0, rel=1e-8)
    assert 1.0 <= ev[-1] <= 100.0


def test_spd_matrix():
    A = problems.spd_matrix(5, 1e4, seed=0)
    assert np.array_equal(A, A.T)
    ev = np.linalg.eigvalsh(A)
    assert ev[0] == pytest.approx(1e-4, rel=1e-8) and ev[-1] == pytest.approx(1.0, rel=1e-10)


def test_noniso_covariance_eigenvalues():
    p = problems.noniso_least_squares(seed=0)
    ev = np.sort(np.linalg.eigvalsh(np.array(p.meta["sigma"])))
    assert np.allclose(ev, [0.25, 0.5, 1, 1, 1], atol=1e-12)


def test_logistic_labels_and_assumption():
    p = problems.logistic_regression(5, 2000, mu=0.1, seed=0)
    assert set(np.unique(p.y)) == {-1.0, 1.0}
    assert np.max(np.linalg.norm(p.X, axis=1)) <= 1.0 + 1e-15  # 000 Assumption 3.2
    assert np.mean(np.sign(p.X @ p.w_true) == p.y) > 0.99


@pytest.mark.parametrize(
    "kwargs,message",
    [({"dim": 0, "n_samples": 5}, "dim"), ({"dim": 2, "n_samples": 0}, "n_samples"),
     ({"dim": 2, "n_samples": 5, "noise_std": -1.0}, "noise_std")],
)
def test_bad_shapes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        problems.make_least_squares("gaussian", **kwargs)
    with pytest.raises(ValueError, match="unknown problem"):
        problems.make_least_squares("hilbert", dim=2, n_samples=2)
    with pytest.raises(ValueError, match="kappa"):
        problems.controlled_least_squares(3, 5, 0.5)


# --- the kernel-independent numerics the generators use (precision.deterministic) ----------
def test_tree_sum_is_the_stated_pairwise_tree():
    from precision import deterministic as det

    a = np.array([1e16, 1.0, -1e16, 1.0, 3.0])
    # level 1: (1e16 + -1e16), (1 + 1), carry 3; level 2: 0 + 2, carry 3; level 3: 2 + 3
    assert det.tree_sum(a) == 5.0
    assert float(sum(a)) == 4.0                    # left to right: another order, another sum
    m = np.random.default_rng(0).standard_normal((7, 5))
    assert np.array_equal(det.tree_sum(m, axis=0), np.array([det.tree_sum(c) for c in m.T]))
    assert det.tree_sum(np.zeros((0, 3)), axis=0).shape == (3,)


def test_deterministic_matmul_orthonormal_and_powers_are_accurate():
    from precision import deterministic as det

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((4, 3))
    assert np.allclose(det.matmul(a, b), a @ b, rtol=1e-14, atol=1e-14)
    assert np.allclose(det.matmul(a, b[:, 0]), a @ b[:, 0], rtol=1e-14, atol=1e-14)
    q = det.orthonormal(rng, 9, 5)
    assert np.abs(q.T @ q - np.eye(5)).max() < 1e-14
    g = np.random.default_rng(2).standard_normal((9, 5))
    qr_q, r = np.linalg.qr(g)
    assert np.allclose(det.orthonormal_columns(g), qr_q * np.sign(np.diag(r)), atol=1e-13)
    assert np.allclose(det.geometric(1e6, (-1, 2), 4), np.logspace(0, -3, 4), rtol=1e-15)
    assert det.geometric(1e6, (-1, 2), 4)[-1] == 1e-3 and det.power(2.0, (1, 2)) == 2 ** 0.5
    ev = det.eigvalsh(np.diag([3.0, 1.0, 1.0]))      # a repeated eigenvalue
    assert np.array_equal(ev, [1.0, 1.0, 3.0])
    h = g.T @ g
    assert np.allclose(det.eigvalsh(h), np.linalg.eigvalsh(h), rtol=1e-13)
    x = np.linspace(-3, 3, 13)
    assert np.allclose(det.tanh(x), np.tanh(x), rtol=1e-15, atol=0)
    slope, intercept = det.linear_fit(np.arange(5.0), 2.0 * np.arange(5.0) + 1.0)
    assert slope == 2.0 and intercept == 1.0

