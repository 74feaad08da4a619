"""Gradient descent and preconditioned gradient descent on least squares.

Objective f(w) = (1/2N) ||X w - y||^2, gradient X^T (X w - y) / N, Hessian H = X^T X / N.
GD: w_{k+1} = w_k - eta grad f(w_k)  (001 App. A.1; 003 eq. 2.4).
Preconditioned GD: w_{k+1} = w_k - eta P grad f(w_k)  (003 eq. 2.10 with A_l = eta P).
GD++ on a prompt (002 eq. 11, Thm 5.1): :func:`gd_plus_plus`.
"""

from __future__ import annotations

from typing import Any


def gradient(X: Any, y: Any, w: Any) -> Any:
    """grad f(w) = X^T (X w - y) / N, computed without forming X^T X."""
    return (X.T @ (X @ w - y)) / float(X.shape[0])


def gd(xp: Any, X: Any, y: Any, *, step: float, iters: int, w0: Any = None) -> list[Any]:
    """Fixed-step GD; returns [w_0, ..., w_iters] with w_0 = 0 unless given."""
    w = xp.zeros(X.shape[1]) if w0 is None else w0
    eta = xp.scalar(step)
    trace = [w]
    for _ in range(iters):
        w = w - eta * gradient(X, y, w)
        trace.append(w)
    return trace


def preconditioned_gd(
    xp: Any, X: Any, y: Any, *, P: Any, step: float, iters: int, w0: Any = None
) -> list[Any]:
    """GD with a preconditioner P (D, D): w <- w - eta P grad f(w)."""
    w = xp.zeros(X.shape[1]) if w0 is None else w0
    eta = xp.scalar(step)
    trace = [w]
    for _ in range(iters):
        w = w - eta * (P @ gradient(X, y, w))
        trace.append(w)
    return trace


def gd_plus_plus(
    xp: Any, X: Any, y: Any, x_query: Any, *, weights: list[tuple[float, float]]
) -> list[Any]:
    """GD++ (002 eq. 11), the algorithm of the linear transformer of 002 Thm 5.1, written as
    recursions on the prompt: context inputs X (n, d), labels y (n,), query x_query (d,) with
    label y_q = 0. Layer l with (w_xx, w_yx) = weights[l] uses the layer's moments
    Sigma = X^T X (d, d) and alpha = X^T y (d,) (sums over the n context pairs) and sets
      X <- X (I + w_xx Sigma),  x_q <- (I + w_xx Sigma) x_q,
      y <- y + w_yx X alpha,    y_q <- y_q + w_yx x_q^T alpha     (the layer's old X, x_q).
    Thm 5.1's proof uses preconditioning layers (w_xx, w_yx) = (-gamma_l, 0), gamma_l =
    1 / (3 nu_l), nu_l = lambda_max(Sigma_l), then GD layers (0, -eta): the residual form of
    GD on the preconditioned features X', w_{k+1} = w_k + eta X'^T (y - X' w_k), whose
    prediction is -y_q = x_q'^T w_k (-> the OLS prediction, the preconditioner being a
    polynomial in Sigma). The weights are used as given (rounded into the precision, like a
    model's weights). Returns the predictions -y_q after each layer, [p_0 = 0, p_1, ...,
    p_L] (0-d arrays).
    """
    xq = x_query
    yq = xp.scalar(0.0)
    trace = [-yq]
    for w_xx, w_yx in weights:
        S = X.T @ X
        a = X.T @ y
        y_new = y + (X @ a) * xp.scalar(w_yx) if w_yx != 0.0 else y
        yq = yq + (xq @ a) * xp.scalar(w_yx) if w_yx != 0.0 else yq
        if w_xx != 0.0:
            X, xq = X + (X @ S) * xp.scalar(w_xx), xq + (S @ xq) * xp.scalar(w_xx)
        y = y_new
        trace.append(-yq)
    return trace
