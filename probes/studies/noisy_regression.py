"""002's ridge baselines and the one-layer optimum on mixed-noise regression (Table 1, Fig. 3).

Studies:

* ``noisy_regression.baselines`` -- the Table 1 (002 App. C) rows ConstRR, AdaRR, TunedRR
  and the 1-layer Diag / GD++ optimum for one noise setting (a Table 1 column), plus OLS,
  iterative AdaRR and the Bayes mixture (ours), with the published values and
  ``table1_worst_ratio``.
* ``noisy_regression.profile`` -- the per-variance profile of 002 Fig. 3: each baseline
  (tuned on the mixed setting) evaluated at fixed sigma over 0 .. sigma_max + 1.

Metric (002 Sec. 6 "adjusted evaluation loss"; the values of its Table 1 are one half of the
loss as its text defines it): ``(1/2) E[(y_hat - y_q)^2 - (y_oracle - y_q)^2]`` with y_q the
noiseless query label and y_oracle the ridge prediction with the true sigma^2. ``loss =
"conditional"`` (default) averages the exact conditional expectation given the prompt,
``||w_hat - w_oracle||^2`` (the oracle is the posterior mean of w given X, y, sigma and x_q ~
N(0, I) is independent), which has the same expectation with much lower variance;
``loss = "sampled"`` uses one sampled query per sequence exactly as the paper evaluates.

Precisions: float64 and float32 (numpy arithmetic in that dtype, inputs rounded from the
float64 sample). Monte Carlo over 10^5-10^6 sequences in ``mpN`` is out of reach, so mpN and
16-bit formats fail the run with a one-line message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from precision.precisions import Precision
from probes.studies import StudyError, StudyOutcome, check_int, per_precision, register_study
from probes.studies import ridge_baselines as rb
from probes.studies.noisy_regression_data import (
    NoiseSpecError,
    noise_label,
    parse_noise,
    sample_batch,
)

#: 002 App. C Table 1, columns sigma_max = 0..7 (uniform) and {1,3}, {1,3,5} (categorical).
TABLE1_COLUMNS = ("0", "1", "2", "3", "4", "5", "6", "7", "{1,3}", "{1,3,5}")
TABLE1: dict[str, tuple[float, ...]] = {
    "one_layer": (1.767, 1.639, 1.396, 1.175, 1.015, 0.906, 0.841, 0.806, 1.007, 0.819),
    "const_rr": (0.0, 0.009, 0.066, 0.161, 0.265, 0.365, 0.454, 0.530, 0.222, 0.422),
    "ada_rr": (0.0, 0.003, 0.016, 0.034, 0.053, 0.068, 0.081, 0.092, 0.051, 0.084),
    "tuned_rr": (0.0, 0.002, 0.010, 0.023, 0.037, 0.049, 0.060, 0.068, 0.021, 0.054),
}
#: Table 1 tolerance of the issue: 5 % relative or 0.002 absolute, whichever is larger.
REL_TOL, ABS_TOL = 0.05, 0.002

ESTIMATORS = ("ols", "const_rr", "ada_rr", "tuned_rr", "iter_ada_rr", "one_layer", "bayes")
CHUNK = 25_000  # sequences per evaluation chunk (each chunk has its own seeded generator)
MAX_ENTRIES = 200_000_000  # entries of one batch of sequences (1.6 GB in float64)
BAYES_GRID = 64  # quadrature points of the Bayes mixture for a uniform sigma prior


# --------------------------------------------------------------------------- parameters
def _check_common(params: dict[str, Any]) -> None:
    try:
        parse_noise(params["noise"])
    except NoiseSpecError as exc:
        raise StudyError(str(exc)) from None
    for key in ("d", "n", "eval_size", "tune_size"):
        check_int(params, key, 1)
    if params["d"] > 64:
        raise StudyError(f"d must be <= 64 (got {params['d']})")
    # tuning draws one batch of tune_size sequences, evaluation chunks of CHUNK: bound both
    for key, rows in (("tune_size", params["tune_size"]),
                      ("eval_size", min(params["eval_size"], CHUNK))):
        entries = rows * params["n"] * (params["d"] + 1)
        if entries > MAX_ENTRIES:
            raise StudyError(f"{key} x n x (d + 1) = {entries:.3g} entries in memory at once "
                             f"is too large (at most {MAX_ENTRIES:.3g})")
    if params["eval_size"] > 100_000_000:
        raise StudyError(f"eval_size must be <= 100000000, got {params['eval_size']}")
    if params["n"] <= params["d"] + 1:
        raise StudyError(f"need n > d + 1 for AdaRR and OLS (got n={params['n']}, "
                         f"d={params['d']})")
    check_int(params, "iters", 0, 100)
    if params["loss"] not in ("conditional", "sampled"):
        raise StudyError(f"loss must be 'conditional' or 'sampled', got {params['loss']!r}")


def _check_profile(params: dict[str, Any]) -> None:
    _check_common(params)
    check_int(params, "points", 2, 200)


def _dtype(precision: Precision) -> type:
    if precision.name == "float64":
        return np.float64
    if precision.name == "float32":
        return np.float32
    raise StudyError(f"noisy_regression baselines run in float32 / float64 only "
                     f"(Monte Carlo over 1e5+ sequences), not {precision.name}")


def _mean_sigma2(noise: Any) -> float:
    kind, values = parse_noise(noise)
    if kind == "uniform":
        return values[0] ** 2 / 3.0
    return float(np.mean(np.square(values)))


def _sigma_prior(noise: Any) -> tuple[np.ndarray, np.ndarray]:
    """Discrete prior (sigmas > 0, weights) for the Bayes mixture: midpoint rule for U(0, S)."""
    kind, values = parse_noise(noise)
    if kind == "uniform":
        sig = (np.arange(BAYES_GRID) + 0.5) * values[0] / BAYES_GRID
        w = np.full(BAYES_GRID, 1.0 / BAYES_GRID)
    else:
        sig = np.asarray(values if kind == "choice" else values[:1], dtype=np.float64)
        w = np.full(sig.size, 1.0 / sig.size)
    return np.maximum(sig, 1e-8), w


def _sigma_quadrature(noise: Any) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights integrating a smooth f(sigma) over the sigma law (Gauss-Legendre)."""
    kind, values = parse_noise(noise)
    if kind != "uniform":
        sig = np.asarray(values if kind == "choice" else values[:1], dtype=np.float64)
        return sig, np.full(sig.size, 1.0 / sig.size)
    x, w = np.polynomial.legendre.leggauss(24)
    return (x + 1) * values[0] / 2, w / 2


# --------------------------------------------------------------------------- tuning
@dataclass(frozen=True)
class Tuned:
    """Per-noise-setting constants, fitted on the tuning set."""

    const_lambda: float
    multiplier: float
    threshold: float
    one_layer_c: float
    tune_loss: dict[str, float]


def _tuning_objective(sb: rb.SpectralBatch, sigma: np.ndarray
                      ) -> tuple[Callable[[np.ndarray], float], np.ndarray]:
    """mean ||coef(lam) - coef_oracle||^2 on the tuning set (the conditional adjusted loss)."""
    target = rb.ridge_coef(sb, sigma.astype(sb.s.dtype) ** 2)

    def loss(lam: np.ndarray) -> float:
        diff = rb.ridge_coef(sb, lam) - target
        return float(np.mean(np.sum(diff.astype(np.float64) ** 2, axis=1)))

    return loss, target


def _tune_const(loss: Callable[[np.ndarray], float], dtype: type) -> float:
    grid = np.concatenate([[0.0], np.logspace(-3, 2.5, 45)])
    vals = [loss(np.asarray(g, dtype=dtype)) for g in grid]
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    if hi <= lo:
        return float(grid[i])
    res = minimize_scalar(lambda v: loss(np.asarray(v, dtype=dtype)), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-6 * max(hi, 1e-3)})
    return float(res.x) if res.fun <= vals[i] else float(grid[i])


def _tune_adaptive(loss: Callable[[np.ndarray], float], sigma2_est: np.ndarray
                   ) -> tuple[float, float]:
    """TunedRR's (multiplier, threshold): a log grid, then Nelder-Mead in log space."""
    top = float(np.max(sigma2_est)) if sigma2_est.size else 1.0
    mults = np.exp(np.linspace(np.log(0.25), np.log(4.0), 17))
    thrs = np.concatenate([np.logspace(-2, 2.5, 19), [max(top, 1.0) * 2]])

    def f(m: float, t: float) -> float:
        return loss(rb.tuned_lambda(sigma2_est, m, t))

    vals = np.array([[f(m, t) for t in thrs] for m in mults])
    i, j = np.unravel_index(int(np.argmin(vals)), vals.shape)
    best = (float(vals[i, j]), float(mults[i]), float(thrs[j]))
    res = minimize(lambda z: f(math.exp(z[0]), math.exp(z[1])),
                   x0=np.log([mults[i], thrs[j]]), method="Nelder-Mead",
                   options={"xatol": 1e-4, "fatol": 1e-9, "maxiter": 400})
    if res.fun < best[0]:
        best = (float(res.fun), math.exp(res.x[0]), math.exp(res.x[1]))
    return best[1], best[2]


def tune(params: dict[str, Any], dtype: type, seed: int) -> Tuned:
    """Fit ConstRR's lambda and TunedRR's (multiplier, threshold) on a separate seeded set."""
    rng = np.random.default_rng([seed, 1])
    batch = sample_batch(params["tune_size"], params["d"], params["n"], params["noise"], rng)
    sb = rb.spectral_batch(batch.X.astype(dtype), batch.y.astype(dtype),
                           batch.x_query.astype(dtype))
    loss, _ = _tuning_objective(sb, batch.sigma)
    lam_c = _tune_const(loss, dtype)
    est = rb.ada_noise_variance(sb)
    mult, thr = _tune_adaptive(loss, est)
    c = rb.one_layer_optimal_scale(params["n"], params["d"], _mean_sigma2(params["noise"]))
    return Tuned(const_lambda=lam_c, multiplier=mult, threshold=thr, one_layer_c=c,
                 tune_loss={"const_rr": 0.5 * loss(np.asarray(lam_c, dtype=dtype)),
                            "tuned_rr": 0.5 * loss(rb.tuned_lambda(est, mult, thr))})


# --------------------------------------------------------------------------- evaluation
def estimator_coefs(sb: rb.SpectralBatch, tuned: Tuned, iters: int,
                    prior: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    """(B, d) eigen-coordinate coefficients of every estimator on one batch."""
    dt = sb.s.dtype
    est = rb.ada_noise_variance(sb)
    return {
        "ols": rb.ridge_coef(sb, 0.0),
        "const_rr": rb.ridge_coef(sb, np.asarray(tuned.const_lambda, dtype=dt)),
        "ada_rr": rb.ridge_coef(sb, est),
        "tuned_rr": rb.ridge_coef(sb, rb.tuned_lambda(est, tuned.multiplier, tuned.threshold)),
        "iter_ada_rr": rb.ridge_coef(sb, rb.iterative_ada_lambda(sb, iters)),
        "one_layer": sb.b * dt.type(tuned.one_layer_c),
        "bayes": rb.bayes_mixture_coef(sb, *prior),
    }


class _Acc:
    """Running sums for the mean and standard error of per-sequence values."""

    def __init__(self) -> None:
        self.n, self.s, self.ss = 0, 0.0, 0.0

    def add(self, v: np.ndarray) -> None:
        v = np.asarray(v, dtype=np.float64)
        self.n += v.size
        self.s += float(v.sum())
        self.ss += float(np.dot(v, v))

    def mean(self) -> float:
        return self.s / self.n

    def se(self) -> float:
        if self.n < 2:
            return math.nan
        var = max(self.ss / self.n - self.mean() ** 2, 0.0) * self.n / (self.n - 1)
        return math.sqrt(var / self.n)


def _adjusted(sb: rb.SpectralBatch, coefs: dict[str, np.ndarray], oracle: np.ndarray,
              y_query: np.ndarray, loss: str) -> dict[str, np.ndarray]:
    """Per-sequence (loss_e - loss_oracle) / 2 for every estimator e."""
    out = {}
    if loss == "conditional":
        for k, c in coefs.items():
            diff = (c - oracle).astype(np.float64)
            out[k] = 0.5 * np.sum(diff * diff, axis=1)
    else:
        yq = y_query.astype(np.float64)
        e_or = (rb.predict(sb, oracle).astype(np.float64) - yq) ** 2
        for k, c in coefs.items():
            out[k] = 0.5 * ((rb.predict(sb, c).astype(np.float64) - yq) ** 2 - e_or)
    return out


def evaluate(params: dict[str, Any], noise: Any, size: int, tuned: Tuned, dtype: type,
             rng_key: list[int]) -> tuple[dict[str, _Acc], _Acc]:
    """Adjusted losses of every estimator over ``size`` fresh sequences of ``noise``.

    Chunk i draws from ``default_rng(rng_key + [i])``. Returns the accumulators per estimator
    and the accumulator of the oracle's MSE given X (sigma integrated by quadrature).
    """
    accs = {k: _Acc() for k in ESTIMATORS}
    oracle_acc = _Acc()
    quad = _sigma_quadrature(noise)
    prior = _sigma_prior(params["noise"])
    for i, start in enumerate(range(0, size, CHUNK)):
        rng = np.random.default_rng([*rng_key, i])
        b = sample_batch(min(CHUNK, size - start), params["d"], params["n"], noise, rng)
        sb = rb.spectral_batch(b.X.astype(dtype), b.y.astype(dtype), b.x_query.astype(dtype))
        oracle = rb.ridge_coef(sb, b.sigma.astype(dtype) ** 2)
        coefs = estimator_coefs(sb, tuned, params["iters"], prior)
        for k, v in _adjusted(sb, coefs, oracle, b.y_query, params["loss"]).items():
            accs[k].add(v)
        oracle_acc.add(rb.oracle_mse_given_x(sb, *quad))
    return accs, oracle_acc


def table1_ratio(measured: dict[str, float], column: str) -> float | None:
    """max over the four checked rows of |measured - published| / max(5% |published|, 0.002)."""
    if column not in TABLE1_COLUMNS:
        return None
    j = TABLE1_COLUMNS.index(column)
    return max(abs(measured[row] - pub[j]) / max(REL_TOL * abs(pub[j]), ABS_TOL)
               for row, pub in TABLE1.items())


# --------------------------------------------------------------------------- studies
_COMMON = {"noise": "uniform:3", "d": 10, "n": 20, "tune_size": 50_000, "iters": 3,
           "loss": "conditional"}


@register_study("noisy_regression.baselines", {**_COMMON, "eval_size": 400_000},
                validate=_check_common)
@per_precision
def baselines(params: dict[str, Any], precision: Precision, seed: int) -> StudyOutcome:
    """002 Table 1 baselines (ConstRR, AdaRR, TunedRR, 1-layer optimum) for one noise column."""
    dtype = _dtype(precision)
    tuned = tune(params, dtype, seed)
    accs, oracle = evaluate(params, params["noise"], params["eval_size"], tuned, dtype,
                            [seed, 2])
    metrics: dict[str, float | None] = {}
    for k, acc in accs.items():
        metrics[k] = acc.mean()
        metrics[f"{k}_se"] = acc.se()
    mse1 = rb.one_layer_mse(params["n"], params["d"], _mean_sigma2(params["noise"]))
    metrics["one_layer_closed"] = 0.5 * (mse1 - oracle.mean())
    metrics["one_layer_closed_se"] = 0.5 * oracle.se()
    metrics["oracle_mse"] = oracle.mean()
    metrics.update(const_lambda=tuned.const_lambda, tuned_multiplier=tuned.multiplier,
                   tuned_threshold=tuned.threshold, one_layer_c=tuned.one_layer_c)
    column = noise_label(params["noise"])
    known = params["d"] == 10 and params["n"] == 20 and column in TABLE1_COLUMNS
    for row, pub in TABLE1.items():
        metrics[f"published_{row}"] = pub[TABLE1_COLUMNS.index(column)] if known else None
    checked = {r: metrics["one_layer_closed" if r == "one_layer" else r] for r in TABLE1}
    ratio = table1_ratio(checked, column) if known else None
    metrics["table1_worst_ratio"] = ratio
    info = {"column": column, "tune_loss": tuned.tune_loss,
            "estimators": list(ESTIMATORS)}
    return StudyOutcome(metrics=metrics, primary="table1_worst_ratio" if known else "tuned_rr",
                        info=info)


def profile_grid(noise: Any, points: int) -> np.ndarray:
    """Fixed sigmas 0 .. max + 1 (``points`` evenly spaced) plus the setting's support points."""
    kind, values = parse_noise(noise)
    top = max(values) + 1.0
    grid = np.linspace(0.0, top, points)
    extra = list(values) if kind != "uniform" else [values[0]]
    return np.unique(np.round(np.concatenate([grid, extra]), 12))


def in_distribution_mean(sig: np.ndarray, prof: np.ndarray, noise: Any) -> float:
    """The profile averaged over the setting's sigma law (trapezoid rule for U(0, S))."""
    kind, values = parse_noise(noise)
    if kind != "uniform":
        return float(np.mean([prof[np.argmin(np.abs(sig - v))] for v in values]))
    top = values[0]
    if top == 0:
        return float(prof[0])
    keep = sig <= top + 1e-12
    x, y = sig[keep], prof[keep]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2) / top)


@register_study("noisy_regression.profile", {**_COMMON, "eval_size": 20_000, "points": 17},
                validate=_check_profile)
@per_precision
def profile(params: dict[str, Any], precision: Precision, seed: int) -> StudyOutcome:
    """002 Fig. 3 per-variance profile: each baseline's adjusted loss at fixed sigma."""
    dtype = _dtype(precision)
    tuned = tune(params, dtype, seed)
    sig = profile_grid(params["noise"], params["points"])
    series: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    series["oracle_mse"], series["sigma"] = [], [float(s) for s in sig]
    for i, s in enumerate(sig):
        accs, oracle = evaluate(params, f"fixed:{float(s)!r}", params["eval_size"], tuned, dtype,
                                [seed, 3, i])
        for k in ESTIMATORS:
            series[k].append(accs[k].mean())
        series["oracle_mse"].append(oracle.mean())
    metrics: dict[str, float | None] = {}
    for k in ESTIMATORS:
        prof = np.asarray(series[k])
        metrics[f"{k}_peak"] = float(prof.max())
        metrics[f"{k}_peak_sigma"] = float(sig[int(np.argmax(prof))])
        metrics[f"{k}_in_dist"] = in_distribution_mean(sig, prof, params["noise"])
    metrics["ada_rr_at_zero"] = float(series["ada_rr"][0])
    _, values = parse_noise(params["noise"])
    inside = sig <= max(values) + 1e-12
    # where tuning hurts most (TunedRR - AdaRR largest) inside the training range
    hurt = np.where(inside, np.subtract(series["tuned_rr"], series["ada_rr"]), -np.inf)
    metrics["tuned_minus_ada_max"] = float(hurt.max())
    metrics["tuned_minus_ada_argmax_sigma"] = float(sig[int(np.argmax(hurt))])
    const = np.asarray(series["const_rr"])
    metrics["const_rr_min_sigma"] = float(sig[int(np.argmin(const))])
    metrics["const_lambda_sqrt"] = math.sqrt(tuned.const_lambda)
    return StudyOutcome(metrics=metrics, primary="tuned_rr_in_dist", series=series,
                        info={"sigma": series["sigma"], "column": noise_label(params["noise"])})
