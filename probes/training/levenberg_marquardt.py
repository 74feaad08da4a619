"""The Levenberg–Marquardt phase of the second-order training recipes, ``engine`` and
``high-precision`` (:mod:`probes.training.recipe_book`).

Levenberg–Marquardt solves ``(J^T J + lam I) d = -J^T r`` for the residual vector r of the
fixed batch (M = batch * |y entries| residuals, P parameters). Small problems form J
explicitly (sample by sample, ``vmap`` of ``jacrev``; whole-batch ``jacrev``/``jacfwd`` when
an operation cannot be vmapped) and diagonalise ``J^T J`` once per iteration (or, with
``lm_solve = "cholesky"``, factor ``J^T J + lam I`` once per damping try);
large ones build a Krylov (Lanczos, fully reorthogonalised) basis of ``J^T J`` from ``J^T r``
with matrix-free products (``J v`` by double backward, ``J^T u`` by backward), augmented by
the last ``lm_memory`` accepted steps (their curvature is recomputed at the current point, so
the subspace keeps the slow, low-curvature directions earlier Krylov spaces found; the products
may run in float32, ``lm_curvature_dtype``, the gradient staying float64). In both cases
the damped step for *any* lam is then a cheap solve in the stored eigenbasis, so a rejected
step costs one forward pass, not a new factorisation. The damping follows Nielsen's rule
(gain ratio rho = actual / predicted decrease: on success lam *= max(1/3, 1 - (2 rho - 1)^3),
on failure lam *= nu, nu *= 2).

The code: :class:`LMState` is what the iterations update (in place: a checkpoint saves it);
:class:`_Engine` holds what stays fixed (the settings, a :class:`TrainConfig`; the model's
residual functions, :class:`_Residuals`; the sampler) and runs one iteration,
:meth:`_Engine.iterate`: its batch, the dense step (:meth:`_Engine.dense_step`) or the
Krylov step (:meth:`_Engine.krylov_step`), the damping search (:func:`_search_damping` over
the tries of a :class:`_Point`), the damping update.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, jacfwd, jacrev, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from probes.training.train_config import TrainConfig
from probes.training.work import WorkLedger, cholesky_flops, eigh_flops

_log = logging.getLogger(__name__)
Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]
Predict = Callable[[nn.Module, torch.Tensor], torch.Tensor]


class Diverged(Exception):
    """Training met a non-finite loss or parameters (either phase); the message says where."""


class _Predictor(nn.Module):
    """model + predict as one module, so ``functional_call`` can swap the parameters."""

    def __init__(self, model: nn.Module, predict: Predict) -> None:
        super().__init__()
        self.model = model
        self._predict = predict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._predict(self.model, x)


class _Flat:
    """The trainable parameters of ``model`` as one flat float64 vector theta (P,)."""

    def __init__(self, model: nn.Module) -> None:
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.names = ["model." + n for n, _ in named]
        self.params = [p for _, p in named]
        self.shapes = [p.shape for p in self.params]
        self.sizes = [p.numel() for p in self.params]

    def get(self) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in self.params])

    def set(self, theta: torch.Tensor) -> None:
        with torch.no_grad():
            for p, chunk in zip(self.params, theta.split(self.sizes), strict=True):
                p.copy_(chunk.view(p.shape))

    def as_dict(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        return {n: c.view(s) for n, c, s in
                zip(self.names, theta.split(self.sizes), self.shapes, strict=True)}


@dataclass
class _Model2:
    """A damped-step model in an orthonormal basis V (P, k): J^T J ~ V diag(lam_i) V^T on
    span V, b = V^T (J^T r). The LM step for damping mu is d = -V (b / (lam_i + mu))."""

    V: torch.Tensor | None   # None: the identity (dense path with eigenvectors folded in)
    evals: torch.Tensor
    b: torch.Tensor

    @property
    def step_flops(self) -> float:
        """FLOPs of one :meth:`step` (the product V z)."""
        return 0.0 if self.V is None else 2.0 * self.V.numel()

    def top_flops(self) -> float:
        """FLOPs of :meth:`top` (none worth counting: the largest of the stored evals)."""
        return 0.0

    def step(self, mu: float) -> tuple[torch.Tensor, float]:
        z = self.b / (self.evals + mu)
        pred = float(self.b.dot(z) - 0.5 * (z * self.evals).dot(z))  # decrease of 0.5||r||^2
        d = -(z if self.V is None else self.V @ z)
        return d, pred

    def top(self) -> float:
        """The largest curvature of the model (sets the first damping)."""
        return float(self.evals.max())


class _CholeskyModel:
    """The same damped-step model without a diagonalisation, from the Marquardt-scaled
    Jacobian Js = J S (M, P) and b = Js^T r: each damping mu costs one Cholesky
    factorisation instead of the ~10x costlier ``eigh``, which pays when few damping tries
    are needed per iteration (fresh batches, large P). With M >= P it factors
    A + mu I, A = Js^T Js (P, P); with M < P the M x M kernel K + mu I, K = Js Js^T, and
    z = Js^T (K + mu I)^-1 r, the same step by (A + mu I)^-1 Js^T = Js^T (K + mu I)^-1."""

    def __init__(self, jac: torch.Tensor, r: torch.Tensor) -> None:
        self.s = _scaling(jac.pow(2).sum(0))        # diag(J^T J) = squared column norms
        self.Js = jac * self.s
        self.r = r
        self.b = self.Js.T @ r
        self.kernel = jac.shape[0] < jac.shape[1]
        self.G = self.Js @ self.Js.T if self.kernel else self.Js.T @ self.Js
        n = self.G.shape[0]
        #: FLOPs of one :meth:`step`: the factorisation, two triangular solves, the products
        self.step_flops = cholesky_flops(n) + 4.0 * n * n + 4.0 * jac.numel()

    def step(self, mu: float) -> tuple[torch.Tensor, float]:
        eye = torch.eye(self.G.shape[0], dtype=self.G.dtype, device=self.G.device)
        L, info = torch.linalg.cholesky_ex(self.G + mu * eye)
        if int(info):
            return torch.zeros_like(self.b), -1.0   # not positive definite: a rejected try
        if self.kernel:
            z = self.Js.T @ torch.cholesky_solve(self.r[:, None], L)[:, 0]
        else:
            z = torch.cholesky_solve(self.b[:, None], L)[:, 0]
        pred = float(self.b.dot(z) - 0.5 * (self.Js @ z).pow(2).sum())
        return -(self.s * z), pred

    def top(self, iterations: int = 30) -> float:
        """Power-iteration estimate of the largest eigenvalue of J^T J (scaled); its FLOPs:
        :meth:`top_flops`."""
        v = torch.ones(self.G.shape[0], dtype=self.G.dtype, device=self.G.device)
        v /= v.norm()
        lam = 0.0
        for _ in range(iterations):
            w = self.G @ v
            lam = float(w.norm())
            if lam == 0.0:
                break
            v = w / lam
        return lam

    def top_flops(self, iterations: int = 30) -> float:
        """FLOPs of :meth:`top` (at most)."""
        return 2.0 * iterations * self.G.numel()


def _batch_jacobian(res: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor,
                    r: torch.Tensor) -> torch.Tensor:
    """J (M, P) of the whole residual vector: jacrev (M <= P) or jacfwd. Its intermediates
    are batch-sized per Jacobian row, so memory and time grow like M * P * batch."""
    return (jacrev if r.numel() <= theta.numel() else jacfwd)(res)(theta)


def _sample_jacobian(res_one: Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                                       torch.Tensor],
                     theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """J (M, P) sample by sample: ``vmap`` over the batch of ``jacrev`` of one sample's
    residuals (k of them), stacked sample-major like ``res(theta)``. Sample b's residuals
    depend only on x[b] (the models have no cross-sample operations), so this is the same
    matrix as :func:`_batch_jacobian` at the cost of ~k backward passes over the batch
    instead of M (Full LSA, P = 968, M = 1024: seconds instead of >10 minutes)."""
    jac = vmap(jacrev(res_one), in_dims=(None, 0, 0))(theta, x, y)
    return jac.reshape(-1, theta.numel())


def _dense_model(jac: torch.Tensor, r: torch.Tensor) -> _Model2:
    """Explicit J (M, P), Marquardt scaling S = diag(J^T J)^(-1/2), then eigh(S J^T J S)."""
    A = jac.T @ jac
    s = _scaling(torch.diagonal(A))
    evals, Q = torch.linalg.eigh(s[:, None] * A * s[None, :])
    return _Model2(V=s[:, None] * Q, evals=evals.clamp(min=0.0), b=Q.T @ (s * (jac.T @ r)))


def _scaling(diag: torch.Tensor) -> torch.Tensor:
    """Marquardt/Jacobi scale 1 / sqrt(diag(J^T J)), floored so dead parameters stay bounded."""
    floor = 1e-12 * float(diag.max()) if diag.numel() else 0.0
    return (diag.clamp(min=0.0) + max(floor, 1e-300)).rsqrt()


class _Scaling:
    """A symmetric positive scaling S of parameter space: the Krylov model works in the
    coordinates z = S^-1 (theta - theta0), where S (J^T J) S has a flatter spectrum than
    J^T J, so a k-dimensional Krylov space holds more of the step.

    S = diag(J^T J)^(-1/2) (Marquardt/Jacobi) on every parameter, except the weight and bias
    of each ``nn.Linear`` when ``kfac``: there the Gauss-Newton block is approximated by a
    Kronecker product A (x) G (K-FAC, Martens & Grosse 2015): A = mean over rows of a a^T of
    the layer's inputs a (with a 1 appended for the bias), G = sum over rows of g g^T of the
    back-propagated output vectors g of one Rademacher probe z (E[J^T z z^T J] = J^T J), and
    S = (A (x) G)^(-1/2) applied in the factors' eigenbases (eigenvalue products floored at
    :data:`KFAC_FLOOR` of the largest, so a direction the one-probe G underestimates stays
    bounded)."""

    def __init__(self, diag_scale: torch.Tensor,
                 blocks: list[tuple[slice, slice | None, torch.Tensor, torch.Tensor,
                                    torch.Tensor, torch.Tensor]]) -> None:
        self.diag = diag_scale
        # layers of one shape are scaled together (a batch of matrix products per shape,
        # not a few small products per layer): per shape (n_out, n_in + bias), the positions
        # of each layer's [weight | bias] matrix in the flat vector (L, n_out, n_in + bias)
        # and the layers' stacked Q_G, Q_A, inverse sqrt and sqrt
        by_shape: dict[tuple[int, int], list[tuple[torch.Tensor, ...]]] = {}
        for w, b, qg, qa, isq, sq in blocks:
            n_out, n_cols = qg.shape[0], qa.shape[0]
            n_in = n_cols - (b is not None)
            pos = torch.arange(w.start, w.stop, device=qg.device).view(n_out, n_in)
            if b is not None:
                pos = torch.cat([pos, torch.arange(b.start, b.stop,
                                                   device=qg.device).view(n_out, 1)], dim=1)
            by_shape.setdefault((n_out, n_cols), []).append((pos, qg, qa, isq, sq))
        self.groups = [tuple(torch.stack(t) for t in zip(*layers, strict=True))
                       for layers in by_shape.values()]

    def _apply(self, v: torch.Tensor, inverse: bool) -> torch.Tensor:
        """S v (or S^-1 v) of one vector (P,) or of each row of a block (b, P): the layers
        of each shape are scaled by one batch of matrix products over the block."""
        block = v if v.dim() == 2 else v[None]
        out = block / self.diag if inverse else block * self.diag
        n = block.shape[0]
        for pos, qg, qa, isq, sq in self.groups:
            flat = pos.flatten()
            mat = block[:, flat].view(n, *pos.shape)           # (b, L, n_out, n_in + bias)
            z = (qg.mT @ mat @ qa) * (sq if inverse else isq)
            out[:, flat] = (qg @ z @ qa.mT).reshape(n, -1)
        return out if v.dim() == 2 else out[0]

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        return self._apply(v, inverse=False)

    def inverse(self, v: torch.Tensor) -> torch.Tensor:
        return self._apply(v, inverse=True)


def _linear_slices(model: nn.Module, flat: _Flat) -> list[tuple[nn.Linear, slice, slice | None]]:
    """Every trainable ``nn.Linear`` of ``model`` with the slices of its weight and bias in
    the flat parameter vector."""
    offsets, start = {}, 0
    for name, size in zip(flat.names, flat.sizes, strict=True):
        offsets[name] = slice(start, start + size)
        start += size
    found = []
    for name, mod in model.named_modules():
        w = offsets.get(f"model.{name}.weight" if name else "model.weight")
        if isinstance(mod, nn.Linear) and w is not None:
            found.append((mod, w, offsets.get(f"model.{name}.bias" if name else "model.bias")))
    return found


#: Floor of the K-FAC eigenvalue products, relative to the largest (see :class:`_Scaling`).
#: G comes from one probe, so its small eigenvalues are underestimated and the floor acts as
#: the factors' damping. Measured (Transformer with LayerNorm, depth 1, width 32, AFFINE, 200
#: Adam steps then 6 iterations): log10 MSE 0.01 at 1e-10 (the damping rose to 1e3 x the
#: top curvature and no step moved), -1.85 at 1e-4, -2.47 at 1e-3, -2.78 at 1e-2, -2.40 at
#: 1e-1, -0.04 with the diagonal scaling alone.
KFAC_FLOOR = 1e-2

#: The damping starts each iteration at most this many times the top curvature of its model:
#: beyond it a step is a vanishing gradient step. Without the bound, one iteration whose
#: every try was rejected multiplied mu by 2^66 (lm_max_tries doublings of a doubling
#: factor), every later step was too small to lower the held-out loss, and training froze.
MU_MAX_RATIO = 1e4


def _kfac_blocks(res: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor,
                 linears: list[tuple[nn.Linear, slice, slice | None]]
                 ) -> list[tuple[slice, slice | None, torch.Tensor, torch.Tensor,
                                 torch.Tensor, torch.Tensor]]:
    """The K-FAC factors of every linear layer (see :class:`_Scaling`) from one forward and
    one backward pass of a Rademacher probe; their eigenbases and (A (x) G)^(-/+1/2)."""
    inputs: dict[int, list[torch.Tensor]] = {}
    grads: dict[int, list[torch.Tensor]] = {}
    handles = []

    def hook(mod: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        key = id(mod)
        inputs.setdefault(key, []).append(args[0].detach().reshape(-1, args[0].shape[-1]))
        if out.requires_grad:
            out.register_hook(lambda g: grads.setdefault(key, []).append(
                g.detach().reshape(-1, g.shape[-1])))

    for mod, _, _ in linears:
        handles.append(mod.register_forward_hook(hook))
    try:
        th = theta.detach().clone().requires_grad_(True)
        r = res(th)
        z = torch.randint(0, 2, r.shape, dtype=r.dtype).to(r.device).mul_(2).sub_(1)
        torch.autograd.grad(r, th, z)
    finally:
        for h in handles:
            h.remove()
    blocks = []
    for mod, w, b in linears:
        if id(mod) not in inputs or id(mod) not in grads:
            continue
        a = torch.cat(inputs[id(mod)])
        if b is not None:
            a = torch.cat([a, torch.ones_like(a[:, :1])], dim=1)
        g = torch.cat(grads[id(mod)])
        ea, qa = torch.linalg.eigh(a.T @ a / a.shape[0])
        eg, qg = torch.linalg.eigh(g.T @ g)
        prod = eg.clamp(min=0.0)[:, None] * ea.clamp(min=0.0)[None, :]
        prod = prod + max(KFAC_FLOOR * float(prod.max()), 1e-300)
        blocks.append((w, b, qg, qa, prod.rsqrt(), prod.sqrt()))
    return blocks


def _model_decrease(proj: torch.Tensor, gnorm: float, damping: float | None) -> float:
    """The decrease b^T z - z^T T z / 2, z = (T + mu I)^-1 b, of the damped model on a
    Lanczos basis: T (j, j) its projected curvature (the upper triangle filled), b = |g| e_1.
    mu = ``damping`` (None: the largest eigenvalue of T / 1e3)."""
    t = torch.triu(proj) + torch.triu(proj, 1).T
    evals, Q = torch.linalg.eigh(t)
    evals = evals.clamp(min=0.0)
    mu = damping if damping is not None else 1e-3 * float(evals.max())
    b = gnorm * Q[0]
    z = b / (evals + max(mu, 1e-300))
    return float(b.dot(z) - 0.5 * (z * evals).dot(z))


def _krylov_converged(decrease: list[float], tol: float) -> bool:
    """Hessian-free's relative-progress test on the model decreases q_1..q_j: with
    w = max(10, j / 10), True when q_j - q_(j-w) < w tol q_j."""
    j = len(decrease)
    w = max(10, j // 10)
    if j <= w or decrease[-1] <= 0.0:
        return False
    return decrease[-1] - decrease[-1 - w] < w * tol * decrease[-1]


def _vjp_rows(out: torch.Tensor, inp: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """The vector-Jacobian products of ``out`` for each row of ``grads`` (b, *out.shape)
    with respect to ``inp`` (b, *inp.shape), one backward pass per row; the graph is kept.

    One pass per row, not torch's batched backward (``is_grads_batched``, a vmap over the
    pass): measured on this CPU (one thread, Transformer without LayerNorm, depth 1, width
    32, float32 products), the batched pass was the slower one: 16 Hutchinson probes took
    1.66 s batched against 0.68 s one by one on an AFFINE batch of 365 sequences, 10
    curvature products 1.74 s against 0.98 s (on READ's 20 sequences: 0.055 s against
    0.043 s, and 0.064 s against 0.077 s)."""
    return torch.stack([torch.autograd.grad(out, inp, g, retain_graph=True)[0] for g in grads])


def _krylov_model(res: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, k: int,
                  probes: int, memory: list[torch.Tensor], deadline: float | None,
                  linears: list[tuple[nn.Linear, slice, slice | None]] | None = None,
                  curvature: tuple[Callable[[torch.Tensor], torch.Tensor], float] | None = None,
                  low: Callable[[torch.Tensor], torch.Tensor] | None = None,
                  tol: float = 0.0, damping: float | None = None,
                  ledger: WorkLedger | None = None, rows: tuple[int, int] = (0, 0)
                  ) -> _Model2:
    """Lanczos on S J^T J S started from S J^T r, at most k matrix-free products.

    ``tol`` > 0: the basis stops growing earlier, when the last directions no longer add to
    the step's predicted decrease q_j (Hessian-free's CG stopping rule, Martens 2010 Sec. 4.4,
    on the Lanczos model): after j products, with w = max(10, j / 10), stop when
    q_j - q_(j-w) < w tol q_j. q_j is the decrease of the damped model on the first j
    directions for the damping ``damping`` (None: ``lam_max / 1e3``, lam_max the largest
    curvature found so far). 0: always k products.

    ``curvature`` = (res_c, c): the products, the K-FAC factors and the probes use the
    residuals ``res_c`` of a subset of the batch, J^T J ~ c J_c^T J_c with c = batch / subset
    (Hessian-free's curvature minibatch, Martens 2010); the gradient J^T r uses the whole
    batch. None: the whole batch for both. ``low``: the same residuals as ``res_c`` computed
    in a lower precision (float64 in, float32 inside): the products and the probes come from
    it (about 3x cheaper on a CPU), the gradient and the K-FAC factors stay float64.

    J v is the double-backward trick: u -> J^T u is linear in u, so d/du <J^T u, v> = J v.
    S (:class:`_Scaling`): K-FAC on the ``linears`` (None: none), elsewhere
    diag(J^T J)^(-1/2) with diag(J^T J) = E[(J^T z)^2] estimated from ``probes`` Rademacher
    vectors z (Hutchinson); S only has to be a preconditioner.

    What does not depend on the previous Lanczos vector is handled as a block: the scaling
    of the remembered steps and of the final basis (matrix-matrix products per layer shape);
    the products themselves run one vector at a time (:func:`_vjp_rows` says why).
    ``ledger`` counts the FLOPs (:mod:`probes.training.work`);
    ``rows``: the sequences of the batch and of its curvature subset (the counts' keys).
    """
    ledger = ledger if ledger is not None else WorkLedger()
    B, sub = rows
    res_c, c = curvature if curvature is not None else (res, 1.0)
    blocks = ledger.run(("kfac", sub), _kfac_blocks, res_c, theta, linears) if linears else []
    ledger.add(sum(eigh_flops(qg.shape[0]) + eigh_flops(qa.shape[0])
                   for _, _, qg, qa, _, _ in blocks))
    products = low if low is not None else res_c
    th = theta.detach().clone().requires_grad_(True)

    def gradient() -> tuple[torch.Tensor, torch.Tensor]:
        r = res(th)
        return r, torch.autograd.grad(r, th, r.detach(), retain_graph=products is res)[0]

    r, g = ledger.run(("gradient", B), gradient)
    if products is not res:
        th = theta.detach().clone().requires_grad_(True)
        r = ledger.run(("forward", sub), products, th)
    u = torch.zeros_like(r, requires_grad=True)
    jtu = ledger.run(("graph", sub), lambda: torch.autograd.grad(r, th, u, create_graph=True)[0])

    def jtj(V: torch.Tensor) -> torch.Tensor:
        """J^T J applied to each row of V (b, P)."""
        jv = _vjp_rows(jtu, u, V.to(jtu.dtype))
        return _vjp_rows(r, th, jv) * c

    if probes > 0:
        Z = torch.randint(0, 2, (probes, r.numel()), dtype=r.dtype).to(r.device).mul_(2).sub_(1)
        diag = ledger.run(("probe", sub), _vjp_rows, r, th, Z,
                          units=probes).pow(2).sum(0) * c
    sc = _Scaling(_scaling(diag / probes) if probes > 0 else torch.ones_like(theta), blocks)

    def image(V: torch.Tensor) -> torch.Tensor:
        """S J^T J S of each row of V (b, P)."""
        return ledger.run(("image", sub), lambda: sc(jtj(sc(V))), units=V.shape[0])

    P = theta.numel()
    basis = torch.empty(k + len(memory), P, dtype=theta.dtype, device=theta.device)
    images = torch.empty_like(basis)            # S J^T J S of each basis vector
    gs = sc(g)
    gnorm = float(gs.norm())
    basis[0] = gs / gnorm
    proj = torch.zeros(k if tol > 0.0 else 0, k if tol > 0.0 else 0,   # V^T S J^T J S V,
                       dtype=theta.dtype, device=theta.device)        # for the rule only
    decrease: list[float] = []                   # q_j of the stopping rule
    n = 0
    for j in range(k):
        w = image(basis[j: j + 1])[0]
        images[j] = w
        n = j + 1
        Vm = basis[:n]
        if tol > 0.0:
            proj[:n, j] = Vm @ w
            decrease.append(_model_decrease(proj[:n, :n], gnorm, damping))
        for _ in range(2):                       # full reorthogonalisation, twice
            w = w - (Vm @ w) @ Vm
        ledger.add(8.0 * P * n)
        beta = float(w.norm())
        if j == k - 1 or beta <= 1e-12 * float(images[0].norm()) or (
                deadline is not None and time.perf_counter() > deadline) or (
                tol > 0.0 and _krylov_converged(decrease, tol)):
            break
        basis[n] = w / beta
    lanczos = n
    if memory:                                   # earlier steps, in scaled coordinates
        for v in sc.inverse(torch.stack(memory)):
            norm0 = float(v.norm())
            Vm = basis[:n]
            for _ in range(2):
                v = v - (Vm @ v) @ Vm
            ledger.add(8.0 * P * n)
            nv = float(v.norm())
            if nv > 1e-8 * norm0:
                basis[n] = v / nv
                n += 1
        if n > lanczos:                          # their curvature: one block product
            images[lanczos:n] = image(basis[lanczos:n])
    Vm = basis[:n]
    T = Vm @ images[:n].T
    evals, Q = torch.linalg.eigh(0.5 * (T + T.T))
    bvec = Q.T @ (Vm @ gs)
    scaled = sc(Q.T @ Vm)                        # (n, P): the model's directions, scaled
    ledger.add(6.0 * P * n * n + eigh_flops(n))
    return _Model2(V=scaled.T, evals=evals.clamp(min=0.0), b=bvec)


@dataclass
class LMState:
    """Everything one iteration hands the next (the parameters aside: they are the model's),
    so that iterations resumed from it compute what uninterrupted ones would, bit for bit:
    the iterations done, the damping ``mu`` and its growth ``nu``, the remembered steps, the
    batch in use and the one drawn ahead (``held``), which Jacobian paths still work, and
    where the Krylov path's curvature stands (its fraction of the batch, lower-precision
    products). The iterations update it in place (:meth:`_Engine.iterate`)."""

    it: int = 0
    mu: float | None = None
    nu: float = 2.0
    memory: list[torch.Tensor] = field(default_factory=list)
    batch: tuple[torch.Tensor, torch.Tensor] | None = None
    held: tuple[torch.Tensor, torch.Tensor] | None = None
    per_sample: bool = True
    dense_ok: bool = True
    curvature: float | None = None   # the Krylov path's curvature fraction (None: the setting's)
    low: bool | None = None   # its products in lm_curvature_dtype (None: as the setting says)
    flops: float = 0.0        # the work of the iterations so far (probes.training.work)

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """(tensors, JSON-able scalars) for a checkpoint (floats are exact in JSON)."""
        tensors = {f"lm.memory.{i}": m for i, m in enumerate(self.memory)}
        for name, pair in (("batch", self.batch), ("held", self.held)):
            if pair is not None:
                tensors[f"lm.{name}.x"], tensors[f"lm.{name}.y"] = pair
        return tensors, {"it": self.it, "mu": self.mu, "nu": self.nu,
                         "memory": len(self.memory), "per_sample": self.per_sample,
                         "dense_ok": self.dense_ok, "curvature": self.curvature,
                         "low": self.low, "flops": self.flops}

    @classmethod
    def from_checkpoint(cls, tensors: dict[str, torch.Tensor], state: dict[str, Any],
                        device: str | torch.device) -> LMState:
        """The state :meth:`to_checkpoint` wrote, its tensors on ``device``."""
        def pair(name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
            if f"lm.{name}.x" not in tensors:
                return None
            return tensors[f"lm.{name}.x"].to(device), tensors[f"lm.{name}.y"].to(device)

        return cls(it=int(state["it"]),
                   mu=None if state["mu"] is None else float(state["mu"]),
                   nu=float(state["nu"]),
                   memory=[tensors[f"lm.memory.{i}"].to(device)
                           for i in range(int(state["memory"]))],
                   batch=pair("batch"), held=pair("held"),
                   per_sample=bool(state["per_sample"]), dense_ok=bool(state["dense_ok"]),
                   curvature=None if state.get("curvature") is None
                   else float(state["curvature"]),
                   low=None if state.get("low") is None else bool(state["low"]),
                   flops=float(state.get("flops", 0.0)))


#: A damped-step model of one iteration: the dense path's (eigenbasis or Cholesky) or the
#: Krylov path's; ``step(mu)`` gives (d (P,), predicted decrease of ||r||^2 / 2).
DampedModel = _Model2 | _CholeskyModel
#: r(theta): the residuals (M,) of one batch at the parameters theta (P,).
ResidualFn = Callable[[torch.Tensor], torch.Tensor]


class _Residuals:
    """The model's residuals r(theta) = predict(model_theta, x) - y at any flat parameter
    vector theta (P,) (``functional_call`` swaps the parameters in; the model's own stay)."""

    def __init__(self, model: nn.Module, predict: Predict, low_dtype: torch.dtype) -> None:
        self.wrapper = _Predictor(model, predict)
        self.flat = _Flat(model)
        self.low_dtype = low_dtype
        self.low_buffers = {n: b.to(low_dtype) if b.is_floating_point() else b
                            for n, b in self.wrapper.named_buffers()}

    def __call__(self, th: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """r (M,) of the batch (x, y), M = y.numel(), sample-major."""
        return (functional_call(self.wrapper, self.flat.as_dict(th), (x,)) - y).flatten()

    def one(self, th: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """One sample's residuals (its x without the batch axis), for the per-sample J."""
        return (functional_call(self.wrapper, self.flat.as_dict(th), (xb[None],))
                - yb[None]).flatten()

    def low(self, th: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """r (M,) with the parameters, buffers and batch (x, y, already in ``low_dtype``)
        in ``low_dtype``: the Krylov path's cheaper curvature products."""
        weights = {**self.low_buffers, **self.flat.as_dict(th.to(self.low_dtype))}
        return (functional_call(self.wrapper, weights, (x,)) - y).flatten()

    def sum_of_squares(self, th: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> float:
        """||r||^2 of the batch (x, y) at th, without a graph (the held-out acceptance)."""
        with torch.no_grad():
            rh = (functional_call(self.wrapper, self.flat.as_dict(th), (x,)) - y)
        return float(rh.pow(2).sum())

    def on(self, x: torch.Tensor, y: torch.Tensor) -> ResidualFn:
        """theta -> r (M,) of the batch (x, y)."""
        return functools.partial(self, x=x, y=y)


@dataclass
class _Try:
    """An acceptable damped step: its ``score`` (the batch loss f, or with ``lm_holdout`` the
    held-out batch's ||r||^2), damping ``mu``, step d (P,), batch loss f = ||r||^2 / 2 after
    it and gain ratio rho = actual / predicted decrease."""

    score: float
    mu: float
    d: torch.Tensor
    f: float
    rho: float


@dataclass
class _Point:
    """Where one iteration linearises: the parameters theta (P,), the batch's residual
    function and its loss f = ||r(theta)||^2 / 2, and (``lm_holdout``) the held-out batch's
    ||r||^2 function and its value at theta."""

    theta: torch.Tensor
    residuals: ResidualFn
    f: float
    ledger: WorkLedger
    rows: int                  # sequences in the batch (and the held-out one)
    held_loss: Callable[[torch.Tensor], float] | None = None
    held_now: float | None = None

    def attempt(self, q: DampedModel, mu: float) -> _Try | None:
        """The step d of ``q`` for damping ``mu`` if it is acceptable: it lowers the batch
        loss (f(theta + d) < f, rho > 0) and, with a held-out batch, that batch's loss."""
        d, pred = q.step(mu)
        self.ledger.add(q.step_flops)
        with torch.no_grad():
            rt = self.ledger.run(("forward", self.rows), self.residuals, self.theta + d)
        ft = 0.5 * float(rt.dot(rt))
        rho = (self.f - ft) / pred if pred > 0 else -1.0
        if not (math.isfinite(ft) and ft < self.f and rho > 0):
            return None
        if self.held_loss is None or self.held_now is None:
            return _Try(ft, mu, d, ft, rho)
        score = self.ledger.run(("forward", self.rows), self.held_loss, self.theta + d)
        return None if score >= self.held_now else _Try(score, mu, d, ft, rho)


def _search_damping(q: DampedModel, point: _Point, st: LMState, cfg: TrainConfig
                    ) -> _Try | None:
    """The step of this iteration, or None: the model's step is cheap for any mu, so the
    smaller dampings mu / 10^k, k = lm_scan..0, are tried first and the best acceptable one
    taken; with none, mu *= nu, nu *= 2 and the step for mu tried, until one is acceptable
    (at most ``lm_max_tries`` - 1 times). ``st.mu`` and ``st.nu`` hold the last damping
    tried (the scan leaves them as they were) and its growth."""
    assert st.mu is not None
    tries = [a for a in (point.attempt(q, st.mu * 10.0 ** -k)
                         for k in range(cfg.lm_scan, -1, -1)) if a is not None]
    for _ in range(cfg.lm_max_tries - 1 if not tries else 0):
        st.mu *= st.nu
        st.nu *= 2.0
        found = point.attempt(q, st.mu)
        if found is not None:
            return found
    return min(tries, key=lambda a: a.score) if tries else None


def _draw(sample: Sampler, batch: int, gen: torch.Generator, device: torch.device
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh batch (x, y) of ``batch`` samples, drawn on the CPU, then moved to ``device``
    in float64."""
    xb, yb = sample(batch, gen)
    return xb.to(device=device, dtype=torch.float64), yb.to(device=device, dtype=torch.float64)


class _Engine:
    """What stays fixed over the iterations of one :func:`_levenberg_marquardt` call: the
    settings, the model's residual functions, the sampler with its generator and batch size
    (:func:`lm_batch_size`), and the linear layers of the K-FAC scaling (None: diagonal)."""

    def __init__(self, model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
                 gen: torch.Generator) -> None:
        self.cfg = cfg
        self.res = _Residuals(model, predict, cfg.curvature_precision.torch_dtype)
        self.n_params = sum(self.res.flat.sizes)
        self.device = self.res.flat.params[0].device
        self.linears = _linear_slices(model, self.res.flat) \
            if cfg.lm_precondition == "kfac" else None
        self.sample, self.gen = sample, gen
        self.batch = lm_batch_size(cfg, self.n_params, per_sample_residuals(sample))
        self.ledger = WorkLedger()   # its count is added to LMState.flops by each iteration

    def next_batch(self, st: LMState) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of iteration ``st.it``: every ``lm_refresh`` iterations the one drawn
        ahead (or a fresh one), and (``lm_holdout``, ``lm_refresh`` = 1) the next one drawn
        ahead into ``st.held``; otherwise the batch in use."""
        cfg = self.cfg
        if st.it % max(cfg.lm_refresh, 1) == 0:
            st.batch = st.held if st.held is not None else \
                _draw(self.sample, self.batch, self.gen, self.device)
            st.held = _draw(self.sample, self.batch, self.gen, self.device) \
                if cfg.lm_holdout and cfg.lm_refresh == 1 else None
        assert st.batch is not None
        return st.batch

    def dense_fits(self, M: int, samples: int) -> bool:
        """Whether J (M, P) is formed: P, M P and the residuals per sample within the
        ``dense_max_*`` settings."""
        cfg, P = self.cfg, self.n_params
        return (P <= cfg.dense_max_params and M * P <= cfg.dense_max_entries
                and M <= cfg.dense_max_sample_residuals * samples)

    def dense_step(self, st: LMState, residuals: ResidualFn, theta: torch.Tensor,
                   batch: tuple[torch.Tensor, torch.Tensor], r: torch.Tensor
                   ) -> DampedModel | None:
        """The dense path: explicit J (M, P), sample by sample (:func:`_sample_jacobian`) or,
        where an op cannot be vmapped, for the whole batch (:func:`_batch_jacobian`), then
        the eigenbasis of the scaled J^T J (:func:`_dense_model`) or, ``lm_solve =
        "cholesky"``, the Cholesky model. None when no torch.func transform works (then
        ``st.dense_ok`` is False and the Krylov path takes over for good)."""
        jac, B = None, batch[0].shape[0]
        if st.per_sample:
            try:
                jac = self.ledger.run(("sample jacobian", B), _sample_jacobian, self.res.one,
                                      theta, *batch)
            except (RuntimeError, NotImplementedError):   # an op vmap cannot batch
                st.per_sample = False
        if not st.per_sample:
            try:
                jac = self.ledger.run(("batch jacobian", B), _batch_jacobian, residuals,
                                      theta, r)
            except (RuntimeError, NotImplementedError):   # no torch.func transform at
                st.dense_ok = False                         # all (an autograd.Function)
        if jac is None:
            return None
        if self.cfg.lm_solve == "cholesky":
            return self.ledger.run(("cholesky model", B), _CholeskyModel, jac, r)
        self.ledger.add(eigh_flops(jac.shape[1]))
        return self.ledger.run(("eigh model", B), _dense_model, jac, r)

    def fraction(self, st: LMState) -> float:
        """The Krylov path's curvature fraction of the batch: the state's (the setting's,
        ``lm_curvature``, before the first iteration)."""
        return self.cfg.lm_curvature if st.curvature is None else st.curvature

    def krylov_step(self, st: LMState, residuals: ResidualFn, theta: torch.Tensor,
                    batch: tuple[torch.Tensor, torch.Tensor], deadline: float | None
                    ) -> _Model2:
        """The Krylov path (:func:`_krylov_model`): the curvature on the first
        :meth:`fraction` of the batch, in ``lm_curvature_dtype`` while ``st.low``; the
        stopping rule's damping is the smallest this iteration tries, mu / 10^lm_scan."""
        cfg, (x, y) = self.cfg, batch
        sub = max(1, round(self.fraction(st) * x.shape[0]))
        curvature = (self.res.on(x[:sub], y[:sub]), x.shape[0] / sub) \
            if sub < x.shape[0] else None
        low = functools.partial(self.res.low, x=x[:sub].to(self.res.low_dtype),
                                y=y[:sub].to(self.res.low_dtype)) if st.low else None
        return _krylov_model(residuals, theta, cfg.krylov_dim, cfg.diag_probes, st.memory,
                             deadline, self.linears, curvature, low, cfg.krylov_tol,
                             None if st.mu is None else st.mu * 10.0 ** -cfg.lm_scan,
                             self.ledger, (x.shape[0], sub))

    def iterate(self, st: LMState, theta: torch.Tensor, first_steps: int,
                deadline: float | None) -> tuple[torch.Tensor, float]:
        """One iteration from ``theta`` (P,): the damped-step model of the batch (dense or
        Krylov), the damping search (:func:`_search_damping`), then Nielsen's update of mu
        on success (mu *= max(1/3, 1 - (2 rho - 1)^3), nu = 2) or, on failure, nu = 2 and on
        the Krylov path exact products, then more of the batch, for the curvature. Updates
        ``st`` (``st.it`` last); returns the new theta and the batch's MSE, 2 f / M.
        :class:`Diverged` on a non-finite loss."""
        cfg = self.cfg
        x, y = batch = self.next_batch(st)
        t_it = time.perf_counter()
        residuals = self.res.on(x, y)
        self.ledger.flops = st.flops
        with torch.no_grad():
            r = self.ledger.run(("forward", x.shape[0]), residuals, theta)
        M = r.numel()
        f = 0.5 * float(r.dot(r))
        if not math.isfinite(f):
            raise Diverged(f"loss became {2 * f / M} at step {first_steps + st.it + 1}")
        q = self.dense_step(st, residuals, theta, batch, r) \
            if self.dense_fits(M, x.shape[0]) and st.dense_ok else None
        dense = q is not None
        if q is None:
            q = self.krylov_step(st, residuals, theta, batch, deadline)
        top = max(q.top(), 1e-300)
        self.ledger.add(q.top_flops())
        if st.mu is None:
            st.mu = cfg.lm_damping * top
        st.mu = min(st.mu, MU_MAX_RATIO * top)
        point = _Point(theta, residuals, f, self.ledger, x.shape[0])
        if st.held is not None:
            point.held_loss = functools.partial(self.res.sum_of_squares, x=st.held[0],
                                                y=st.held[1])
            point.held_now = self.ledger.run(("forward", x.shape[0]), point.held_loss, theta)
        best = _search_damping(q, point, st, cfg)
        st.nu = 2.0   # on failure mu stays large; the next batch / linearisation starts from it
        if best is not None:
            theta, f = theta + best.d, best.f
            st.memory = ([best.d] + st.memory)[:cfg.lm_memory]
            st.mu = best.mu * max(1.0 / 3.0, 1.0 - (2.0 * best.rho - 1.0) ** 3)
        elif not dense and st.low:   # the curvature cannot place a step: exact products
            st.low = False
        elif not dense:              # then more of the batch
            st.curvature = min(1.0, 2.0 * self.fraction(st))
        if _log.isEnabledFor(logging.DEBUG):   # q.top() is a power iteration on the dense path
            _log.debug("iteration %d: batch loss %.3e, %s, mu %.2e (top curvature %.2e), "
                       "rho %.2f, held-out %s, %s, %.2f s", st.it + 1, 2.0 * f / M,
                       "accepted" if best is not None else "rejected", st.mu, q.top(),
                       -1.0 if best is None else best.rho,
                       "-" if point.held_now is None else f"{point.held_now:.3e}",
                       "dense" if dense else f"krylov {q.evals.numel()}",
                       time.perf_counter() - t_it)
        st.mu = min(max(st.mu, 1e-300), 1e300)
        st.flops = self.ledger.flops
        st.it += 1
        return theta, 2.0 * f / M


def _levenberg_marquardt(model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
                         gen: torch.Generator, first_steps: int, deadline: float | None,
                         after_step: Callable[[int, float, Callable[[], None]], bool],
                         st: LMState) -> int:
    """Levenberg-Marquardt on fixed float64 batches of ``sample`` (see the module docstring)
    with the settings of ``cfg``, from the iterations state ``st`` (updated in place by each
    iteration, :meth:`_Engine.iterate`); returns the iterations done in all (``st.it``), the
    model holding the final parameters.

    After iteration i, ``after_step(first_steps + i, loss of the batch, sync)`` is called;
    ``sync()`` copies the current parameters into the model; True stops the iterations.
    :class:`Diverged` on a non-finite loss."""
    engine = _Engine(model, sample, predict, cfg, gen)
    theta = engine.res.flat.get()
    if st.curvature is None:
        st.curvature = cfg.lm_curvature
    if st.low is None:
        st.low = engine.res.low_dtype != torch.float64
    while st.it < cfg.second_order_steps and not budget_spent(cfg, st):
        if deadline is not None and time.perf_counter() > deadline:
            break
        theta, loss = engine.iterate(st, theta, first_steps, deadline)
        if after_step(first_steps + st.it, loss, functools.partial(engine.res.flat.set, theta)):
            break
    engine.res.flat.set(theta)
    return st.it


def budget_spent(cfg: TrainConfig, st: LMState) -> bool:
    """The iterations have done the work ``cfg.engine_flops`` allows (0: no work budget)."""
    return cfg.engine_flops > 0 and st.flops >= cfg.engine_flops


def per_sample_residuals(sample: Sampler) -> int:
    """Residuals one sample contributes (the entries of its y), from a one-sample draw of
    a throw-away generator (the training generator is not advanced)."""
    return int(sample(1, torch.Generator().manual_seed(0))[1].numel())


def lm_batch_size(cfg: TrainConfig, n_params: int, residuals: int) -> int:
    """Samples per Levenberg-Marquardt batch: ``second_order_batch``, raised so that the batch
    holds at least ``lm_residuals`` x P residuals (a Gauss-Newton step fits P directions to
    the batch's residuals: with fewer residuals than parameters it fits the batch's noise), at
    most ``lm_max_batch``."""
    need = math.ceil(cfg.lm_residuals * n_params / max(residuals, 1))
    return max(cfg.second_order_batch, min(need, cfg.lm_max_batch))


def levenberg_marquardt(model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
                        gen: torch.Generator, first_steps: int, deadline: float | None,
                        after_step: Callable[[int, float, Callable[[], None]], bool],
                        state: LMState | None = None) -> int:
    """The iterations of :func:`_levenberg_marquardt` (its docstring) with scaled dot-product
    attention computed by its composite (math) kernel: the fused CPU kernels have no second
    derivative, and the Krylov path's J v is a double backward pass. ``state``: go on from it
    (and keep it current, for a checkpoint); None starts afresh."""
    with sdpa_kernel(SDPBackend.MATH):
        return _levenberg_marquardt(model, sample, predict, cfg, gen, first_steps, deadline,
                                    after_step, LMState() if state is None else state)
