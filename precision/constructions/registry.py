"""Constructions by name, and :func:`run_construction`, which measures one layer by layer.

For each depth (layer or step count) t, the constructed model is evaluated in the precision
and compared with (a) the matching reference algorithm's iterate t computed in the *same*
precision by :mod:`precision.solvers`, and (b) the certified truth of the task (from the
inputs after rounding). The result has the format of a solver run, plus the trace against
the algorithm, so the store, the floor detector and the report treat both alike.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np
import torch
from torch import nn

from precision.constructions import baseconv_gd, baseconv_primitives, lsa_gd, lsa_newton
from precision.evaluate import evaluate, mp_program
from precision.metrics import detect_floor, error_summary
from precision.precisions import parse_precision
from precision.solvers.gd import gd
from precision.solvers.newton_schulz import newton_schulz
from precision.solvers.registry import SolverError, SolverResult, lookup, make_problem
from precision.truth import (
    certified,
    from_arb_mat,
    inverse_truth,
    least_squares_truth,
    matvec,
    to_arb_mat,
    truth_bits,
)


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
        if self.kind == "baseconv_gd_noncausal":             # w^T x_q after each 3-layer step
            lay = baseconv_gd._layout_noncausal(self.d)
            h = self.model.inp(x)
            outs = []
            for i, layer in enumerate(self.model.layers[:-1]):
                h = layer(h)
                if i % 3 == 2:
                    outs.append((h[:, -1, lay["q"]] * h[:, -1, lay["w"]]).sum(-1))
            return torch.stack(outs, dim=1)                  # (batch, iters)
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
    model = baseconv_gd.gradient_descent(d, n, eta, iters)
    x = baseconv_gd.tokens(Xr, yr, q)
    if p.is_mp:  # the same arithmetic as the whole model, one layer exported (fast)
        lay = baseconv_gd._layout(d)
        out = _blockwise_mp(model, x, p, 1, iters, lay["q"], lay["w"], start=2)
    else:
        out = evaluate(_PerLayer(model, "baseconv_gd", d), x, p)[0]
    models = [out[t - 1:t] for t in range(1, iters + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, iters + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


class _Block(nn.Module):
    """``k`` BaseConv layers, then the read-out w^T x_q at the last token."""

    def __init__(self, layers: list[nn.Module], q: slice, w: slice) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.q, self.w = q, w

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.layers:
            h = layer(h)
        return h, (h[:, -1, self.q] * h[:, -1, self.w]).sum(-1)


class _Prefix(nn.Module):
    """A BaseConv's input projection and its first layers."""

    def __init__(self, inp: nn.Module, layers: list[nn.Module]) -> None:
        super().__init__()
        self.inp, self.layers = inp, nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return h


def _blockwise_mp(model: nn.Module, x: torch.Tensor, p: Any, k: int, blocks: int, q: slice,
                  w: slice, start: int = 0) -> np.ndarray:
    """The read-out after each of ``blocks`` blocks of ``k`` layers of a BaseConv (after its
    first ``start`` layers), in mpN.

    Same arithmetic as interpreting the whole model (each block's weights are loaded from the
    model before it runs), but one export of a k-layer block instead of one of the whole
    model, whose torch.export time dominates (~0.2 s per layer)."""
    block = _Block([copy.deepcopy(layer) for layer in model.layers[start:start + k]], q, w)
    h = mp_program(_Prefix(model.inp, list(model.layers[:start])), x)(x, precision=p)
    prog = mp_program(block, torch.zeros(x.shape[:2] + (model.cfg.width,), dtype=x.dtype))
    outs = []
    for b in range(blocks):
        lo = start + k * b
        with torch.no_grad():
            for dst, src in zip(block.layers, model.layers[lo:lo + k], strict=True):
                dst.load_state_dict(src.state_dict())
        h, r = prog(h, precision=p)
        outs.append(p.backend.to_exact(r))
    return np.stack(outs, axis=1)[0]                        # (blocks,)


def _trace_baseconv_gd_noncausal(p: Any, prob: Any, iters: int, step: float | None
                                 ) -> tuple[list[Any], list[Any], Any]:
    """Per GD step (3 layers) of the non-causal BaseConv (001 App. C.2.1): x_q^T w_k vs GD
    run with the same step (:func:`baseconv_gd.exact_step`, so eta/N is an exact weight)."""
    xp = p.backend
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)
    n, d = Xr.shape
    ev = np.linalg.eigvalsh(Xr.T @ Xr / n)
    eta = baseconv_gd.exact_step(step if step is not None else 2.0 / (ev[0] + ev[-1]), n)
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=iters)
    model = baseconv_gd.gradient_descent_noncausal(d, n, eta, iters)
    x = baseconv_gd.tokens_noncausal(Xr, yr, q)
    if p.is_mp:
        lay = baseconv_gd._layout_noncausal(d)
        out = _blockwise_mp(model, x, p, 3, iters, lay["q"], lay["w"])
    else:
        out = evaluate(_PerLayer(model, "baseconv_gd_noncausal", d), x, p)[0]
    models = [out[t - 1:t] for t in range(1, iters + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, iters + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


def _trace_primitive(p: Any, prob: Any, op: str) -> tuple[list[Any], list[Any], Any]:
    """One point: the single-layer BaseConv primitive (001 App. C.1) on the seeded input u,
    against the primitive computed directly in the same precision (a row copy, u H, or a
    product of columns) and against the exact result from the rounded u (and H)."""
    if prob.op != op:
        raise SolverError(f"construction 'baseconv_{op}' needs a primitive problem of kind "
                          f"'{op}', not '{prob.op}'")
    xp = p.backend
    u = xp.asarray(prob.u)
    ue = xp.to_exact(u)                      # exact values of the rounded input
    n, d = ue.shape
    prm = prob.params
    bits = truth_bits(p)
    if op == "read":
        i, j, a, b = prm["i"], prm["j"], prm["a"], prm["b"]
        model = baseconv_primitives.read(n, d, i, j, a, b)
        rows = np.arange(n)
        rows[j] = i
        ref = truth = ue[rows][:, a:b]      # a copy: exact in every precision
    elif op == "affine":
        H = xp.asarray(prm["H"])            # a weight: rounded into the precision like u
        He = xp.to_exact(H)
        model = baseconv_primitives.affine(n, xp.to_numpy(H))
        ref = xp.to_exact(u @ H)
        truth = from_arb_mat(certified(lambda: to_arb_mat(ue) * to_arb_mat(He), bits),
                             (n, He.shape[1]))
    else:
        a, b, k = prm["a"], prm["b"], prm["d_out"]
        model = baseconv_primitives.multiply(n, d, a, b, k)
        ref = xp.to_exact(u[:, a:a + k] * u[:, b:b + k])
        ua, ub = to_arb_mat(ue[:, a:a + k]), to_arb_mat(ue[:, b:b + k])
        truth = from_arb_mat(certified(
            lambda: flint.arb_mat(n, k, [ua[r, c] * ub[r, c] for r in range(n)
                                         for c in range(k)]), bits), (n, k))
    out = evaluate(model, torch.as_tensor(xp.to_numpy(u)[None]), p)[0]
    return [out], [ref], truth


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


def _trace_logistic_newton(p: Any, prob: Any, N: int, k: int, steps: int
                           ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton step: the 11 + 2k layer transformer's x_t (000 Thm 5.2, App. C), damped
    Newton's x_t in the same precision, and the certified minimiser (as run_solver's)."""
    from precision.constructions import logistic_newton
    from precision.solvers.newton_logistic import newton_logistic
    from precision.truth import logistic_truth

    xp = p.backend
    A, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Ar, yr = xp.to_numpy(A), xp.to_numpy(y)  # the inputs as the model receives them
    n, d = Ar.shape
    model = logistic_newton.damped_newton(d, n, prob.mu, N=N, k=k, steps=steps)
    out = evaluate(logistic_newton.PerStep(model), logistic_newton.tokens(Ar, yr), p)[0]
    iterates = newton_logistic(xp, A, y, mu=prob.mu, iters=steps, damped=True)
    models = [out[t] for t in range(steps)]
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    truth = logistic_truth(xp.to_exact(A), xp.to_exact(y), prob.mu, truth_bits(p))
    return models, refs, truth


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
            "baseconv_gd_noncausal", "least_squares", {"iters": 40, "step": None},
            "non-causal BaseConv, O(D) state, 3 layers per GD step (001 App. C.2.1)",
            lambda p, prob, iters, step: _trace_baseconv_gd_noncausal(p, prob, iters, step)),
        ConstructionSpec(
            "lsa_newton_schulz", "inverse", {"steps": 12},
            "Newton-Schulz steps in 2 linear-attention layers each (000 Lemma 4.1)",
            lambda p, prob, steps: _trace_lsa_newton(p, prob, steps)),
        ConstructionSpec(
            "baseconv_read", "primitive", {},
            "single-layer BaseConv READ(i, j, a, b) (001 App. C.1.1), one point",
            lambda p, prob: _trace_primitive(p, prob, "read")),
        ConstructionSpec(
            "baseconv_affine", "primitive", {},
            "single-layer BaseConv AFFINE(H) (001 App. C.1.2), one point",
            lambda p, prob: _trace_primitive(p, prob, "affine")),
        ConstructionSpec(
            "baseconv_multiply", "primitive", {},
            "single-layer BaseConv MULTIPLY(a, b, d_out) (001 App. C.1.3), one point",
            lambda p, prob: _trace_primitive(p, prob, "multiply")),
        ConstructionSpec(
            "logistic_newton", "logistic", {"N": 32, "k": 8, "steps": 4},
            "damped Newton for logistic regression in 11+2k layers, ReLU gadgets of N "
            "intervals, k Newton-Schulz steps (000 Thm 5.2, App. C)",
            lambda p, prob, N, k, steps: _trace_logistic_newton(p, prob, N, k, steps)),
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
