"""High-precision truths computed from the exact inputs a subject received.

Inputs are numpy object arrays of exact ``flint.arb`` values (what ``Backend.to_exact`` gives
after the data were rounded into the subject's precision). Truths are arb balls at
``truth_bits`` bits; each function checks that the ball is tight enough (radius below
2**-(bits/2) times the result's scale, :func:`_tight`) and raises the working precision until
it is, so a truth is certified, not merely computed in more digits. A truth that cannot be
certified is a :class:`TruthError`.
"""

from __future__ import annotations

from collections.abc import Callable

import flint
import numpy as np

from precision.backends.mp_backend import workprec
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
    """Every entry's radius is below 2**-(bits/2) times the result's scale.

    The scale is the largest midpoint magnitude of the whole result, so an entry whose true
    value is exactly zero (a ball around 0 can never be small *relative* to itself) certifies
    once its radius is negligible next to the result's other entries: errors are measured
    absolutely (MSE), so that is the accuracy the measurements need. An all-zero result
    certifies only with zero radii.
    """
    entries = mat.entries()
    if not all(v.is_finite() for v in entries):
        return False
    scale = max((abs(v.mid()) for v in entries), default=flint.arb(0))
    limit = scale * flint.arb(2) ** (-(bits // 2))
    return all(v.rad() == 0 or v.rad() <= limit for v in entries)


class TruthError(ArithmeticError):
    """A truth that cannot be certified (a singular or non-convergent problem)."""


def certified(
    compute: Callable[[], flint.arb_mat], bits: int, max_bits: int = 1 << 14
) -> flint.arb_mat:
    """Run ``compute`` at ``bits``, doubling the precision until every entry's ball is tight
    (:func:`_tight`); :class:`TruthError` past ``max_bits`` (an exactly singular system never
    certifies: its solve fails at every precision)."""
    start = bits
    while True:
        with workprec(bits):
            try:
                result = compute()
            except ZeroDivisionError:
                result = None
            if result is not None and _tight(result, bits):
                return result
        if bits >= max_bits:
            raise TruthError(f"truth could not be certified at {start}..{bits} bits "
                             "(singular or numerically singular problem)")
        bits *= 2


def least_squares_truth(X: np.ndarray, y: np.ndarray, bits: int,
                        ridge: float | flint.arb = 0.0) -> np.ndarray:
    """w* = argmin (1/2N) ||X w - y||^2 + (ridge/2) ||w||^2, the scaling the solvers use.

    Solves (X^T X / N + ridge I) w = X^T y / N in certified arb. X: (N, D), y: (N,);
    returns (D,) midpoints. For N < D (underdetermined) the minimum-norm solution
    X^T (X X^T)^{-1} y is returned when ridge == 0. ``ridge`` is taken exactly: pass the
    value the subject used (rounded into its precision), not the suite's decimal.
    """
    n, d = X.shape

    def compute() -> flint.arb_mat:
        Xm, ym = to_arb_mat(X), to_arb_mat(y)
        if n < d and ridge == 0:
            return Xm.transpose() * (Xm * Xm.transpose()).solve(ym)
        G = Xm.transpose() * Xm / n
        if ridge != 0:
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
    with workprec(bits):
        prod = to_arb_mat(A) * to_arb_mat(x)
    return from_arb_mat(prod, (A.shape[0],))


def _logistic_gradient(Am: flint.arb_mat, yv: list[flint.arb], w: flint.arb_mat,
                       mu: flint.arb) -> flint.arb_mat:
    """grad f(w) in ball arithmetic (radii kept): an enclosure of the true gradient at w."""
    n, d = Am.nrows(), Am.ncols()
    z = Am * w
    grad = flint.arb_mat(d, 1, [mu * w[k, 0] for k in range(d)])
    for i in range(n):
        s = 1 / (1 + (yv[i] * z[i, 0]).exp())  # sigma(-y_i a_i^T w)
        for k in range(d):
            grad[k, 0] = grad[k, 0] - yv[i] * s * Am[i, k] / n
    return grad


def logistic_truth(A: np.ndarray, y: np.ndarray, mu: float | flint.arb, bits: int,
                   max_bits: int = 1 << 12) -> np.ndarray:
    """Minimiser of f(w) = (1/n) sum log(1 + exp(-y_i w^T a_i)) + mu/2 ||w||^2 (000 eq. 3.5).

    Newton's method on midpoints at ``bits`` from w = 0 until the step is below 2**-(bits/2)
    (quadratic convergence makes that a handful of steps past the damped phase); damped steps
    1/(1+lambda) while the Newton decrement is large (000 Sec. 3.2.2). Then **certified**: f is
    mu-strongly convex, so ||w - w*||_2 <= ||grad f(w)||_2 / mu, with the gradient enclosed in
    ball arithmetic; the bound must be below 2**-(bits/2) times max |w_k| (as :func:`_tight`).
    A bound that is not small enough doubles the precision; Newton that does not converge in
    500 steps, or no certificate by ``max_bits``, is a :class:`TruthError`.
    """
    n, d = A.shape
    start = bits
    while True:
        with workprec(bits):
            mu_b = flint.arb(mu)
            Am = to_arb_mat(A)
            yv = [flint.arb(v) for v in y]
            w = flint.arb_mat(d, 1)
            tol = flint.arb(2) ** (-(bits // 2))
            for _ in range(500):
                z = Am * w
                grad = flint.arb_mat(d, 1, [mu_b * w[k, 0] for k in range(d)])
                H = flint.arb_mat(d, d, [mu_b if i == j else 0 for i in range(d)
                                         for j in range(d)])
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
            else:
                raise TruthError(f"logistic truth: Newton did not converge in 500 steps "
                                 f"at {bits} bits")
            g = _logistic_gradient(Am, yv, w, mu_b)
            bound = sum((g[k, 0].abs_upper() ** 2 for k in range(d)), flint.arb(0)).sqrt() / mu_b
            scale = max(abs(w[k, 0].mid()) for k in range(d))
            if bound.upper() <= scale * tol:
                return from_arb_mat(w, (d,))
        if bits >= max_bits:
            raise TruthError(f"logistic truth could not be certified at {start}..{bits} bits")
        bits *= 2
