"""Where a model rounds below the evaluation precision (its float casts), and how much of its
error each of those islands causes.

An *island* is a graph node a model computes in a float dtype narrower than the one it runs
in, because it casts there (``hidden.to(torch.float32)`` in an RMSNorm, RoPE frequencies, a
softmax; :attr:`~precision.backends.interpreter.MPProgram.islands`). Evaluated in precision p
under ``casts="keep"``, the islands whose dtype has fewer significand bits than p round below
p. Their effect is measured against the promoted model (the same model with every cast in p):

  casts effect in p     = f_p,keep - f_p,promote
  effect of module M    = f_ref,keep(M) - f_ref,promote

where ``f_ref,keep(M)`` is the model in the high ``attribution`` precision (mp30 by default)
with only M's islands rounded into their dtypes: the error that M's casts alone cause, without
p's own rounding mixed in (it is 2**-p smaller than an island's when the island is narrower).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from precision.backends.interpreter.casts import NARROW_DTYPES
from precision.evaluate import evaluate_exact, mp_program
from precision.metrics import ErrorSummary, error_summary
from precision.precisions import FLOAT_BITS, Precision, with_casts

#: The precision module effects are attributed in (its own rounding ~1e-30, far below any
#: float island's).
ATTRIBUTION_PRECISION = Precision("mp30", 30)


@dataclass(frozen=True)
class Island:
    """The nodes of one module that compute in one narrower dtype.

    ``effect``: the output's error against the promoted model when only this module's
    islands round (relative, max abs, digits...); None until measured."""

    module: str
    dtype: str
    nodes: int
    effect: ErrorSummary | None = None


@dataclass(frozen=True)
class IslandReport:
    """What casting below ``precision`` costs a model on one input.

    ``total``: f_p,keep against f_p,promote (None when no island rounds below p);
    ``islands``: the islands below p, largest effect first."""

    precision: str
    islands: list[Island] = field(default_factory=list)
    total: ErrorSummary | None = None

    def lines(self) -> list[str]:
        """Human-readable lines: one for the total, one per island."""
        if not self.islands:
            return [f"{self.precision}: the model rounds nowhere below {self.precision}"]
        head = (f"{self.precision}: casts round below it in {len(self.islands)} "
                f"module{'s' if len(self.islands) != 1 else ''}")
        if self.total is not None:
            head += f"; keep vs promote: relative {self.total.relative:.1e}"
        out = [head]
        for i in self.islands:
            effect = f", alone: relative {i.effect.relative:.1e}" if i.effect else ""
            out.append(f"  {i.module}: {i.nodes} {i.dtype} node"
                       f"{'s' if i.nodes != 1 else ''}{effect}")
        return out


def _example(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64) if x.is_floating_point() else x


def islands_below(model: torch.nn.Module, x: torch.Tensor, precision: Precision) -> list[Island]:
    """The islands of ``model`` (exported on inputs shaped like ``x``) whose dtype has fewer
    significand bits than ``precision``, one per (module, dtype), in graph order (no
    evaluation)."""
    counts: dict[tuple[str, str], int] = {}
    for dtype, module in mp_program(model, _example(x)).islands.values():
        name = NARROW_DTYPES[dtype]
        if FLOAT_BITS[name] < precision.bits:
            counts[(module, name)] = counts.get((module, name), 0) + 1
    return [Island(m, d, n) for (m, d), n in counts.items()]


def island_report(model: torch.nn.Module, x: torch.Tensor, precision: Precision, *,
                  attribution: Precision = ATTRIBUTION_PRECISION,
                  select: Callable[[np.ndarray], np.ndarray] = lambda y: y,
                  device: str = "cpu") -> IslandReport:
    """Islands of ``model`` below ``precision`` on input ``x`` and their effects (module
    docstring). ``select``: the part of the output that is measured (a task's read-out)."""
    islands = islands_below(model, x, precision)
    if not islands:
        return IslandReport(precision.name)
    kept = select(evaluate_exact(model, x, with_casts(precision, "keep"), device))
    promoted = select(evaluate_exact(model, x, with_casts(precision, "promote"), device))
    ref_promoted = select(evaluate_exact(model, x, with_casts(attribution, "promote")))
    measured = []
    for module in dict.fromkeys(i.module for i in islands):
        alone = select(evaluate_exact(model, x, with_casts(attribution, "keep"),
                                kept_modules={module}))
        effect = error_summary(alone, ref_promoted)
        measured += [Island(i.module, i.dtype, i.nodes, effect) for i in islands
                     if i.module == module]
    measured.sort(key=lambda i: -i.effect.relative if i.effect else 0.0)
    return IslandReport(precision.name, measured, error_summary(kept, promoted))
