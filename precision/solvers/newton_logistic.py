"""Newton's method, classic and damped, for mu-regularised logistic regression (000 Sec. 3.2.2).

f(w) = (1/n) sum_i log(1 + exp(-y_i w^T a_i)) + (mu/2) ||w||^2, labels y_i in {-1, +1} (eq. 3.5)
grad f = -(1/n) A^T (y * s) + mu w,  s_i = sigma(-y_i w^T a_i)
H     = (1/n) A^T diag(s (1 - s)) A + mu I
w_{t+1} = w_t - eta(w_t) H^{-1} grad f(w_t)                                  (eq. 3.6)
classic: eta = 1; damped: eta = 1 / (1 + lambda(w)), lambda = sqrt(grad^T H^{-1} grad).
The Newton system is solved with the same Cholesky as the normal equations.
"""

from __future__ import annotations

from typing import Any

from precision.solvers.linalg import cholesky_solve


def logistic_grad_hess(xp: Any, A: Any, y: Any, w: Any, mu: float) -> tuple[Any, Any]:
    """Gradient (d,) and Hessian (d, d) of the regularised logistic loss at w."""
    n, d = A.shape
    s = xp.sigmoid(-(y * (A @ w)))
    # Divide by the exact integer n: a Python constant such as -1.0/n would carry float64
    # rounding into every precision and cap mp50 at ~1e-33.
    grad = w * mu - (A.T @ (y * s)) / float(n)
    weights = s * (1.0 - s)
    H = (A.T @ (A * weights.reshape(n, 1))) / float(n) + xp.eye(d) * mu
    return grad, H


def newton_logistic(
    xp: Any, A: Any, y: Any, *, mu: float, iters: int, damped: bool = False
) -> list[Any]:
    """Newton iterates [w_0 = 0, ..., w_iters] on the loss of eq. 3.5."""
    w = xp.zeros(A.shape[1])
    trace = [w]
    for _ in range(iters):
        grad, H = logistic_grad_hess(xp, A, y, w, mu)
        step = cholesky_solve(xp, H, grad)
        if damped:
            lam = xp.sqrt(abs(grad @ step))
            w = w - step / (lam + 1.0)
        else:
            w = w - step
        trace.append(w)
    return trace
