"""Gradient descent and preconditioned gradient descent on least squares.

Objective f(w) = (1/2N) ||X w - y||^2, gradient X^T (X w - y) / N, Hessian H = X^T X / N.
GD: w_{k+1} = w_k - eta grad f(w_k)  (001 App. A.1; 003 eq. 2.4).
Preconditioned GD: w_{k+1} = w_k - eta P grad f(w_k)  (003 eq. 2.10 with A_l = eta P).
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
