"""Heavy-ball momentum and Nesterov's accelerated gradient on least squares (003 App. B).

Objective and gradient as in :mod:`precision.solvers.gd`.
Heavy ball (Polyak):  w_{k+1} = w_k - eta grad f(w_k) + beta (w_k - w_{k-1}).
Nesterov:             v_k = w_k + beta (w_k - w_{k-1});  w_{k+1} = v_k - eta grad f(v_k).
003 App. B uses eta = 0.005, beta = 0.9 (heavy ball) and eta = 0.03, beta = 0.9 (Nesterov)
on its non-isotropic data; the ``memformer`` suite uses those, other suites the tuned values.
"""

from __future__ import annotations

from typing import Any

from precision.solvers.gd import gradient


def heavy_ball(
    xp: Any, X: Any, y: Any, *, step: float, beta: float, iters: int
) -> list[Any]:
    """Polyak heavy-ball iterates [w_0, ..., w_iters], w_0 = w_{-1} = 0."""
    w = xp.zeros(X.shape[1])
    w_prev = w
    eta, b = xp.scalar(step), xp.scalar(beta)
    trace = [w]
    for _ in range(iters):
        w, w_prev = w - eta * gradient(X, y, w) + b * (w - w_prev), w
        trace.append(w)
    return trace


def nesterov(xp: Any, X: Any, y: Any, *, step: float, beta: float, iters: int) -> list[Any]:
    """Nesterov accelerated gradient iterates [w_0, ..., w_iters] (constant beta)."""
    w = xp.zeros(X.shape[1])
    w_prev = w
    eta, b = xp.scalar(step), xp.scalar(beta)
    trace = [w]
    for _ in range(iters):
        v = w + b * (w - w_prev)
        w, w_prev = v - eta * gradient(X, y, v), w
        trace.append(w)
    return trace
