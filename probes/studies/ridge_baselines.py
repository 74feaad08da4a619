"""Ridge-regression baselines of 002 (Sec. 6 "Baseline estimates", App. C Table 1).

Every estimator here predicts the query label of one batch of in-context regression
problems -- X (B, n, d), y (B, n), x_query (B, d) -- by a ridge solution
``w(lam) = (X^T X + lam I)^{-1} X^T y`` (002 eq. 5) with a per-sequence ``lam``:

* oracle ridge: ``lam = sigma_tau^2`` (the true noise variance; the Bayes posterior mean
  for w ~ N(0, I)),
* OLS: ``lam = 0`` (002 eq. 4),
* ConstRR: one constant ``lam`` for all sequences (tuned per noise setting by the caller),
* AdaRR: ``lam = sigma_est^2 = RSS_OLS / (n - d)`` (Cherkassky & Ma 2003, 002 Sec. 6),
* TunedRR: ``lam = m * min(sigma_est^2, t)``: AdaRR with a max. threshold ``t`` on the
  estimated variance and a multiplicative adjustment ``m`` (002 Sec. 6; threshold and
  multiplier commute up to reparametrisation, ``min(m s, t) = m min(s, t / m)``),
* iterative AdaRR (ours, not in 002's table): start from AdaRR's estimate and re-estimate
  ``sigma^2 <- RSS(lam) / (n - df(lam))`` from the *ridge* residuals, with the effective
  degrees of freedom ``df(lam) = tr X (X^T X + lam I)^{-1} X^T = sum_k s_k / (s_k + lam)``,
* the best one-layer Diag / GD++ linear transformer: ``y_hat = c x_q^T X^T y`` (002 eq. 10
  with one layer: the query label starts at 0, so only ``w_yx`` acts), whose optimal ``c`` and
  MSE are closed-form (:func:`one_layer_optimal_scale`, :func:`one_layer_mse`),
* a Bayes mixture (ours): the posterior mean of w when sigma is unknown with a known prior,
  a lower bound for every predictor (not a row of 002's table; its posterior weights are
  computed in float64 whatever the input dtype).

All of them run through one eigen-decomposition ``X^T X = V diag(s) V^T`` per sequence
(:class:`SpectralBatch`), so a candidate ``lam`` costs O(B d): that makes tuning cheap.
Coefficients live in eigen coordinates (``w = V coef``); since V is orthogonal, squared
distances between estimators are the same in both coordinates. Arithmetic is numpy in the
input dtype (float32 or float64), so a float32 batch is solved in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SpectralBatch:
    """One batch in eigen coordinates of ``X^T X``.

    Attributes:
        X: (B, n, d) inputs, y: (B, n) labels (kept for residuals).
        s: (B, d) eigenvalues of X^T X (ascending), V: (B, d, d) eigenvectors (columns).
        b: (B, d) ``V^T X^T y``; q: (B, d) ``V^T x_query``.
    """

    X: np.ndarray
    y: np.ndarray
    s: np.ndarray
    V: np.ndarray
    b: np.ndarray
    q: np.ndarray

    @property
    def n(self) -> int:
        """Context length n."""
        return int(self.X.shape[1])

    @property
    def d(self) -> int:
        """Input dimension d."""
        return int(self.X.shape[2])


def spectral_batch(X: np.ndarray, y: np.ndarray, x_query: np.ndarray) -> SpectralBatch:
    """Eigen-decompose ``X^T X`` per sequence (in X's dtype). X (B,n,d), y (B,n), x_query (B,d)."""
    G = np.matmul(X.transpose(0, 2, 1), X)
    s, V = np.linalg.eigh(G)
    s = np.maximum(s, 0)  # X^T X is PSD; clip roundoff below 0
    Vt = V.transpose(0, 2, 1)
    b = np.matmul(Vt, np.matmul(X.transpose(0, 2, 1), y[..., None]))[..., 0]
    q = np.matmul(Vt, x_query[..., None])[..., 0]
    return SpectralBatch(X=X, y=y, s=s, V=V, b=b, q=q)


def ridge_coef(sb: SpectralBatch, lam: np.ndarray | float) -> np.ndarray:
    """(B, d) eigen coordinates of ``w(lam) = (X^T X + lam I)^{-1} X^T y`` (002 eq. 5).

    ``lam``: scalar or (B,) per sequence, >= 0 (0 is OLS; needs n >= d, X of full rank).
    """
    lam = np.asarray(lam, dtype=sb.s.dtype)
    return sb.b / (sb.s + lam[..., None] if lam.ndim else sb.s + lam)


def coef_to_weights(sb: SpectralBatch, coef: np.ndarray) -> np.ndarray:
    """(B, d) weight vectors ``w = V coef``."""
    return np.einsum("bdk,bk->bd", sb.V, coef)


def predict(sb: SpectralBatch, coef: np.ndarray) -> np.ndarray:
    """(B,) query predictions ``x_query^T V coef``."""
    return np.einsum("bk,bk->b", sb.q, coef)


def ridge_weights(X: np.ndarray, y: np.ndarray, lam: np.ndarray | float) -> np.ndarray:
    """(B, d) ridge solutions by a direct solve (reference formula, eq. 5); lam scalar or (B,)."""
    B, _, d = X.shape
    lam = np.broadcast_to(np.asarray(lam, dtype=X.dtype), (B,))
    G = np.einsum("bni,bnj->bij", X, X) + lam[:, None, None] * np.eye(d, dtype=X.dtype)
    return np.linalg.solve(G, np.einsum("bnd,bn->bd", X, y)[..., None])[..., 0]


def residual_sum_squares(sb: SpectralBatch, coef: np.ndarray) -> np.ndarray:
    """(B,) ``||y - X V coef||^2`` from the residuals themselves (no cancellation)."""
    r = sb.y - np.einsum("bnd,bd->bn", sb.X, coef_to_weights(sb, coef))
    return np.einsum("bn,bn->b", r, r)


def ada_noise_variance(sb: SpectralBatch) -> np.ndarray:
    """(B,) AdaRR's unbiased estimate ``sigma_est^2 = RSS_OLS / (n - d)`` (002 Sec. 6)."""
    if sb.n <= sb.d:
        raise ValueError(f"AdaRR needs n > d (got n={sb.n}, d={sb.d})")
    return residual_sum_squares(sb, ridge_coef(sb, 0.0)) / (sb.n - sb.d)


def tuned_lambda(sigma2_est: np.ndarray, multiplier: float, threshold: float) -> np.ndarray:
    """TunedRR's ridge parameter ``multiplier * min(sigma_est^2, threshold)`` (002 Sec. 6)."""
    return multiplier * np.minimum(sigma2_est, np.asarray(threshold, dtype=sigma2_est.dtype))


def iterative_ada_lambda(sb: SpectralBatch, iters: int) -> np.ndarray:
    """(B,) ridge parameter after ``iters`` re-estimations from ridge residuals (ours).

    ``lam_0 = RSS_OLS / (n - d)`` (AdaRR); ``lam_{k+1} = RSS(lam_k) / (n - df(lam_k))`` with
    ``df(lam) = sum_k s_k / (s_k + lam)``; ``iters = 0`` is AdaRR.
    """
    lam = ada_noise_variance(sb)
    for _ in range(iters):
        rss = residual_sum_squares(sb, ridge_coef(sb, lam))
        df = np.sum(sb.s / (sb.s + lam[:, None]), axis=1)
        lam = rss / (sb.n - df)
    return lam


def oracle_mse_given_x(sb: SpectralBatch, sigmas: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(B,) ``sum_j weights_j * sum_k sigma_j^2 / (s_k + sigma_j^2)``: the oracle MSE given X,
    averaged over a quadrature rule (sigmas, weights) of the sigma law instead of one draw."""
    s2 = np.asarray(sigmas, dtype=np.float64) ** 2
    s = sb.s.astype(np.float64)
    per = np.sum(s2[None, :, None] / (s[:, None, :] + s2[None, :, None]), axis=2)  # (B, K)
    return per @ np.asarray(weights, dtype=np.float64)


def one_layer_optimal_scale(n: int, d: int, mean_sigma2: float) -> float:
    """Optimal ``c`` of the one-layer predictor ``c x_q^T X^T y``: ``1 / (n + d + 1 + E sigma^2)``.

    From ``E[(X^T X)^2] = n (n + d + 1) I`` (Wishart) and ``E[X^T xi xi^T X] = n E[sigma^2] I``.
    """
    return 1.0 / (n + d + 1 + mean_sigma2)


def one_layer_mse(n: int, d: int, mean_sigma2: float, c: float | None = None) -> float:
    """Query MSE of ``c x_q^T X^T y`` with w, x, x_q ~ N(0, I) (002 Sec. 2.2 data):

    ``d (c^2 n (n + d + 1 + E sigma^2) - 2 c n + 1)``; at the optimal ``c`` this is
    ``d (1 - n / (n + d + 1 + E sigma^2))``.
    """
    if c is None:
        c = one_layer_optimal_scale(n, d, mean_sigma2)
    return d * (c * c * n * (n + d + 1 + mean_sigma2) - 2 * c * n + 1)


def bayes_mixture_coef(sb: SpectralBatch, sigmas: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """(B, d) posterior mean of w (eigen coordinates) when sigma has a discrete prior (ours).

    ``sigmas`` (K,) > 0 with weights ``prior`` (K,); w ~ N(0, I). The marginal likelihood is
    ``y ~ N(0, X X^T + sigma^2 I)``: with ``u_k^2 = b_k^2 / s_k`` (projections of y on the
    column space) ``log p = -1/2 [sum_k log(s_k + sigma^2) + (n - d) log sigma^2
    + sum_k u_k^2 / (s_k + sigma^2) + (||y||^2 - sum_k u_k^2) / sigma^2]``; the posterior mean
    is the posterior-weighted mix of the ridge solutions ``w(sigma^2)``.
    """
    s2 = np.asarray(sigmas, dtype=np.float64) ** 2
    s, b = sb.s.astype(np.float64), sb.b.astype(np.float64)
    u2 = b * b / s
    yy = np.einsum("bn,bn->b", sb.y, sb.y).astype(np.float64)
    out_of_span = np.maximum(yy - u2.sum(axis=1), 0.0)
    den = s[:, None, :] + s2[None, :, None]                      # (B, K, d)
    logp = -0.5 * (np.log(np.prod(den, axis=2)) + (sb.n - sb.d) * np.log(s2)
                   + (u2[:, None, :] / den).sum(axis=2) + out_of_span[:, None] / s2)
    logp += np.log(np.asarray(prior, dtype=np.float64))
    post = np.exp(logp - logp.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    coef = np.einsum("bj,bjk->bk", post, b[:, None, :] / den)
    return coef.astype(sb.s.dtype)
