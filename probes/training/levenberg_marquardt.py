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
        """Power-iteration estimate of the largest eigenvalue of J^T J (scaled)."""
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
        self.blocks = blocks   # (weight slice, bias slice, Q_G, Q_A, inverse sqrt, sqrt)

    def _apply(self, v: torch.Tensor, inverse: bool) -> torch.Tensor:
        out = v / self.diag if inverse else v * self.diag
        for w, b, qg, qa, isq, sq in self.blocks:
            n_out, n_in = qg.shape[0], qa.shape[0] - (b is not None)
            mat = v[w].view(n_out, n_in)
            if b is not None:
                mat = torch.cat([mat, v[b].view(n_out, 1)], dim=1)
            z = (qg.T @ mat @ qa) * (sq if inverse else isq)
            mat = qg @ z @ qa.T
            out[w] = mat[:, :n_in].reshape(-1)
            if b is not None:
                out[b] = mat[:, n_in]
        return out

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


def _krylov_model(res: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, k: int,
                  probes: int, memory: list[torch.Tensor], deadline: float | None,
                  linears: list[tuple[nn.Linear, slice, slice | None]] | None = None,
                  curvature: tuple[Callable[[torch.Tensor], torch.Tensor], float] | None = None,
                  low: Callable[[torch.Tensor], torch.Tensor] | None = None,
                  tol: float = 0.0, damping: float | None = None) -> _Model2:
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
    """
    res_c, c = curvature if curvature is not None else (res, 1.0)
    blocks = _kfac_blocks(res_c, theta, linears) if linears else []
    products = low if low is not None else res_c
    th = theta.detach().clone().requires_grad_(True)
    r = res(th)
    g = torch.autograd.grad(r, th, r.detach(), retain_graph=products is res)[0]
    if products is not res:
        th = theta.detach().clone().requires_grad_(True)
        r = products(th)
    u = torch.zeros_like(r, requires_grad=True)
    jtu = torch.autograd.grad(r, th, u, create_graph=True)[0]

    def jtj(v: torch.Tensor) -> torch.Tensor:
        jv = torch.autograd.grad(jtu, u, v, retain_graph=True)[0]
        return torch.autograd.grad(r, th, jv, retain_graph=True)[0] * c

    diag = torch.zeros_like(theta)
    for _ in range(probes):
        z = torch.randint(0, 2, r.shape, dtype=r.dtype).to(r.device).mul_(2).sub_(1)
        diag += torch.autograd.grad(r, th, z, retain_graph=True)[0].pow(2) * c
    sc = _Scaling(_scaling(diag / max(probes, 1)) if probes > 0 else torch.ones_like(theta),
                  blocks)
    gs = sc(g)
    gnorm = float(gs.norm())
    basis = [gs / gnorm]
    images: list[torch.Tensor] = []              # S J^T J S applied to each basis vector
    proj = torch.zeros(k if tol > 0.0 else 0, k if tol > 0.0 else 0,   # V^T S J^T J S V,
                       dtype=theta.dtype, device=theta.device)        # for the rule only
    decrease: list[float] = []                   # q_j of the stopping rule
    for j in range(k):
        w = sc(jtj(sc(basis[j])))
        images.append(w)
        Vm = torch.stack(basis, dim=1)
        if tol > 0.0:
            proj[: j + 1, j] = Vm.T @ w
            decrease.append(_model_decrease(proj[: j + 1, : j + 1], gnorm, damping))
        for _ in range(2):                       # full reorthogonalisation, twice
            w = w - Vm @ (Vm.T @ w)
        beta = float(w.norm())
        if j == k - 1 or beta <= 1e-12 * float(images[0].norm()) or (
                deadline is not None and time.perf_counter() > deadline) or (
                tol > 0.0 and _krylov_converged(decrease, tol)):
            break
        basis.append(w / beta)
    basis = basis[:len(images)]
    for d in memory:                             # earlier steps, in scaled coordinates
        v = sc.inverse(d)
        norm0 = float(v.norm())
        Vm = torch.stack(basis, dim=1)
        for _ in range(2):
            v = v - Vm @ (Vm.T @ v)
        nv = float(v.norm())
        if nv <= 1e-8 * norm0:
            continue
        basis.append(v / nv)
        images.append(sc(jtj(sc(basis[-1]))))
    Vm = torch.stack(basis, dim=1)
    T = Vm.T @ torch.stack(images, dim=1)
    evals, Q = torch.linalg.eigh(0.5 * (T + T.T))
    bvec = Q.T @ (Vm.T @ gs)
    Vm = Vm @ Q
    Vm = torch.stack([sc(c) for c in Vm.T], dim=1)
    return _Model2(V=Vm, evals=evals.clamp(min=0.0), b=bvec)


@dataclass
class LMState:
    """Everything one iteration hands the next (the parameters aside: they are the model's),
    so that iterations resumed from it compute what uninterrupted ones would, bit for bit:
    the iterations done, the damping ``mu`` and its growth ``nu``, the remembered steps, the
    batch in use and the one drawn ahead (``held``), which Jacobian paths still work, and
    where the Krylov path's curvature stands (its fraction of the batch, float32 products)."""

    it: int = 0
    mu: float | None = None
    nu: float = 2.0
    memory: list[torch.Tensor] = field(default_factory=list)
    batch: tuple[torch.Tensor, torch.Tensor] | None = None
    held: tuple[torch.Tensor, torch.Tensor] | None = None
    per_sample: bool = True
    dense_ok: bool = True
    curvature: float | None = None   # the Krylov path's curvature fraction (None: the setting's)
    low: bool | None = None   # its products in float32 (None: as the setting says)

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """(tensors, JSON-able scalars) for a checkpoint (floats are exact in JSON)."""
        tensors = {f"lm.memory.{i}": m for i, m in enumerate(self.memory)}
        for name, pair in (("batch", self.batch), ("held", self.held)):
            if pair is not None:
                tensors[f"lm.{name}.x"], tensors[f"lm.{name}.y"] = pair
        return tensors, {"it": self.it, "mu": self.mu, "nu": self.nu,
                         "memory": len(self.memory), "per_sample": self.per_sample,
                         "dense_ok": self.dense_ok, "curvature": self.curvature,
                         "low": self.low}

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
                   low=None if state.get("low") is None else bool(state["low"]))


def _levenberg_marquardt(model: nn.Module, sample: Sampler, predict: Predict, cfg: Any,
                        gen: torch.Generator, first_steps: int, deadline: float | None,
                        after_step: Callable[[int, float, Callable[[], None]], bool],
                        st: LMState) -> int:
    """Levenberg-Marquardt on fixed float64 batches of ``sample`` (see the module docstring)
    with the settings of ``cfg`` (a :class:`~probes.training.recipes.TrainConfig`), from
    the iterations state ``st`` (updated in place after each iteration); returns the
    iterations done in all (``st.it``), the model holding the final parameters.

    After iteration i, ``after_step(first_steps + i, loss of the batch, sync)`` is called;
    ``sync()`` copies the current parameters into the model; True stops the iterations.
    :class:`Diverged` on a non-finite loss."""
    wrapper = _Predictor(model, predict)
    flat = _Flat(model)
    theta = flat.get()
    P = theta.numel()
    mu, nu, memory = st.mu, st.nu, list(st.memory)
    per_sample, dense_ok = st.per_sample, st.dense_ok
    frac = cfg.lm_curvature if st.curvature is None else st.curvature
    low_on = cfg.lm_curvature_dtype == "float32" if st.low is None else st.low
    buffers32 = {n: b.to(torch.float32) if b.is_floating_point() else b
                 for n, b in wrapper.named_buffers()}
    f = math.inf
    linears = _linear_slices(model, flat) if cfg.lm_precondition == "kfac" else None

    def res_one(th: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """One sample's residuals (its x without the batch axis), for the per-sample J."""
        return (functional_call(wrapper, flat.as_dict(th), (xb[None],)) - yb[None]).flatten()

    batch = lm_batch_size(cfg, P, per_sample_residuals(sample))
    held = st.held   # the next batch, drawn ahead
    if st.batch is not None:
        x, y = st.batch

    def draw() -> tuple[torch.Tensor, torch.Tensor]:
        xb, yb = sample(batch, gen)             # drawn on the CPU, then moved
        return tuple(t.to(device=theta.device, dtype=torch.float64) for t in (xb, yb))

    for it in range(st.it, cfg.second_order_steps):
        if deadline is not None and time.perf_counter() > deadline:
            break
        if it % max(cfg.lm_refresh, 1) == 0:
            x, y = held if held is not None else draw()
            held = draw() if cfg.lm_holdout and cfg.lm_refresh == 1 else None

        def res(th: torch.Tensor, x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            return (functional_call(wrapper, flat.as_dict(th), (x,)) - y).flatten()

        def held_loss(th: torch.Tensor, held: tuple[torch.Tensor, torch.Tensor] | None = held
                      ) -> float:
            assert held is not None
            with torch.no_grad():
                rh = (functional_call(wrapper, flat.as_dict(th), (held[0],)) - held[1])
            return float(rh.pow(2).sum())

        t_it = time.perf_counter()
        with torch.no_grad():
            r = res(theta)
        M = r.numel()
        f = 0.5 * float(r.dot(r))
        if not math.isfinite(f):
            raise Diverged(f"loss became {2 * f / M} at step {first_steps + it + 1}")
        dense = (P <= cfg.dense_max_params and M * P <= cfg.dense_max_entries
                 and M <= cfg.dense_max_sample_residuals * x.shape[0])
        jac = None
        if dense and dense_ok:
            if per_sample:
                try:
                    jac = _sample_jacobian(res_one, theta, x, y)
                except (RuntimeError, NotImplementedError):   # an op vmap cannot batch
                    per_sample = False
            if not per_sample:
                try:
                    jac = _batch_jacobian(res, theta, r)
                except (RuntimeError, NotImplementedError):   # no torch.func transform at
                    dense_ok = False                            # all (an autograd.Function)
        dense = jac is not None
        if jac is not None:
            q = (_CholeskyModel if cfg.lm_solve == "cholesky" else _dense_model)(jac, r)
        else:
            sub = max(1, round(frac * x.shape[0]))
            curvature = None
            if sub < x.shape[0]:
                def res_c(th: torch.Tensor, x: torch.Tensor = x[:sub], y: torch.Tensor = y[:sub]
                          ) -> torch.Tensor:
                    return (functional_call(wrapper, flat.as_dict(th), (x,)) - y).flatten()
                curvature = (res_c, x.shape[0] / sub)
            low = None
            if low_on:
                x32, y32 = x[:sub].to(torch.float32), y[:sub].to(torch.float32)

                def low(th: torch.Tensor, x: torch.Tensor = x32, y: torch.Tensor = y32
                        ) -> torch.Tensor:
                    weights = {**buffers32, **flat.as_dict(th.to(torch.float32))}
                    return (functional_call(wrapper, weights, (x,)) - y).flatten()
            # the stopping rule's damping: the smallest this iteration tries
            q = _krylov_model(res, theta, cfg.krylov_dim, cfg.diag_probes, memory, deadline,
                              linears, curvature, low, cfg.krylov_tol,
                              None if mu is None else mu * 10.0 ** -cfg.lm_scan)
        top = max(q.top(), 1e-300)
        if mu is None:
            mu = cfg.lm_damping * top
        mu = min(mu, MU_MAX_RATIO * top)
        held_now = held_loss(theta) if held is not None else None

        def attempt(m: float, q: Any = q, theta: torch.Tensor = theta, f: float = f,
                    held_now: float | None = held_now
                    ) -> tuple[float, float, torch.Tensor, float, float] | None:
            """The step for damping m if it is acceptable: (score, m, d, loss, rho)."""
            d, pred = q.step(m)
            with torch.no_grad():
                rt = res(theta + d)
            ft = 0.5 * float(rt.dot(rt))
            rho = (f - ft) / pred if pred > 0 else -1.0
            if not (math.isfinite(ft) and ft < f and rho > 0):
                return None
            score = ft if held_now is None else held_loss(theta + d)
            if held_now is not None and score >= held_now:
                return None
            return score, m, d, ft, rho

        # automatic damping: the model's step is cheap for any mu, so smaller dampings are
        # tried first (lm_scan of them, 10x apart) and the best acceptable step is taken
        tries = [a for a in (attempt(mu * 10.0 ** -k) for k in range(cfg.lm_scan, -1, -1))
                 if a is not None]
        rho = -1.0
        for _ in range(cfg.lm_max_tries - 1 if not tries else 0):   # lm_max_tries in all
            mu *= nu
            nu *= 2.0
            found = attempt(mu)
            if found is not None:
                tries = [found]
                break
        accepted = bool(tries)
        if accepted:
            _, mu, d, f, rho = min(tries, key=lambda a: a[0])
            theta = theta + d
            memory = ([d] + memory)[:cfg.lm_memory]
            mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            nu = 2.0
        if not accepted:
            nu = 2.0    # keep mu large; the next batch / linearisation starts from it
            if not dense and low_on:   # the curvature cannot place a step: exact products
                low_on = False
            elif not dense:            # then more of the batch
                frac = min(1.0, 2.0 * frac)
        if _log.isEnabledFor(logging.DEBUG):   # q.top() is a power iteration on the dense path
            _log.debug("iteration %d: batch loss %.3e, %s, mu %.2e (top curvature %.2e), "
                       "rho %.2f, held-out %s, %s, %.2f s", it + 1, 2.0 * f / M,
                       "accepted" if accepted else "rejected", mu, q.top(), rho,
                       "-" if held_now is None else f"{held_now:.3e}",
                       "dense" if dense else f"krylov {q.evals.numel()}",
                       time.perf_counter() - t_it)
        mu = min(max(mu, 1e-300), 1e300)
        st.it, st.mu, st.nu, st.memory = it + 1, mu, nu, memory
        st.batch, st.held, st.per_sample, st.dense_ok = (x, y), held, per_sample, dense_ok
        st.curvature, st.low = frac, low_on
        if after_step(first_steps + st.it, 2.0 * f / M, functools.partial(flat.set, theta)):
            break
    flat.set(theta)
    return st.it


def per_sample_residuals(sample: Sampler) -> int:
    """Residuals one sample contributes (the entries of its y), from a one-sample draw of
    a throw-away generator (the training generator is not advanced)."""
    return int(sample(1, torch.Generator().manual_seed(0))[1].numel())


def lm_batch_size(cfg: Any, n_params: int, residuals: int) -> int:
    """Samples per Levenberg-Marquardt batch: ``second_order_batch``, raised so that the batch
    holds at least ``lm_residuals`` x P residuals (a Gauss-Newton step fits P directions to
    the batch's residuals: with fewer residuals than parameters it fits the batch's noise), at
    most ``lm_max_batch``."""
    need = math.ceil(cfg.lm_residuals * n_params / max(residuals, 1))
    return max(cfg.second_order_batch, min(need, cfg.lm_max_batch))


def levenberg_marquardt(model: nn.Module, sample: Sampler, predict: Predict, cfg: Any,
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
