"""Constructions by name, and :func:`run_construction`, which measures one layer by layer.

For each depth (layer or step count) t, the constructed model is evaluated in the precision
and compared with (a) the matching reference algorithm's iterate t computed in the *same*
precision by :mod:`precision.solvers`, and (b) the certified truth of the task (from the
inputs after rounding). The result has the format of a solver run, plus the trace against
the algorithm, so the store, the floor detector and the report treat both alike.
In mpN, deep models are evaluated one exported layer (or BaseConv block) at a time with each
layer's weights loaded in turn (:func:`_layerwise`, :func:`_blockwise_mp`): the same
arithmetic as interpreting the whole model, without exporting every layer.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import numpy as np
import torch
from torch import nn

from precision.backends import backend_for
from precision.backends.torch_backend import cast_module, round_to_dtype
from precision.constructions import (
    baseconv_gd,
    baseconv_primitives,
    lsa_gd,
    lsa_gdpp,
    lsa_newton,
)
from precision.evaluate import evaluate, mp_program
from precision.metrics import detect_floor, error_summary
from precision.models.linear_attention import LSA, LinearTransformer, RestrictedLSA
from precision.params import Param, count, positive
from precision.precisions import parse_precision
from precision.solvers.gd import gd, gd_plus_plus
from precision.solvers.newton_schulz import newton_schulz
from precision.solvers.registry import (
    SolverError,
    SolverResult,
    lookup,
    make_problem,
    resolve_params,
)
from precision.truth import (
    TruthError,
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
    """A construction: the task family it solves, its parameters (default, type and range of
    each, :class:`~precision.params.Param`), one line of description."""

    name: str
    task: str
    params: dict[str, Param]
    description: str
    trace: Callable[..., tuple[list[Any], list[Any], Any]]

    @property
    def defaults(self) -> dict[str, Any]:
        """Default value of every parameter."""
        return {k: p.default for k, p in self.params.items()}


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


# --- layered models evaluated one layer at a time -----------------------------------------
def _layer_step(model: nn.Module, h: torch.Tensor, layer: int) -> torch.Tensor:
    """Layer ``layer`` of a LinearTransformer (000 eq. 3.1), LSA (002) or RestrictedLSA (003)
    on tokens h (batch, N, width): the same operations as the model's own forward pass."""
    if isinstance(model, RestrictedLSA):
        return h + model.attn(h, layer)
    if isinstance(model, LinearTransformer | LSA):
        return model.step(h, layer)
    raise TypeError(f"no per-layer step for {type(model).__name__}")


def _sub_model(model: nn.Module, layers: Sequence[int]) -> nn.Module:
    """A copy of a layered model (per-layer parameters stacked along dim 0, MLPs in a
    ``ModuleList``) holding only ``layers``, in that order."""
    sub = copy.deepcopy(model)
    idx = torch.as_tensor(list(layers), dtype=torch.long)
    with torch.no_grad():
        for name, prm in list(model.named_parameters(recurse=False)):
            if prm.shape[0] == model.depth:
                setattr(sub, name, nn.Parameter(prm.detach()[idx].clone()))
    if getattr(model, "mlp", None) is not None:
        sub.mlp = nn.ModuleList(copy.deepcopy(model.mlp[i]) for i in layers)
    sub.depth = len(layers)
    return sub


class _Window(nn.Module):
    """One layer of a layered model as a module of its own, loadable with the weights of any
    of its layers, plus fixed ``tail`` layers applied to a copy of the state for a read-out.

    forward(h (batch, N, width)) -> (h after the layer, read(tail(h after the layer))). The
    layers of :class:`LinearTransformer` / :class:`LSA` / :class:`RestrictedLSA` models share
    one graph, so one export serves every layer."""

    def __init__(self, model: nn.Module, tail: Sequence[int],
                 read: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.sub = _sub_model(model, [0, *tail])
        self.read = read

    def load(self, model: nn.Module, layer: int) -> None:
        """Copy layer ``layer``'s weights of ``model`` into the window's layer (cast to the
        window's dtype, the rounding ``model.to(dtype)`` does)."""
        with torch.no_grad():
            for name, prm in model.named_parameters(recurse=False):
                if prm.shape[0] == model.depth:
                    dst = getattr(self.sub, name)[0]
                    dst.copy_(round_to_dtype(prm[layer], dst.dtype))
            if getattr(model, "mlp", None) is not None:
                for dst, src in zip(self.sub.mlp[0].parameters(), model.mlp[layer].parameters(),
                                    strict=True):
                    dst.copy_(round_to_dtype(src, dst.dtype))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = _layer_step(self.sub, h, 0)
        r = h
        for layer in range(1, self.sub.depth):
            r = _layer_step(self.sub, r, layer)
        return h, self.read(r)


def _layerwise(model: nn.Module, x: torch.Tensor, p: Any,
               read: Callable[[torch.Tensor], torch.Tensor], *, every: int = 1, start: int = 0,
               tail: Sequence[int] = ()) -> list[np.ndarray]:
    """Read-outs of a layered model after layers start + every, start + 2 every, ... (of its
    first depth - len(tail) layers), ``read`` applied after the ``tail`` layers; each read-out
    without its batch axis, as exact values.

    The model runs one layer at a time through a :class:`_Window` loaded with that layer's
    weights: the arithmetic of evaluating the whole model (floats: the model cast to the
    dtype, on x rounded to it; mpN: the graph interpreter), but in mpN one export of a
    one-layer graph instead of one of the whole model, whose torch.export time (~0.4 s a
    layer) would dominate."""
    model.eval()
    window = _Window(model, tail, read).eval()
    h: Any = x
    if p.is_mp:
        prog = mp_program(window, x)

        def run(h: Any) -> Any:
            return prog(h, precision=p)
    else:
        window = cast_module(window, p.torch_dtype)

        def run(h: Any) -> Any:
            with torch.no_grad():
                return window(h)
        h = round_to_dtype(x, p.torch_dtype)
    outs = []
    for layer in range(model.depth - len(tail)):
        window.load(model, layer)
        h, r = run(h)
        if layer >= start and (layer + 1 - start) % every == 0:
            outs.append(backend_for(p).to_exact(r)[0])
    return outs


def _pow2_below(x: float) -> float:
    """The largest power of two <= 1/x: exact in every precision."""
    return 2.0 ** -int(np.ceil(np.log2(x)))


def _trace_lsa_gd(p: Any, prob: Any, layers: int, step: float | None
                  ) -> tuple[list[Any], list[Any], Any]:
    """Per layer: the LSA's query prediction, GD's prediction x_q^T w_l, the OLS truth."""
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)  # the inputs as the model receives them
    n = Xr.shape[0]
    ev = np.linalg.eigvalsh(Xr.T @ Xr / n)
    eta = step if step is not None else 2.0 / (ev[0] + ev[-1])  # the optimal fixed step
    q = prob.X_query[0]
    iterates = gd(xp, X, y, step=eta, iters=layers)
    tokens = lsa_gd.tokens(Xr, yr, q)
    d = Xr.shape[1]
    model = lsa_gd.preconditioned_gd(d, layers, eta)
    if p.is_mp:  # the same arithmetic as the whole model, one layer exported (fast)
        models = _layerwise(model, tokens, p, lambda e: -e[:, -1, d:d + 1])
    else:
        out = evaluate(_PerLayer(model, "lsa_gd", 0), tokens, p)[0]    # (layers,)
        models = [out[t - 1:t] for t in range(1, layers + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, layers + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    qx = xp.to_exact(xp.asarray(q.reshape(1, -1)))
    return models, refs, matvec(qx, w, bits)


def _query_trace(p: Any, X: Any, y: Any, q: np.ndarray, out: np.ndarray, iterates: list[Any],
                 iters: int) -> tuple[list[Any], list[Any], Any]:
    """Per step t = 1..iters: the model's query prediction out[t-1], the algorithm's
    x_q^T w_t in the same precision, and the certified OLS prediction x_q^T w*."""
    xp = backend_for(p)
    models = [out[t - 1:t] for t in range(1, iters + 1)]
    refs = [xp.to_exact(xp.asarray(q) @ iterates[t]).reshape(1) for t in range(1, iters + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


def _trace_baseconv_gd(p: Any, prob: Any, iters: int, step: float | None
                       ) -> tuple[list[Any], list[Any], Any]:
    """Per GD layer of the causal BaseConv (001 App. C.2.2): x_q^T w_k vs GD and OLS."""
    xp = backend_for(p)
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
    return _query_trace(p, X, y, q, out, iterates, iters)


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
        outs.append(backend_for(p).to_exact(r))
    return np.stack(outs, axis=1)[0]                        # (blocks,)


def _trace_baseconv_gd_noncausal(p: Any, prob: Any, iters: int, step: float | None
                                 ) -> tuple[list[Any], list[Any], Any]:
    """Per GD step (3 layers) of the non-causal BaseConv (001 App. C.2.1): x_q^T w_k vs GD
    run with the same step (:func:`baseconv_gd.exact_step`, so eta/N is an exact weight)."""
    xp = backend_for(p)
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
    return _query_trace(p, X, y, q, out, iterates, iters)


def _trace_primitive(p: Any, prob: Any, op: str) -> tuple[list[Any], list[Any], Any]:
    """One point: the single-layer BaseConv primitive (001 App. C.1) on the seeded input u,
    against the primitive computed directly in the same precision (a row copy, u H, or a
    product of columns) and against the exact result from the rounded u (and H)."""
    if prob.op != op:
        raise SolverError(f"construction 'baseconv_{op}' needs a primitive problem of kind "
                          f"'{op}', not '{prob.op}'")
    xp = backend_for(p)
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
    xp = backend_for(p)
    Ap = xp.asarray(A)
    Ar = xp.to_numpy(Ap)
    d = Ar.shape[0]
    alpha = _pow2_below(float(np.sum(Ar * Ar)))
    iterates = newton_schulz(xp, Ap, iters=steps, alpha=alpha)
    tokens = lsa_newton.tokens(alpha * Ar.T, Ar)
    model = lsa_newton.newton_schulz(d, steps)
    if p.is_mp:  # one layer exported, run layer by layer; X_t^T after every second layer
        models = [o.T for o in _layerwise(model, tokens, p, lambda h: h[:, :, :d], every=2)]
    else:
        out = evaluate(_PerLayer(model, "ns", d), tokens, p)[0]
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

    xp = backend_for(p)
    A, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Ar, yr = xp.to_numpy(A), xp.to_numpy(y)  # the inputs as the model receives them
    n, d = Ar.shape
    model = logistic_newton.damped_newton(d, n, prob.mu, N=N, k=k, steps=steps)
    x = logistic_newton.tokens(Ar, yr)
    if p.is_mp:  # one layer exported, run layer by layer; x after every Newton step
        xs = logistic_newton.rows(d)["x"]
        out = _layerwise(model, x, p, lambda h: h[:, 0, xs],
                         every=logistic_newton.layers_per_step(k))
    else:
        out = evaluate(logistic_newton.PerStep(model), x, p)[0]
    iterates = newton_logistic(xp, A, y, mu=prob.mu, iters=steps, damped=True)
    models = [out[t] for t in range(steps)]
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    truth = logistic_truth(xp.to_exact(A), xp.to_exact(y), prob.mu, truth_bits(p))
    return models, refs, truth


def _trace_lsa_least_squares(p: Any, prob: Any, steps: int, mu: float
                             ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton–Schulz step t = 1..T of the 3 + T layer linear transformer of 000 Thm 4.2
    (ridge variant, 000 Remark 4.4, for mu > 0), A (n, d), y (n,), query a (d,):

    * model: the prediction y_hat = y^T A X_t a of the 3 + t layer model (its read-out
      layers T+2, T+3 applied to the state after Newton layer t; they do not depend on T);
    * algorithm: :func:`newton_schulz` on R = A^T A + mu I from X_0 = eps R in the same
      precision, prediction a^T X_t (A^T y);
    * truth: a^T w*, w* = (A^T A + mu I)^{-1} A^T y, certified (``least_squares_truth`` with
      ridge mu / n in its 1/n scaling, passed as an arb so it is exact).

    eps = the largest power of two <= 1/||R||_F^2 (< 2 / lambda_max(R)^2: convergence), so
    X_0 = eps R is exact; mu must make the weights mu - 1 and eps mu - 1 exact float64
    numbers (e.g. an integer or a power of two), or mp50 would see float64 rounding.
    """
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)  # the inputs as the model receives them
    n, d = Xr.shape
    mu = float(mu)
    R64 = Xr.T @ Xr + mu * np.eye(d)
    eps = _pow2_below(float(np.sum(R64 * R64)))
    if mu < 0 or Fraction(mu) - 1 != Fraction(mu - 1.0) or (
            Fraction(eps) * Fraction(mu) - 1 != Fraction(eps * mu - 1.0)):
        raise SolverError(f"lsa ridge: mu={mu!r} must be >= 0 with mu - 1 and eps mu - 1 "
                          f"exact in float64 (eps = {eps!r}); use an integer or power of two")
    q = prob.X_query[0]
    model = lsa_newton.least_squares(d, steps, eps, mu)
    col = 4 * d + 2  # the prediction: token 0 of the last row of H (lsa_newton.ls_prediction)
    models = _layerwise(model, lsa_newton.ls_tokens(Xr, yr, q), p,
                        lambda h: h[:, 0, col:col + 1], start=1, tail=(steps + 1, steps + 2))
    R = X.T @ X
    if mu:
        R = R + xp.eye(d) * mu
    iterates = newton_schulz(xp, R, iters=steps, alpha=eps)      # X_0 = eps R^T = eps R
    b, qv = X.T @ y, xp.asarray(q)
    refs = [xp.to_exact(qv @ (iterates[t] @ b)).reshape(1) for t in range(1, steps + 1)]
    bits = truth_bits(p)
    ridge: Any = 0.0
    if mu:
        old = flint.ctx.prec
        flint.ctx.prec = 4 * bits
        try:
            ridge = flint.arb(mu) / n
        finally:
            flint.ctx.prec = old
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits, ridge=ridge)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


def _trace_lsa_newton_symmetric(p: Any, A: np.ndarray, steps: int
                                ) -> tuple[list[Any], list[Any], Any]:
    """Per Newton–Schulz step (one linear-attention layer each, symmetric A (d, d); 000
    Lemma 4.1's last sentence): the model's X_t, Newton–Schulz's X_t from X_0 = alpha A in
    the same precision (alpha a power of two <= 1/||A||_F^2), and A^{-1}."""
    xp = backend_for(p)
    Ap = xp.asarray(A)
    Ar = xp.to_numpy(Ap)
    d = Ar.shape[0]
    if not np.array_equal(Ar, Ar.T):
        raise SolverError("lsa_newton_schulz_sym needs an exactly symmetric matrix")
    alpha = _pow2_below(float(np.sum(Ar * Ar)))
    iterates = newton_schulz(xp, Ap, iters=steps, alpha=alpha)   # X_0 = alpha A^T = alpha A
    model = lsa_newton.newton_schulz_symmetric(d, steps)
    outs = _layerwise(model, lsa_newton.symmetric_tokens(alpha * Ar, Ar), p,
                      lambda h: h[:, :, :d])                      # X_t^T (row tokens)
    models = [o.T for o in outs]
    refs = [xp.to_exact(iterates[t]) for t in range(1, steps + 1)]
    return models, refs, inverse_truth(xp.to_exact(Ap), truth_bits(p))


def _trace_lsa_gdpp(p: Any, prob: Any, precondition: int, gd_steps: int
                    ) -> tuple[list[Any], list[Any], Any]:
    """Per layer of 002 Thm 5.1's GD++ linear transformer (``precondition`` layers with
    w_xx = -gamma_l = -1/(3 nu_l), then ``gd_steps`` GD layers; steps from the rounded prompt
    in float64, :func:`lsa_gdpp.gdpp`): the query read-out -y_q, the same recursion run by
    :func:`precision.solvers.gd.gd_plus_plus` in the same precision with the same weights,
    and the certified OLS prediction x_q^T w* (the limit of Thm 5.1)."""
    xp = backend_for(p)
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    Xr, yr = xp.to_numpy(X), xp.to_numpy(y)
    d = Xr.shape[1]
    q = prob.X_query[0]
    model = lsa_gdpp.gdpp(Xr, precondition, gd_steps)
    models = _layerwise(model, lsa_gd.tokens(Xr, yr, q), p, lambda e: -e[:, -1, d:d + 1])
    weights = [(float(a), float(b)) for a, b in model.w.detach().tolist()]
    qv = xp.asarray(q)
    preds = gd_plus_plus(xp, X, y, qv, weights=weights)
    refs = [xp.to_exact(preds[t]).reshape(1) for t in range(1, len(weights) + 1)]
    bits = truth_bits(p)
    w = least_squares_truth(xp.to_exact(X), xp.to_exact(y), bits)
    return models, refs, matvec(xp.to_exact(xp.asarray(q.reshape(1, -1))), w, bits)


#: Layer / step counts of a construction: each is a layer of a model built in memory.
MAX_LAYERS = 10_000
_STEP = positive(None, optional=True)  # GD step; None: 2/(lmin+lmax) of the rounded inputs


def _layers(default: int, lo: int = 1, hi: int = MAX_LAYERS) -> Param:
    return count(default, lo=lo, hi=hi)


CONSTRUCTIONS: dict[str, ConstructionSpec] = {
    c.name: c for c in [
        ConstructionSpec(
            "lsa_gd", "least_squares", {"layers": _layers(12), "step": _STEP},
            "linear attention = GD with step eta (003 eq. 2.8-2.10); default 2/(lmin+lmax)",
            lambda p, prob, layers, step: _trace_lsa_gd(p, prob, layers, step)),
        ConstructionSpec(
            "baseconv_gd", "least_squares", {"iters": _layers(40), "step": _STEP},
            "causal BaseConv running GD on least squares (001 App. C.2.2)",
            lambda p, prob, iters, step: _trace_baseconv_gd(p, prob, iters, step)),
        ConstructionSpec(
            "baseconv_gd_noncausal", "least_squares", {"iters": _layers(40), "step": _STEP},
            "non-causal BaseConv, O(D) state, 3 layers per GD step (001 App. C.2.1)",
            lambda p, prob, iters, step: _trace_baseconv_gd_noncausal(p, prob, iters, step)),
        ConstructionSpec(
            "lsa_newton_schulz", "inverse", {"steps": _layers(12)},
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
            "logistic_newton", "logistic", {"N": _layers(32), "k": _layers(8, lo=0, hi=64),
             "steps": _layers(4)},
            "damped Newton for logistic regression in 11+2k layers, ReLU gadgets of N "
            "intervals, k Newton-Schulz steps (000 Thm 5.2, App. C)",
            lambda p, prob, N, k, steps: _trace_logistic_newton(p, prob, N, k, steps)),
        ConstructionSpec(
            "lsa_least_squares", "least_squares", {"steps": _layers(16)},
            "least squares in 3+T linear-attention layers, width 4d+3, T Newton-Schulz steps "
            "(000 Thm 4.2), per step t: a^T X_t A^T y",
            lambda p, prob, steps: _trace_lsa_least_squares(p, prob, steps, 0.0)),
        ConstructionSpec(
            "lsa_ridge", "least_squares", {"steps": _layers(16), "mu": Param(4.0, lo=0.0)},
            "ridge regression (A^T A + mu I)^{-1} A^T y in 3+T linear-attention layers "
            "(000 Remark 4.4), per Newton-Schulz step",
            lambda p, prob, steps, mu: _trace_lsa_least_squares(p, prob, steps, mu)),
        ConstructionSpec(
            "lsa_newton_schulz_sym", "inverse", {"steps": _layers(12)},
            "Newton-Schulz for symmetric A, one linear-attention layer per step "
            "(000 Lemma 4.1, last sentence)",
            lambda p, prob, steps: _trace_lsa_newton_symmetric(p, prob, steps)),
        ConstructionSpec(
            "lsa_gdpp", "least_squares",
            {"precondition": _layers(8, lo=0), "gd_steps": _layers(4)},
            "GD++ linear transformer: preconditioning layers gamma_l = 1/(3 nu_l) per sequence, "
            "then GD layers (002 Thm 5.1), per layer against the OLS prediction",
            lambda p, prob, precondition, gd_steps: _trace_lsa_gdpp(p, prob, precondition,
                                                                    gd_steps)),
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
    prm = resolve_params(spec, params)
    p = parse_precision(precision)
    prob = make_problem(spec.task, problem)
    t0 = time.perf_counter()
    result = SolverResult(solver=name, precision=p.name, status="ok", params=prm)
    try:
        models, refs, truth = spec.trace(p, prob, **prm)
    except TruthError as exc:  # that run's result; the sweep goes on
        result.status, result.error = "failed", str(exc)
        result.wall_time = time.perf_counter() - t0
        return result
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
