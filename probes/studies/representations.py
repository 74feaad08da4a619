"""004 *In-context learning with representations*: population-loss GD, the ridge limit, heads.

Three studies on a seeded instance of 004's setting (tanh basis f, K unit-norm tokens, the
prompt = the first N; see :mod:`probes.studies.population_loss`):

* ``representations.closed_form`` -- Lemma 4's closed-form population loss (corrected L*)
  against a Monte Carlo estimate of the actual model's loss (:class:`SoftmaxICL`, float64),
  and the ridge limit A (eq. 31) against eq. 64 and a direct ridge regression (eq. 16).
* ``representations.population_gd`` -- GD with the reparameterised step sizes (Lemma 5,
  eq. 11) in the run's precision: max|A_hat_t - A| per iteration against a truth computed at
  4x the working bits, its floor, the fitted linear rate of the loss gap vs Thm 1's bound
  (eq. 12), and the trained model's predictions against the ridge predictor (eq. 15-16).
* ``representations.heads`` -- the rank condition H >= N (Prop. 1) and the H = 1 failure
  (App. B.4): final loss gap per number of heads, with a certified lower bound on the gap of
  any single-head model.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from precision import deterministic as det
from precision.backends import backend_for
from precision.metrics import detect_floor, max_abs_error
from precision.models.softmax_icl import SoftmaxICL
from precision.precisions import Precision, parse_precision
from precision.solvers.ols import ridge
from precision.truth import truth_bits
from probes.studies import StudyError, StudyOutcome, check_int, per_precision, register_study
from probes.studies import population_loss as pl

_INSTANCE = {"d": 3, "N": 3, "K": 6, "m": 2, "tau": 0.5, "beta": 2.0, "heads": 12}
_GD = {"step_rule": "scaled", "gamma": 1.0, "step": 1.5, "iters": 3000, "record_every": 10}
_STEP_RULES = ("scaled", "theorem")


# --- validation ------------------------------------------------------------------------
#: Upper bounds of the integer parameters (sizes of the instance, iteration counts): a larger
#: value is a one-line error, not an exhausted memory.
_MAX = {"d": 64, "N": 1024, "K": 1024, "m": 64, "heads": 1024, "samples": 10_000_000,
        "iters": 10_000_000}


def _positive(params: dict[str, Any], key: str) -> float:
    v = params[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or math.isinf(v):
        raise StudyError(f"{key} must be a finite number > 0, got {v!r}")
    return float(v)


def _validate_instance(params: dict[str, Any]) -> None:
    for key in ("d", "N", "K", "m", "heads"):
        check_int(params, key, 1, _MAX.get(key))
    for key in ("tau", "beta"):
        _positive(params, key)
    if not params["N"] < params["K"]:
        raise StudyError(f"need N < K (query tokens to predict), got N={params['N']}, "
                         f"K={params['K']}")


def _validate_gd(params: dict[str, Any]) -> None:
    _validate_instance(params)
    _positive(params, "gamma")
    if params["step_rule"] not in _STEP_RULES:
        raise StudyError(f"step_rule must be one of {', '.join(_STEP_RULES)}, got "
                         f"{params['step_rule']!r}")
    if not 0 < _positive(params, "step") < 2:
        raise StudyError(f"step must lie in (0, 2) (GD stability), got {params['step']!r}")
    iters = check_int(params, "iters", 1, _MAX["iters"])
    every = check_int(params, "record_every", 1)
    if iters % every:
        raise StudyError(f"iters ({iters}) must be a multiple of record_every ({every})")


def _validate_closed_form(params: dict[str, Any]) -> None:
    _validate_instance(params)
    if check_int(params, "samples", 1, _MAX["samples"]) < 1000:
        raise StudyError(f"samples must be >= 1000, got {params['samples']}")
    _positive(params, "w_scale")


# --- the instance in float64 and in the run's precision -------------------------------------
def _instance(params: dict[str, Any], seed: int) -> tuple[pl.RepresentationProblem, np.ndarray]:
    """The problem (seed) and the initialisation Q_h(i, j) ~ N(0, beta^2) (Prop. 1)."""
    prob = pl.representation_problem(seed, d=params["d"], N=params["N"], K=params["K"],
                                      m=params["m"], tau=params["tau"])
    rng = np.random.default_rng([seed, 1])
    Q0 = params["beta"] * rng.standard_normal((params["heads"], params["d"], params["d"]))
    return prob, Q0


def _arrays(xp: Any, prob: pl.RepresentationProblem) -> dict[str, Any]:
    """T (d, K), V (d, N), Zhat (m, K), Z (m, N), M (N, N), A (N, K) in ``xp``."""
    T = xp.asarray(prob.tokens)
    Zhat = xp.asarray(prob.features)
    N = prob.n_prompt
    Z = Zhat[:, :N]
    return {"T": T, "V": T[:, :N], "Zhat": Zhat, "Z": Z, "M": pl.gram(xp, Z, prob.m_tau),
            "A": pl.ridge_limit(xp, Z, Zhat, prob.m_tau)}


def _high(precision: Precision) -> Any:
    """The backend for truths: arb midpoints at 4x the working bits (at least 512;
    :func:`precision.truth.truth_bits`)."""
    digits = math.ceil(truth_bits(precision) * math.log10(2)) + 2
    return backend_for(parse_precision(f"mp{digits}"))


def _truth_A(precision: Precision, arrs: dict[str, Any], m_tau: float) -> np.ndarray:
    """A (eq. 31) from the exact rounded inputs, computed at 4x the working bits (arb)."""
    xp, hi = backend_for(precision), _high(precision)
    Zhat = hi.asarray(xp.to_exact(arrs["Zhat"]))
    N = arrs["Z"].shape[1]
    return hi.to_exact(pl.ridge_limit(hi, Zhat[:, :N], Zhat, m_tau))


def ridge_prediction_error(precision: Precision, prob: pl.RepresentationProblem,
                           arrs: dict[str, Any], Ahat: Any, seed: int,
                           prompts: int = 8) -> float:
    """max over ``prompts`` seeded prompts y = (Z + eps)^T lambda (eq. 1) of
    max_k |y_hat_k - y_hat*_k|: the model's prediction y_hat = A_hat^T y (eq. 6, computed in
    the run's precision) against the ridge predictor y_hat* = (y, Z^Q^T lambda_hat),
    lambda_hat = (m tau I + Z Z^T)^-1 Z y (eq. 15, 65; computed at 4x the working bits)."""
    xp, hi = backend_for(precision), _high(precision)
    rng = np.random.default_rng([seed, 4])
    N = prob.n_prompt
    Zhat = hi.asarray(xp.to_exact(arrs["Zhat"]))
    worst = 0.0
    for _ in range(prompts):
        lam = rng.standard_normal(prob.m)
        eps = math.sqrt(prob.tau) * rng.standard_normal((prob.m, N))
        y = xp.asarray(det.matmul((prob.features[:, :N] + eps).T, lam))   # no BLAS
        ref = pl.ridge_predictions(hi, Zhat[:, :N], Zhat, hi.asarray(xp.to_exact(y)),
                                   prob.m_tau)
        worst = max(worst, max_abs_error(xp.to_exact(Ahat.T @ y), hi.to_exact(ref)))
    return worst


def _np_attention(prob: pl.RepresentationProblem, Q: np.ndarray) -> np.ndarray:
    """S (H, N, K) in float64 numpy (diagnostics only)."""
    scores = prob.tokens[:, : prob.n_prompt].T @ Q @ prob.tokens
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _np_closed_forms(prob: pl.RepresentationProblem) -> tuple[np.ndarray, np.ndarray]:
    """M (N, N) and A (N, K) in float64 numpy (diagnostics only)."""
    N = prob.n_prompt
    Z = prob.features[:, :N]
    M = Z.T @ Z + prob.m_tau * np.eye(N)
    R = Z.T @ prob.features
    R[:, :N] += prob.m_tau * np.eye(N)
    return M, np.linalg.solve(M, R)


# --- Thm 1 quantities (float64) ---------------------------------------------------------
def init_diagnostics(prob: pl.RepresentationProblem, Q0: np.ndarray, gamma: float,
                     step: float, rule: str = "scaled") -> dict[str, float]:
    """Step sizes and Thm 1's constants at the initialisation (w = 0), float64.

    C_k = (s_k^1, ..., s_k^H) (N, H), B_k = Zbar C_k (eq. 23), Zbar = M^{1/2};
    zeta0 = min_k lambda_min(B_k B_k^T) (eq. 9; 0 when H < N: Assumption 3 fails).
    eta_w = step * K / max_k lambda_max(C_k^T M C_k) (the w-Hessian is C_k^T M C_k / K, so
    step < 2 is stable in w), eta_Q = eta_w / gamma^2 (eq. 11). rate_bound = 1 - eta_w
    zeta0 / (2K) (eq. 12). gamma_min: eq. 10; L: eq. 59 with alpha of eq. 42;
    rate_theory = eq. 12 with the theorem's own steps gamma = gamma_min, eta_Q = 1 / L.
    ``rule = "theorem"`` uses those steps for the run (``gamma``, ``eta_q``, ``rate_bound``);
    ``"scaled"`` uses ``gamma`` and ``step`` as above.
    """
    K, N, H = prob.K, prob.n_prompt, Q0.shape[0]
    M, A = _np_closed_forms(prob)
    evals, evecs = np.linalg.eigh(M)
    Zbar = (evecs * np.sqrt(evals)) @ evecs.T
    S = _np_attention(prob, Q0)
    lmax = max(np.linalg.eigvalsh(S[:, :, k] @ M @ S[:, :, k].T)[-1] for k in range(K))
    zeta0 = min(np.linalg.eigvalsh(Zbar @ S[:, :, k].T @ S[:, :, k] @ Zbar)[0]
                for k in range(K))
    zeta0 = max(float(zeta0), 0.0) if H >= N else 0.0
    eta_w = step * K / lmax
    delta0 = float(np.sum(A * (M @ A)) / (2 * K))    # w = 0: A_hat = 0
    out = {"zeta0": zeta0, "gamma": gamma, "eta_w": eta_w, "eta_q": eta_w / gamma**2,
           "delta0": delta0, "rate_bound": 1.0 - eta_w * zeta0 / (2 * K)}
    if zeta0 <= 0:
        if rule == "theorem":
            raise StudyError("step_rule = 'theorem' needs zeta0 > 0 (Assumption 3; H >= N)")
        return {**out, "thm1_gamma_min": math.inf, "thm1_eta_q_max": 0.0,
                "thm1_rate_theory": 1.0}
    consts = {"Z2": np.linalg.norm(prob.features[:, :N], 2), "Zbar2": np.linalg.norm(Zbar, 2),
              "fmax": float(np.linalg.norm(Zbar, axis=0).max()), "A2": np.linalg.norm(A, 2)}
    gamma_min = zeta0 ** -1.25 * math.sqrt(
        128 * math.sqrt(2) / (math.sqrt(2) - 1) * consts["Z2"] ** 2 * math.sqrt(H)
        * consts["fmax"] * K**1.5 * delta0)

    def smoothness(g: float) -> float:
        """L of eq. 59 at gamma = g."""
        a = math.sqrt(2 * K) * 4 * consts["Zbar2"] / (g * zeta0) * math.sqrt(delta0)
        zb2, a2 = consts["Zbar2"] ** 2, consts["A2"]
        first = 2 * ((2 * g * zb2 * (2 * g * H * a + a2)) ** 2 / K + g**4 * H**2 * zb2**2 / K**2)
        second = 8 * g * consts["fmax"] * consts["Zbar2"] * max(1.0, 4 * K * a * a) * (
            (a * g * H) ** 2 + 4 * N * (a * g * H + a2) ** 2)
        return math.sqrt(first + second)

    L_min = smoothness(gamma_min)
    rate_theory = 1.0 - gamma_min**2 / L_min * zeta0 / (2 * K)
    if rule == "theorem":
        out.update({"gamma": gamma_min, "eta_q": 1.0 / L_min, "eta_w": gamma_min**2 / L_min,
                    "rate_bound": rate_theory})
    return {**out, "thm1_gamma_min": gamma_min, "thm1_rate_theory": rate_theory,
            "thm1_eta_q_max": 1.0 / smoothness(out["gamma"])}


# --- population GD -----------------------------------------------------------------------
def _run_gd(params: dict[str, Any], precision: Precision, seed: int) -> dict[str, Any]:
    """GD from (Q0, w = 0) in ``precision``; traces of max|A_hat - A| (vs truth) and gap."""
    prob, Q0 = _instance(params, seed)
    diag = init_diagnostics(prob, Q0, params["gamma"], params["step"], params["step_rule"])
    xp = backend_for(precision)
    arrs = _arrays(xp, prob)
    trace = pl.population_gd(
        xp, arrs["V"], arrs["T"], arrs["M"], arrs["A"], xp.asarray(Q0),
        xp.zeros((params["heads"], prob.K)), eta_q=diag["eta_q"], gamma=diag["gamma"],
        iters=params["iters"], record_every=params["record_every"])
    truth = _truth_A(precision, arrs, prob.m_tau)
    errs = [max_abs_error(xp.to_exact(a), truth) for a in trace.a_hats]
    gaps = [abs(xp.to_float(g)) for g in trace.gaps]
    pred_err = ridge_prediction_error(precision, prob, arrs, trace.a_hats[-1], seed)
    return {"prob": prob, "diag": diag, "steps": trace.steps, "errs": errs, "gaps": gaps,
            "ridge_pred_err": pred_err,
            "Q": xp.to_numpy(trace.Q), "w": xp.to_numpy(trace.alpha) * diag["gamma"]}


def _per_iter(rate: float | None, every: int) -> float | None:
    return None if rate is None or rate <= 0 else rate ** (1.0 / every)


def _bound_holds(steps: list[int], gaps: list[float], rate_bound: float) -> float:
    """1.0 when Delta_t <= rate_bound^t Delta_0 (eq. 12) at every recorded t whose Delta_t is
    still 1e3 above the trace's floor (below that, rounding, not GD, sets Delta_t)."""
    floor = detect_floor(gaps).level
    floor = 0.0 if not math.isfinite(floor) else floor
    ok = all(g <= gaps[0] * rate_bound**t * (1 + 1e-9)
             for t, g in zip(steps, gaps, strict=True) if g > 1e3 * floor)
    return 1.0 if ok else 0.0


@register_study("representations.population_gd", {**_INSTANCE, **_GD}, validate=_validate_gd)
@per_precision
def population_gd(params: dict[str, Any], precision: Precision, seed: int) -> StudyOutcome:
    """GD on 004's population loss: A_hat -> ridge limit A, floor and rate vs Thm 1.

    Lemma 4's loss, Lemma 5's steps; the limit is eq. 31, the linear rate Thm 1 (eq. 12)."""
    run = _run_gd(params, precision, seed)
    diag, every = run["diag"], params["record_every"]
    err_floor = detect_floor(run["errs"])
    gap_floor = detect_floor(run["gaps"])
    gap_rate = _per_iter(gap_floor.rate, every)
    bound = diag["rate_bound"]
    speedup = (math.log(gap_rate) / math.log(bound)
               if gap_rate is not None and 0 < gap_rate < 1 and 0 < bound < 1 else None)
    steps_ok = (diag["gamma"] >= diag["thm1_gamma_min"] * (1 - 1e-12)
                and diag["eta_q"] <= diag["thm1_eta_q_max"] * (1 + 1e-12))
    metrics = {
        "max_abs_err": run["errs"][-1],
        "ridge_pred_err": run["ridge_pred_err"],
        "floor_log10": err_floor.log10_level,
        "floor_step": float(run["steps"][min(err_floor.index, len(run["steps"]) - 1)]),
        "err_rate": _per_iter(err_floor.rate, every),
        "gap_final": run["gaps"][-1],
        "gap_rate": gap_rate,
        "gap_rate_bound": bound,
        "rate_speedup": speedup,
        "thm1_bound_holds": _bound_holds(run["steps"], run["gaps"], bound),
        "zeta0": diag["zeta0"], "gamma": diag["gamma"], "eta_w": diag["eta_w"],
        "eta_q": diag["eta_q"], "thm1_steps_satisfied": 1.0 if steps_ok else 0.0,
        "thm1_gamma_min": diag["thm1_gamma_min"], "thm1_eta_q_max": diag["thm1_eta_q_max"],
        "thm1_rate_theory": diag["thm1_rate_theory"],
    }
    series = {"max_abs_err": list(zip(run["steps"], run["errs"], strict=True)),
              "gap": list(zip(run["steps"], run["gaps"], strict=True))}
    return StudyOutcome(metrics=metrics, primary="max_abs_err", series=series,
                        info={"err_floor": err_floor.to_dict(), "gap_floor": gap_floor.to_dict()})


# --- heads: Prop. 1 and App. B.4 -----------------------------------------------------------
def cone_gap(M: np.ndarray, a: np.ndarray) -> float:
    """min over u >= 0 or u <= 0 of (u - a)^T M (u - a) for M (n, n) SPD, a (n,): exact, by
    enumerating the supports of u (the convex QP's optimum is the best feasible
    support-restricted stationary point). float64; n <= 12."""
    n = a.shape[0]
    if (a >= 0).all() or (a <= 0).all():
        return 0.0                                  # u = a is feasible
    best = math.inf
    for sign in (1.0, -1.0):
        b = sign * a
        for mask in range(1 << n):
            idx = [i for i in range(n) if mask >> i & 1]
            u = np.zeros(n)
            if idx:
                u[idx] = np.linalg.solve(M[np.ix_(idx, idx)], (M @ b)[idx])
                if (u[idx] < 0).any():
                    continue
            r = u - b
            best = min(best, float(r @ M @ r))
    return best


def single_head_gap_bound(prob: pl.RepresentationProblem) -> tuple[float, int]:
    """(lower bound on L - L* for every H = 1 model, number of query columns of A with mixed
    signs). With H = 1, A_hat[:, k] = w_{1,k} s_k with s_k > 0 (App. B.4), so
    L - L* >= (1/2K) sum_k min_{u >= 0 or u <= 0} (u - A_k)^T M (u - A_k) (eq. 29). The
    bound is 0 (no certificate) when every column of A has one sign."""
    M, A = _np_closed_forms(prob)
    N = prob.n_prompt
    A[:, :N] = np.eye(N)       # exact by eq. 64 (the solve leaves +-1e-17 off the diagonal)
    total = sum(cone_gap(M, A[:, k]) for k in range(prob.K))
    mixed = sum(1 for k in range(N, prob.K) if A[:, k].min() < 0 < A[:, k].max())
    return total / (2 * prob.K), mixed


def _min_rank(prob: pl.RepresentationProblem, Q0: np.ndarray) -> int:
    """min_k rank C_k (N, H) at the initialisation (singular values > 1e-10 sigma_max)."""
    S = _np_attention(prob, Q0)
    ranks = []
    for k in range(prob.K):
        sv = np.linalg.svd(S[:, :, k], compute_uv=False)
        ranks.append(int((sv > 1e-10 * sv[0]).sum()))
    return min(ranks)


@register_study("representations.heads", {**_INSTANCE, **_GD}, validate=_validate_gd)
@per_precision
def heads(params: dict[str, Any], precision: Precision, seed: int) -> StudyOutcome:
    """Heads H vs the ridge limit: H >= N reaches it, H = 1 keeps a certified loss gap.

    H >= N: 004 Prop. 1; the positive gap of one head: 004 App. B.4."""
    run = _run_gd(params, precision, seed)
    bound, mixed = single_head_gap_bound(run["prob"])
    prob, Q0 = _instance(params, seed)
    gap = run["gaps"][-1]
    metrics = {
        "gap_final": gap, "max_abs_err": run["errs"][-1],
        "single_head_gap_bound": bound,
        "gap_over_bound": gap / bound if bound > 0 else None,
        "mixed_sign_queries": float(mixed),
        "rank_c_min": float(_min_rank(prob, Q0)),
        "zeta0": run["diag"]["zeta0"],
    }
    series = {"gap": list(zip(run["steps"], run["gaps"], strict=True)),
              "max_abs_err": list(zip(run["steps"], run["errs"], strict=True))}
    return StudyOutcome(metrics=metrics, primary="gap_final", series=series)


# --- closed form vs Monte Carlo, ridge limit vs direct ridge --------------------------------
def monte_carlo_loss(prob: pl.RepresentationProblem, model: SoftmaxICL, samples: int,
                     seed: int, chunk: int = 20000) -> tuple[float, float]:
    """(mean, standard error) of the model's loss (1/2K) sum_k (y_hat_k - y_k)^2 (eq. 7) over
    lambda ~ N(0, I_m) (Assumption 1) and eps_k ~ N(0, tau I_m) (eq. 1), float64."""
    rng = np.random.default_rng([int(seed), 6])      # numpy draws: the same samples everywhere
    tokens = torch.tensor(prob.tokens.T, dtype=torch.float64)       # (K, d)
    feats = torch.tensor(prob.features, dtype=torch.float64)        # (m, K)
    total, total_sq, done = 0.0, 0.0, 0
    with torch.no_grad():
        while done < samples:
            b = min(chunk, samples - done)
            lam = det.tensor(rng.standard_normal((b, prob.m)))
            # noise variance tau (eq. 1); 004 eq. 75 misprints it as tau^2
            eps = math.sqrt(prob.tau) * det.tensor(rng.standard_normal((b, prob.m, prob.K)))
            y = torch.einsum("bm,bmk->bk", lam, feats[None] + eps)  # (b, K)
            pred = model(SoftmaxICL.embed(tokens, y[:, : prob.n_prompt]))[..., 0]
            loss = 0.5 * ((pred - y) ** 2).mean(dim=1)
            total += float(loss.sum())
            total_sq += float((loss**2).sum())
            done += b
    mean = total / samples
    var = max(total_sq / samples - mean**2, 0.0)
    return mean, math.sqrt(var / samples)


def limit_weights(prob: pl.RepresentationProblem, Q: np.ndarray) -> np.ndarray | None:
    """w (H, K) with sum_h w_{h,k} s_k^h = A[:, k] (min-norm), so A_hat = A: the minimiser
    reached with these Q; None when some C_k (N, H) is not of full row rank (H < N)."""
    S = _np_attention(prob, Q)
    _, A = _np_closed_forms(prob)
    W = np.zeros((Q.shape[0], prob.K))
    for k in range(prob.K):
        w, _, rank, _ = np.linalg.lstsq(S[:, :, k].T, A[:, k], rcond=None)
        if rank < prob.n_prompt:
            return None
        W[:, k] = w
    return W


def _mc_metrics(params: dict[str, Any], prob: pl.RepresentationProblem, Q0: np.ndarray,
                W_rand: np.ndarray, seed: int) -> dict[str, float | None]:
    """Closed form (float64) vs Monte Carlo at a random theta and at the limit theta*."""
    xp = backend_for(Precision("float64"))
    arrs = _arrays(xp, prob)
    S = pl.attention(xp, arrs["V"], arrs["T"], xp.asarray(Q0))
    floor = pl.loss_floor(xp, arrs["Z"], arrs["Zhat"], prob.m_tau)
    closed = xp.to_float(pl.population_loss(xp, arrs["M"], arrs["A"], S, xp.asarray(W_rand),
                                            floor))
    model = SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W_rand), prob.n_prompt)
    mc, se = monte_carlo_loss(prob, model, params["samples"], seed)
    out: dict[str, float | None] = {"closed_loss": closed, "mc_loss": mc, "mc_se": se,
                                    "mc_z": (mc - closed) / se, "mc_rel_err": abs(mc / closed - 1)}
    lstar = xp.to_float(floor)
    printed = xp.to_float(pl.loss_floor(xp, arrs["Z"], arrs["Zhat"], prob.m_tau, printed=True))
    W_lim = limit_weights(prob, Q0)
    out.update({"lstar": lstar, "lstar_printed": printed, "mc_loss_limit": None,
                "mc_z_limit": None, "mc_z_limit_printed": None})
    if W_lim is not None:
        model = SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W_lim), prob.n_prompt)
        mc_l, se_l = monte_carlo_loss(prob, model, params["samples"], seed + 1)
        out.update({"mc_loss_limit": mc_l, "mc_z_limit": (mc_l - lstar) / se_l,
                    "mc_z_limit_printed": (mc_l - printed) / se_l})
    return out


@register_study("representations.closed_form", {**_INSTANCE, "samples": 100000, "w_scale": 1.0},
                validate=_validate_closed_form)
@per_precision
def closed_form(params: dict[str, Any], precision: Precision, seed: int) -> StudyOutcome:
    """Lemma 4's loss vs Monte Carlo of the model; the ridge limit three ways.

    Lemma 4 with the corrected L*, Monte Carlo in float64 runs; the ridge limit by eq. 31,
    eq. 64 and a direct ridge regression (eq. 16), in every precision."""
    prob, Q0 = _instance(params, seed)
    W_rand = params["w_scale"] * np.random.default_rng([seed, 2]).standard_normal(
        (params["heads"], prob.K))
    xp = backend_for(precision)
    arrs = _arrays(xp, prob)
    N = prob.n_prompt
    A64 = pl.ridge_limit_woodbury(xp, arrs["Z"], arrs["Zhat"], prob.m_tau)
    y = xp.asarray(np.random.default_rng([seed, 3]).standard_normal(N))
    lam = xp.scalar(prob.m_tau) / float(N)                         # m tau / N, rounded once
    direct = ridge(xp, arrs["Z"].T, y, lam=lam)[0]                  # eq. 16 as written
    pred_direct = arrs["Zhat"].T @ direct
    pred_limit = arrs["A"].T @ y                                    # A^T y = y_hat* (eq. 15)
    S = pl.attention(xp, arrs["V"], arrs["T"], xp.asarray(Q0))
    Ahat = pl.a_hat(xp, S, xp.asarray(W_rand))
    floor = pl.loss_floor(xp, arrs["Z"], arrs["Zhat"], prob.m_tau)
    completed = pl.population_loss(xp, arrs["M"], arrs["A"], S, xp.asarray(W_rand), floor)
    direct_loss = pl.population_loss_direct(xp, arrs["Z"], arrs["Zhat"], prob.m_tau, Ahat)
    metrics: dict[str, float | None] = {
        "ridge_forms_diff": xp.to_float(xp.max(xp.abs(arrs["A"] - A64))),
        "ridge_vs_direct": max(
            xp.to_float(xp.max(xp.abs(pred_limit[N:] - pred_direct[N:]))),
            xp.to_float(xp.max(xp.abs(pred_limit[:N] - y)))),
        "loss_forms_rel_diff": abs(xp.to_float((completed - direct_loss) / direct_loss)),
    }
    if precision.name == "float64":
        metrics.update(_mc_metrics(params, prob, Q0, W_rand, seed))
    return StudyOutcome(metrics=metrics, primary="ridge_forms_diff")
