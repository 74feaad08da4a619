"""002 ridge baselines (probes/studies/ridge_baselines.py) and the noisy_regression studies."""

from __future__ import annotations

import re

import numpy as np
import pytest

from precision.precisions import parse_precision
from probes.studies import StudyError, get_study
from probes.studies import noisy_regression as nr
from probes.studies import ridge_baselines as rb
from probes.studies.noisy_regression_data import sample_batch

F64 = parse_precision("float64")


def _batch(size: int, noise: object, seed: int, d: int = 10, n: int = 20):
    b = sample_batch(size, d, n, noise, np.random.default_rng(seed))
    return b, rb.spectral_batch(b.X, b.y, b.x_query)


def test_ridge_by_eigenbasis_is_the_ridge_formula() -> None:
    # d = 1 by hand: w = sum x y / (sum x^2 + lam)
    X = np.array([[[1.0], [2.0], [-1.0]]])
    y = np.array([[1.0, 3.0, 0.5]])
    sb = rb.spectral_batch(X, y, np.array([[2.0]]))
    w = rb.coef_to_weights(sb, rb.ridge_coef(sb, 4.0))
    assert w[0, 0] == pytest.approx((1 + 6 - 0.5) / (6 + 4))
    assert rb.predict(sb, rb.ridge_coef(sb, 4.0))[0] == pytest.approx(2 * 6.5 / 10)
    # d = 10, per-sequence lambda: eigenbasis == direct solve of (X^T X + lam I) w = X^T y
    b, sb = _batch(50, "uniform:3", 0)
    lam = b.sigma ** 2
    direct = rb.ridge_weights(b.X, b.y, lam)
    np.testing.assert_allclose(rb.coef_to_weights(sb, rb.ridge_coef(sb, lam)), direct,
                               rtol=1e-10, atol=1e-12)
    # lam = 0 is OLS; noiseless data -> the true w
    _, sb0 = _batch(5, 0, 1)
    np.testing.assert_allclose(rb.coef_to_weights(sb0, rb.ridge_coef(sb0, 0.0)),
                               sample_batch(5, 10, 20, 0, np.random.default_rng(1)).w,
                               atol=1e-10)


def test_ada_noise_estimate_is_unbiased_and_thresholds() -> None:
    _, sb = _batch(20000, "fixed:2", 2)
    est = rb.ada_noise_variance(sb)
    # RSS / (n - d) ~ sigma^2 chi2_10 / 10: mean 4, SE 4 sqrt(0.2 / 20000) = 0.0126
    assert abs(est.mean() - 4.0) < 0.05
    assert est.std() == pytest.approx(4 * np.sqrt(0.2), rel=0.05)
    lam = rb.tuned_lambda(np.array([1.0, 5.0, 9.0]), 2.0, 6.0)
    np.testing.assert_allclose(lam, [2.0, 10.0, 12.0])
    # zero re-estimations is AdaRR; re-estimating with df(lam) keeps the scale ~ sigma^2
    np.testing.assert_allclose(rb.iterative_ada_lambda(sb, 0), est)
    assert abs(rb.iterative_ada_lambda(sb, 3).mean() - 4.0) < 0.6


def test_const_tuning_picks_the_best_constant() -> None:
    # fixed sigma = 1.5: the best constant is the oracle's lam = 2.25, adjusted loss 0
    tuned = nr.tune({"noise": "fixed:1.5", "d": 10, "n": 20, "tune_size": 4000}, np.float64, 0)
    assert tuned.const_lambda == pytest.approx(2.25, rel=1e-3)
    assert tuned.tune_loss["const_rr"] < 1e-9
    # mixed noise: the tuned constant beats every constant of a brute-force grid
    b, sb = _batch(4000, "uniform:4", 5)
    loss, _ = nr._tuning_objective(sb, b.sigma)
    best = nr._tune_const(loss, np.float64)
    grid = np.linspace(0.5, 12, 200)
    assert loss(np.asarray(best)) <= min(loss(np.asarray(g)) for g in grid) + 1e-12
    assert 4.0 < best < 7.0   # near E sigma^2 = 16 / 3


def test_one_layer_closed_form_matches_monte_carlo() -> None:
    n, d, noise = 20, 10, "uniform:2"
    m2 = 4.0 / 3.0
    c = rb.one_layer_optimal_scale(n, d, m2)
    assert c == pytest.approx(1 / (31 + m2))
    assert rb.one_layer_mse(n, d, 0.0) == pytest.approx(10 * 11 / 31)
    b = sample_batch(40000, d, n, noise, np.random.default_rng(3))
    pred = c * np.einsum("bd,bnd,bn->b", b.x_query, b.X, b.y)
    err = (pred - b.y_query) ** 2
    assert abs(err.mean() - rb.one_layer_mse(n, d, m2)) < 4 * err.std() / np.sqrt(err.size)
    # c is the minimiser: +-10 % worse both ways (closed form and Monte Carlo)
    for f in (0.9, 1.1):
        assert rb.one_layer_mse(n, d, m2, f * c) > rb.one_layer_mse(n, d, m2) + 0.01
        assert (((f * pred) - b.y_query) ** 2).mean() > err.mean()


def test_bayes_mixture_with_one_sigma_is_the_oracle() -> None:
    _, sb = _batch(200, "fixed:2", 4)
    np.testing.assert_allclose(rb.bayes_mixture_coef(sb, np.array([2.0]), np.array([1.0])),
                               rb.ridge_coef(sb, 4.0), rtol=1e-12)


@pytest.fixture(scope="module")
def small_runs() -> dict[str, dict]:
    spec = get_study("noisy_regression.baselines")
    out = {}
    for noise in (2, [1, 3]):
        p = spec.resolve({"noise": noise, "eval_size": 30000, "tune_size": 8000})
        out[str(noise)] = spec.fn(p, (F64,), 0)[0].metrics
    return out


@pytest.mark.parametrize("noise, col", [("2", 2), ("[1, 3]", 8)])
def test_small_study_hits_table1(small_runs: dict, noise: str, col: int) -> None:
    m = small_runs[noise]
    for row, metric in (("one_layer", "one_layer_closed"), ("const_rr", "const_rr"),
                        ("ada_rr", "ada_rr"), ("tuned_rr", "tuned_rr")):
        pub = nr.TABLE1[row][col]
        assert m[f"published_{row}"] == pub
        assert abs(m[metric] - pub) <= max(0.08 * pub, 0.004), (row, m[metric], pub)
    assert m["table1_worst_ratio"] < 1.6
    # closed-form one-layer vs its Monte Carlo estimate; ordering of the baselines
    assert abs(m["one_layer"] - m["one_layer_closed"]) < 4 * m["one_layer_se"]
    assert m["bayes"] < m["tuned_rr"] < m["ada_rr"] < m["const_rr"] < m["ols"]


def test_sampled_query_loss_agrees_and_runs_are_seeded() -> None:
    spec = get_study("noisy_regression.baselines")
    base = {"noise": 3, "eval_size": 20000, "tune_size": 3000}
    cond, f32 = (o.metrics for o in spec.fn(spec.resolve(base),
                                             (F64, parse_precision("float32")), 1))
    again = spec.fn(spec.resolve(base), (F64,), 1)[0].metrics
    assert cond == again
    samp = spec.fn(spec.resolve({**base, "loss": "sampled"}), (F64,), 1)[0].metrics
    for k in ("const_rr", "ada_rr", "tuned_rr"):
        assert samp[f"{k}_se"] > cond[f"{k}_se"]          # the conditional loss is tighter
        assert abs(samp[k] - cond[k]) < 4 * samp[f"{k}_se"]
    assert f32["tuned_rr"] == pytest.approx(cond["tuned_rr"], abs=2e-3)
    assert cond["published_const_rr"] == 0.161 and cond["oracle_mse"] > 1.5


def test_profile_study() -> None:
    spec = get_study("noisy_regression.profile")
    p = spec.resolve({"noise": 3, "eval_size": 3000, "tune_size": 3000, "points": 9})
    [out] = spec.fn(p, (F64,), 0)
    sig = np.asarray(out.series["sigma"])
    assert sig[0] == 0 and sig[-1] == 4 and 3.0 in sig
    assert out.series["ada_rr"][0] == pytest.approx(0, abs=1e-12)   # AdaRR exact when noiseless
    assert out.series["ols"][0] == pytest.approx(0, abs=1e-12)
    # ConstRR is the oracle where sigma^2 = its constant: its profile dips there
    assert abs(out.metrics["const_rr_min_sigma"] - out.metrics["const_lambda_sqrt"]) <= 0.5
    assert out.metrics["ada_rr_peak_sigma"] == 4.0            # AdaRR degrades with the noise
    assert out.metrics["ada_rr_at_zero"] == pytest.approx(0, abs=1e-12)
    # TunedRR is worse than AdaRR in the middle of the range (002 Sec. 6, Fig. 3)
    assert out.metrics["tuned_minus_ada_max"] > 0.005
    assert 0.5 <= out.metrics["tuned_minus_ada_argmax_sigma"] <= 2.5
    assert 0.1 < out.metrics["const_rr_in_dist"] < 0.22       # Table 1: 0.161


@pytest.mark.parametrize("given, message", [
    ({"noise": "gauss:3"}, "unknown noise distribution"),
    ({"noise": "uniform:-1"}, "noise levels must be finite"),
    ({"n": 11}, "need n > d + 1"),
    ({"eval_size": 0}, "eval_size must be an integer >= 1"),
    ({"d": 2.5}, "d must be an integer"),
    ({"iters": -1}, "iters must be an integer in"),
    ({"loss": "median"}, "loss must be"),
])
def test_bad_parameters(given: dict, message: str) -> None:
    for name in ("noisy_regression.baselines", "noisy_regression.profile"):
        with pytest.raises(StudyError, match=re.escape(message)):
            get_study(name).resolve(given)
    with pytest.raises(StudyError, match="points must be"):
        get_study("noisy_regression.profile").resolve({"points": 1})
    with pytest.raises(StudyError, match="no parameter"):
        get_study("noisy_regression.baselines").resolve({"points": 5})


def test_mp_precision_is_refused_in_one_line() -> None:
    """mp50 is that precision's failed outcome (one line); float64 of the same run is ok."""
    spec = get_study("noisy_regression.baselines")
    mp, f64 = spec.fn(spec.resolve({"eval_size": 10, "tune_size": 10}),
                      (parse_precision("mp50"), F64), 0)
    assert mp.status == "failed" and mp.error.startswith("StudyError: ")
    assert "float32 / float64 only" in mp.error and "\n" not in mp.error
    assert f64.status == "ok" and f64.metrics["tuned_rr"] is not None
