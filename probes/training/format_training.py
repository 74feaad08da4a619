"""Training in a simulated format: the forward and backward of every Adam step rounded per op
as at evaluation, the weights and Adam's state kept in a wider master precision.

A training precision that is not one of the native dtypes (``float32``, ``float64``,
``bfloat16``: the model, its gradients and Adam's moments all in that dtype) is a *format*:
any precision the float path simulates (``float8_e4m3``, ``bfloat16:sr``, ``mxfp8_e4m3``,
``int8``, ``float16:rne``, a per-module assignment ``float32+mod[*.mlp]=bfloat16``). One Adam
step trained in a format is the mixed-precision scheme of Micikevicius et al. (2018) with the
rounding simulated:

1. **Weights.** The model holds the master weights (``master_dtype``: float32 unless the
   config says float64), and Adam's moments are kept in that dtype. With ``master_dtype =
   "none"`` there are no master weights: after each update the weights are rounded into the
   format by its own rounding mode (:meth:`FormatTraining.store`; under stochastic rounding
   the update is unbiased: the use of SR in low-precision training, Gupta et al., 2015);
   Adam's moments stay float32. A *working copy* in the
   format's carrier dtype gets the master weights rounded to the format each step, exactly as
   an evaluation rounds a checkpoint (:func:`precision.formats.simulate.prepare_module`:
   stored values round to nearest even under stochastic rounding; integer formats quantise the
   weight matrices per group; a per-module assignment rounds each parameter to its module's
   format).
2. **Forward and backward.** The batch (rounded into the format) goes through the working copy
   under :class:`~precision.formats.op_rounding.RoundResults`: every ATen op of the forward
   *and* of the backward is computed in the carrier and its result rounded to the format
   (MX: the operands of every product quantised per block, the backward's products
   included). A per-module assignment's rule holds in the forward; autograd's backward ops
   run outside any module's ``forward``, so they run in the assignment's base precision.
3. **Gradients through rounding: the straight-through estimator.** Rounding is not an op on
   the autograd tape (the mode rounds results after each op), so the derivative of
   ``round(f(x))`` is taken as ``f'(x)``, and the gradient with respect to the rounded weight
   is used as the gradient of its master weight (Courbariaux et al., 2015; Bengio et al.,
   2013).
4. **Loss scaling** where the format needs it (its narrowest value format has fewer exponent
   bits than float32's 8: float16, FP8, FP6, FP4): the backward is seeded with the loss scale
   S instead of 1, so the loss's gradients sit S times higher in the format's range, and the
   master gradients are divided by S (exact: S is a power of two). Dynamic scaling
   (:class:`LossScale`, the rule of ``torch.amp.GradScaler``): S starts at the largest power
   of two the format holds, halves and skips the step when a gradient overflows (not finite,
   or at the largest finite value of a saturating format: saturation hides overflow), and
   doubles after :data:`GROWTH_INTERVAL` steps without one. Overflow inside the backward that
   leaves every final gradient in range is not seen.
5. **The update** (Adam, gradient clipping) runs on the master weights in the master dtype,
   outside the mode.

Stochastic rounding draws from the run's seed (``cfg.seed``; a ``+seed=`` in the spelling wins):
step s's ops from stream domain ``2^32 + s`` (:data:`TRAIN_DOMAIN`) and its update's rounding
(``master_dtype = "none"``) from ``2^33 + s`` (:data:`UPDATE_DOMAIN`), so a run resumed from a
checkpoint draws what the uninterrupted run would have drawn. Validation measures the master
weights in the master dtype; the trained model is the master weights (an evaluation in the
format rounds them as the training forward did).
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from precision.backends.promote_casts import PromoteCasts
from precision.formats.integer_weights import quantize_weight
from precision.formats.module_assignment import (
    AssignmentError,
    ModuleStack,
    base_of,
    carrier_dtype,
    check_globs,
    formats_of,
    has_op_globs,
    module_paths,
    parents,
    precision_at,
    round_parameters,
)
from precision.formats.op_rounding import RoundResults, round_values
from precision.formats.rounding import RandomStream
from precision.formats.simulate import prepare_module, stored
from precision.precisions import Precision, seeded_by

#: Step s of a format training draws its stochastic-rounding bits from stream (seed, 2^32 + s)
#: (evaluation's ops use domain 1 and a solver's arrays domain 3).
TRAIN_DOMAIN = 2**32
#: ... and the rounding of its update into the format (master_dtype "none"): (seed, 2^33 + s).
UPDATE_DOMAIN = 2**33
#: Steps without an overflow after which the loss scale doubles.
GROWTH_INTERVAL = 100
#: Exponent bits below which a format's range needs loss scaling (float32's and bfloat16's).
WIDE_EXPONENT_BITS = 8

Predict = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def _value_formats(p: Precision) -> list[Any]:
    """The binary value formats every op result of ``p`` may be rounded to (its base's and
    each assigned precision's)."""
    return [q.value_format for q in formats_of(p)]


def needs_loss_scaling(p: Precision) -> bool:
    """A value format of ``p`` has fewer exponent bits than float32 (module docstring, 4)."""
    return any(f.exponent_bits < WIDE_EXPONENT_BITS for f in _value_formats(p))


@dataclass
class LossScale:
    """Dynamic loss scaling (module docstring, 4): the scale, the clean steps since it last
    changed, and the steps skipped on an overflow."""

    scale: float
    clean: int = 0
    skipped: int = 0

    def update(self, overflow: bool) -> None:
        """After a step: halve (the step was skipped) or count, doubling every
        :data:`GROWTH_INTERVAL` clean steps."""
        if overflow:
            self.scale, self.clean, self.skipped = self.scale / 2, 0, self.skipped + 1
        else:
            self.clean += 1
            if self.clean >= GROWTH_INTERVAL:
                self.scale, self.clean = self.scale * 2, 0

    def state(self) -> dict[str, Any]:
        return {"scale": self.scale, "clean": self.clean, "skipped": self.skipped}

    @classmethod
    def from_state(cls, state: Any, carrier: torch.dtype) -> LossScale:
        """The scaler a checkpoint saved (:meth:`state`), checked to be one this class can
        reach: the scale a power of two the ``carrier`` dtype holds (it seeds the backward
        there), ``clean`` a whole count below :data:`GROWTH_INTERVAL`, ``skipped`` a whole
        count. ValueError (one line) otherwise: a state outside that range is damage, and
        resuming from it would store numbers no training computes."""
        if not isinstance(state, dict) or set(state) != {"scale", "clean", "skipped"}:
            raise ValueError("loss scale state is not {scale, clean, skipped}")
        scale, clean, skipped = state["scale"], state["clean"], state["skipped"]
        info = torch.finfo(carrier)
        if not (isinstance(scale, int | float) and not isinstance(scale, bool)
                and math.isfinite(scale) and info.smallest_normal * info.eps <= scale <= info.max
                and math.frexp(scale)[0] == 0.5):
            raise ValueError(f"loss scale {scale!r:.40} is not a power of two that "
                             f"{str(carrier).removeprefix('torch.')} holds")

        def whole(v: Any, below: float) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < below

        if not whole(clean, GROWTH_INTERVAL):
            raise ValueError(f"loss scale's clean-step count {clean!r:.40} is not a whole "
                             f"number below {GROWTH_INTERVAL}")
        if not whole(skipped, 2**53):
            raise ValueError(f"loss scale's skipped-step count {skipped!r:.40} is not a whole "
                             "number")
        return cls(float(scale), clean, skipped)


def initial_scale(p: Precision) -> float:
    """The largest power of two every value format of ``p`` holds (2^emax of the narrowest)."""
    # at most float16's 2^15: a format as wide as float32 needs no more headroom
    return 2.0 ** min(min(f.emax for f in _value_formats(p)), 15)


class FormatTraining:
    """The gradient of a batch computed in a format, for master weights (module docstring).

    ``precision``: the training format (seeded by the run already); ``model``: the master
    weights (its parameters' ``.grad`` receive the unscaled gradient); ``loss_scaling``:
    "auto" (when :func:`needs_loss_scaling`), "dynamic" or "off"; ``in_format``: no master
    weights (``master_dtype = "none"``): :meth:`store` rounds the model's weights into the
    format after each update (and once here, before the first step).
    """

    def __init__(self, model: nn.Module, precision: Precision, loss_scaling: str,
                 in_format: bool = False) -> None:
        self.p = precision
        self.in_format = in_format
        self.assigned = bool(precision.modules)
        if self.assigned:
            check_globs(module_paths(model), precision)
            if has_op_globs(precision):   # the backward's ops run outside every module
                raise AssignmentError(f"{precision.name}: a training precision assigns "
                                      "modules, not one op of a module (+mod[MODULE::OP] "
                                      "is for evaluate and localize)")
            self.carrier = carrier_dtype(precision)
        else:
            self.carrier = precision.carrier_dtype
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's pytree note on copy
            self.work = copy.deepcopy(model).to(self.carrier)
        self.carried = Precision(str(self.carrier).removeprefix("torch."))
        scaled = loss_scaling == "dynamic" or (loss_scaling == "auto"
                                               and needs_loss_scaling(precision))
        self.scaler = LossScale(initial_scale(precision)) if scaled else None
        self.saturating = [f.max_finite for f in _value_formats(precision)
                           if f.overflow == "saturate"]
        if in_format:
            self.store(model, -1)

    def store(self, model: nn.Module, step: int) -> None:
        """Without master weights: ``model``'s weights rounded (in place) into the format by
        its rounding mode, stochastic bits from stream (seed, 2^33 + step); integer formats
        quantise their weight matrices (to nearest even under sr, as stored weights are); a
        per-module assignment rounds each to its module's precision. A no-op with master
        weights."""
        if not self.in_format:
            return
        streams: dict[int, RandomStream] = {}

        def rounded(t: torch.Tensor, q: Precision) -> torch.Tensor:
            stream = None
            if q.needs_stream:
                seed = q.seed or 0
                stream = streams.setdefault(seed, RandomStream(seed, UPDATE_DOMAIN + step))
            if q.int_weights is not None and t.dim() >= 2:
                bits, group = q.int_weights
                return quantize_weight(t.to(q.carrier_dtype), bits, group,
                                       stored(q).rounding).to(t.dtype)
            return round_values(t.to(torch.float64), q, stream=stream).to(t.dtype)

        with torch.no_grad():
            for path, module in model.named_modules():
                q = precision_at(parents(path), self.p) if self.assigned else self.p
                for t in module.parameters(recurse=False):
                    if t.is_floating_point():
                        t.copy_(rounded(t.detach(), q))

    def _load(self, model: nn.Module) -> None:
        """The working copy's weights: the master weights rounded to the format."""
        with torch.no_grad():
            for w, m in zip(self.work.parameters(), model.parameters(), strict=True):
                w.data = m.detach().to(torch.float64).to(self.carrier)
            if self.assigned:
                round_parameters(self.work, self.p)
            else:
                prepare_module(self.work, self.p)
        self.work.zero_grad(set_to_none=True)

    def _round_data(self, t: torch.Tensor) -> torch.Tensor:
        """A batch tensor (float64) rounded into the base format, held in the carrier."""
        return round_values(t.to(torch.float64), stored(base_of(self.p))).to(self.carrier)

    def _mode(self, step: int) -> tuple[RoundResults, Any]:
        """The step's rounding mode (a fresh stream, domain 2^32 + step) and module stack."""
        if not self.assigned:
            return RoundResults(lambda: self.p, domain=TRAIN_DOMAIN + step), None
        stack = ModuleStack(self.work)

        def choose() -> Precision | None:
            q = precision_at(stack.paths, self.p)
            return None if q == self.carried else q
        return RoundResults(choose, domain=TRAIN_DOMAIN + step), stack

    def gradient(self, model: nn.Module, predict: Predict, x: torch.Tensor, y: torch.Tensor,
                 step: int, micro_batch: int,
                 batch_gradient: Callable[..., float]) -> tuple[float, bool]:
        """The batch MSE (as the format computed it) and whether the step must be skipped
        (a gradient overflowed under loss scaling: the master ``.grad`` are then cleared).
        x (batch, N, d_in), y (batch, ...) in float64; ``batch_gradient`` is the native
        recipes' (:func:`probes.training.recipes.batch_gradient`)."""
        self._load(model)
        x, y = self._round_data(x), self._round_data(y)
        scale = self.scaler.scale if self.scaler is not None else 1.0
        seed = None if scale == 1.0 else torch.tensor(scale, dtype=self.carrier)
        mode, stack = self._mode(step)
        with contextlib.ExitStack() as ctx:
            if stack is not None:
                ctx.enter_context(stack)   # its hooks come off at the end
            if self.p.casts == "promote":
                ctx.enter_context(PromoteCasts(self.carrier))
            ctx.enter_context(mode)
            value = batch_gradient(self.work, predict, x, y, micro_batch, seed)
        overflow = False
        for w, m in zip(self.work.parameters(), model.parameters(), strict=True):
            if w.grad is None:
                m.grad = None
                continue
            g = w.grad.detach()
            overflow = overflow or not bool(torch.isfinite(g).all()) or any(
                bool((g.abs() >= top).any()) for top in self.saturating)
            m.grad = (g.to(torch.float64) / scale).to(m.dtype)
        skip = self.scaler is not None and overflow and math.isfinite(value)
        if self.scaler is not None:
            self.scaler.update(skip)
        if skip:
            for m in model.parameters():
                m.grad = None
        return value, skip


def training_precision(p: Precision, seed: int) -> Precision:
    """The format ``p`` as a run of seed ``seed`` trains in (an unseeded ``:sr`` takes it)."""
    p = seeded_by(p, seed)
    if p.modules:
        p = replace(p, modules=tuple((g, seeded_by(q, seed)) for g, q in p.modules))
    return p
