"""Dense factorizations written once against the backend namespace ``xp``.

Cholesky, triangular solves, Householder QR and one-sided Jacobi SVD. The same code runs in
bfloat16 ... float64 (PyTorch) and in ``mpN`` (arb), so a floor difference between
precisions is the arithmetic's, never a different library's algorithm. Sizes here are small
(D <= a few dozen), so the Python loops over columns are cheap; the inner work is vector ops.
"""

from __future__ import annotations

from typing import Any


def cholesky(xp: Any, A: Any) -> Any:
    """Lower-triangular L with L L^T = A for symmetric positive-definite A (n, n).

    Column-oriented (left-looking) Cholesky–Banachiewicz; raises ``ValueError`` when a pivot
    is not positive (A not numerically SPD in this precision).
    """
    n = A.shape[0]
    L = xp.zeros((n, n))
    for j in range(n):
        s = A[j, j] - (L[j, :j] @ L[j, :j] if j else 0.0)
        if not s > 0:
            raise ValueError(f"cholesky: pivot {j} is not positive ({xp.to_float(s):.3g})")
        d = xp.sqrt(s)
        L[j, j] = d
        if j + 1 < n:
            col = A[j + 1 :, j] - (L[j + 1 :, :j] @ L[j, :j] if j else 0.0)
            L[j + 1 :, j] = col / d
    return L


def solve_lower(xp: Any, L: Any, b: Any) -> Any:
    """Forward substitution: x with L x = b, L (n, n) lower triangular, b (n,)."""
    n = L.shape[0]
    x = xp.zeros(n)
    for i in range(n):
        s = b[i] - (L[i, :i] @ x[:i] if i else 0.0)
        x[i] = s / L[i, i]
    return x


def solve_upper(xp: Any, U: Any, b: Any) -> Any:
    """Back substitution: x with U x = b, U (n, n) upper triangular, b (n,)."""
    n = U.shape[0]
    x = xp.zeros(n)
    for i in range(n - 1, -1, -1):
        s = b[i] - (U[i, i + 1 :] @ x[i + 1 :] if i + 1 < n else 0.0)
        x[i] = s / U[i, i]
    return x


def cholesky_solve(xp: Any, A: Any, b: Any) -> Any:
    """x with A x = b for SPD A via A = L L^T."""
    L = cholesky(xp, A)
    return solve_upper(xp, L.T, solve_lower(xp, L, b))


def householder_qr_solve(xp: Any, X: Any, y: Any) -> Any:
    """Least-squares x minimising ||X x - y||_2 by Householder QR, X (N, D) with N >= D.

    Reflectors H_k = I - 2 v v^T / (v^T v), v = x + sign(x_1) ||x|| e_1, applied to X and y
    in place (Golub & Van Loan Alg. 5.2.1); then R x = (Q^T y)[:D] by back substitution.
    """
    R = xp.copy(X)
    c = xp.copy(y)
    n_rows, n_cols = R.shape
    for k in range(n_cols):
        x = R[k:, k]
        alpha = xp.norm(x)
        if xp.to_float(alpha) == 0.0:
            continue
        v = xp.copy(x)
        v[0] = x[0] + alpha if x[0] >= 0 else x[0] - alpha
        vtv = v @ v
        tail = R[k:, k:]
        R[k:, k:] = tail - xp.outer(v, (v @ tail) * (2.0 / vtv))
        ck = c[k:]
        c[k:] = ck - v * ((v @ ck) * (2.0 / vtv))
    return solve_upper(xp, R[:n_cols, :], c[:n_cols])


def jacobi_svd(xp: Any, X: Any, *, max_sweeps: int = 60) -> tuple[Any, Any, Any]:
    """Thin SVD X = U diag(s) V^T by one-sided Jacobi rotations (Hestenes), X (N, D), N >= D.

    Rotates column pairs of a working copy until all pairs are orthogonal to the working
    precision (|a_i . a_j| <= u * ||a_i|| ||a_j||), accumulating V. Singular values are the
    final column norms; U's columns are the normalised columns. Converges quadratically, so
    mp50 needs only a few more sweeps than float32.
    """
    A = xp.copy(X)
    n = A.shape[1]
    V = xp.eye(n)
    tol = xp.precision.unit_roundoff
    for _ in range(max_sweeps):
        rotated = False
        for i in range(n - 1):
            for j in range(i + 1, n):
                ai, aj = A[:, i], A[:, j]
                alpha = ai @ ai
                beta = aj @ aj
                gamma = ai @ aj
                g = abs(xp.to_float(gamma))
                if g == 0.0 or g <= tol * (xp.to_float(alpha) * xp.to_float(beta)) ** 0.5:
                    continue
                rotated = True
                zeta = (beta - alpha) / (gamma * 2.0)
                sign = 1.0 if zeta >= 0 else -1.0
                t = sign / (abs(zeta) + xp.sqrt(zeta * zeta + 1.0))
                cs = 1.0 / xp.sqrt(t * t + 1.0)
                sn = cs * t
                A[:, i], A[:, j] = ai * cs - aj * sn, ai * sn + aj * cs
                vi, vj = V[:, i], V[:, j]
                V[:, i], V[:, j] = vi * cs - vj * sn, vi * sn + vj * cs
        if not rotated:
            break
    s = xp.sqrt(xp.sum(A * A, axis=0))
    U = xp.copy(A)
    for k in range(n):
        if xp.to_float(s[k]) != 0.0:
            U[:, k] = A[:, k] / s[k]
    return U, s, V


def svd_solve(xp: Any, X: Any, y: Any, *, rcond: float | None = None) -> Any:
    """Least-squares / pseudo-inverse solution x = V diag(1/s) U^T y, dropping s <= rcond*s_max.

    ``rcond`` defaults to D * unit roundoff of the working precision.
    """
    U, s, V = jacobi_svd(xp, X)
    n = s.shape[0]
    if rcond is None:
        rcond = n * xp.precision.unit_roundoff
    smax = max(xp.to_float(s[k]) for k in range(n))
    coef = U.T @ y
    scaled = xp.zeros(n)
    for k in range(n):
        if xp.to_float(s[k]) > rcond * smax:
            scaled[k] = coef[k] / s[k]
    return V @ scaled
