"""GD++ in a linear transformer with per-sequence step sizes (002 Thm 5.1, its proof).

GD++ (002 eq. 11) is the LSA ``gdpp`` parameterisation: per layer
  x_i <- (I + w_xx Sigma) x_i,   y_i <- y_i + w_yx <alpha, x_i>
with Sigma = sum_{j<=n} x_j x_j^T and alpha = sum_{j<=n} y_j x_j of the current layer.
The proof's construction: first *precondition* with w_xx = -gamma_l, gamma_l = 1/(3 nu_l),
nu_l the largest eigenvalue of the current Sigma_l, so every eigenvalue lambda becomes
lambda (1 - gamma_l lambda)^2 and the condition number shrinks geometrically, then
quadratically (002 App. Lemma: kappa -> c kappa, and 1 + eps -> 1 + 2 eps^2); then run GD on
the labels with w_yx = -eta, eta = 2 / (lambda_min + lambda_max) of the preconditioned Sigma.
Since the preconditioner is a polynomial in Sigma, the query read-out -y_t converges to the
OLS prediction <x_t, w*>. The step sizes are computed here from the sequence in float64 (a
construction for one prompt, as in the theorem; products and eigenvalues by
:mod:`precision.deterministic`, so the weights are the same on every machine); as they
are only 1e-16 accurate, each GD layer then gains ~16 digits, so 4 GD layers reach mp50's
floor (measured: 8 preconditioning + 4 GD layers give MSE 4e-102 against the OLS prediction).
"""

from __future__ import annotations

import numpy as np
import torch

from precision import deterministic as det
from precision.models.linear_attention import LSA


def gdpp(X: np.ndarray, precondition: int, gd_steps: int) -> LSA:
    """The LSA (param ``gdpp``) of 002 Thm 5.1 for the prompt with context inputs X (n, d)."""
    n, d = X.shape
    depth = precondition + gd_steps
    model = LSA(d, depth=depth, param="gdpp").double()
    sigma = det.matmul(X.T, X)
    ws = []
    for _ in range(precondition):
        gamma = 1.0 / (3.0 * float(det.eigvalsh(sigma)[-1]))
        ws.append((-gamma, 0.0))
        m = np.eye(d) - gamma * sigma
        sigma = det.matmul(det.matmul(m, sigma), m)
    ev = det.eigvalsh(sigma)
    eta = 2.0 / (ev[0] + ev[-1])
    ws += [(0.0, -eta)] * gd_steps
    with torch.no_grad():
        model.w.copy_(torch.as_tensor(ws, dtype=torch.float64))
    return model
