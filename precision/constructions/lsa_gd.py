"""Linear attention = preconditioned gradient descent (003 eq. 2.8-2.10).

With P_l = [[0, 0], [0, 1]] and Q_l = [[-A_l, 0], [0, 0]] (B_l = 0 in
:class:`~precision.models.linear_attention.RestrictedLSA`), layer l updates every label by
y_i <- y_i - (1/n) sum_j y_j x_j^T A_l x_i. The context labels become residuals
r_j = y_j - w_l^T x_j and the query's label becomes -w_{l+1}^T x_q with
  w_{l+1} = w_l + (1/n) A_l X^T (y - X w_l) = w_l - A_l grad f(w_l),
f(w) = (1/2n) ||X w - y||^2, w_0 = 0: preconditioned GD. With A_l = eta I it is plain GD with
step eta, the iterates of :func:`precision.solvers.gd.gd`.
"""

from __future__ import annotations

import numpy as np
import torch

from precision.models.linear_attention import RestrictedLSA


def preconditioned_gd(d: int, depth: int, A: np.ndarray | float) -> RestrictedLSA:
    """RestrictedLSA running ``depth`` steps of GD preconditioned by ``A`` (d, d), or by
    ``A * I`` for a scalar step size, on tokens (x_i, y_i), query (x_q, 0)."""
    model = RestrictedLSA(d, depth=depth).double()
    mat = np.eye(d) * A if np.isscalar(A) else np.asarray(A, dtype=np.float64)
    if mat.shape != (d, d):
        raise ValueError(f"preconditioner must be ({d}, {d}), got {mat.shape}")
    with torch.no_grad():
        model.A.copy_(torch.as_tensor(mat).repeat(depth, 1, 1))
    return model


def tokens(X: np.ndarray, y: np.ndarray, x_query: np.ndarray) -> torch.Tensor:
    """(1, n + 1, d + 1) tokens: rows (x_i, y_i), then the query (x_q, 0)."""
    ctx = np.concatenate([X, y[:, None]], axis=1)
    query = np.concatenate([x_query, [0.0]])[None, :]
    return torch.as_tensor(np.concatenate([ctx, query], axis=0)[None], dtype=torch.float64)
