"""002: trained linear transformers (LSA Full / Diag / GD++) on mixed-noise regression.

Study ``noisy_regression.lsa`` (002 Sec. 5-6, Fig. 1-3, Table 1): train one single-head LSA
(:class:`~precision.models.linear_attention.LSA`, eq. 1-3 / 8-10 / 11) with Adam on the
mixed-noise problem (eq. 7, :mod:`probes.studies.noisy_regression_data`), then measure on a
fixed
seeded evaluation set:

* ``loss`` -- 002's adjusted evaluation loss, **one half of (MSE - oracle MSE)** (README: the
  Table 1 values are this half), the MSE taken against the noiseless query label and computed
  in the run's precision (``precision.evaluate.evaluate`` on the trained module: PyTorch for
  floats, the graph interpreter for mpN). The oracle is ridge regression with the true
  lambda = sigma_tau^2 (eq. 5), in float64.
* per-layer read-outs -y_{n+1}^l (Fig. 2) as the series ``layer_loss`` (L entries);
* the implicit linear model (Thm 4.1 / Lemma 4.2 with the corrected sign, see
  :func:`~precision.models.linear_attention.implicit_linear_model`): ``implicit_rel_dev`` =
  max_b |<w^L, x_t> - y_hat| / rms(y_hat) against the forward pass, in the run's dtype
  (float64 for mpN runs);
* with ``decompose = true``: the same weights in float32, float64 and mp50 -- ``approximation``
  (= the mp50 loss, the weights' own error) and ``rounding`` (= float32 loss - float64 loss),
  plus ``rounding_float32`` / ``rounding_float64`` = 0.5 mean (y_hat_p - y_hat_mp50)^2;
* ``constrr_loss``: ConstRR (ridge with one lambda for every sequence, tuned on a separate
  seeded set) on the same evaluation set, the reference GD++ is compared with in Fig. 1.
* with ``profile_points = k > 0``: the per-variance profile of Fig. 3 / 4 -- the adjusted
  loss on ``profile_size`` sequences at each fixed sigma of
  :func:`probes.studies.noisy_regression.profile_grid` (0 .. sigma_max + 1, so it shows
  extrapolation to unseen variances), as the series ``sigma_profile`` (and ``sigma``), with
  ``profile_peak``, ``profile_peak_sigma``, ``profile_in_dist`` (the profile averaged over the
  training law of sigma) and ``profile_outside`` (mean beyond the training range).

Training: Adam on fresh seeded batches, loss = MSE of the query read-out against the
noiseless label (002 Sec. 6: lr 1e-4, batch 2048, 200k steps, constant rate), with optional
warm-up, gradient-norm clipping and a cosine decay of the rate (``warmup``, ``clip``,
``schedule``: ``probes.training.recipes``'s constant / cosine recipes; 002 only notes that deep
models needed a smaller rate "to prevent stability issues"), then optionally a float64
Levenberg-Marquardt finish (``second_order_steps``; ``probes.training.recipes``'s high-precision
phase). One run trains once and measures the weights in each of its precisions.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import flint
import numpy as np
import torch
from torch import nn

from precision import deterministic as det
from precision.evaluate import evaluate_method
from precision.models.linear_attention import LSA, implicit_linear_model
from precision.precisions import Precision, parse_precision
from probes.studies import (
    StudyError,
    StudyOutcome,
    check_int,
    check_positive,
    each_precision,
    register_study,
)
from probes.studies import ridge_baselines as rb
from probes.studies.noisy_regression import in_distribution_mean, profile_grid
from probes.studies.noisy_regression_data import (
    NoiseSpecError,
    NoisyRegressionBatch,
    noise_label,
    parse_noise,
    sample_batch,
)
from probes.training.recipes import TrainConfig, TrainResult, train

VARIANTS = ("full", "diag", "gdpp")
SCHEDULES = ("constant", "cosine")
TRAIN_DTYPES = ("float32", "float64")
DECOMPOSE_PRECISIONS = ("float32", "float64", "mp50")

DEFAULTS: dict[str, Any] = {
    "variant": "diag",          # full | diag | gdpp (002 Sec. 6)
    "layers": 4,                # L (002: 1..7)
    "heads": 1,                 # 002 Sec. 6 trains single-head models
    "noise": "uniform:5",       # sigma_tau ~ U(0, 5); 0 = noiseless; "choice:1,3"
    "d": 10,                    # 002 Sec. 6: D = 10
    "n": 20,                    # 002 Sec. 6: N = 20 in-context examples
    "steps": 200_000,           # Adam steps (002 Sec. 6)
    "batch": 2048,              # (002 Sec. 6)
    "lr": 1e-4,                 # (002 Sec. 6)
    "schedule": "constant",     # constant (002) | cosine (decay to 0 over the steps)
    "warmup": 0,                # steps of linear learning-rate warm-up (002: none)
    "clip": 0.0,                # gradient-norm clip, 0 = none (002: none)
    "train_dtype": "float32",   # float32 | float64
    "second_order_steps": 0,    # float64 Levenberg-Marquardt finish iterations
    "second_order_batch": 2048,  # samples per fixed LM batch (refreshed every 10 iterations)
    "init_scale": 0.02,
    "eval_size": 4000,          # fixed evaluation sequences (002: 100 000)
    "eval_seed": 20240,         # independent of the training seed
    "decompose": False,         # also evaluate in float32 / float64 / mp50
    "profile_points": 0,        # per-variance profile grid points (0 = no profile)
    "profile_size": 2000,       # evaluation sequences per profile point
}

# --- parameters ------------------------------------------------------------------------------
#: Entries of one batch of sequences held at once (1.6 GB in float64).
MAX_ENTRIES = 200_000_000


def _validate(params: dict[str, Any]) -> None:
    """One-line StudyError on a bad parameter."""
    if params["variant"] not in VARIANTS:
        raise StudyError(f"variant must be one of {', '.join(VARIANTS)}, "
                         f"got {params['variant']!r}")
    if params["schedule"] not in SCHEDULES:
        raise StudyError(f"schedule must be constant or cosine, got {params['schedule']!r}")
    if params["train_dtype"] not in TRAIN_DTYPES:
        raise StudyError(f"train_dtype must be float32 or float64, got {params['train_dtype']!r}")
    if params["second_order_steps"] and params["train_dtype"] != "float64":
        raise StudyError("second_order_steps (a float64 finish) needs train_dtype = "
                         "\"float64\"")
    try:
        parse_noise(params["noise"])
    except NoiseSpecError as exc:
        raise StudyError(str(exc)) from None
    check_int(params, "layers", 1, 16)
    check_int(params, "heads", 1, 8)
    if params["variant"] == "gdpp" and params["heads"] != 1:
        raise StudyError("variant 'gdpp' has one (w_xx, w_yx) pair per layer: heads must be 1")
    check_int(params, "d", 1, 64)
    check_int(params, "n", 1, 1000)
    check_int(params, "steps", 0, 100_000_000)
    check_int(params, "batch", 1, 65_536)     # TrainConfig.batch_size's bound
    check_int(params, "warmup", 0, 100_000_000)
    check_int(params, "second_order_steps", 0, 1_000_000)
    check_int(params, "second_order_batch", 1)
    check_int(params, "eval_size", 2)
    check_int(params, "eval_seed", 0)
    check_int(params, "profile_points", 0, 200)
    check_int(params, "profile_size", 2)
    for key in ("batch", "second_order_batch", "eval_size", "profile_size"):
        entries = params[key] * params["n"] * (params["d"] + 1)
        if entries > MAX_ENTRIES:
            raise StudyError(f"{key} x n x (d + 1) = {entries:.3g} entries is too large "
                             f"(at most {MAX_ENTRIES:.3g})")
    check_positive(params, "lr")
    check_positive(params, "init_scale")
    c = params["clip"]
    if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c < 0:
        raise StudyError(f"clip must be a number >= 0 (0 = no clipping), got {c!r}")
    if not isinstance(params["decompose"], bool):
        raise StudyError(f"decompose must be true or false, got {params['decompose']!r}")


# --- data ------------------------------------------------------------------------------------
def tokens(batch: NoisyRegressionBatch) -> torch.Tensor:
    """002 Sec. 2.1 prompt: rows e_i = (x_i, y_i), i <= n, then the query (x_t, 0):
    (B, n + 1, d + 1) float64."""
    B, n, d = batch.X.shape
    e = np.zeros((B, n + 1, d + 1))
    e[:, :n, :d] = batch.X
    e[:, :n, d] = batch.y
    e[:, n, :d] = batch.x_query
    return det.tensor(e)


def _sampler(params: dict[str, Any]):  # noqa: ANN202 -- probes.training.recipes.Sampler
    """Fresh training batches: (tokens (B, n+1, d+1), noiseless query label (B,)), float64,
    drawn by a numpy generator seeded from the trainer's torch generator."""
    d, n, noise = params["d"], params["n"], params["noise"]

    def sample(size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        b = sample_batch(size, d, n, noise, np.random.default_rng(seed))
        return tokens(b), det.tensor(b.y_query)

    return sample


def _predict(model: nn.Module, e: torch.Tensor) -> torch.Tensor:
    """The query read-out -y_{n+1}^L: (B,)."""
    return model(e)[:, -1, 0]


def _spectral(batch: NoisyRegressionBatch) -> rb.SpectralBatch:
    return rb.spectral_batch(batch.X, batch.y, batch.x_query)


def ridge_predictions(batch: NoisyRegressionBatch, lam: np.ndarray | float) -> np.ndarray:
    """x_t^T (X^T X + lam I)^-1 X^T y per sequence (002 eq. 5), float64: (B,)."""
    sb = _spectral(batch)
    return rb.predict(sb, rb.ridge_coef(sb, lam))


def oracle_mse(batch: NoisyRegressionBatch) -> float:
    """MSE of ridge with the true lambda = sigma_tau^2 (002 Sec. 6 oracle), float64."""
    return float(np.mean((ridge_predictions(batch, batch.sigma**2) - batch.y_query) ** 2))


def constrr_loss(batch: NoisyRegressionBatch, tune: NoisyRegressionBatch) -> tuple[float, float]:
    """ConstRR (002 Sec. 6): one lambda for all sequences, chosen on ``tune`` from a log grid
    (0 and 10^-4 .. 10^3); returns (adjusted loss on ``batch``, lambda)."""
    grid = np.concatenate([[0.0], np.logspace(-4, 3, 141)])
    sb = _spectral(tune)
    tuning = [np.mean((rb.predict(sb, rb.ridge_coef(sb, lam)) - tune.y_query) ** 2)
              for lam in grid]
    lam = float(grid[int(np.argmin(tuning))])
    mse = np.mean((ridge_predictions(batch, lam) - batch.y_query) ** 2)
    return 0.5 * float(mse - oracle_mse(batch)), lam


# --- training --------------------------------------------------------------------------------
def build(params: dict[str, Any], seed: int) -> LSA:
    """The untrained LSA of ``params`` (seeded init, float64).

    GD++'s (w_xx, w_yx) play the role of Diag's products p q (eq. 9), so they start at
    ``init_scale**2``: with w_xx ~ init_scale the x-update (I + w_xx Sigma) of a positive w_xx
    already overflows float32 at init for L = 4 (Sigma ~ n I grows doubly exponentially)."""
    scale = float(params["init_scale"])
    if params["variant"] == "gdpp":
        scale = scale**2
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LSA(params["d"], depth=params["layers"], heads=params["heads"],
                    param=params["variant"], init_scale=scale)
    return model.double()


def adam(model: LSA, params: dict[str, Any], seed: int) -> TrainResult:
    """Adam on fresh batches in ``train_dtype`` (002 Sec. 6): ``probes.training.recipes``'s
    constant
    or cosine recipe (``schedule``) with ``warmup`` and ``clip``. Stops at the first
    non-finite loss or parameter (status "diverged"); the model is left in float64."""
    cfg = TrainConfig(recipe=params["schedule"], steps=params["steps"],
                      batch_size=params["batch"], lr=float(params["lr"]),
                      dtype=params["train_dtype"], seed=seed, warmup=params["warmup"],
                      clip=float(params["clip"]), curve_points=101)
    return train(model, _sampler(params), _predict, cfg)


def levenberg_marquardt(model: LSA, params: dict[str, Any], seed: int, first: TrainResult
                        ) -> TrainResult:
    """The float64 Levenberg-Marquardt phase of ``probes.training.recipes`` (recipe
    high-precision
    with no Adam steps) after ``first``: fixed seeded batches of ``second_order_batch``. The
    result's curve is Adam's followed by the LM iterations (numbered after the Adam steps)."""
    cfg = TrainConfig(recipe="high-precision", steps=0, batch_size=1, seed=seed + 7919,
                      second_order_steps=params["second_order_steps"],
                      second_order_batch=params["second_order_batch"], lm_refresh=10)
    res = train(model, _sampler(params), _predict, cfg)
    curve = first.curve + [(first.steps + s, v) for s, v in res.curve]
    return TrainResult(curve=curve, steps=first.steps + res.steps, status=res.status,
                       message=res.message, wall_time=first.wall_time + res.wall_time)


def trained_model(params: dict[str, Any], seed: int) -> tuple[LSA, TrainResult]:
    """The LSA of ``params`` trained (Adam, then the optional Levenberg-Marquardt finish);
    float64 weights."""
    model = build(params, seed)
    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        result = adam(model, params, seed)
        if result.status == "ok" and params["second_order_steps"] > 0:
            result = levenberg_marquardt(model, params, seed, result)
    return model, result


# --- evaluation ------------------------------------------------------------------------------
def per_layer_predictions(model: LSA, e: torch.Tensor, precision: Precision
                          ) -> np.ndarray:
    """-y_{n+1}^l for l = 1..L computed in ``precision``, rounded to float64 (B, L).

    (An mp50 prediction rounded to float64 keeps 16 digits of the prediction, so its error
    against a float64 label is exact to ~1e-16 relative -- far below every loss measured.)"""
    out = evaluate_method(model, "query_per_layer", e, precision)
    return np.vectorize(lambda v: float(v.mid()) if isinstance(v, flint.arb) else float(v),
                        otypes=[float])(out)


def adjusted_loss(pred: np.ndarray, batch: NoisyRegressionBatch, oracle: float) -> np.ndarray:
    """0.5 * (MSE - oracle MSE) per column of pred (B, k) against the noiseless label (k,)."""
    mse = np.mean((pred - batch.y_query[:, None]) ** 2, axis=0)
    return 0.5 * (mse - oracle)


def implicit_deviation(model: LSA, e: torch.Tensor, dtype: torch.dtype) -> tuple[float, float]:
    """Thm 4.1 check in ``dtype``: (max_b |<w^L, x_t> - y_hat| / rms(y_hat), the same for
    every context token's y^L = a^L y_i - <w^L, x_i> relative to rms(y^L))."""
    m = copy.deepcopy(model).to(dtype)
    e = e.to(dtype)
    with torch.no_grad():
        im = implicit_linear_model(m, e)
        out = e
        for layer in range(m.depth):
            out = m.step(out, layer)
    d = m.d
    pred = -out[:, -1, d]
    implied = (im.w[:, -1] * e[:, -1, :d]).sum(-1)
    q = float((implied - pred).abs().max() / pred.pow(2).mean().sqrt())
    y_ctx = out[:, :-1, d]
    y_imp = im.a[:, -1, None] * e[:, :-1, d] - (e[:, :-1, :d] @ im.w[:, -1, :, None])[..., 0]
    t = float((y_imp - y_ctx).abs().max() / y_ctx.pow(2).mean().sqrt())
    return q, t


def _decomposition(model: LSA, e: torch.Tensor, batch: NoisyRegressionBatch,
                   oracle: float) -> dict[str, float]:
    """Adjusted losses of the same weights in float32 / float64 / mp50 and their split."""
    preds = {p: per_layer_predictions(model, e, parse_precision(p))[:, -1]
             for p in DECOMPOSE_PRECISIONS}
    out = {f"loss_{p}": float(adjusted_loss(preds[p][:, None], batch, oracle)[0])
           for p in DECOMPOSE_PRECISIONS}
    out["approximation"] = out["loss_mp50"]
    out["rounding"] = out["loss_float32"] - out["loss_float64"]
    for p in ("float32", "float64"):
        out[f"rounding_{p}"] = 0.5 * float(np.mean((preds[p] - preds["mp50"]) ** 2))
    return out


def sigma_profile(model: LSA, params: dict[str, Any], precision: Precision
                  ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """002 Fig. 3 / 4 per-variance profile: (sigmas (k,), adjusted loss at each (k,), summary
    metrics). Each sigma gets its own seeded fixed-noise evaluation set of ``profile_size``
    sequences and its own oracle (ridge with lambda = sigma^2)."""
    sig = profile_grid(params["noise"], params["profile_points"])
    prof = np.empty(len(sig))
    for i, s in enumerate(sig):
        rng = np.random.default_rng([params["eval_seed"], 5, i])
        batch = sample_batch(params["profile_size"], params["d"], params["n"],
                             f"fixed:{float(s)!r}", rng)
        pred = per_layer_predictions(model, tokens(batch), precision)[:, -1:]
        prof[i] = adjusted_loss(pred, batch, oracle_mse(batch))[0]
    _, values = parse_noise(params["noise"])
    outside = sig > max(values) + 1e-12
    metrics = {"profile_peak": float(prof.max()),
               "profile_peak_sigma": float(sig[int(np.argmax(prof))]),
               "profile_in_dist": in_distribution_mean(sig, prof, params["noise"]),
               "profile_outside": float(prof[outside].mean()) if outside.any() else None}
    return sig, prof, metrics


@register_study("noisy_regression.lsa", DEFAULTS, validate=_validate)
def lsa_study(params: dict[str, Any], precisions: tuple[Precision, ...], seed: int
              ) -> list[StudyOutcome]:
    """Trained LSA Full/Diag/GD++ on mixed-noise regression: adjusted loss, per layer, Thm 4.1.
    002 Sec. 4-6, eq. 1-3, 8-11, Table 1.

    Trained once; what does not depend on the precision (the evaluation set, its oracle,
    ConstRR, the float32 / float64 / mp50 decomposition) is computed once too."""
    model, result = trained_model(params, seed)
    rng = np.random.default_rng(params["eval_seed"])
    batch = sample_batch(params["eval_size"], params["d"], params["n"], params["noise"], rng)
    tune = sample_batch(params["eval_size"], params["d"], params["n"], params["noise"], rng)
    e = tokens(batch)
    oracle = oracle_mse(batch)
    const_rr, const_lam = constrr_loss(batch, tune)
    final_train = result.curve[-1][1] if result.curve else None
    common: dict[str, float | None] = {"constrr_loss": const_rr, "train_loss": final_train,
                                       "train_steps": float(result.steps)}
    decomposition = _decomposition(model, e, batch, oracle) if params["decompose"] else {}
    weights = {k: v.detach().reshape(-1).tolist() for k, v in model.state_dict().items()}
    info = {"noise_label": noise_label(params["noise"]), "constrr_lambda": const_lam,
            "train_status": result.status, "train_message": result.message,
            "train_seconds": result.wall_time,
            "weights": weights if sum(len(v) for v in weights.values()) <= 200 else None}
    train_curve = [(int(s), float(v)) for s, v in result.curve]

    def measure(precision: Precision) -> StudyOutcome:
        per_layer = adjusted_loss(per_layer_predictions(model, e, precision), batch, oracle)
        dtype = torch.float32 if precision.name == "float32" else torch.float64
        q_dev, t_dev = implicit_deviation(model, e, dtype)
        metrics: dict[str, float | None] = {
            "loss": float(per_layer[-1]), "oracle_mse": oracle, "implicit_rel_dev": q_dev,
            "implicit_tokens_rel_dev": t_dev, **common, **decomposition}
        series: dict[str, Any] = {
            "layer_loss": [(i + 1, float(v)) for i, v in enumerate(per_layer)],
            "train_curve": train_curve}
        if params["profile_points"]:
            sig, prof, summary = sigma_profile(model, params, precision)
            metrics.update(summary)
            series["sigma"] = [float(v) for v in sig]
            series["sigma_profile"] = [float(v) for v in prof]
        return StudyOutcome(
            metrics=metrics, primary="loss", series=series,
            info={**info, "implicit_dtype": str(dtype)},
            status="ok" if result.status == "ok" else "diverged",
            error=result.message or None)

    return each_precision(precisions, measure)
