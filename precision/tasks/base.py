"""The base of every task class: options, shapes, seeded inputs, describe."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import flint
import numpy as np
import torch

from precision import deterministic as det


class TaskError(ValueError):
    """An unknown task or impossible task options (one line, for the CLI)."""


class Task(ABC):
    """A seeded task instance: a sequence-to-sequence map on tokens (rows).

    The model sees x (batch, n_tokens, d_in) and outputs (batch, n_tokens, d_out);
    :meth:`select` cuts the answered entries out of that output, shaped like the target y.
    A subclass is one task: its ``name``, its options (``defaults``, and the ``optional`` ones
    without a fixed default), its constructor (validates them, sets the shapes, draws the
    hidden parameters from ``rng``), its inputs, its float64 :meth:`target` and exact
    :meth:`truth`, and :meth:`select` / :meth:`evaluated` where not every entry is answered.
    """

    name: ClassVar[str]
    defaults: ClassVar[dict[str, Any]] = {"dim": 20, "n": 40}   # 001 App. D.2.3: D = 20, N = 40
    optional: ClassVar[tuple[str, ...]] = ()
    #: How :meth:`target` computes. 1: the first way. 2: sums and solves through
    #: :mod:`precision.deterministic` (the first way, BLAS and LAPACK, gave other last bits
    #: for a differently aligned copy of the same input, i.e. between two calls: AFFINE and
    #: the least-squares tasks). Elementwise targets (IEEE operations) stay 1. A trained
    #: job's id holds it when above 1.
    target_version: ClassVar[int] = 1

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        """``options`` over ``defaults``; ``rng`` draws the hidden parameters (subclasses)."""
        bad = set(options) - set(self.defaults) - set(self.optional)
        if bad:
            raise TaskError(f"task '{self.name}' has no option {', '.join(sorted(bad))} "
                            f"(options: {', '.join(sorted([*self.defaults, *self.optional]))})")
        self.options: dict[str, Any] = {**self.defaults, **options}
        d, n = self.dim, self.n = self.options["dim"], self.options["n"]
        if not (isinstance(d, int) and isinstance(n, int) and d >= 1 and n >= 1):
            raise TaskError(f"task '{self.name}': dim and n must be positive integers, "
                            f"got {d}, {n}")
        self.n_tokens, self.d_in, self.d_out = n, d, d

    def _int_option(self, key: str, default: int | None = None) -> Any:
        """Option ``key`` (``default`` when not given): None or an integer, else a TaskError."""
        value = self.options.get(key, default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TaskError(f"task '{self.name}': {key} must be an integer, got {value!r}")
        return value

    def sample(self, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) in float64: x (batch, n_tokens, d_in), y shaped like :meth:`select`'s output."""
        x = self.inputs(batch, gen)
        return x, self.target(x)

    def inputs(self, batch: int, gen: torch.Generator) -> torch.Tensor:
        """``batch`` input sequences (float64), the same on every machine: ``gen`` seeds the
        numpy ``Generator`` that draws them (:func:`~precision.deterministic.rng_from`), and
        every product in them is :mod:`precision.deterministic`'s (never torch's sampling or
        BLAS kernels, which depend on the CPU and the thread count), returned in torch's own
        aligned memory (:func:`~precision.deterministic.tensor`)."""
        return det.tensor(self.inputs_numpy(batch, det.rng_from(gen)))

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        """:meth:`inputs` as a numpy array drawn from ``rng``: here u ~ N(0, 1) per entry
        (001 D.3), (batch, n, dim)."""
        return rng.standard_normal((batch, self.n, self.dim))

    @abstractmethod
    def target(self, x: torch.Tensor) -> torch.Tensor:
        """The float64 target of float64 inputs ``x`` (CPU; for training, exact enough there),
        the same bits for the same values on every call (tested at every memory alignment)."""

    @abstractmethod
    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        """Exact target (object array of arb at ``bits``, shaped like :meth:`target`'s) of
        exact inputs ``x`` (object array (batch, n_tokens, d_in) of the values the model
        received, i.e. after rounding into the evaluation precision)."""

    def select(self, out: torch.Tensor) -> torch.Tensor:
        """The answered entries of a model output (batch, n_tokens, d_out), shaped like y:
        here all of them."""
        return out

    def evaluated(self, a: Any) -> Any:
        """The entries of a target-shaped array the *test* MSE is taken over: here all."""
        return a

    def _shown(self) -> dict[str, Any]:
        """Drawn hidden parameters :meth:`describe` names after the options (none here)."""
        return {}

    def describe(self) -> str:
        """``name(option=value, ..., hidden=value, ...)``."""
        shown = self._shown()
        items = {**{k: v for k, v in self.options.items() if k not in shown}, **shown}
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in items.items())})"


def exact_dot(a: np.ndarray, b: np.ndarray) -> flint.arb:
    """sum_i a_i b_i of two object arrays of arb, left to right from 0 (at the working
    precision in force)."""
    return sum((a[i] * b[i] for i in range(len(a))), flint.arb(0))
