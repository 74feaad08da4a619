"""What ``precision list solvers`` says of each reference solver: the task family it solves
and one line, declared apart from the solvers (no numpy, no torch), so the listing is
instant. :data:`~precision.solvers.measure.SOLVERS` registers against it: a solver that is
not declared here is refused when it is registered, and its spec reads its task and
description from here."""

from __future__ import annotations

from precision.registry import Listed

#: The reference solvers by name (tests/test_catalogs.py: the same names as the registry).
SOLVER_CATALOG: dict[str, Listed] = {
    "ols_normal": Listed("least_squares", "OLS by the normal equations and Cholesky"),
    "ols_qr": Listed("least_squares", "OLS by Householder QR"),
    "ols_svd": Listed("least_squares", "OLS by one-sided Jacobi SVD (pseudo-inverse)"),
    "ridge": Listed("least_squares", "ridge regression by Cholesky"),
    "gd": Listed("least_squares",
                 "gradient descent (step 'optimal' = 2/(lmin+lmax), '1/L', or a number)"),
    "pgd": Listed("least_squares", "gradient descent preconditioned by diag(H)^-1"),
    "heavy_ball": Listed("least_squares", "Polyak heavy-ball momentum (003 App. B)"),
    "nesterov": Listed("least_squares", "Nesterov accelerated gradient (003 App. B)"),
    "cg": Listed("least_squares", "conjugate gradient, Fletcher-Reeves, exact line search"),
    "newton_schulz": Listed("inverse", "Newton-Schulz inversion, order 2 (000 eq. 3.3)"),
    "newton_schulz_p": Listed("inverse", "Newton-Schulz order-p family (000 eq. 3.4)"),
    "newton": Listed("logistic", "classic Newton on regularised logistic loss (000 eq. 3.6)"),
    "damped_newton": Listed("logistic", "damped Newton, eta = 1/(1+lambda) (000 eq. 3.6)"),
}
