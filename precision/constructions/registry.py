"""Constructions by name, and :func:`run_construction`, which measures one layer by layer.

For each depth (layer or step count) t, the constructed model is evaluated in the precision
and compared with (a) the matching reference algorithm's iterate t computed in the *same*
precision by :mod:`precision.solvers`, and (b) the certified truth of the task (from the
inputs after rounding). The result has the format of a solver run, plus the trace against
the algorithm, so the store, the floor detector and the report treat both alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from precision.constructions import baseconv_gd, lsa_gd, lsa_newton
from precision.evaluate import evaluate
from precision.metrics import detect_floor, error_summary
from precision.precisions import parse_precision
from precision.solvers.gd import gd
from precision.solvers.newton_schulz import newton_schulz
from precision.solvers.registry import SolverError, SolverResult, lookup, make_problem
from precision.truth import inverse_truth, least_squares_truth, matvec, truth_bits


@dataclass(frozen=True)
class ConstructionSpec:
    """A construction: the task family it solves, its parameters, one line of description."""

    name: str
    task: str
    defaults: dict[str, Any]
    description: str
    trace: Callable[..., tuple[list[Any], list[Any], Any]]


class _PerLayer(nn.Module):
    """Wraps a model so one forward pass returns the read-out after every layer (or every
    ``stride`` layers): one export, one evaluation per precision for a whole layer trace."""

    def __init__(self, model: nn.Module, kind: str, d: int) -> None:
        super().__init__()
        self.model, self.kind, self.d = model, kind, d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "lsa_gd":
            return self.model.query_per_layer(x)             # (batch, layers)
        if self.kind == "baseconv_gd":                       # w^T x_q after each GD layer
            lay = baseconv_gd._layout(self.d)
            h = self.model.inp(x)
            outs = []
            for i, layer in enumerate(self.model.layers[:-1]):
                h = layer(h)
                if i >= 1:
                    outs.append((h[:, -1, lay["q"]] * h[:, -1, lay["w"]]).sum(-1))
            return torch.stack(outs[1:], dim=1)              # (batch, iters)
        outs, h = [], x
        for layer in range(self.model.depth):               # Newton–Schulz: 2 layers a step
            h = self.model.step(h, layer)
            if layer % 2 == 1:
                outs.append(h[:, :, : self.d])              # X_t^T (row tokens)
        return torch.stack(outs, dim=1)                      # (batch, steps, d, d)


def _pow2_below(x: float) -> float:
    """The largest power of two <= 1/x: exact in every precision."""
    return 2.0 ** -int(np.ceil(np.log2(x)))


def _trace_lsa_gd(p: Any, prob: Any, layers: int, step: float | None
                  ) -> tuple[list[Any], list[Any], Any]:
    """Per layer: the LSA's query prediction, GD's prediction x_q^T w_l, the OLS truth."""
    xp = p.backend
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)  # the inputs as the model receives them
    n = Xr.shape[0]
    ev = np.linalg.eigvalsh(Xr.T @ Xr / n)
    eta = step if step is not None else 2.0 / (ev[0] + ev[-1])  # the optimal fixed step
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=layers)
    tokens = lsa_gd.tokens(Xr, yr, q)
    model = _PerLayer(lsa_gd.preconditioned_gd(Xr.shape[1], layers, eta), "lsa_gd", 0)
    out = evaluate(model, tokens, p)[0]                      # (layers,)
    models = [out[t - 1:t] for t in range(1, layers + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, layers + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    qx = xp.to_exact(xp.asarray(q.reshape(1, -1)))
    return models, refs, matvec(qx, w, bits)


def _trace_baseconv_gd(p: Any, prob: Any, iters: int, step: float | None
                       ) -> tuple[list[Any], list[Any], Any]:
    """Per GD layer of the causal BaseConv (001 App. C.2.2): x_q^T w_k vs GD and OLS."""
    xp = p.backend
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)
    n, d = Xr.shape
    ev = np.linalg.eigvalsh(Xr.T @ Xr / n)
    eta = step if step is not None else 2.0 / (ev[0] + ev[-1])
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=iters)
    model = _PerLayer(baseconv_gd.gradient_descent(d, n, eta, iters), "baseconv_gd", d)
    out = evaluate(model, baseconv_gd.tokens(Xr, yr, q), p)[0]
    models = [out[t - 1:t] for t in range(1, iters + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, iters + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


def _trace_lsa_newton(p: Any, A: np.ndarray, steps: int) -> tuple[list[Any], list[Any], Any]:
    """Per Newton step: the transformer's X_t, Newton–Schulz's X_t, and A^{-1}."""
    xp = p.backend
    Ap = xp.asarray(A)
    Ar = xp.to_numpy(Ap)
    d = Ar.shape[0]
    alpha = _pow2_below(float(np.sum(Ar * Ar)))
    iterates = newton_schulz(xp, Ap, iters=steps, alpha=alpha)
    tokens = lsa_newton.tokens(alpha * Ar.T, Ar)
    out = evaluate(_PerLayer(lsa_newton.newton_schulz(d, steps), "ns", d), tokens, p)[0]
    models = [out[t - 1].T for t in range(1, steps + 1)]    # X_t
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    return models, refs, inverse_truth(xp.to_exact(Ap), truth_bits(p))


CONSTRUCTIONS: dict[str, ConstructionSpec] = {
    c.name: c for c in [
        ConstructionSpec(
            "lsa_gd", "least_squares", {"layers": 12, "step": None},
            "linear attention = GD with step eta (003 eq. 2.8-2.10); default 2/(lmin+lmax)",
            lambda p, prob, layers, step: _trace_lsa_gd(p, prob, layers, step)),
        ConstructionSpec(
            "baseconv_gd", "least_squares", {"iters": 40, "step": None},
            "causal BaseConv running GD on least squares (001 App. C.2.2)",
            lambda p, prob, iters, step: _trace_baseconv_gd(p, prob, iters, step)),
        ConstructionSpec(
            "lsa_newton_schulz", "inverse", {"steps": 12},
            "Newton-Schulz steps in 2 linear-attention layers each (000 Lemma 4.1)",
            lambda p, prob, steps: _trace_lsa_newton(p, prob, steps)),
    ]
}


def get_construction(name: str) -> ConstructionSpec:
    """The construction called ``name``; :class:`SolverError` listing the valid names."""
    return lookup(CONSTRUCTIONS, name, "construction")


def run_construction(name: str, precision: Any, problem: dict[str, Any],
                     params: dict[str, Any] | None = None) -> SolverResult:
    """Per-layer errors of construction ``name`` in ``precision`` (see the module docstring).

    ``steps`` holds the errors against the truth per layer; ``reference`` those against the
    reference algorithm's iterates in the same precision.
    """
    spec = get_construction(name)
    params = dict(params or {})
    extra = set(params) - set(spec.defaults)
    if extra:
        raise SolverError(f"construction '{name}' has no parameter {', '.join(sorted(extra))}")
    prm = {**spec.defaults, **params}
    p = parse_precision(precision)
    prob = make_problem(spec.task, problem)
    t0 = time.perf_counter()
    result = SolverResult(solver=name, precision=p.name, status="ok", params=prm)
    models, refs, truth = spec.trace(p, prob, **prm)
    for out, ref in zip(models, refs, strict=True):
        result.steps.append(error_summary(out, truth))
        result.reference.append(error_summary(out, ref))
        result.param_mse.append(result.steps[-1].mse)
    if any(s.log10_mse != s.log10_mse for s in result.steps):  # NaN: diverged
        result.status = "diverged"
    result.floor = detect_floor([s.mse for s in result.steps],
                                log10_trace=[s.log10_mse for s in result.steps])
    result.wall_time = time.perf_counter() - t0
    return result
