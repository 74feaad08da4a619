"""One sample through a model in every evaluation precision, before anything is trained.

``probe`` trains for minutes and only then evaluates; a model that cannot be evaluated in one
of its precisions (an op the interpreter lacks, an op that fails on the dtypes it was
exported with) would then store every cell ``failed``. :func:`check_sample` evaluates the
freshly built model on one seeded input in each precision first: a failure is one line that
names the precision, the op, its graph node and its module path, and nothing is trained or
stored. It also reports, per precision, where the model's casts round below that precision
and how much each island moves the output (:mod:`precision.islands`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from precision.evaluate import evaluate
from precision.islands import IslandReport, island_report, islands_below
from precision.precisions import Precision
from probes.isolation import one_line

#: Seed of the sample's input (any fixed seed: the check is about ops, not values).
SAMPLE_SEED = 0


@dataclass
class SampleCheck:
    """The outcome of :func:`check_sample`: ``problem`` (one line, None when every precision
    evaluates) and the island reports of the precisions the model rounds below."""

    problem: str | None
    islands: list[IslandReport] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The island reports as lines (nothing when no cast rounds below a precision)."""
        return [line for r in self.islands for line in r.lines()]


def sample_input(d_in: int, tokens: int, batch: int = 2) -> torch.Tensor:
    """The seeded float64 input (batch, tokens, d_in) of the check (batch 2: the census's
    shape, so the check reuses its export)."""
    gen = torch.Generator().manual_seed(SAMPLE_SEED)
    return torch.randn(batch, tokens, d_in, dtype=torch.float64, generator=gen)


def check_sample(model: nn.Module, x: torch.Tensor, precisions: Sequence[Precision], *,
                 islands: bool = True, label: str = "the model") -> SampleCheck:
    """Evaluate ``model`` on ``x`` in each precision (module docstring); with ``islands``,
    the island report of each precision with casts below it (the first failure stops)."""
    reports = []
    for p in precisions:
        try:
            evaluate(model, x, p)
            if islands and islands_below(model, x, p):
                reports.append(island_report(model, x, p))
        except Exception as exc:  # noqa: BLE001 - any failure is the check's one line
            return SampleCheck(f"{label} cannot be evaluated in {p.name} "
                               f"(checked on one sample before training): {one_line(exc)}",
                               reports)
    return SampleCheck(None, reports)
