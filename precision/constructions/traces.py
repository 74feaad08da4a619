"""One trace per construction, ``trace(p, problem, **params) -> (models, refs, truth)``: per
depth t, the model's output in precision ``p``, the reference algorithm's iterate t in the
same precision (:mod:`precision.solvers`) and the certified truth of the rounded inputs, all
exact values (:func:`~precision.constructions.measure.run_construction` scores them)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import flint
import numpy as np
import torch

from precision import deterministic as det
from precision.backends import backend_for
from precision.backends.mp_backend import workprec
from precision.constructions import (
    baseconv_gd,
    baseconv_primitives,
    logistic_newton,
    lsa_gd,
    lsa_gdpp,
    lsa_newton,
    transformer_read,
)
from precision.constructions.layers import PerLayer, blockwise_mp, layerwise
from precision.evaluate import evaluate_exact, evaluate_method
from precision.solvers.gd import gd, gd_plus_plus
from precision.solvers.measure import SolverError
from precision.solvers.newton_logistic import newton_logistic
from precision.solvers.newton_schulz import newton_schulz
from precision.truth import (
    certified,
    from_arb_mat,
    inverse_truth,
    least_squares_truth,
    logistic_truth,
    matvec,
    to_arb_mat,
    truth_bits,
)


def pow2_below(x: float) -> float:
    """The largest power of two <= 1/x (x > 0): exact in every precision, and found from the
    binary exponent of x (no logarithm, so the same on every machine)."""
    mantissa, exponent = math.frexp(float(x))        # x = mantissa 2^exponent, in [1/2, 1)
    return math.ldexp(1.0, -(exponent - 1 if mantissa == 0.5 else exponent))


def step_from_spectrum(Xr: np.ndarray) -> float:
    """2 / (lambda_min + lambda_max) of X^T X / N, the optimal fixed GD step, computed without
    BLAS or LAPACK (:mod:`precision.deterministic`): the same on every machine."""
    ev = det.eigvalsh(det.matmul(Xr.T, Xr) / Xr.shape[0])
    return 2.0 / (ev[0] + ev[-1])


def trace_lsa_gd(p: Any, prob: Any, layers: int, step: float | None
                 ) -> tuple[list[Any], list[Any], Any]:
    """Per layer: the LSA's query prediction, GD's prediction x_q^T w_l, the OLS truth."""
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)  # the inputs as the model receives them
    eta = step if step is not None else step_from_spectrum(Xr)  # the optimal fixed step
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=layers)
    tokens = lsa_gd.tokens(Xr, yr, q)
    d = Xr.shape[1]
    model = lsa_gd.preconditioned_gd(d, layers, eta)
    if p.is_mp:  # the same arithmetic as the whole model, one layer exported (fast)
        out = np.concatenate(layerwise(model, tokens, p, lambda e: -e[:, -1, d:d + 1]))
    else:
        out = evaluate_method(model, "query_per_layer", tokens, p)[0]    # (layers,)
    return _query_trace(p, X, y, q, out, iterates, layers)


def _query_trace(p: Any, X: Any, y: Any, q: np.ndarray, out: np.ndarray, iterates: list[Any],
                 iters: int) -> tuple[list[Any], list[Any], Any]:
    """Per step t = 1..iters: the model's query prediction out[t-1], the algorithm's
    x_q^T w_t in the same precision, and the certified OLS prediction x_q^T w*."""
    xp = backend_for(p)
    models = [out[t - 1:t] for t in range(1, iters + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, iters + 1)]
    return models, refs, _ols_prediction(xp, X, y, q, truth_bits(p))


def _ols_prediction(xp: Any, X: Any, y: Any, q: np.ndarray, bits: int, ridge: Any = 0.0
                    ) -> np.ndarray:
    """The certified least-squares (ridge) prediction x_q^T w* from the rounded X, y."""
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits, ridge=ridge)
    return matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


def trace_baseconv_gd(p: Any, prob: Any, iters: int, step: float | None, causal: bool = True
                      ) -> tuple[list[Any], list[Any], Any]:
    """Per GD step of the causal BaseConv (001 App. C.2.2, a layer a step) or the non-causal
    one (App. C.2.1, 3 layers a step, step :func:`baseconv_gd.exact_step` so eta/N is an
    exact weight): x_q^T w_k vs GD run with the same step, and the OLS prediction."""
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)
    n, d = Xr.shape
    eta = step if step is not None else step_from_spectrum(Xr)
    eta = eta if causal else baseconv_gd.exact_step(eta, n)
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=iters)
    if causal:
        model, x = baseconv_gd.gradient_descent(d, n, eta, iters), baseconv_gd.tokens(Xr, yr, q)
    else:
        model = baseconv_gd.gradient_descent_noncausal(d, n, eta, iters)
        x = baseconv_gd.tokens_noncausal(Xr, yr, q)
    if p.is_mp:  # the same arithmetic as the whole model, one block exported (fast)
        lay = (baseconv_gd._layout if causal else baseconv_gd._layout_noncausal)(d)
        out = blockwise_mp(model, x, p, 1 if causal else 3, iters, lay["q"], lay["w"],
                           start=2 if causal else 0)
    else:
        kind = "baseconv_gd" if causal else "baseconv_gd_noncausal"
        out = evaluate_exact(PerLayer(model, kind, d), x, p)[0]
    return _query_trace(p, X, y, q, out, iterates, iters)


def trace_primitive(p: Any, prob: Any, op: str, family: str = "baseconv",
                    gap: float = transformer_read.DEFAULT_GAP, layernorm: bool = False,
                    scale: float = transformer_read.DEFAULT_SCALE
                    ) -> tuple[list[Any], list[Any], Any]:
    """One point: the single-layer primitive (001 App. C.1's BaseConv, or READ in one
    softmax-attention head, :mod:`.transformer_read`, logit margin ``gap``, with LayerNorm
    and constant channels +-``scale`` when ``layernorm``) on the seeded
    input u, against the primitive computed directly in the same precision (a row copy, u H,
    or a product of columns) and against the exact result from the rounded u (and H)."""
    task = prob.task
    if task.name != op:
        raise SolverError(f"construction '{family}_{op}' needs a primitive problem of kind "
                          f"'{op}', not '{task.name}'")
    xp = backend_for(p)
    u = xp.asarray(prob.u)
    ue = xp.to_exact(u)                      # exact values of the rounded input
    n, d = ue.shape
    bits = truth_bits(p)
    if op == "read":
        i, j, a, b = task.i, task.j, task.a, task.b
        if family == "transformer":    # the problem's READ is causal: i < j
            width = max(32, d + (6 if layernorm else 3))
            model = transformer_read.read(n, d, i, j, a, b, width=width, gap=gap,
                                          layernorm=layernorm, scale=scale)
        else:
            model = baseconv_primitives.read(n, d, i, j, a, b)
        rows = np.arange(n)
        rows[j] = i
        ref = truth = ue[rows][:, a:b]      # a copy: exact in every precision
    elif op == "affine":
        H = xp.asarray(task.H)               # a weight: rounded into the precision like u
        He = xp.to_exact(H)
        model = baseconv_primitives.affine(n, xp.to_numpy(H))
        ref = xp.to_exact(u @ H)
        truth = from_arb_mat(certified(lambda: to_arb_mat(ue) * to_arb_mat(He), bits),
                             (n, He.shape[1]))
    else:
        a, b, k = task.a, task.b, task.d_out
        model = baseconv_primitives.multiply(n, d, a, b, k)
        ref = xp.to_exact(u[:, a:a + k] * u[:, b:b + k])
        ua, ub = to_arb_mat(ue[:, a:a + k]), to_arb_mat(ue[:, b:b + k])
        truth = from_arb_mat(certified(
            lambda: flint.arb_mat(n, k, [ua[r, c] * ub[r, c] for r in range(n)
                                         for c in range(k)]), bits), (n, k))
    out = evaluate_exact(model, torch.as_tensor(xp.to_numpy(u)[None]), p)[0]
    return [out], [ref], truth


def trace_lsa_newton(p: Any, A: np.ndarray, steps: int) -> tuple[list[Any], list[Any], Any]:
    """Per Newton step: the transformer's X_t, Newton–Schulz's X_t, and A^{-1}."""
    xp = backend_for(p)
    Ap = xp.asarray(A)
    Ar = xp.to_numpy(Ap)
    d = Ar.shape[0]
    alpha = pow2_below(float(det.tree_sum((Ar * Ar).ravel())))
    iterates = newton_schulz(xp, Ap, iters=steps, alpha=alpha)
    tokens = lsa_newton.tokens(alpha * Ar.T, Ar)
    model = lsa_newton.newton_schulz(d, steps)
    if p.is_mp:  # one layer exported, run layer by layer; X_t^T after every second layer
        models = [o.T for o in layerwise(model, tokens, p, lambda h: h[:, :, :d], every=2)]
    else:
        out = evaluate_exact(PerLayer(model, "ns", d), tokens, p)[0]
        models = [out[t - 1].T for t in range(1, steps + 1)]    # X_t
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    return models, refs, inverse_truth(xp.to_exact(Ap), truth_bits(p))


def trace_logistic_newton(p: Any, prob: Any, N: int, k: int, steps: int
                          ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton step: the 11 + 2k layer transformer's x_t (000 Thm 5.2, App. C), damped
    Newton's x_t in the same precision, and the certified minimiser (as run_solver's)."""
    xp = backend_for(p)
    A, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Ar, yr = xp.to_numpy(A), xp.to_numpy(y)  # the inputs as the model receives them
    n, d = Ar.shape
    model = logistic_newton.damped_newton(d, n, prob.mu, N=N, k=k, steps=steps)
    x = logistic_newton.tokens(Ar, yr)
    if p.is_mp:  # one layer exported, run layer by layer; x after every Newton step
        xs = logistic_newton.rows(d)["x"]
        out = layerwise(model, x, p, lambda h: h[:, 0, xs],
                        every=logistic_newton.layers_per_step(k))
    else:
        out = evaluate_exact(logistic_newton.PerStep(model), x, p)[0]
    iterates = newton_logistic(xp, A, y, mu=prob.mu, iters=steps, damped=True)
    models = [out[t] for t in range(steps)]
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    truth = logistic_truth(xp.to_exact(A), xp.to_exact(y), prob.mu, truth_bits(p))
    return models, refs, truth


def trace_lsa_least_squares(p: Any, prob: Any, steps: int, mu: float
                            ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton–Schulz step t = 1..T of the 3 + T layer linear transformer of 000 Thm 4.2
    (ridge variant, 000 Remark 4.4, for mu > 0), A (n, d), y (n,), query a (d,):

    * model: the prediction y_hat = y^T A X_t a of the 3 + t layer model (its read-out
      layers T+2, T+3 applied to the state after Newton layer t; they do not depend on T);
    * algorithm: :func:`newton_schulz` on R = A^T A + mu I from X_0 = eps R in the same
      precision, prediction a^T X_t (A^T y);
    * truth: a^T w*, w* = (A^T A + mu I)^{-1} A^T y, certified (``least_squares_truth`` with
      ridge mu / n in its 1/n scaling, passed as an arb so it is exact).

    eps = the largest power of two <= 1/||R||_F^2 (< 2 / lambda_max(R)^2: convergence), so
    X_0 = eps R is exact; mu must make the weights mu - 1 and eps mu - 1 exact float64
    numbers (e.g. an integer or a power of two), or mp50 would see float64 rounding.
    """
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)  # the inputs as the model receives them
    n, d = Xr.shape
    mu = float(mu)
    R64 = det.matmul(Xr.T, Xr) + mu * np.eye(d)
    eps = pow2_below(float(det.tree_sum((R64 * R64).ravel())))
    if mu < 0 or Fraction(mu) - 1 != Fraction(mu - 1.0) or (
            Fraction(eps) * Fraction(mu) - 1 != Fraction(eps * mu - 1.0)):
        raise SolverError(f"lsa ridge: mu={mu!r} must be >= 0 with mu - 1 and eps mu - 1 "
                          f"exact in float64 (eps = {eps!r}); use an integer or power of two")
    q = prob.X_query[0]
    model = lsa_newton.least_squares(d, steps, eps, mu)
    col = 4 * d + 2  # the prediction: token 0 of the last row of H (lsa_newton.ls_prediction)
    models = layerwise(model, lsa_newton.ls_tokens(Xr, yr, q), p,
                       lambda h: h[:, 0, col:col + 1], start=1, tail=(steps + 1, steps + 2))
    R = X.T @ X
    if mu:
        R = R + xp.eye(d) * mu
    iterates = newton_schulz(xp, R, iters=steps, alpha=eps)      # X_0 = eps R^T = eps R
    b, qv = X.T @ y, xp.asarray(q)
    refs = [xp.to_exact(qv @ (iterates[t] @ b)).reshape(1) for t in range(1, steps + 1)]
    bits = truth_bits(p)
    ridge: Any = 0.0
    if mu:
        with workprec(4 * bits):
            ridge = flint.arb(mu) / n
    return models, refs, _ols_prediction(xp, X, y, q, bits, ridge)


def trace_lsa_newton_symmetric(p: Any, A: np.ndarray, steps: int
                               ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton–Schulz step (one linear-attention layer each, symmetric A (d, d); 000
    Lemma 4.1's last sentence): the model's X_t, Newton–Schulz's X_t from X_0 = alpha A in
    the same precision (alpha a power of two <= 1/||A||_F^2), and A^{-1}."""
    xp = backend_for(p)
    Ap = xp.asarray(A)
    Ar = xp.to_numpy(Ap)
    d = Ar.shape[0]
    if not np.array_equal(Ar, Ar.T):
        raise SolverError("lsa_newton_schulz_sym needs an exactly symmetric matrix")
    alpha = pow2_below(float(det.tree_sum((Ar * Ar).ravel())))
    iterates = newton_schulz(xp, Ap, iters=steps, alpha=alpha)   # X_0 = alpha A^T = alpha A
    model = lsa_newton.newton_schulz_symmetric(d, steps)
    outs = layerwise(model, lsa_newton.symmetric_tokens(alpha * Ar, Ar), p,
                     lambda h: h[:, :, :d])                      # X_t^T (row tokens)
    models = [o.T for o in outs]
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    return models, refs, inverse_truth(xp.to_exact(Ap), truth_bits(p))


def trace_lsa_gdpp(p: Any, prob: Any, precondition: int, gd_steps: int
                   ) -> tuple[list[Any], list[Any], Any]:
    """Per layer of 002 Thm 5.1's GD++ linear transformer (``precondition`` layers with
    w_xx = -gamma_l = -1/(3 nu_l), then ``gd_steps`` GD layers; steps from the rounded prompt
    in float64, :func:`lsa_gdpp.gdpp`): the query read-out -y_q, the same recursion run by
    :func:`precision.solvers.gd.gd_plus_plus` in the same precision with the same weights,
    and the certified OLS prediction x_q^T w* (the limit of Thm 5.1)."""
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)
    d = Xr.shape[1]
    q = prob.X_query[0]
    model = lsa_gdpp.gdpp(Xr, precondition, gd_steps)
    models = layerwise(model, lsa_gd.tokens(Xr, yr, q), p, lambda e: -e[:, -1, d:d + 1])
    weights = [(float(a), float(b)) for a, b in model.w.detach().tolist()]
    qv = xp.asarray(q)
    preds = gd_plus_plus(xp, X, y, qv, weights=weights)
    refs = [xp.to_exact(preds[t]).reshape(1) for t in range(1, len(weights) + 1)]
    return models, refs, _ols_prediction(xp, X, y, q, truth_bits(p))
