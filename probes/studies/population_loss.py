"""004's population loss (Lemma 4) in closed form, its gradient, and GD on it, written once
against the array namespace ``xp`` so it runs in float32 / float64 / mpN.

Notation (004 Sec. 2, App. C-E). Dictionary T = (v_1, ..., v_K) (d, K) of unit-norm tokens,
prompt tokens V = T[:, :N] (d, N); representation f: R^d -> R^m, Zhat = f(T) (m, K),
Z = Zhat[:, :N] (m, N); labels y_k = lambda^T (f(v_k) + eps_k), eps_k ~ N(0, tau I_m)
(eq. 1). Parameters theta = {Q_h (d, d), w_h (K,)}; the heads' attention
s_k^h = softmax(V^T Q_h v_k) (N,) (eq. 24), stored as S (H, N, K); the model's
A_hat = (sum_h w_{h,k} s_k^h)_k (N, K) (eq. 32), so y_hat_k = <y, A_hat[:, k]> (eq. 6).

Closed forms (with M = Z^T Z + m tau I_N (N, N)):

* ridge limit A = M^-1 (Z^T Zhat + (m tau I_N, 0)) (eq. 31) = (I_N, Z^T (m tau I_m + Z Z^T)^-1
  Z^Q) (eq. 64);
* loss (eq. 29) L(theta) = (1/2K) sum_k (A_hat_k - A_k)^T M (A_hat_k - A_k) + L*.
  **Misprint** (004's printed L*): the k > N terms of L* need + m tau (the query label's own
  noise, E||eps_k||^2 = m tau, cf. eq. 75); the noise variance is tau, not tau^2 (eq. 75).

The problem data (tokens, the tanh basis) are generated in float64 numpy by
:func:`representation_problem`; everything else takes backend arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from precision import deterministic as det
from precision.solvers.linalg import cholesky_solve


@dataclass(frozen=True)
class RepresentationProblem:
    """One instance of 004's setting (float64 numpy).

    ``tokens`` (d, K): the dictionary, unit-norm columns, the first N are the prompt tokens;
    ``features`` (m, K): Zhat = f(tokens) for the basis f(x) = tanh(U x + b);
    ``n_prompt`` N; ``tau`` the label-noise variance (eq. 1).
    """

    tokens: np.ndarray
    features: np.ndarray
    n_prompt: int
    tau: float

    @property
    def d(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def K(self) -> int:  # noqa: N802 - the paper's name
        return int(self.tokens.shape[1])

    @property
    def m(self) -> int:
        return int(self.features.shape[0])

    @property
    def m_tau(self) -> float:
        """m tau, the ridge parameter of the limit (eq. 16, 64)."""
        return self.m * self.tau


def tanh_basis(rng: np.random.Generator, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights (U (m, d), b (m,)) of the basis f_i(x) = tanh(u_i^T x + b_i), i = 1..m."""
    return rng.standard_normal((m, d)), rng.standard_normal(m)


def representation_problem(
    seed: int, *, d: int, N: int, K: int, m: int, tau: float  # noqa: N803
) -> RepresentationProblem:
    """Seeded instance: K Gaussian tokens normalised to unit norm (distinct a.s., so
    Assumption 2 holds a.s.), m tanh basis functions, prompt = the first N tokens. The same
    arrays on every machine (:mod:`precision.deterministic`: no BLAS, tanh rounded from ball
    arithmetic)."""
    rng = np.random.default_rng(seed)
    tokens = rng.standard_normal((d, K))
    tokens /= np.sqrt(det.tree_sum(tokens * tokens, axis=0))[None, :]
    U, b = tanh_basis(rng, m, d)
    features = det.tanh(det.matmul(U, tokens) + b[:, None])
    return RepresentationProblem(tokens, features, int(N), float(tau))


# --- closed forms ----------------------------------------------------------------------
def gram(xp: Any, Z: Any, m_tau: float) -> Any:
    """M = Z^T Z + m tau I_N (N, N) for Z (m, N) (004 eq. 22: M = Zbar^2)."""
    return Z.T @ Z + xp.eye(Z.shape[1]) * m_tau


def _solve_columns(xp: Any, G: Any, R: Any) -> Any:
    """X with G X = R for SPD G (n, n), R (n, c), one Cholesky solve per column."""
    X = xp.zeros(R.shape)
    for j in range(R.shape[1]):
        X[:, j] = cholesky_solve(xp, G, R[:, j])
    return X


def ridge_limit(xp: Any, Z: Any, Zhat: Any, m_tau: float) -> Any:
    """A = (Z^T Z + m tau I_N)^-1 (Z^T Zhat + (m tau I_N, 0)) (N, K), 004 eq. 31."""
    N = Z.shape[1]
    R = Z.T @ Zhat
    R[:, :N] = R[:, :N] + xp.eye(N) * m_tau
    return _solve_columns(xp, gram(xp, Z, m_tau), R)


def ridge_limit_woodbury(xp: Any, Z: Any, Zhat: Any, m_tau: float) -> Any:
    """A = (I_N, Z^T (m tau I_m + Z Z^T)^-1 Z^Q) (N, K), 004 eq. 64 (the Woodbury form)."""
    m, N = Z.shape
    K = Zhat.shape[1]
    A = xp.zeros((N, K))
    A[:, :N] = xp.eye(N)
    G = Z @ Z.T + xp.eye(m) * m_tau
    A[:, N:] = Z.T @ _solve_columns(xp, G, Zhat[:, N:])
    return A


def ridge_predictions(xp: Any, Z: Any, Zhat: Any, y: Any, m_tau: float) -> Any:
    """y_hat* = (y, (Z^Q)^T lambda_hat) (K,) with lambda_hat = (m tau I + Z Z^T)^-1 Z y the
    ridge regression of eq. 16 / 65 on the prompt (y (N,))."""
    m, N = Z.shape
    lam = cholesky_solve(xp, Z @ Z.T + xp.eye(m) * m_tau, Z @ y)
    out = xp.zeros(Zhat.shape[1])
    out[:N] = y
    out[N:] = Zhat[:, N:].T @ lam
    return out


def loss_floor(xp: Any, Z: Any, Zhat: Any, m_tau: float, *, printed: bool = False) -> Any:
    """L* = inf_theta L (0-d), 004 Lemma 4 with the corrected constant.

    k <= N: c_k = -b_k^T M^-1 b_k + ||z_k||^2 + m tau with b_k = Z^T z_k + m tau e_k;
    k > N:  c'_k = -b_k^T M^-1 b_k + ||z_k||^2 + m tau with b_k = Z^T z_k
    (misprint fixed: the printed c'_k omits + m tau; ``printed=True`` returns the printed
    value, which is lower by (K - N) m tau / (2K)). L* = (1/2K) sum_k c_k.
    """
    N = Z.shape[1]
    K = Zhat.shape[1]
    Bm = Z.T @ Zhat
    Bm[:, :N] = Bm[:, :N] + xp.eye(N) * m_tau
    X = _solve_columns(xp, gram(xp, Z, m_tau), Bm)
    quad = xp.sum(Bm * X)
    norms = xp.sum(Zhat * Zhat)
    n_noise = N if printed else K  # misprint fixed: printed L* has + m tau only for k <= N
    return (norms - quad + m_tau * float(n_noise)) / float(2 * K)


# --- the model's attention and the loss --------------------------------------------------
def _row_max(xp: Any, X: Any) -> Any:
    """An upper envelope of X (..., N, K) over axis -2 via max(a, b) = (a + b + |a - b|) / 2
    (the softmax shift; any value close to the max keeps exp in range)."""
    c = X[..., 0, :]
    for j in range(1, X.shape[-2]):
        x = X[..., j, :]
        c = (c + x + xp.abs(c - x)) * 0.5
    return c


def attention(xp: Any, V: Any, T: Any, Q: Any) -> Any:
    """S (H, N, K) with S[h, :, k] = softmax(V^T Q_h v_k) (004 eq. 24), V (d, N), T (d, K),
    Q (H, d, d)."""
    scores = V.T @ (Q @ T)                     # (H, N, K)
    H, N, K = scores.shape
    shift = _row_max(xp, scores)               # (H, K)
    e = xp.exp(scores - shift.reshape(H, 1, K))
    return e / xp.sum(e, axis=1).reshape(H, 1, K)


def a_hat(xp: Any, S: Any, W: Any) -> Any:
    """A_hat (N, K) = (sum_h w_{h,k} s_k^h)_k (004 eq. 32); S (H, N, K), W (H, K)."""
    H, N, K = S.shape
    return xp.sum(S * W.reshape(H, 1, K), axis=0)


def loss_gap(xp: Any, M: Any, D: Any) -> Any:
    """L - L* = (1/2K) sum_k delta_k^T M delta_k (0-d) for D = A_hat - A (N, K) (eq. 29)."""
    return xp.sum(D * (M @ D)) / float(2 * D.shape[1])


def population_loss(xp: Any, M: Any, A: Any, S: Any, W: Any, floor: Any) -> Any:
    """L(theta) = loss_gap + L* (0-d), 004 eq. 29 (completed-square form)."""
    return loss_gap(xp, M, a_hat(xp, S, W) - A) + floor


def population_loss_direct(xp: Any, Z: Any, Zhat: Any, m_tau: float, Ahat: Any) -> Any:
    """L(theta) (0-d) before completing the square (004 App. H.1, eq. 73-75):
    L_k = 1/2 (||Z a_k - z_k||^2 + m tau ||a_k - e_k||^2)      for k <= N,
    L_k = 1/2 (||Z a_k - z_k||^2 + m tau (||a_k||^2 + 1))      for k > N,
    L = (1/K) sum_k L_k with a_k = A_hat[:, k] (N, K)."""
    N = Z.shape[1]
    K = Zhat.shape[1]
    R = Z @ Ahat - Zhat
    Dn = xp.copy(Ahat)
    Dn[:, :N] = Dn[:, :N] - xp.eye(N)
    total = xp.sum(R * R) + (xp.sum(Dn * Dn) + float(K - N)) * m_tau
    return total / float(2 * K)


def population_grad(
    xp: Any, V: Any, T: Any, M: Any, A: Any, Q: Any, W: Any
) -> tuple[Any, Any, Any, Any]:
    """(gap, dL/dQ (H, d, d), dL/dW (H, K), A_hat (N, K)) at theta = (Q, W).

    With delta = A_hat - A and G = M delta (N, K), g_k = G[:, k]:
    dL/dw_{h,k} = (1/K) (s_k^h)^T g_k (eq. 43 with alpha = w / gamma);
    dL/dQ_h = (1/K) sum_k w_{h,k} V (s ∘ g_k - s (s^T g_k)) v_k^T, s = s_k^h (eq. 80 with
    the softmax derivative of eq. 25), i.e. (1/K) V R_h T^T with R_h (N, K).
    """
    H, K = W.shape
    S = attention(xp, V, T, Q)
    Ahat = a_hat(xp, S, W)
    D = Ahat - A
    G = M @ D
    SG = S * G.reshape(1, G.shape[0], K)        # (H, N, K)
    sg = xp.sum(SG, axis=1)                     # (H, K): s_k^h . g_k
    gW = sg / float(K)
    R = (SG - S * sg.reshape(H, 1, K)) * W.reshape(H, 1, K)
    gQ = (V @ R) @ T.T / float(K)
    return xp.sum(D * G) / float(2 * K), gQ, gW, Ahat


@dataclass
class GDTrace:
    """What :func:`population_gd` recorded: ``steps`` (recorded iteration numbers), ``gaps``
    (L - L* there, backend 0-d arrays), ``a_hats`` (A_hat there, backend (N, K)), and the
    final parameters ``Q`` (H, d, d), ``alpha`` (H, K)."""

    steps: list[int]
    gaps: list[Any]
    a_hats: list[Any]
    Q: Any
    alpha: Any


def population_gd(
    xp: Any, V: Any, T: Any, M: Any, A: Any, Q0: Any, alpha0: Any, *,
    eta_q: float, gamma: float, iters: int, record_every: int = 1,
) -> GDTrace:
    """GD on the reparameterised loss l(xi) = L(theta), xi = {Q_h, alpha_h = w_h / gamma}
    with one step eta_Q (004 Lemma 5, eq. 34-36); equivalent to eta_Q on Q and
    eta_w = gamma^2 eta_Q on w (eq. 11). dl/dalpha = gamma dL/dw.
    Records steps 0, record_every, ..., and always the last one."""
    Q, alpha = Q0, alpha0
    eta = xp.scalar(eta_q)
    trace = GDTrace([], [], [], Q, alpha)
    for t in range(iters + 1):
        gap, gQ, gW, Ahat = population_grad(xp, V, T, M, A, Q, alpha * gamma)
        if t % record_every == 0 or t == iters:
            trace.steps.append(t)
            trace.gaps.append(gap)
            trace.a_hats.append(Ahat)
        if t == iters:
            break
        Q = Q - eta * gQ
        alpha = alpha - eta * (gW * gamma)
    trace.Q, trace.alpha = Q, alpha
    return trace
