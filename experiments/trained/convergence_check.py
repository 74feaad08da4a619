"""The convergence check behind a trained cell's label: can a few Gauss-Newton steps from the
final weights still lower the held-out error?

A first-order method stops on a plateau (a saddle: 001's READ Transformers sit at the MSE of
copying the input) as readily as at a floor, and its validation curve is flat on both. A
Gauss-Newton step sees the curvature of the residuals, so from a saddle it finds the way down.
The check runs :data:`CHECK_STEPS` iterations of the engine (its settings, whatever recipe
trained the model) on a *copy* of the model, on fresh batches of its own seed, and compares
the MSE on a held-out set of its own before and after. Training has converged (the cell may
be labelled ``A``) only when the gain is at most :data:`CHECK_GAIN`; the gain and the norm of
the held-out loss gradient are stored as the label's evidence.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from experiments.trained.levenberg_marquardt import Diverged, Predict, Sampler, levenberg_marquardt
from experiments.trained.train_config import TrainConfig

#: The largest factor by which the check may lower the held-out MSE of a converged model.
CHECK_GAIN = 2.0
#: Engine iterations of the check (READ, D = 4, N = 8, on the plateau, batches of at most
#: 32: 5 lowered the MSE 1.6x, 10 2.3x, 15 6.4x, 20 44x: a saddle is left slowly at first).
CHECK_STEPS = 15
#: Sequences per check batch at most (the engine's rule would give a 155k-parameter model
#: ~200; the check must stay a small part of a cell's time).
CHECK_MAX_BATCH = 32
#: Held-out sequences the check measures on (its own seed: not the training or test data).
CHECK_SIZE = 128
#: Offset of the check's seed from the training seed.
CHECK_SEED_OFFSET = 7_000_001


@dataclass(frozen=True)
class Check:
    """before / after: held-out MSE of the final weights and after the check's steps; gain =
    before / after (inf when after is 0); grad_norm: norm of the gradient of the held-out
    MSE at the final weights."""

    before: float
    after: float
    gain: float
    grad_norm: float

    @property
    def converged(self) -> bool:
        return self.gain <= CHECK_GAIN


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


def convergence_check(model: nn.Module, sample: Sampler, predict: Predict,
                      cfg: TrainConfig) -> Check:
    """The check of ``model`` (float64, on the CPU; left unchanged) trained with ``cfg`` (its
    seed, batch size and device are used; the steps are the engine's)."""
    engine = replace(TrainConfig(recipe="engine", steps=0, batch_size=cfg.batch_size,
                                 second_order_steps=CHECK_STEPS, second_order_batch=8,
                                 seed=cfg.seed).resolved(), lm_max_batch=CHECK_MAX_BATCH)
    seed = cfg.seed + CHECK_SEED_OFFSET
    x, y = sample(CHECK_SIZE, torch.Generator().manual_seed(seed))
    trial = copy.deepcopy(model).double()
    trial.eval()
    before, grad_norm = _held_out_mse(trial, predict, x, y, grad=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            levenberg_marquardt(trial, sample, predict, engine,
                                torch.Generator().manual_seed(seed + 1), 0, None,
                                lambda *_: False)
        except Diverged:
            pass      # the check's own trouble says nothing about the model: gain 1
        after, _ = _held_out_mse(trial, predict, x, y)
    if not math.isfinite(after) or after >= before:
        after = before
    gain = 1.0 if before == 0 else before / after if after > 0 else math.inf
    return Check(before=before, after=after, gain=gain, grad_norm=grad_norm)
