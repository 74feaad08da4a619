"""One sample through a model in every evaluation precision, before anything is trained.

``probe`` trains for minutes and only then evaluates; a model that cannot be evaluated in one
of its precisions (an op the interpreter lacks, an op that fails on the dtypes it was
exported with) would then store every cell ``failed``. :func:`check_sample` evaluates the
freshly built model on one seeded input in each precision first: a failure is one line that
names the precision, the op, its graph node and its module path, and nothing is trained or
stored. It also reports, per precision, where the model's casts round below that precision
and how much each island moves the output (:mod:`precision.islands`).

:func:`evaluate_sample` is ``precision evaluate``'s computation: a user factory's module built
(seeded, untrained), one seeded input evaluated in each precision and its relative error
against the reference (an mpN, every cast promoted), as one :class:`SampleEvaluation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from precision.evaluate import evaluate_exact
from precision.islands import IslandReport, island_report, islands_below
from precision.precisions import Precision, seeded_by
from probes.factory import FactoryError, build_family
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


def seeded_model(spec: str, d_in: int, d_out: int, depth: int, width: int, tokens: int,
                 seed: int) -> nn.Module:
    """FACTORY ``spec``'s module built with torch seeded by ``seed`` (the global generator
    restored after), in eval mode; FactoryError (one line) when it cannot be built."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_family(spec, d_in, d_out, depth, width, tokens).eval()


def sample_input(d_in: int, tokens: int, batch: int = 2,
                 seed: int = SAMPLE_SEED) -> torch.Tensor:
    """The seeded float64 input (batch, tokens, d_in) of the check (batch 2: the census's
    shape, so the check reuses its export)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, tokens, d_in, dtype=torch.float64, generator=gen)


def _evaluate_in(model: nn.Module, x: torch.Tensor, p: Precision, islands: bool,
                 seed: int = SAMPLE_SEED) -> tuple[torch.Tensor, IslandReport | None]:
    """``model``'s output on ``x`` in ``p`` (an unseeded ``:sr`` seeded with ``seed``), and
    with ``islands`` the island report of ``p`` when the model's casts round below it (else
    None)."""
    p = seeded_by(p, seed)
    out = evaluate_exact(model, x, p)
    report = island_report(model, x, p) if islands and islands_below(model, x, p) else None
    return out, report


def check_sample(model: nn.Module, x: torch.Tensor, precisions: Sequence[Precision], *,
                 islands: bool = True, label: str = "the model") -> SampleCheck:
    """Evaluate ``model`` on ``x`` in each precision (module docstring); with ``islands``,
    the island report of each precision with casts below it (the first failure stops)."""
    reports = []
    for p in precisions:
        try:
            _out, report = _evaluate_in(model, x, p, islands)
            if report is not None:
                reports.append(report)
        except Exception as exc:  # noqa: BLE001 - any failure is the check's one line
            return SampleCheck(f"{label} cannot be evaluated in {p.name} "
                               f"(checked on one sample before training): {one_line(exc)}",
                               reports)
    return SampleCheck(None, reports)


@dataclass(frozen=True)
class SampleRow:
    """One precision of :func:`evaluate_sample`: the output's relative error against the
    reference, its digits, and the part the model's casts cause (None: no cast rounds below
    the precision, or its policy is promote)."""

    precision: str
    relative: float
    digits: float
    casts: float | None


@dataclass
class SampleEvaluation:
    """The outcome of :func:`evaluate_sample`. ``build_error``: the factory cannot build its
    module (one line; nothing was evaluated). Otherwise ``rows`` in the order of the
    precisions, up to ``problem`` (one line: the first precision that cannot evaluate, None
    when every one does), and ``notes``: where the casts of the ``keep`` precisions round,
    then the float literals the reference took as given."""

    build_error: str | None = None
    rows: list[SampleRow] = field(default_factory=list)
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


def _non_finite(values: Any) -> str:
    """``'NaN'`` / ``'inf'`` (the first kind found) when ``values`` (exact arb values) hold
    one, else ``''``."""
    for v in np.asarray(values, dtype=object).reshape(-1).tolist():
        if not v.is_finite():
            return "NaN" if v.mid().is_nan() else "inf"
    return ""


def evaluate_sample(spec: str, precisions: Sequence[Precision], reference: Precision,
                    d_in: int, d_out: int, depth: int, width: int, tokens: int, batch: int,
                    seed: int) -> SampleEvaluation:
    """Build FACTORY ``spec``'s module (seeded with ``seed``, not trained), evaluate one
    (batch, tokens, d_in) input (seed ``seed + 1``) in ``reference`` and each precision, and
    compare each output with the reference's (module docstring). Runs the user's code: call
    it in a child process (:func:`probes.isolation.call_isolated`)."""
    from precision.backends.interpreter.constants import literal_lines
    from precision.evaluate import mp_program
    from precision.metrics import error_summary

    try:
        model = seeded_model(spec, d_in, d_out, depth, width, tokens, seed)
    except FactoryError as exc:
        return SampleEvaluation(build_error=str(exc))
    x = sample_input(d_in, tokens, batch, seed=seed + 1)
    result = SampleEvaluation()
    truth = None
    for p in [reference, *precisions]:
        try:
            out, report = _evaluate_in(model, x, p, islands=True, seed=seed)
        except Exception as exc:  # noqa: BLE001 - the failing op, node and module, one line
            result.problem = f"'{spec}' cannot be evaluated in {p.name}: {one_line(exc)}"
            return result
        if truth is None:   # the reference comes first
            bad = _non_finite(out)
            if bad:   # nothing to measure against: say so rather than print nan rows
                result.problem = (f"'{spec}' outputs {bad} in {p.name} on the seeded sample: "
                                  "the truth itself is not finite, so no precision's error "
                                  "can be measured against it")
                return result
            truth = out
            continue
        summary = error_summary(out, truth)
        casts = report.total.relative if report is not None and report.total else None
        result.rows.append(SampleRow(p.name, summary.relative, summary.digits, casts))
        result.notes += report.lines() if report is not None and p.casts == "keep" else []
    # the reference is an mpN: its program (cached) says which literals its truth took as given
    result.notes += literal_lines(mp_program(model, x).literals)
    return result
