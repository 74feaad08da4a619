"""Direct least-squares solvers: normal equations (Cholesky), Householder QR, SVD; ridge.

All minimise (1/2N) ||X w - y||^2 (+ (lam/2) ||w||^2 for ridge) with X (N, D), y (N,).
Each returns a one-entry iterate list ``[w]`` so that direct and iterative solvers share the
trace format. Rounding behaviour (Higham, *Accuracy and Stability*, Ch. 20): the normal
equations lose accuracy like kappa(X)^2 u, QR and SVD like kappa(X) u on consistent systems.
"""

from __future__ import annotations

from typing import Any

from precision.solvers.linalg import cholesky_solve, householder_qr_solve, svd_solve


def ols_normal(xp: Any, X: Any, y: Any) -> list[Any]:
    """Normal equations: form G = X^T X / N and b = X^T y / N, solve G w = b by Cholesky."""
    n = X.shape[0]
    G = (X.T @ X) / float(n)
    b = (X.T @ y) / float(n)
    return [cholesky_solve(xp, G, b)]


def ols_qr(xp: Any, X: Any, y: Any) -> list[Any]:
    """Householder QR of X, then R w = Q^T y."""
    return [householder_qr_solve(xp, X, y)]


def ols_svd(xp: Any, X: Any, y: Any) -> list[Any]:
    """Pseudo-inverse solution w = V diag(1/s) U^T y from a one-sided Jacobi SVD."""
    return [svd_solve(xp, X, y)]


def ridge(xp: Any, X: Any, y: Any, *, lam: float = 1e-2) -> list[Any]:
    """Ridge: (X^T X / N + lam I) w = X^T y / N by Cholesky."""
    n, d = X.shape
    G = (X.T @ X) / float(n) + xp.eye(d) * lam
    b = (X.T @ y) / float(n)
    return [cholesky_solve(xp, G, b)]
