"""Conjugate gradient (Fletcher–Reeves) with exact line search on the least-squares quadratic.

f(w) = (1/2) w^T H w - b^T w with H = X^T X / N, b = X^T y / N (003 Sec. 2.2):
  r_0 = b - H w_0, p_0 = r_0;  alpha_k = r_k.r_k / p_k.H p_k  (exact line search);
  w_{k+1} = w_k + alpha_k p_k;  r_{k+1} = r_k - alpha_k H p_k;
  beta_k = r_{k+1}.r_{k+1} / r_k.r_k  (Fletcher–Reeves);  p_{k+1} = r_{k+1} + beta_k p_k.
In exact arithmetic it terminates in at most D steps; H p is applied as X^T (X p) / N.
"""

from __future__ import annotations

from typing import Any


def conjugate_gradient(xp: Any, X: Any, y: Any, *, iters: int) -> list[Any]:
    """CG iterates [w_0 = 0, ..., w_iters]; once the residual is exactly zero it stays put."""
    n = float(X.shape[0])
    w = xp.zeros(X.shape[1])
    r = (X.T @ y) / n
    p = r
    rr = r @ r
    trace = [w]
    for _ in range(iters):
        if not rr > 0:
            trace.append(w)
            continue
        Hp = (X.T @ (X @ p)) / n
        pHp = p @ Hp
        if not pHp > 0:
            trace.append(w)
            continue
        alpha = rr / pHp
        w = w + alpha * p
        r = r - alpha * Hp
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
        trace.append(w)
    return trace
