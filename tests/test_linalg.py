import numpy as np
import pytest

from precision.backends import backend_for
from precision.precisions import as_precision, parse_precision
from precision.solvers.linalg import cholesky, householder_qr_solve, jacobi_svd, svd_solve

RNG = np.random.default_rng(3)
X = RNG.standard_normal((9, 4))
Y = RNG.standard_normal(9)
W_REF = np.linalg.lstsq(X, Y, rcond=None)[0]


@pytest.mark.parametrize("name,tol", [("float32", 1e-5), ("float64", 1e-13), ("mp40", 1e-13)])
def test_cholesky_reconstructs(name, tol):
    xp = backend_for(as_precision(name))
    A = xp.asarray(X.T @ X)
    L = cholesky(xp, A)
    Ln = xp.to_numpy(L)
    assert np.allclose(np.triu(Ln, 1), 0)
    assert np.allclose(Ln @ Ln.T, X.T @ X, rtol=tol, atol=tol)


@pytest.mark.parametrize("solve", [householder_qr_solve, svd_solve])
@pytest.mark.parametrize("name,tol", [("float32", 1e-5), ("float64", 1e-12), ("mp40", 1e-14)])
def test_least_squares_solvers_match_numpy(solve, name, tol):
    xp = backend_for(as_precision(name))
    w = xp.to_numpy(solve(xp, xp.asarray(X), xp.asarray(Y)))
    assert np.allclose(w, W_REF, rtol=tol, atol=tol)


def test_jacobi_svd_singular_values_and_orthogonality_mp():
    xp = backend_for(parse_precision("mp40"))
    U, s, V = jacobi_svd(xp, xp.asarray(X))
    sv = np.sort(xp.to_numpy(s))[::-1]
    assert np.allclose(sv, np.linalg.svd(X, compute_uv=False), rtol=1e-14)
    Vn = xp.to_numpy(V)
    assert np.allclose(Vn.T @ Vn, np.eye(4), atol=1e-15)
    recon = xp.to_numpy(U) @ np.diag(xp.to_numpy(s)) @ Vn.T
    assert np.allclose(recon, X, atol=1e-14)


def test_cholesky_reports_non_spd():
    xp = backend_for(parse_precision("float64"))
    with pytest.raises(ValueError, match="pivot"):
        cholesky(xp, xp.asarray([[1.0, 2.0], [2.0, 1.0]]))
