"""The convergence check behind a trained cell's label: can a few Gauss-Newton steps from the
final weights still lower the held-out error?

A first-order method stops on a plateau (a saddle: 001's READ Transformers sit at the MSE of
copying the input) as readily as at a floor, and its validation curve is flat on both. A
Gauss-Newton step sees the curvature of the residuals, so from a saddle it finds the way down.
The check runs :data:`CHECK_STEPS` iterations of the engine (its settings, whatever recipe
trained the model) on a *copy* of the model, on fresh batches of its own seed, and compares
the MSE on a held-out set of its own before and after.

A few Gauss-Newton steps can also fail to lower the MSE on a slope that is not a floor: an
ill-conditioned valley whose downhill direction has low curvature, which a damped step on a
small batch cannot resolve (a depth-2, width-32 Transformer on READ at 2.9e-2 had a check
gain of 1.04-1.12 while the gradients of independent batches pointed the same way, cosine
0.9). So the check also tests whether the expected gradient is distinguishable from zero:
with gradients g_1..g_K of :data:`DRIFT_BATCHES` independent batches, the mean of g_i . g_j
over pairs i < j is an unbiased estimate of |E g|^2 (zero at a stationary point, whatever the
noise), and its jackknife standard error says how far from zero it is (``drift``, a z-score).

A saddle can defeat both: where the expected gradient is zero by symmetry (a model that
predicts 0 for a target odd in the data), the drift is noise, and a few Gauss-Newton steps
cannot leave it (Gauss-Newton's curvature is positive semi-definite and cannot see the way
down). A point is a minimum only when the Hessian has no negative curvature, so the check
also measures the extreme eigenvalues of the held-out loss's Hessian (Lanczos on
Hessian-vector products) and reports the most negative over the largest (``curvature``).

All three measurements see only the residuals of the check's batches, and a task whose
sequence carries few of them (fixed-N least squares: one per sequence; in-context: 21; READ:
800) gives the check too few to see anything: a depth-4, width-64 Transformer at the trivial
predictor of in-context least squares (MSE 5.2, E[y^2] = 5) passed all three with Gauss-Newton
batches of 32 sequences, 0.0033 residuals per parameter. So the check's batches are sized in
residuals: a Gauss-Newton batch holds at least :data:`CHECK_POWER` residuals per parameter
(the held-out set and the drift's batches grow in proportion), up to
:data:`CHECK_MAX_BATCH` sequences; where that cap cannot reach it the check runs at its
smallest size and is *underpowered* (``power``, its residuals per parameter, is stored):
its verdict does not count.

Training has converged (the cell may be labelled ``A``) only when the check is powered, the
gain is at most :data:`CHECK_GAIN`, the drift at most :data:`CHECK_DRIFT` and the curvature
at least :data:`CHECK_CURVATURE`; the power, the gain, the drift, the curvature and the norm of
the held-out loss gradient are stored as the label's evidence.

The check's work is counted as the engine's is (:mod:`probes.training.work`: its iterations,
gradients and Hessian-vector products, by shape), so that training can keep the checks it
runs on the way to a floor to a fixed share of its work (``Validation.CHECK_SHARE`` in
:mod:`probes.training.recipes`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from probes.training.levenberg_marquardt import (
    Diverged,
    LMState,
    Predict,
    Sampler,
    levenberg_marquardt,
    lm_batch_size,
    per_sample_residuals,
)
from probes.training.train_config import TrainConfig
from probes.training.work import WorkLedger, eigh_flops

#: The largest factor by which the check may lower the held-out MSE of a converged model.
CHECK_GAIN = 2.0
#: Engine iterations of the check (READ, D = 4, N = 8, on the plateau, batches of at most
#: 32: 5 lowered the MSE 1.6x, 10 2.3x, 15 6.4x, 20 44x: a saddle is left slowly at first).
CHECK_STEPS = 15
#: Sequences per check Gauss-Newton batch at least (the engine's rule would give a
#: 155k-parameter model ~200; the check must stay a small part of a cell's time) ...
CHECK_MIN_BATCH = 32
#: ... and at most, where a batch of CHECK_MIN_BATCH holds too few residuals.
CHECK_MAX_BATCH = 128
#: Residuals per parameter a check Gauss-Newton batch must hold for the check's verdict to
#: count (module docstring). Between where the check was seen to fail (in-context least
#: squares, 0.0033: the trivial predictor passed) and where it was seen to work (READ's
#: grid, 0.16 and more: saddles and slopes refused).
CHECK_POWER = 0.02
#: The largest z-score of |E g|^2 > 0 a converged model may show (measured, READ: models on
#: the plateau 8.7 (D = 4, N = 8) and 16 (D = 20, N = 40, depth 2, width 32); after the engine
#: 1.2).
CHECK_DRIFT = 4.0
#: The most negative Hessian eigenvalue, relative to the largest, a converged model may show
#: (Lanczos, :data:`CURVATURE_STEPS` Hessian-vector products on the :data:`CHECK_SIZE`
#: held-out sequences). Measured: a 2-layer BaseConv at the trivial predictor of fixed-N least
#: squares (MSE 4.7 against E[y^2] = 5; gain 1.00, drift 1.0: labelled A before) -0.11 (-0.063
#: on 512 sequences); READ's plateau (depth 2, width 32) -1e-4; the explicit-gradient BaseConv
#: at its floor (1e-27) +2.5e-8.
CHECK_CURVATURE = -1e-2
CURVATURE_STEPS = 30
#: Independent batches (of :data:`DRIFT_BATCH` sequences) whose gradients the drift compares.
DRIFT_BATCHES = 8
DRIFT_BATCH = 128
#: Held-out sequences the check measures on (its own seed: not the training or test data).
CHECK_SIZE = 128
#: Offset of the check's seed from the training seed.
CHECK_SEED_OFFSET = 7_000_001


@dataclass(frozen=True)
class Check:
    """before / after: held-out MSE of the final weights and after the check's steps; gain =
    before / after (inf when after is 0); grad_norm: norm of the gradient of the held-out
    MSE at the final weights; drift: z-score of the expected gradient; curvature: the most
    negative Hessian eigenvalue over the largest (module docstring; either NaN where it could
    not be measured, which does not count against convergence); power: residuals per
    parameter in one of the check's Gauss-Newton batches (below :data:`CHECK_POWER`: the
    check could not see, and its verdict does not count); flops: the check's work, counted
    (:mod:`probes.training.work`)."""

    before: float
    after: float
    gain: float
    grad_norm: float
    drift: float = math.nan
    curvature: float = math.nan
    power: float = math.inf
    flops: float = 0.0

    @property
    def powered(self) -> bool:
        """The check's batches held enough residuals for its verdict to count."""
        return self.power >= CHECK_POWER

    @property
    def converged(self) -> bool:
        return (self.powered and self.gain <= CHECK_GAIN and not self.drift > CHECK_DRIFT
                and not self.curvature < CHECK_CURVATURE)


def _held_out_mse(model: nn.Module, predict: Predict, x: torch.Tensor, y: torch.Tensor,
                  grad: bool = False) -> tuple[float, float]:
    """MSE of ``model`` on (x, y) and (``grad``) the norm of its gradient (else NaN)."""
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.set_grad_enabled(grad):
        loss = (predict(model, x) - y).pow(2).mean()
    if not grad:
        return float(loss), math.nan
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    norm = math.sqrt(sum(float(g.pow(2).sum()) for g in grads if g is not None))
    return float(loss.detach()), norm


def gradient_drift(model: nn.Module, sample: Sampler, predict: Predict, seed: int,
                   batches: int = DRIFT_BATCHES, batch: int = DRIFT_BATCH,
                   ledger: WorkLedger | None = None) -> float:
    """z-score of |E g|^2 > 0 for the MSE gradient g of ``model`` (module docstring): the
    U-statistic mean over pairs i < j of g_i . g_j of ``batches`` independent batches of
    ``batch`` sequences (seeds ``seed``, ``seed + 1``, ...) over its jackknife standard
    error. NaN when a gradient is not finite or the error is 0. ``ledger``: counts the
    gradients' FLOPs."""
    ledger = ledger if ledger is not None else WorkLedger()
    params = [p for p in model.parameters() if p.requires_grad]

    def gradient(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        loss = (predict(model, x) - y).pow(2).mean()
        return torch.autograd.grad(loss, params, allow_unused=True)

    grads = []
    for k in range(batches):
        x, y = sample(batch, torch.Generator().manual_seed(seed + k))
        parts = ledger.run(("drift gradient", tuple(x.shape)), gradient, x, y)
        grads.append(torch.cat([torch.zeros(p.numel(), dtype=torch.float64) if g is None
                                else g.detach().reshape(-1).double()
                                for p, g in zip(params, parts, strict=True)]))
    g = torch.stack(grads)
    dots = g @ g.T
    i, j = torch.triu_indices(batches, batches, 1)
    pairs = dots[i, j]
    leave_one_out = torch.stack([pairs[(i != k) & (j != k)].mean() for k in range(batches)])
    se = math.sqrt((batches - 1) / batches
                   * float((leave_one_out - leave_one_out.mean()).pow(2).sum()))
    mean = float(pairs.mean())
    if not (math.isfinite(mean) and math.isfinite(se)) or se == 0:
        return math.nan
    return mean / se


def hessian_curvature(model: nn.Module, predict: Predict, x: torch.Tensor, y: torch.Tensor,
                      steps: int = CURVATURE_STEPS, ledger: WorkLedger | None = None) -> float:
    """lambda_min / lambda_max of the Hessian of the MSE of ``model`` on (x, y): Lanczos
    (fully reorthogonalised, from a seeded random vector) on Hessian-vector products, the
    gradient's double backward (attention through its math kernel: the fused CPU kernels have
    no second derivative). Both ends of the spectrum converge first, so a few tens of
    products find a negative eigenvalue of a saddle. NaN when the model has no second
    derivative or the Hessian is 0. ``ledger``: counts the products' FLOPs (and the
    re-orthogonalisation's, 8 P k for the k-th vector)."""
    ledger = ledger if ledger is not None else WorkLedger()
    params = [p for p in model.parameters() if p.requires_grad]
    key = tuple(x.shape)
    alphas: list[float] = []
    betas: list[float] = []
    try:
        with sdpa_kernel(SDPBackend.MATH):
            def graph() -> tuple[torch.Tensor | None, ...]:
                loss = (predict(model, x) - y).pow(2).mean()
                return torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)

            grads = ledger.run(("hessian graph", key), graph)
            pairs = [(p, g) for p, g in zip(params, grads, strict=True)
                     if g is not None and g.requires_grad]
            if not pairs:
                return math.nan
            flat = torch.cat([g.reshape(-1) for _, g in pairs])
            wrt = [p for p, _ in pairs]
            gen = torch.Generator().manual_seed(0)
            q = torch.randn(flat.numel(), dtype=flat.dtype, generator=gen).to(flat.device)
            basis = [q / q.norm()]
            for _ in range(steps):
                hv = ledger.run(("hessian product", key), torch.autograd.grad, flat, wrt,
                                basis[-1], retain_graph=True, allow_unused=True)
                z = torch.cat([torch.zeros(p.numel(), dtype=flat.dtype, device=flat.device)
                               if h is None else h.reshape(-1)
                               for p, h in zip(wrt, hv, strict=True)]).detach()
                alphas.append(float(z @ basis[-1]))
                V = torch.stack(basis, dim=1)
                ledger.add(8.0 * V.numel())
                for _ in range(2):
                    z = z - V @ (V.T @ z)
                beta = float(z.norm())
                if not math.isfinite(beta) or beta <= 1e-12 * max(abs(a) for a in alphas):
                    break
                betas.append(beta)
                basis.append(z / beta)
    except (RuntimeError, NotImplementedError):   # no double backward through some op
        return math.nan
    k = len(alphas)
    T = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    if k > 1:
        off = torch.tensor(betas[:k - 1], dtype=torch.float64)
        T = T + torch.diag(off, 1) + torch.diag(off, -1)
    evals = torch.linalg.eigvalsh(T)
    ledger.add(eigh_flops(k))
    if not bool(torch.isfinite(evals).all()) or float(evals.abs().max()) == 0:
        return math.nan
    return float(evals[0]) / float(evals[-1]) if float(evals[-1]) > 0 else -math.inf


@dataclass(frozen=True)
class CheckSizes:
    """Sequences in the check's Gauss-Newton batches (at most: the engine's own rule may take
    fewer), its held-out set and each drift batch; ``power``: residuals per parameter in one
    Gauss-Newton batch."""

    batch: int
    held_out: int
    drift_batch: int
    power: float


def check_sizes(n_params: int, residuals: int, engine: TrainConfig) -> CheckSizes:
    """The check's sizes for a model of ``n_params`` parameters whose samples hold
    ``residuals`` residuals each (module docstring): Gauss-Newton batches of
    :data:`CHECK_MIN_BATCH` sequences, raised to hold :data:`CHECK_POWER` residuals per
    parameter where at most :data:`CHECK_MAX_BATCH` sequences do (the held-out set and the
    drift batches grow by the same factor); else the smallest sizes, underpowered.
    ``engine``: the check's resolved engine setting (its batch rule gives the batch used)."""
    residuals = max(residuals, 1)
    need = math.ceil(CHECK_POWER * n_params / residuals)
    cap = max(CHECK_MIN_BATCH, need) if need <= CHECK_MAX_BATCH else CHECK_MIN_BATCH
    used = lm_batch_size(replace(engine, lm_max_batch=cap), n_params, residuals)
    scale = cap / CHECK_MIN_BATCH
    return CheckSizes(batch=cap, held_out=math.ceil(CHECK_SIZE * scale),
                      drift_batch=math.ceil(DRIFT_BATCH * scale),
                      power=used * residuals / max(n_params, 1))


def convergence_check(model: nn.Module, sample: Sampler, predict: Predict,
                      cfg: TrainConfig) -> Check:
    """The check of ``model`` (float64, on the CPU; left unchanged) trained with ``cfg`` (its
    seed, batch size and device are used; the steps are the engine's); its sizes from
    :func:`check_sizes`."""
    engine = TrainConfig(recipe="engine", steps=0, batch_size=cfg.batch_size,
                         second_order_steps=CHECK_STEPS, second_order_batch=8,
                         seed=cfg.seed).resolved()
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    sizes = check_sizes(n_params, per_sample_residuals(sample), engine)
    engine = replace(engine, lm_max_batch=sizes.batch)
    seed = cfg.seed + CHECK_SEED_OFFSET
    x, y = sample(sizes.held_out, torch.Generator().manual_seed(seed))
    trial = copy.deepcopy(model).double()
    trial.eval()
    ledger, key = WorkLedger(), tuple(x.shape)
    before, grad_norm = ledger.run(("held-out gradient", key), _held_out_mse, trial, predict,
                                   x, y, grad=True)
    drift = gradient_drift(trial, sample, predict, seed + 2, batch=sizes.drift_batch,
                           ledger=ledger)
    curvature = hessian_curvature(trial, predict, x, y, ledger=ledger)
    state = LMState()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            levenberg_marquardt(trial, sample, predict, engine,
                                torch.Generator().manual_seed(seed + 1), 0, None,
                                lambda *_: False, state)
        except Diverged:
            pass      # the check's own trouble says nothing about the model: gain 1
        after, _ = ledger.run(("held-out", key), _held_out_mse, trial, predict, x, y)
    if not math.isfinite(after) or after >= before:
        after = before
    gain = 1.0 if before == 0 else before / after if after > 0 else math.inf
    return Check(before=before, after=after, gain=gain, grad_norm=grad_norm, drift=drift,
                 curvature=curvature, power=sizes.power, flops=ledger.flops + state.flops)
