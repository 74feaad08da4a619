"""Training: ``train(model, sample, predict, cfg)`` runs the recipe ``cfg.recipe`` (the
registered :class:`~probes.training.recipe_book.Recipe` objects say what each one is).

Every model maps (batch, N, d_in) -> (batch, N, d_out); ``sample(batch, gen)`` draws a fresh
batch ``(x, y)`` in float64 (x: (batch, N, d_in), y: whatever ``predict`` returns, e.g.
(batch, N, d_out)); ``predict(model, x)`` maps the model output to the shape of y. The loss
is the mean squared error over all entries of y.

Every recipe's Adam phase clips the gradient to norm ``clip`` when ``clip > 0`` (deep linear
attention without LayerNorm needs it: its output is a polynomial of degree 3^L in the input).

Determinism: data come from ``torch.Generator().manual_seed(seed)``; parameter-side
randomness (none in these recipes, but models may use dropout) from ``torch.manual_seed(seed)``
inside ``torch.random.fork_rng``, so the caller's global RNG is untouched and the same config
gives bit-identical results (on the same machine and thread count).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from precision.metrics import detect_floor
from precision.provenance import code_version
from probes.training.checkpoint import Checkpoint, Paused, Phase
from probes.training.checkpoint_check import check_saved, restoring
from probes.training.convergence_check import Check, convergence_check
from probes.training.format_training import FormatTraining, LossScale, training_precision
from probes.training.levenberg_marquardt import (
    Diverged,
    LMState,
    Predict,
    Sampler,
    budget_spent,
    levenberg_marquardt,
)
from probes.training.recipe_book import RECIPES as RECIPE_BOOK
from probes.training.train_config import RECIPES, SECOND_ORDER, UNTIL, TrainConfig


@dataclass
class TrainResult:
    """curve: (step, training loss) subsampled, includes the last step; steps: steps done
    (first + second order); status "ok" | "diverged"; lr_trace: (step, lr) where it changed
    (first entry: step 0 and the initial lr; the constant / cosine recipes' rate is
    :func:`scheduled_rate` and not traced); curve_times: wall seconds of each curve point;
    val_curve / converged / stop_reason: see :class:`Validation`."""

    curve: list[tuple[int, float]]
    steps: int
    status: str
    message: str
    wall_time: float
    lr_trace: list[tuple[int, float]] = field(default_factory=list)
    curve_times: list[float] = field(default_factory=list)  # seconds since start, per point
    #: (step, MSE on a fixed held-out set) during training, ending at the final model
    val_curve: list[tuple[int, float]] = field(default_factory=list)
    #: wall seconds since the start of training at each val_curve point
    val_times: list[float] = field(default_factory=list)
    #: the engine's FLOPs done at each val_curve point (0 in the Adam phase): the
    #: time-to-floor curve in work, the same on every machine
    val_flops: list[float] = field(default_factory=list)
    #: the validation curve reached its plateau (None: no validation curve)
    converged: bool | None = None
    #: why training stopped: "steps" (its step budget), "work" (the engine's FLOP budget,
    #: ``engine_flops``), "floor" (until = "floor": the held-out curve plateaued and the
    #: convergence check passed), "time limit" (the wall-clock safety stop), "diverged"
    stop_reason: str = "steps"
    #: the convergence check that confirmed the floor (stop_reason "floor"), of the final
    #: weights; None otherwise
    check: Check | None = None
    #: plateaus of the held-out curve that the convergence check refused (until = "floor")
    refused_floors: int = 0
    #: floating-point operations of the second-order iterations (probes.training.work)
    engine_flops: float = 0.0
    #: ... and of the convergence checks run on the way (until = "floor"), counted alike
    check_flops: float = 0.0
    #: a format training's loss scale at the end (0: not scaled) and the steps it skipped
    #: on a gradient overflow (probes.training.format_training.LossScale)
    loss_scale: float = 0.0
    skipped_steps: int = 0
    #: the code that trained (:func:`precision.provenance.code_version`): kept weights are
    #: measured by later code, and their records say which code made them
    code: str = ""
    #: where training started: "fresh" (the seeded init) or "contained <job id> (depth d,
    #: held-out MSE m)", the kept weights it was embedded from (probes.training.warm_start)
    start: str = "fresh"


class Validation:
    """The validation curve: MSE of the model on a fixed held-out set of sequences.

    The set is drawn once from its own generator (seed + :data:`VALIDATION_SEED_OFFSET`), so
    the training batches, and so every trained number, are the same with or without it. A
    measurement is taken every ``every`` Adam steps, every ``second_every`` iterations of the
    second-order phase (``validation_points`` in each phase) and at the end.
    :meth:`plateaued` applies the one floor detector (:func:`precision.metrics.detect_floor`)
    to the curve: *converged*
    means the held-out error stopped falling, whatever the training loss does; a run whose
    curve is still falling at the end was cut by its budget (training-limited).

    With ``until = "floor"`` a plateau stops training only if ``confirm()`` (when set) says
    it is a floor; a refused plateau (a saddle, a slow valley) is counted in ``refused`` and
    looked for again from the next measurement on, after :data:`MIN_POINTS` more, and once
    training has done enough work since that the checks stay within :data:`CHECK_SHARE` of
    it (a check reports its cost to :meth:`checked`; its work is counted, not timed).
    """

    #: Minimum measurements before the curve can be called a plateau (``until = "floor"``).
    MIN_POINTS = 20
    #: The plateau test judges at least the last half of those (the floor detector's tail is
    #: a fifth of the curve: 4 of 20 points, too few for its steady-fall test, which needs 6
    #: blocks, so a curve falling 0.05-0.1 decades every point passed as flat: the engine's
    #: AFFINE cells stopped at 10^-6.1 and 10^-5.8 while still falling that way).
    MIN_TAIL = MIN_POINTS // 2
    #: ... and calls it flat when it falls less than this many decades across that tail (the
    #: detector's default 0.5 let an AFFINE curve falling 0.36 decades in 10 points, one tie
    #: among them, stop at 10^-6.7; 0.1 over 30 engine iterations is a decade per 300).
    PLATEAU_DECADES = 0.1
    #: The convergence checks that training runs on plateaus take at most this share of the
    #: work since the first one: after a refused check of cost C, the next waits until the
    #: engine has done C (1 - share) / share more (a check of READ, depth 1, width 32 costs
    #: about 18 engine iterations, so the next waits at least 72 iterations, not 60).
    CHECK_SHARE = 0.2

    def __init__(self, model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
                 total_steps: int) -> None:
        gen = torch.Generator().manual_seed(cfg.seed + VALIDATION_SEED_OFFSET)
        self.x, self.y = (t.to(cfg.device) for t in sample(cfg.validation_size, gen))
        self.model, self.predict = model, predict
        self.every = max(1, math.ceil(total_steps / max(cfg.validation_points, 1)))
        #: the second-order phase's own cadence: its iterations are few and each costs far
        #: more than a measurement, so they get ``validation_points`` of their own, or a
        #: measurement every ``validation_every`` iterations where the count is only a cap
        self.second_every = cfg.validation_every or max(
            1, math.ceil(cfg.second_order_steps / max(cfg.validation_points, 1)))
        self.second_from = 0   # the step the second-order phase starts after
        self.until_floor = cfg.until == "floor"
        self.curve: list[tuple[int, float]] = []
        self.times: list[float] = []
        self.flops: list[float] = []   # the engine's work at each point (``work()``)
        self.work: Callable[[], float] = lambda: 0.0
        self.t0 = time.perf_counter()
        self.stop = False
        self.floor_from = 0   # the plateau is looked for from this point of the curve on
        self.keep_best = cfg.keep_best
        self.best: tuple[float, int, list[torch.Tensor]] | None = None  # (mse, step, weights)
        self.confirm: Callable[[], bool] | None = None
        self.refused = 0
        self.check_flops = 0.0     # the work of the checks run on plateaus (``checked``)
        self.check_last = (0.0, 0.0)   # (the work() at the last check's end, its cost)
        self.priced = False   # work() counts (the engine's phase): checks keep their share

    def measure(self, step: int) -> None:
        """Record the held-out MSE at ``step`` (in the model's current dtype)."""
        if self.curve and self.curve[-1][0] == step:
            return
        dtype = next((p.dtype for p in self.model.parameters()), torch.float64)
        was_training = self.model.training
        self.model.eval()   # no running statistics are touched by the held-out pass
        with torch.no_grad():
            mse = float(_mse(self.predict(self.model, self.x.to(dtype)), self.y.to(dtype)))
        self.model.train(was_training)
        self.curve.append((step, mse))
        if self.keep_best and math.isfinite(mse) and (self.best is None or mse < self.best[0]):
            self.best = (mse, step, [p.detach().clone() for p in self.model.parameters()])
        self.times.append(time.perf_counter() - self.t0)
        self.flops.append(self.work())
        if self.until_floor and len(self.curve) - self.floor_from >= self.MIN_POINTS and \
                self.check_due() and self.plateaued(self.floor_from):
            if self.confirm is None or self.confirm():
                self.stop = True
            else:
                self.refused += 1
                self.floor_from = len(self.curve)

    def check_due(self) -> bool:
        """The work since the last check is at least its cost (1 - share) / share: a check
        now keeps the checks within :data:`CHECK_SHARE` of the work."""
        if not self.priced:   # an Adam phase's work is not counted: MIN_POINTS alone
            return True
        at, cost = self.check_last
        return self.work() - at >= cost * (1.0 - self.CHECK_SHARE) / self.CHECK_SHARE

    def checked(self, flops: float) -> None:
        """A convergence check of cost ``flops`` has just run."""
        self.check_flops += flops
        self.check_last = (self.work(), flops)

    def after_step(self, step: int) -> bool:
        """Measure when due; True when training should stop (``until = "floor"``)."""
        if step % self.every == 0:
            self.measure(step)
        return self.stop

    def plateaued(self, start: int = 0) -> bool | None:
        """Whether the curve (from its point ``start`` on) reached its floor (None with fewer
        than 4 finite points)."""
        logs = [math.log10(v) if v > 0 else -math.inf for _, v in self.curve[start:]
                if math.isfinite(v)]
        if len(logs) < 4:
            return None
        return detect_floor([10.0**v if v > -300 else 0.0 for v in logs],
                            log10_trace=logs, min_tail=self.MIN_TAIL,
                            tol_decades=self.PLATEAU_DECADES).reached


#: Offset of the validation set's seed from the training seed.
VALIDATION_SEED_OFFSET = 2_000_029  # the test set uses seed + 1_000_003


class _Curve:
    """Keeps every ``stride``-th (step, loss) plus the last one: at most ``points`` entries."""

    def __init__(self, total_steps: int, points: int) -> None:
        self.t0 = time.perf_counter()
        self.times: list[float] = []
        self.last_time = 0.0
        self.stride = max(1, math.ceil(total_steps / max(points - 1, 1)))
        self.points: list[tuple[int, float]] = []
        self.last: tuple[int, float] | None = None

    def add(self, step: int, loss: float) -> None:
        self.last = (step, loss)
        self.last_time = time.perf_counter() - self.t0
        if step % self.stride == 0 or step == 1:
            self.points.append((step, loss))
            self.times.append(self.last_time)

    def finish(self) -> tuple[list[tuple[int, float]], list[float]]:
        pts, times = list(self.points), list(self.times)
        if self.last is not None and (not pts or pts[-1][0] != self.last[0]):
            pts.append(self.last)
            times.append(self.last_time)
        return pts, times


class AdaptiveLR:
    """Step learning rate that decreases *or* increases from a gradient-variance signal.

    Rule (checked every ``window`` = W steps, on the raw minibatch gradients g_1..g_W of the
    window and the losses l_1..l_W):

    * gbar = mean g_k, sigma^2 = sum_k ||g_k - gbar||^2 / (W - 1) (per-step noise power),
      and the *window SNR* snr = (||gbar||^2 - sigma^2 / W) / (sigma^2 / W): the squared
      drift of the window mean over its own noise (E ||gbar||^2 = ||mu||^2 + sigma^2 / W).
      Over a window, the drift moves the parameters ~ W |mu| and the noise ~ sqrt(W) sigma,
      so snr < 1 means the window made no systematic progress, only noise.
    * trend = mean loss of the window's second half / mean loss of its first half.
    * noise dominates (snr < snr_low) or the loss rose (trend > 1.05): lr *= lr_down;
    * signal dominates (snr > snr_high) and the loss fell (trend < 0.99): lr *= lr_up;
    * otherwise lr is kept. lr stays in [lr0 * lr_min_factor, lr0 * lr_max_factor].

    Lowering the rate when noise dominates lowers the SGD noise floor; raising it while the
    gradient is consistent speeds the deterministic phase. 001 (App. D.1) uses a fixed StepLR;
    its ICLR'25 version describes an adaptive scheduler of this kind (text not available to
    us, so the rule above is our design).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> None:
        self.opt = optimizer
        self.lr = cfg.lr
        self.lo = cfg.lr * cfg.lr_min_factor
        self.hi = cfg.lr * cfg.lr_max_factor
        self.cfg = cfg
        self.window = max(4, cfg.window)
        self._reset()
        self.last_snr = float("nan")
        self.last_trend = float("nan")

    def _reset(self) -> None:
        self.gsum: torch.Tensor | None = None
        self.sqsum = 0.0
        self.losses: list[float] = []

    def observe(self, grad: torch.Tensor, loss: float) -> bool:
        """Record one step's flat float64 gradient and loss; True when the lr changed."""
        self.gsum = grad.clone() if self.gsum is None else self.gsum + grad
        self.sqsum += float(grad.dot(grad))
        self.losses.append(loss)
        if len(self.losses) < self.window:
            return False
        w = len(self.losses)
        gbar = self.gsum / w
        mean2 = float(gbar.dot(gbar))
        sigma2 = max((self.sqsum - w * mean2) / (w - 1), 0.0)
        noise = sigma2 / w
        snr = (mean2 - noise) / noise if noise > 0 else math.inf
        half = w // 2
        first = sum(self.losses[:half]) / half
        second = sum(self.losses[half:]) / (w - half)
        trend = second / first if first > 0 else 1.0
        self.last_snr, self.last_trend = snr, trend
        self._reset()
        cfg = self.cfg
        new = self.lr
        if snr < cfg.snr_low or trend > 1.05:
            new = self.lr * cfg.lr_down
        elif snr > cfg.snr_high and trend < 0.99:
            new = self.lr * cfg.lr_up
        new = min(max(new, self.lo), self.hi)
        if new == self.lr:
            return False
        self.lr = new
        for group in self.opt.param_groups:
            group["lr"] = new
        return True


def _params_finite(params: list[torch.Tensor]) -> bool:
    total = torch.stack([p.detach().double().sum() for p in params]).sum()
    return bool(torch.isfinite(total))


def _mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (pred - y).pow(2).mean()


def batch_gradient(model: nn.Module, predict: Predict, x: torch.Tensor, y: torch.Tensor,
                   micro_batch: int = 0, seed: torch.Tensor | None = None) -> float:
    """Add the gradient of the batch MSE, mean over all entries of (predict(model, x) - y)^2,
    to the parameters' ``.grad`` and return the MSE. x (batch, N, d_in), y (batch, ...).

    micro_batch > 0: forward and backward in passes of that many sequences, each pass's sum
    of squares divided by the batch's entry count, so the accumulated gradient is the batch
    gradient up to rounding (summation order). It trades nothing but Python overhead for
    activations small enough to stay in the CPU's cache. No backward is run (and nothing is
    added) after a pass whose loss is not finite; the non-finite value is returned.

    ``seed``: a scalar tensor S that seeds each backward instead of 1 (loss scaling,
    :mod:`probes.training.format_training`): ``.grad`` receives S times the gradient. (Made
    by the caller before it enters a rounding mode, so S itself is not rounded.)"""
    if micro_batch <= 0 or micro_batch >= x.shape[0]:
        loss = _mse(predict(model, x), y)
        value = float(loss.detach())
        if math.isfinite(value):
            loss.backward(seed)
        return value
    total = 0.0
    for xs, ys in zip(x.split(micro_batch), y.split(micro_batch), strict=True):
        part = (predict(model, xs) - ys).pow(2).sum() / y.numel()
        value = float(part.detach())
        if not math.isfinite(value):
            return value
        part.backward(seed)
        total += value
    return total


def scheduled_rate(cfg: TrainConfig, step: int) -> float:
    """Learning rate of Adam step ``step`` (1-based) for the constant / cosine recipes: linear
    warm-up over ``cfg.warmup`` steps, then cfg.lr or lr * (1 + cos(pi * t)) / 2 with t going
    from 0 at the end of the warm-up to 1 at ``cfg.steps``."""
    if step <= cfg.warmup:
        return cfg.lr * step / cfg.warmup
    if RECIPE_BOOK[cfg.recipe].schedule == "cosine":
        frac = (step - 1 - cfg.warmup) / max(cfg.steps - cfg.warmup, 1)
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * frac))
    return cfg.lr


#: save(done, tensors, state): write a checkpoint of the training after step ``done`` with the
#: phase's own ``tensors`` and ``state`` added to the common ones (:func:`train`)
Save = Callable[[int, dict[str, torch.Tensor], dict[str, Any]], None]


def _first_order(model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
                 scheduler: str, dtype: torch.dtype, gen: torch.Generator, curve: _Curve,
                 lr_trace: list[tuple[int, float]], deadline: float | None,
                 val: Validation | None = None, checkpoint: Checkpoint | None = None,
                 save: Save | None = None,
                 resume: tuple[dict[str, torch.Tensor], dict[str, Any]] | None = None,
                 fmt: FormatTraining | None = None) -> int:
    """Adam for cfg.steps steps with ``scheduler`` "step" (StepLR), "adaptive", "constant" or
    "cosine" (:func:`scheduled_rate`); returns the steps done; raises :class:`Diverged` on a
    non-finite loss or parameters. With a ``checkpoint``, ``save`` writes the state when due
    and at the end of the slice (then :class:`Paused` is raised); ``resume``: the saved
    tensors and state to go on from (the model, data and curves already restored); ``fmt``:
    a format training's gradients (:mod:`probes.training.format_training`)."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    periods = RECIPE_BOOK[cfg.recipe].step_periods   # 001 App. E.2: the period scales
    step_size = max(1, cfg.steps // periods) if periods else cfg.step_size
    steplr = torch.optim.lr_scheduler.StepLR(opt, step_size=step_size, gamma=cfg.gamma) \
        if scheduler == "step" else None
    adaptive = AdaptiveLR(opt, cfg) if scheduler == "adaptive" else None
    done = 0
    if resume is not None:
        with restoring(checkpoint.path if checkpoint is not None else "?"):
            done = _restore_adam(resume, opt, steplr, adaptive)
            if fmt is not None and fmt.scaler is not None and "loss_scale" in resume[1]:
                fmt.scaler = LossScale.from_state(resume[1]["loss_scale"], fmt.carrier)

    def save_adam(step: int) -> None:
        if save is None:
            return
        sd = opt.state_dict()
        tensors = {f"adam.{i}.{k}": v for i, st in sd["state"].items() for k, v in st.items()}
        state: dict[str, Any] = {"adam_groups": sd["param_groups"],
                                 "adam_keys": sorted(sd["state"])}
        if steplr is not None:
            state["steplr"] = steplr.state_dict()
        if adaptive is not None:
            state["adaptive"] = {"lr": adaptive.lr, "sqsum": adaptive.sqsum,
                                 "losses": adaptive.losses, "snr": adaptive.last_snr,
                                 "trend": adaptive.last_trend}
            if adaptive.gsum is not None:
                tensors["adaptive.gsum"] = adaptive.gsum
        if fmt is not None and fmt.scaler is not None:
            state["loss_scale"] = fmt.scaler.state()
        save(step, tensors, state)

    for step in range(done + 1, cfg.steps + 1):
        if deadline is not None and time.perf_counter() > deadline:
            break
        if scheduler in ("constant", "cosine"):
            for group in opt.param_groups:
                group["lr"] = scheduled_rate(cfg, step)
        x, y = sample(cfg.batch_size, gen)   # on the CPU: the same batches on every device
        opt.zero_grad(set_to_none=True)
        skip = False
        if fmt is not None:
            lval, skip = fmt.gradient(model, predict, x, y, step, cfg.micro_batch,
                                      batch_gradient)
        else:
            lval = batch_gradient(model, predict, x.to(cfg.device, dtype),
                                  y.to(cfg.device, dtype), cfg.micro_batch)
        if not math.isfinite(lval):
            raise Diverged(f"loss became {lval} at step {step}")
        if cfg.clip > 0 and not skip:
            torch.nn.utils.clip_grad_norm_(params, cfg.clip)
        if not skip:   # a skipped step: a gradient overflowed the loss scale (halved)
            opt.step()
            if fmt is not None:
                fmt.store(model, step)   # master_dtype "none": the weights back in the format
        done = step
        curve.add(step, lval)
        if not _params_finite(params):
            raise Diverged(f"parameters became non-finite at step {step}")
        if steplr is not None:
            before = opt.param_groups[0]["lr"]
            steplr.step()
            after = opt.param_groups[0]["lr"]
            if after != before:
                lr_trace.append((step, after))
        if adaptive is not None:
            grad = torch.cat([p.grad.detach().double().flatten() for p in params
                              if p.grad is not None])
            if adaptive.observe(grad, lval):
                lr_trace.append((step, adaptive.lr))
        if val is not None and val.after_step(step):
            break
        if checkpoint is not None:
            if checkpoint.pause_due():
                save_adam(step)
                raise Paused(f"paused after step {step}")
            if checkpoint.save_due():
                save_adam(step)
    return done


def _restore_adam(resume: tuple[dict[str, torch.Tensor], dict[str, Any]],
                  opt: torch.optim.Optimizer, steplr: Any, adaptive: AdaptiveLR | None) -> int:
    """Adam's moments, the schedule and the adaptive rate's window from a checkpoint; the
    steps done."""
    tensors, state = resume
    opt.load_state_dict({
        "state": {i: {k.rsplit(".", 1)[1]: v for k, v in tensors.items()
                      if k.startswith(f"adam.{i}.")} for i in state["adam_keys"]},
        "param_groups": state["adam_groups"]})
    if steplr is not None:
        steplr.load_state_dict(state["steplr"])
    if adaptive is not None:
        a = state["adaptive"]
        adaptive.lr, adaptive.sqsum, adaptive.losses = a["lr"], a["sqsum"], list(a["losses"])
        adaptive.last_snr, adaptive.last_trend = a["snr"], a["trend"]
        gsum = tensors.get("adaptive.gsum")
        device = opt.param_groups[0]["params"][0].device
        adaptive.gsum = None if gsum is None else gsum.to(device)
    return int(state["done"])


def train(model: nn.Module, sample: Sampler, predict: Predict, cfg: TrainConfig,
          checkpoint: Checkpoint | None = None) -> TrainResult:
    """Train ``model`` in place with recipe ``cfg.recipe``; never raises on divergence.

    The model is cast to ``cfg.training_precision`` for training (``cfg.dtype``; the
    second-order recipes: float64 throughout; a simulated format: its master weights are
    the model's, in ``cfg.master_dtype``, :mod:`probes.training.format_training`) and moved
    to ``cfg.device``; it is left in float64 on the CPU at the end. Loss: mean over all
    entries of (predict(model, x) - y)^2, x (batch, N, d_in) and y from ``sample`` (float64,
    drawn on the CPU, cast to the training dtype).

    ``checkpoint`` (:mod:`probes.training.checkpoint`): go on from its saved state, save
    the state as training goes, and raise :class:`~probes.training.checkpoint.Paused` at
    the end of its slice; a finished training is saved with its result and returned as it was.
    """
    second_order = cfg.second_order  # cfg was validated when it was made
    check_cfg = cfg
    cfg = cfg.resolved()
    dtype = cfg.weights_dtype.torch_dtype   # a format training: its master weights' dtype
    saved = checkpoint.load() if checkpoint is not None else None
    where = checkpoint.path if checkpoint is not None else "?"
    # checked against the job's model before any of it is used (keys, shapes, random states)
    phase = Phase.FIRST_ORDER if saved is None else check_saved(where, saved, model)
    if saved is not None and phase is Phase.DONE:
        with restoring(where):
            return _finished(model, saved)
    start = time.perf_counter() - (float(saved[1]["elapsed"]) if saved is not None else 0.0)
    deadline = None if cfg.time_limit is None else start + cfg.time_limit
    total = cfg.steps + (cfg.second_order_steps if second_order else 0)
    curve = _Curve(max(total, 1), cfg.curve_points)
    curve.t0 = start
    lr_trace: list[tuple[int, float]] = [(0, cfg.lr)]
    status, message, done = "ok", "", 0
    model.to(device=cfg.device, dtype=dtype)
    model.train()
    # a format training: each step's gradient computed in the format, Adam on the master
    # weights (the model's parameters, in cfg.master_dtype)
    fmt = FormatTraining(model, training_precision(cfg.precision, cfg.seed),
                         cfg.loss_scaling, in_format=cfg.master_dtype == "none") \
        if cfg.is_format else None
    val = Validation(model, sample, predict, cfg, max(cfg.steps if second_order else total, 1)) \
        if cfg.validation_size > 0 else None
    if val is not None:
        val.t0 = start
    if val is not None and second_order:
        val.until_floor = False   # Adam only warms the engine up: its plateau is not a floor
    confirmed: list[Check] = []
    if val is not None:
        def confirm() -> bool:
            """A plateau is a floor only if the convergence check of the weights training
            would end on (the best so far with keep_best) passes: the same rule as the
            label's, so a run never stops where its label would be ``T``."""
            trial = copy.deepcopy(model).to(device="cpu", dtype=torch.float64)
            if val.best is not None:
                _copy_weights(trial, val.best[2])
            check = convergence_check(trial, sample, predict, check_cfg)
            val.checked(check.flops)
            confirmed[:] = [check] if check.converged else []
            return check.converged
        val.confirm = confirm

    lm_state = LMState()
    if saved is not None and phase is Phase.SECOND_ORDER_RUNNING:
        with restoring(where):
            lm_state = LMState.from_checkpoint(saved[0], saved[1]["lm"], cfg.device)
    if val is not None:
        val.work = lambda: lm_state.flops

    def after_lm_step(step: int, loss: float, sync: Callable[[], None]) -> bool:
        curve.add(step, loss)
        # the phase's own cadence only (after_step's Adam cadence on top of it kept one
        # measurement in lcm(second_every, every) iterations: 1 in 30 in the floor profiles)
        if val is not None and (step - val.second_from) % val.second_every == 0:
            sync()
            val.measure(step)
            if val.stop:
                return True
        pause = checkpoint is not None and checkpoint.pause_due()
        if pause or (checkpoint is not None and checkpoint.save_due()):
            sync()   # the model holds the parameters; lm_state the rest
            lm_t, lm_s = lm_state.to_checkpoint()
            save(step, lm_t, {"lm": lm_s}, at=Phase.SECOND_ORDER_RUNNING)
            if pause:
                raise Paused(f"paused in the second-order phase at step {step}")
        return False

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        gen = torch.Generator().manual_seed(cfg.seed)
        if saved is not None:
            with restoring(where):
                done = _restore_common(saved, model, gen, curve, lr_trace, val)

        def save(step: int, tensors: dict[str, torch.Tensor], state: dict[str, Any],
                 at: Phase = Phase.FIRST_ORDER) -> None:
            assert checkpoint is not None
            common_t, common_s = _common_state(model, gen, curve, lr_trace, val)
            checkpoint.save({**common_t, **tensors},
                            {**common_s, **state, "phase": at, "done": step,
                             "elapsed": time.perf_counter() - start})

        try:
            if phase is Phase.FIRST_ORDER:
                done = _first_order(model, sample, predict, cfg,
                                    RECIPE_BOOK[cfg.recipe].schedule, dtype, gen, curve,
                                    lr_trace, deadline, val, checkpoint,
                                    save if checkpoint is not None else None, saved, fmt)
                if checkpoint is not None and second_order and not (val is not None and val.stop):
                    save(done, {}, {}, at=Phase.SECOND_ORDER)   # a pause resumes here
            adam_done = done - lm_state.it
            if val is not None and second_order:   # the engine's plateau is the floor
                val.until_floor, val.second_from = cfg.until == "floor", adam_done
                val.priced = True
                if phase is not Phase.SECOND_ORDER_RUNNING:   # (a resumed one's: in its state)
                    val.floor_from = len(val.curve)
            if second_order and not (val is not None and val.stop):
                done = adam_done + levenberg_marquardt(model, sample, predict, cfg, gen,
                                                       adam_done, deadline, after_lm_step,
                                                       lm_state)
        except Diverged as exc:
            status, message = "diverged", str(exc)
            done = curve.last[0] if curve.last is not None else 0
    stop = "diverged" if status == "diverged" else "floor" if val is not None and val.stop \
        else "steps" if done >= total else "work" if second_order and budget_spent(cfg, lm_state) \
        else "time limit"
    converged = None
    if val is not None and status == "ok":
        val.measure(done)   # the curve ends at the final model
        if val.best is not None and val.best[1] != done:   # keep_best: end on the best weights
            _copy_weights(model, val.best[2])
            val.curve[-1] = (done, val.best[0])   # the curve ends at the final model
        # a run stopped at a floor passed this test on the curve since its last refused
        # plateau (and the check): judging the whole curve again could disagree with it
        converged = True if stop == "floor" else val.plateaued()
    model.to(device="cpu", dtype=torch.float64)
    points, times = curve.finish()
    result = TrainResult(curve=points, curve_times=times, steps=done, status=status,
                         message=message, wall_time=time.perf_counter() - start,
                         lr_trace=lr_trace,
                         val_curve=list(val.curve) if val is not None else [],
                         val_times=list(val.times) if val is not None else [],
                         val_flops=list(val.flops) if val is not None else [],
                         converged=converged, stop_reason=stop,
                         check=confirmed[0] if stop == "floor" and confirmed else None,
                         refused_floors=val.refused if val is not None else 0,
                         engine_flops=lm_state.flops,
                         check_flops=val.check_flops if val is not None else 0.0,
                         loss_scale=fmt.scaler.scale if fmt and fmt.scaler else 0.0,
                         skipped_steps=fmt.scaler.skipped if fmt and fmt.scaler else 0,
                         code=code_version())
    if checkpoint is not None:   # kept until the job's records are made
        state = {k: v for k, v in asdict(result).items() if k != "check"}
        checkpoint.save(_model_tensors(model), {"phase": Phase.DONE, "result": state})
    return result


def _copy_weights(model: nn.Module, weights: list[torch.Tensor]) -> None:
    """Put ``weights`` (one per parameter, in order) into ``model``'s parameters."""
    with torch.no_grad():
        for p, b in zip(model.parameters(), weights, strict=True):
            p.copy_(b)


def _model_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    return {f"model.{k}": v for k, v in model.state_dict().items()}


def _load_model_tensors(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """The inverse of :func:`_model_tensors` (the checkpoint's other tensors left alone)."""
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items()
                           if k.startswith("model.")})


def _common_state(model: nn.Module, gen: torch.Generator, curve: _Curve,
                  lr_trace: list[tuple[int, float]], val: Validation | None
                  ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """What every phase's checkpoint holds: the model, the random states, the curves."""
    tensors = {**_model_tensors(model), "gen": gen.get_state(), "rng": torch.get_rng_state()}
    state: dict[str, Any] = {
        "curve": {"points": curve.points, "times": curve.times, "last": curve.last,
                  "last_time": curve.last_time},
        "lr_trace": lr_trace}
    if val is not None:
        state["val"] = {"curve": val.curve, "times": val.times, "flops": val.flops,
                        "refused": val.refused, "check_flops": val.check_flops,
                        "check_last": list(val.check_last),
                        "floor_from": val.floor_from, "best": None}
        if val.best is not None:
            state["val"]["best"] = [val.best[0], val.best[1]]
            tensors.update({f"best.{i}": b for i, b in enumerate(val.best[2])})
    return tensors, state


def _pairs(values: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(v) for v in values]


def _restore_common(saved: tuple[dict[str, torch.Tensor], dict[str, Any]], model: nn.Module,
                    gen: torch.Generator, curve: _Curve, lr_trace: list[tuple[int, float]],
                    val: Validation | None) -> int:
    """Put the state of :func:`_common_state` back; the steps done."""
    tensors, state = saved
    _load_model_tensors(model, tensors)
    gen.set_state(tensors["gen"])
    torch.set_rng_state(tensors["rng"])
    c = state["curve"]
    curve.points, curve.times = _pairs(c["points"]), list(c["times"])
    curve.last = tuple(c["last"]) if c["last"] is not None else None
    curve.last_time = c["last_time"]
    lr_trace[:] = _pairs(state["lr_trace"])
    if val is not None and "val" in state:
        v = state["val"]
        val.curve, val.times = _pairs(v["curve"]), list(v["times"])
        val.flops = [float(f) for f in v.get("flops", [0.0] * len(val.curve))]
        val.refused, val.floor_from = int(v["refused"]), int(v["floor_from"])
        val.check_flops = float(v.get("check_flops", 0.0))
        at, cost = v.get("check_last", (0.0, 0.0))
        val.check_last = (float(at), float(cost))
        if v["best"] is not None:
            n = sum(1 for k in tensors if k.startswith("best."))
            weights = [tensors[f"best.{i}"].to(next(model.parameters()).device)
                       for i in range(n)]
            val.best = (float(v["best"][0]), int(v["best"][1]), weights)
    return int(state["done"])


def _finished(model: nn.Module, saved: tuple[dict[str, torch.Tensor], dict[str, Any]]
              ) -> TrainResult:
    """A training that was over when it was saved: its final weights and its result."""
    tensors, state = saved
    model.to(device="cpu", dtype=torch.float64)
    _load_model_tensors(model, tensors)
    r = dict(state["result"])
    for key in ("curve", "lr_trace", "val_curve"):
        r[key] = _pairs(r[key])
    return TrainResult(**r)


__all__ = ["RECIPES", "SECOND_ORDER", "UNTIL",
           "AdaptiveLR", "Predict", "Sampler", "TrainConfig", "TrainResult", "Validation",
           "scheduled_rate", "train"]
