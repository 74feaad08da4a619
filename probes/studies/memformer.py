"""003 Memformers against CG, Nesterov, heavy ball and preconditioned GD (Sec. 3.3, 4, 5, App. B).

Data (Sec. 3.3): d = 5, n = 20 context pairs and one query; x ~ N(0, Sigma), w* ~ N(0,
Sigma^-1), y = w*^T x, with Sigma = U^T diag(1, 1, 0.5, 0.25, 1) U (``non-isotropic``; one
random orthogonal U per seed, shared by every instance of the run, as the paper averages
over five runs "each with a different randomly sampled U") or Sigma = I (``isotropic``).
Tokens are rows e_i = (x_i, y_i), the query (x_q, 0) last (eq. 2.1 transposed).

Models (:class:`~precision.models.memformer.Memformer`, L = ``depth`` layers, ``heads``
heads summed): ``lsa`` the linear transformer of eq. 2.5 / 2.8 (= preconditioned GD,
Lemma 1), ``cgd`` the CGD-like memory of eq. 3.1-3.2, ``lfom_full`` / ``lfom_scalar`` the
gated LFOM memory of eq. 3.4 with a full (d + 1) x (n + 1) or scalar Gamma_j, ``gdpp`` the
LFOM memory (full Gamma) with non-zero B_l blocks (LFOM GD++, Fig. 3).

Training (Sec. 3.3): Adam on the mean squared query error (eq. 2.7, with the README's sign
fix: the read-out -[Z_L]_{d+1,n+1} predicts +w*^T x_q); the gradient of every parameter
matrix is clipped to norm ``clip`` (0.01); in float64. Batches (``batch_mode = "auto"``):
B > 100 is Sec. 3.3's setting (a fresh batch of B instances every ``resample`` = 100 steps,
evaluated on ``n_test`` fresh instances); B <= 100 is Sec. 4's "training batches" (one fixed
batch of B instances, the model trained on it and evaluated on the same instances, where CG
also runs).

Measured on the evaluation instances, in the study's precision (model through
:func:`precision.evaluate.evaluate`, the solvers through the precision's backend): the mean
squared query error after each layer / iteration for the model, CG (Fletcher-Reeves, exact
line search), Nesterov (eta 0.03, beta 0.9) and heavy ball (eta 0.005, beta 0.9) as in
App. B, and preconditioned GD with the population preconditioner Sigma^-1 (step 0.8 = 1 /
(1 + d / n), the Marchenko-Pastur optimal step), each run per instance for L iterations on
f(w) = (1 / 2n) ||X w - y||^2 (eq. 2.11) from w_0 = 0.

Metrics: ``loss`` (primary) the model's mean squared query error after L layers;
``ratio_vs_<cg|nesterov|heavy_ball|pgd>`` = loss / that solver's mean loss after L
iterations on the same instances (< 1: the model wins); ``ratio_vs_lsa`` = loss / loss of
the linear transformer trained the same way (same data, B, heads, seed); ``ratio_vs_one_head``
= loss / loss of the same model with 1 head (heads > 1); ``frac_beats_cg`` the fraction of
instances where the model beats CG; ``mean_log10_loss`` / ``mean_log10_loss_cg`` the mean
per-instance log10 loss (the paper's "average log-loss"); ``loss_cg``; ``train_loss`` the
last training batch loss. Series: ``loss_model``, ``loss_cg``, ``loss_nesterov``,
``loss_heavy_ball``, ``loss_pgd`` (mean loss after 0..L layers / iterations), ``train_loss``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import flint
import numpy as np
import torch

from precision import deterministic as det
from precision.backends import backend_for
from precision.backends.mp_backend import workprec
from precision.evaluate import evaluate_method
from precision.models.memformer import Memformer
from precision.precisions import Precision
from precision.problems import orthonormal
from precision.solvers.cg import conjugate_gradient
from precision.solvers.gd import preconditioned_gd
from precision.solvers.momentum import heavy_ball, nesterov
from probes.studies import (
    StudyError,
    StudyOutcome,
    check_int,
    check_positive,
    each_precision,
    register_study,
)
from probes.training.recipes import TrainConfig
from probes.training.recipes import train as train_model

DATA = ("isotropic", "non-isotropic")
#: model name -> Memformer options (003 eq. 2.5, 3.1-3.2, 3.4; Fig. 3 for gdpp).
MODELS: dict[str, dict[str, Any]] = {
    "lsa": {"memory": "none"},
    "cgd": {"memory": "cgd"},
    "lfom_full": {"memory": "lfom", "gamma": "full"},
    "lfom_scalar": {"memory": "lfom", "gamma": "scalar"},
    "gdpp": {"memory": "lfom", "gamma": "full", "gdpp": True},
}
BATCH_MODES = ("auto", "fixed", "fresh")
SMALL_BATCH = 100  # batch_mode "auto": B <= this trains and evaluates on one fixed batch

DEFAULTS: dict[str, Any] = {
    "data": "non-isotropic", "model": "lfom_scalar", "heads": 1, "B": 1000, "depth": 3,
    "d": 5, "n": 20, "eigenvalues": [1.0, 1.0, 0.5, 0.25, 1.0],
    "steps": 2000, "lr": 0.01, "resample": 100, "clip": 0.01, "init_scale": 0.1,
    "batch_mode": "auto", "n_test": 1000,
    "nesterov_eta": 0.03, "nesterov_beta": 0.9, "heavy_ball_eta": 0.005,
    "heavy_ball_beta": 0.9, "pgd_step": 0.8,
}


def _validate(params: dict[str, Any]) -> None:
    """One-line StudyError for any parameter the study cannot run with."""
    if params["data"] not in DATA:
        raise StudyError(f"data must be one of {', '.join(DATA)}, got {params['data']!r}")
    if not isinstance(params["model"], str) or params["model"] not in MODELS:
        raise StudyError(f"model must be one of {', '.join(MODELS)}, got {params['model']!r}")
    if params["batch_mode"] not in BATCH_MODES:
        raise StudyError(f"batch_mode must be one of {', '.join(BATCH_MODES)}, "
                         f"got {params['batch_mode']!r}")
    for key, top in (("heads", 16), ("B", 65_536), ("depth", 20), ("d", 50), ("n", 1000),
                     ("steps", 1_000_000), ("resample", 1_000_000), ("n_test", 100_000)):
        check_int(params, key, 1, top)
    for key in ("lr", "clip", "init_scale", "nesterov_eta", "heavy_ball_eta", "pgd_step"):
        check_positive(params, key)
    for key in ("nesterov_beta", "heavy_ball_beta"):
        b = params[key]
        if not isinstance(b, int | float) or isinstance(b, bool) or not 0 <= b < 1:
            raise StudyError(f"{key} must be in [0, 1), got {b!r}")
    ev = params["eigenvalues"]
    if params["data"] == "non-isotropic":
        if not isinstance(ev, list) or len(ev) != params["d"]:
            raise StudyError(f"eigenvalues must be a list of d = {params['d']} numbers, "
                             f"got {ev!r}")
        if not all(isinstance(v, int | float) and v > 0 for v in ev):
            raise StudyError(f"eigenvalues must be positive, got {ev!r}")


# ---------------------------------------------------------------- data (003 Sec. 3.3)

def covariance(params: dict[str, Any], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Sigma^{1/2}, Sigma^{-1/2}, Sigma^{-1}), each (d, d): Sigma = U^T diag(ev) U with U
    uniformly random orthogonal from ``seed`` (non-isotropic) or Sigma = I (isotropic)."""
    d = params["d"]
    if params["data"] == "isotropic":
        eye = np.eye(d)
        return eye, eye, eye
    U = orthonormal(np.random.default_rng([seed, 3]), d, d)
    ev = np.asarray(params["eigenvalues"], dtype=np.float64)

    def sym(f: np.ndarray) -> np.ndarray:          # U^T diag(f) U, without BLAS
        m = det.matmul(U.T * f[None, :], U)
        return (m + m.T) / 2

    return sym(np.sqrt(ev)), sym(1 / np.sqrt(ev)), sym(1 / ev)


def sample_instances(params: dict[str, Any], root: np.ndarray, inv_root: np.ndarray,
                     count: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` instances: tokens (count, n + 1, d + 1) float64 (query label 0) and targets
    w*^T x_q (count,). x = Sigma^{1/2} g, w* = Sigma^{-1/2} g' with g, g' ~ N(0, I)."""
    d, n = params["d"], params["n"]
    x = det.matmul(rng.standard_normal((count, n + 1, d)), root)    # root is symmetric
    w = det.matmul(rng.standard_normal((count, d)), inv_root)
    y = det.dot(x, w[:, None, :])                      # no BLAS: the same on every machine
    target = y[:, -1].copy()
    y[:, -1] = 0.0
    tokens = np.concatenate([x, y[..., None]], axis=-1)
    return det.tensor(tokens), det.tensor(target)


def _is_fixed(params: dict[str, Any]) -> bool:
    mode = params["batch_mode"]
    return mode == "fixed" or (mode == "auto" and params["B"] <= SMALL_BATCH)


def evaluation_set(params: dict[str, Any], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The instances everything is measured on: the fixed training batch (Sec. 4) or
    ``n_test`` fresh instances (Sec. 3.3)."""
    root, inv_root, _ = covariance(params, seed)
    if _is_fixed(params):
        return sample_instances(params, root, inv_root, params["B"],
                                np.random.default_rng([seed, 1]))
    return sample_instances(params, root, inv_root, params["n_test"],
                            np.random.default_rng([seed, 2]))


# ---------------------------------------------------------------- training (Sec. 3.3)

def build(params: dict[str, Any], seed: int) -> Memformer:
    """The float64 Memformer of ``params['model']`` with seeded initial weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Memformer(params["d"], depth=params["depth"], heads=params["heads"],
                          max_len=params["n"] + 1, init_scale=params["init_scale"],
                          **MODELS[params["model"]])
    return model.double()


def _clip_each_matrix(model: Memformer, clip: float) -> list[Any]:
    """Gradient hooks that clip the gradient of every parameter matrix to norm ``clip``
    separately (Sec. 3.3), exactly as ``clip_grad_norm_([p], clip)`` per parameter would;
    returns the hook handles (remove them after training)."""

    def clipped(grad: torch.Tensor) -> torch.Tensor:
        norm = torch.nn.utils.get_total_norm([grad])
        return grad * torch.clamp(clip / (norm + 1e-6), max=1.0)

    return [p.register_hook(clipped) for p in model.parameters()]


def train(params: dict[str, Any], seed: int) -> tuple[Memformer, list[tuple[int, float]]]:
    """Adam on the mean squared query error with per-matrix gradient clipping (Sec. 3.3):
    :func:`probes.training.recipes.train`'s constant-rate recipe in float64, its data the fixed
    evaluation batch or a fresh batch of B instances every ``resample`` steps.

    Returns the trained model and the training curve (step, batch loss) at steps 0, 100,
    ... and the last step (0-based: the loss before the update of that step); a training
    that diverged ends it with NaN at the step it diverged.
    """
    model = build(params, seed)
    root, inv_root, _ = covariance(params, seed)
    rng = np.random.default_rng([seed, 1])
    fixed = evaluation_set(params, seed) if _is_fixed(params) else None

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:         # the fixed batch, or a fresh one every ``resample`` steps
            batch = fixed if fixed is not None else \
                sample_instances(params, root, inv_root, params["B"], rng)
            yield from itertools.repeat(batch, params["resample"])

    stream = batches()
    steps = params["steps"]
    cfg = TrainConfig(recipe="constant", steps=steps, batch_size=params["B"],
                      lr=params["lr"], dtype="float64", seed=seed, curve_points=steps + 1,
                      validation_size=0)
    hooks = _clip_each_matrix(model, params["clip"])
    try:
        result = train_model(model, lambda size, gen: next(stream),
                             lambda m, x: m(x)[:, -1, 0], cfg)
    finally:
        for hook in hooks:
            hook.remove()
    curve = [(s - 1, v) for s, v in result.curve if (s - 1) % 100 == 0 or s == steps]
    if result.status != "ok":
        curve.append((result.steps, math.nan))
    return model, curve


# ---------------------------------------------------------------- measurement

@workprec(256)
def _sq_err(pred: Any, target: float) -> float:
    """(pred - target)^2 computed in arb (pred an exact arb) and rounded to a float."""
    return float(((flint.arb(pred) - flint.arb(target)) ** 2).mid())


def model_losses(model: Memformer, tokens: torch.Tensor, target: torch.Tensor,
                 precision: Precision) -> np.ndarray:
    """Squared query errors (instances, depth + 1) after 0..L layers, model run in
    ``precision`` (column 0: the zero prediction of Z_0)."""
    preds = evaluate_method(model, "query_per_layer", tokens, precision)   # (instances, depth) arb
    t = target.numpy()
    out = np.empty((len(t), preds.shape[1] + 1))
    out[:, 0] = t ** 2
    for i in range(len(t)):
        for k in range(preds.shape[1]):
            out[i, k + 1] = _sq_err(preds[i, k], float(t[i]))
    return out


def _solver_traces(params: dict[str, Any], precision: Precision, X: np.ndarray, y: np.ndarray,
                   P: np.ndarray) -> dict[str, list[Any]]:
    xp = backend_for(precision)
    Xp, yp, L = xp.asarray(X), xp.asarray(y), params["depth"]
    return {
        "cg": conjugate_gradient(xp, Xp, yp, iters=L),
        "nesterov": nesterov(xp, Xp, yp, step=params["nesterov_eta"],
                             beta=params["nesterov_beta"], iters=L),
        "heavy_ball": heavy_ball(xp, Xp, yp, step=params["heavy_ball_eta"],
                                 beta=params["heavy_ball_beta"], iters=L),
        "pgd": preconditioned_gd(xp, Xp, yp, P=xp.asarray(P), step=params["pgd_step"],
                                 iters=L),
    }


def baseline_losses(params: dict[str, Any], tokens: torch.Tensor, target: torch.Tensor,
                    precision: Precision, seed: int) -> dict[str, np.ndarray]:
    """Squared query errors (instances, L + 1) of CG, Nesterov, heavy ball and
    preconditioned GD (P = Sigma^-1) run per instance in ``precision`` for L iterations."""
    d = params["d"]
    _, _, P = covariance(params, seed)
    xp = backend_for(precision)
    out: dict[str, np.ndarray] = {}
    for i in range(tokens.shape[0]):
        e = tokens[i].numpy()
        X, y, xq = e[:-1, :d], e[:-1, d], xp.asarray(e[-1, :d])
        for name, trace in _solver_traces(params, precision, X, y, P).items():
            row = out.setdefault(name, np.empty((tokens.shape[0], len(trace))))
            preds = [xp.to_exact(xq @ w).reshape(-1)[0] for w in trace]
            row[i] = [_sq_err(p, float(target[i])) for p in preds]
    return out


def _mean_log10(v: np.ndarray) -> float:
    """Mean of log10 of per-instance losses (the paper plots the average log-loss)."""
    return float(np.mean(np.log10(np.maximum(v, 1e-300))))


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else None


def measure(params: dict[str, Any], seed: int, precision: Precision, model: Memformer,
            curve: list[tuple[int, float]], lsa: Memformer | None,
            one_head: Memformer | None) -> StudyOutcome:
    """The metrics of one precision: ``model`` (trained, training curve ``curve``) and the
    solvers on the evaluation instances, ``lsa`` / ``one_head`` the trained counterparts of
    ``ratio_vs_lsa`` / ``ratio_vs_one_head`` (None: not measured)."""
    tokens, target = evaluation_set(params, seed)
    mine = model_losses(model, tokens, target, precision)
    base = baseline_losses(params, tokens, target, precision, seed)
    final = float(mine[:, -1].mean())
    finals = {name: float(v[:, -1].mean()) for name, v in base.items()}
    metrics: dict[str, float | None] = {"loss": final}
    for name in ("cg", "nesterov", "heavy_ball", "pgd"):
        metrics[f"ratio_vs_{name}"] = _ratio(final, finals[name])
    for name, other in (("lsa", lsa), ("one_head", one_head)):
        metrics[f"ratio_vs_{name}"] = None if other is None else _ratio(
            final, float(model_losses(other, tokens, target, precision)[:, -1].mean()))
    metrics["frac_beats_cg"] = float(np.mean(mine[:, -1] < base["cg"][:, -1]))
    metrics["mean_log10_loss"] = _mean_log10(mine[:, -1])
    metrics["mean_log10_loss_cg"] = _mean_log10(base["cg"][:, -1])
    metrics["loss_cg"] = finals["cg"]
    metrics["train_loss"] = curve[-1][1]
    status = "ok" if math.isfinite(curve[-1][1]) and math.isfinite(final) else "diverged"
    series = {"loss_model": [float(v) for v in mine.mean(axis=0)],
              **{f"loss_{k}": [float(x) for x in v.mean(axis=0)] for k, v in base.items()},
              "train_loss": curve}
    info = {"instances": int(tokens.shape[0]), "fixed_batch": _is_fixed(params),
            "parameters": int(sum(p.numel() for p in model.parameters()))}
    return StudyOutcome(metrics=metrics, primary="loss", series=series, info=info,
                        status=status)


@register_study("memformer.compare", DEFAULTS, validate=_validate)
def compare(params: dict[str, Any], precisions: tuple[Precision, ...], seed: int
            ) -> list[StudyOutcome]:
    """Trained Memformer / linear transformer vs per-instance CG, Nesterov, heavy ball, PGD.
    003 eq. 2.5-2.10, 3.1-3.2, 3.4; Sec. 3.3, 4, 5; App. B.

    The model (and the lsa / 1-head counterpart its ratios need) is trained once and
    measured in each precision."""
    torch.set_num_threads(1)
    model, curve = train(params, seed)
    lsa = None if params["model"] == "lsa" else train({**params, "model": "lsa"}, seed)[0]
    one_head = None if params["heads"] == 1 else train({**params, "heads": 1}, seed)[0]
    return each_precision(precisions, lambda p: measure(params, seed, p, model, curve, lsa,
                                                        one_head))
