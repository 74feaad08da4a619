"""High-precision truths computed from the exact inputs a subject received (DESIGN principle 3).

Inputs are numpy object arrays of exact ``flint.arb`` values (what ``Backend.to_exact`` gives
after the data were rounded into the subject's precision). Truths are arb balls at
``truth_bits`` bits; each function checks that the ball is tight enough (relative radius below
2**-(2 * needed_bits)) and raises the working precision until it is, so a truth is certified,
not merely computed in more digits.
"""

from __future__ import annotations

from collections.abc import Callable

import flint
import numpy as np

from precision.precisions import Precision


def truth_bits(precision: Precision) -> int:
    """Working bits for truths of a subject in ``precision``: 4x its bits, at least 512."""
    return max(4 * precision.bits, 512)


def to_arb_mat(a: np.ndarray) -> flint.arb_mat:
    """Object array (n,) or (n, m) of arb -> arb_mat ((n, 1) for vectors)."""
    a2 = a.reshape(-1, 1) if a.ndim == 1 else a
    m, n = a2.shape
    mat = flint.arb_mat(m, n)
    for i in range(m):
        for j in range(n):
            mat[i, j] = a2[i, j]
    return mat


def from_arb_mat(mat: flint.arb_mat, shape: tuple[int, ...]) -> np.ndarray:
    """arb_mat -> object array of its midpoints with ``shape``."""
    out = np.empty(mat.nrows() * mat.ncols(), dtype=object)
    out[:] = mat.mid().entries()
    return out.reshape(shape)


def _tight(mat: flint.arb_mat, bits: int) -> bool:
    for v in mat.entries():
        if not v.is_finite():
            return False
        r = v.rad()
        if r == 0:
            continue
        m = abs(v.mid())
        if m == 0 or r > m * flint.arb(2) ** (-bits // 2):
            return False
    return True


def certified(
    compute: Callable[[], flint.arb_mat], bits: int, max_bits: int = 1 << 16
) -> flint.arb_mat:
    """Run ``compute`` at ``bits``, doubling the precision until every entry's ball is tight."""
    old = flint.ctx.prec
    try:
        while True:
            flint.ctx.prec = bits
            try:
                result = compute()
            except ZeroDivisionError:
                result = None
            if result is not None and _tight(result, bits):
                return result
            if bits >= max_bits:
                raise ArithmeticError("truth: could not certify the result (singular problem?)")
            bits *= 2
    finally:
        flint.ctx.prec = old


def least_squares_truth(X: np.ndarray, y: np.ndarray, bits: int, ridge: float = 0.0) -> np.ndarray:
    """w* = argmin (1/2N) ||X w - y||^2 + (ridge/2) ||w||^2, the scaling the solvers use.

    Solves (X^T X / N + ridge I) w = X^T y / N in certified arb. X: (N, D), y: (N,);
    returns (D,) midpoints. For N < D (underdetermined) the minimum-norm solution
    X^T (X X^T)^{-1} y is returned when ridge == 0.
    """
    n, d = X.shape

    def compute() -> flint.arb_mat:
        Xm, ym = to_arb_mat(X), to_arb_mat(y)
        if n < d and ridge == 0.0:
            return Xm.transpose() * (Xm * Xm.transpose()).solve(ym)
        G = Xm.transpose() * Xm / n
        if ridge:
            G = G + flint.arb_mat(d, d, [flint.arb(ridge) if i == j else 0 for i in range(d)
                                         for j in range(d)])
        return G.solve(Xm.transpose() * ym / n)

    return from_arb_mat(certified(compute, bits), (d,))


def inverse_truth(A: np.ndarray, bits: int) -> np.ndarray:
    """A^{-1} for a square nonsingular A (n, n)."""
    n = A.shape[0]
    return from_arb_mat(certified(lambda: to_arb_mat(A).inv(), bits), (n, n))


def matvec(A: np.ndarray, x: np.ndarray, bits: int) -> np.ndarray:
    """A @ x for exact object arrays, at ``bits`` (used for predictions on query points)."""
    old = flint.ctx.prec
    try:
        flint.ctx.prec = bits
        prod = to_arb_mat(A) * to_arb_mat(x)
    finally:
        flint.ctx.prec = old
    return from_arb_mat(prod, (A.shape[0],))


def logistic_truth(A: np.ndarray, y: np.ndarray, mu: float, bits: int) -> np.ndarray:
    """Minimiser of f(w) = (1/n) sum log(1 + exp(-y_i w^T a_i)) + mu/2 ||w||^2 (000 eq. 3.5).

    Newton's method in arb at ``bits`` from w = 0 until the step is below 2**-(bits/2)
    relative (quadratic convergence makes that a handful of steps past the damped phase);
    damped steps 1/(1+lambda) while the Newton decrement lambda >= 1/4 (000 Sec. 3.2.2).
    """
    n, d = A.shape
    old = flint.ctx.prec
    try:
        flint.ctx.prec = bits
        Am = to_arb_mat(A)
        yv = [flint.arb(v) for v in y]
        w = flint.arb_mat(d, 1)
        tol = flint.arb(2) ** (-(bits // 2))
        for _ in range(500):
            z = Am * w
            grad = flint.arb_mat(d, 1, [mu * w[k, 0] for k in range(d)])
            H = flint.arb_mat(d, d, [mu if i == j else 0 for i in range(d) for j in range(d)])
            for i in range(n):
                m = (yv[i] * z[i, 0]).mid()
                s = 1 / (1 + m.exp())  # sigma(-m)
                c = (s * (1 - s)).mid() / n
                for k in range(d):
                    grad[k, 0] = (grad[k, 0] - yv[i] * s * Am[i, k] / n).mid()
                    for j in range(d):
                        H[k, j] = (H[k, j] + c * Am[i, k] * Am[i, j]).mid()
            step = H.solve(grad)
            lam = sum((grad[k, 0] * step[k, 0] for k in range(d)), flint.arb(0)).mid()
            eta = 1 if lam < flint.arb(1) / 16 else 1 / (1 + lam.sqrt())
            w = (w - step * eta).mid()
            size = max(abs(step[k, 0].mid()) for k in range(d))
            if size < tol:
                break
        return from_arb_mat(w, (d,))
    finally:
        flint.ctx.prec = old
