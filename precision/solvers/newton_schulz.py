"""Newton–Schulz matrix inversion, order 2 and the order-p family (000 eq. 3.3–3.4).

X_0 = alpha A^T with 0 < alpha < 2 / lambda_max(A^T A); then
  order 2:  X_{t+1} = X_t (2 I - A X_t)                                     (eq. 3.3)
  order p:  X_{t+1} = X_t sum_{m=0}^{p-1} (-1)^m C(p, m+1) (A X_t)^m        (eq. 3.4)
so that I - X_{t+1} A = (I - X_t A)^p: the error exponent multiplies by p each step.
"""

from __future__ import annotations

from math import comb
from typing import Any


def default_alpha(xp: Any, A: Any) -> float:
    """alpha = 1 / ||A||_F^2 <= 1 / sigma_max(A)^2 < 2 / lambda_max(A^T A)."""
    return 1.0 / xp.to_float(xp.sum(A * A))


def newton_schulz(
    xp: Any, A: Any, *, iters: int, order: int = 2, alpha: float | None = None
) -> list[Any]:
    """Iterates [X_0, ..., X_iters] approximating A^{-1}, A (n, n)."""
    if order < 2:
        raise ValueError("newton_schulz: order must be >= 2")
    n = A.shape[0]
    eye = xp.eye(n)
    a = default_alpha(xp, A) if alpha is None else alpha
    X = A.T * a
    trace = [X]
    for _ in range(iters):
        AX = A @ X
        if order == 2:
            X = X @ (eye * 2.0 - AX)
        else:
            # Horner form of sum_m (-1)^m C(p, m+1) (AX)^m.
            S = eye * float((-1) ** (order - 1) * comb(order, order))
            for m in range(order - 2, -1, -1):
                S = AX @ S + eye * float((-1) ** m * comb(order, m + 1))
            X = X @ S
        trace.append(X)
    return trace
