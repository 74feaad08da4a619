"""Error against sequence length: one model evaluated at several sequence lengths, in several
precisions, against its high-precision reference.

Softmax normalisers, scans and long sums accumulate rounding along the sequence, so a
precision's error can grow with the number of tokens. ``evaluate_lengths(model, [16, 64, 256],
["float32", "bfloat16"], d_in=8)`` evaluates the model (weights as they are: no training) on
seeded inputs of each length and returns, per (length, precision), the relative error

    relative(L, p) = ||f_p(x_L) - f_mpN(x_L)||_2 / ||f_mpN(x_L)||_2

over every output entry (batch, L, d_out) (Frobenius norms), with the reference mpN (mp100 by
default) checked against mp2N (:mod:`precision.reference`: its certain digits per length).

Inputs: one seeded draw x of shape (batch, max length, d_in), each length L its prefix
x[:, :L]. Every entry is k / 64 for an integer |k| <= 256 (a standard normal rounded to that
grid and clipped to [-4, 4]): 9 significant bits, exact in bfloat16, float16, float32 and
float64 alike, so every precision sees the same inputs and the error is its arithmetic's and
its weights' rounding alone, never the inputs'.

A model with a fixed maximum length (a learned positional embedding, a long filter, a RoPE
table) raises on a longer input: the float64 forward is tried first at each length, and a length
the model does not accept is one line in :attr:`LengthSweep.skipped`, not an error.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from precision.evaluate import evaluate_exact, reference_digits
from precision.invariants import NONFINITE
from precision.metrics import error_summary
from precision.precisions import Precision, as_precision
from precision.reference import check_precision

#: The reference precision of a sweep (the trained measure's reference, mp100).
DEFAULT_REFERENCE = Precision("mp100", 100)
#: Longest sequence a sweep accepts (the task-token bound of the suites).
MAX_LENGTH = 65_536
#: Input grid: entries are k / INPUT_SCALE with |k| <= INPUT_SCALE * INPUT_CLIP.
INPUT_SCALE, INPUT_CLIP = 64, 4


class LengthError(ValueError):
    """Bad arguments of a length sweep (one line)."""


@dataclass(frozen=True)
class LengthPoint:
    """One (length, precision) of a sweep: the relative error against the reference
    (``relative``; ``digits`` = -log10 of it, ``max_abs`` the largest entry error, ``mse``
    the mean squared error) or, when the precision's output was not finite, ``status``
    ``diverged`` with the errors None."""

    length: int
    precision: Precision
    status: str
    relative: float | None = None
    digits: float | None = None
    max_abs: float | None = None
    mse: float | None = None

    @property
    def log10_relative(self) -> float | None:
        """log10 of the relative error (-inf for an exact zero)."""
        if self.relative is None:
            return None
        return math.log10(self.relative) if self.relative > 0 else -math.inf


@dataclass(frozen=True)
class LengthSweep:
    """What :func:`evaluate_lengths` measured: ``points`` (each accepted length x each
    precision, in order), the ``reference`` precision and its certain digits per length
    (``truth_digits``), and a one-line note per length the model does not accept
    (``skipped``)."""

    reference: Precision
    points: list[LengthPoint] = field(default_factory=list)
    truth_digits: dict[int, float] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)

    @property
    def lengths(self) -> list[int]:
        """The lengths measured, in order."""
        return list(self.truth_digits)


def check_lengths(lengths: Sequence[int]) -> tuple[int, ...]:
    """``lengths`` as a tuple of distinct positive integers up to :data:`MAX_LENGTH`, in the
    order given; LengthError (one line) otherwise."""
    if not isinstance(lengths, list | tuple) or not lengths:
        raise LengthError("lengths must be a non-empty list of positive integers")
    out = []
    for n in lengths:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= MAX_LENGTH:
            raise LengthError(f"a length must be an integer from 1 to {MAX_LENGTH}, got {n!r}")
        if int(n) in out:
            raise LengthError(f"length {int(n)} is given twice")
        out.append(int(n))
    return tuple(out)


def sweep_inputs(batch: int, length: int, d_in: int, seed: int) -> torch.Tensor:
    """(batch, length, d_in) float64 inputs on the grid k / 64, |k| <= 256 (module
    docstring), from ``torch.Generator().manual_seed(seed)``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, d_in, generator=gen, dtype=torch.float64)
    return (x * INPUT_SCALE).round().clamp(-INPUT_SCALE * INPUT_CLIP,
                                           INPUT_SCALE * INPUT_CLIP) / INPUT_SCALE


def accepted(model: nn.Module, x: torch.Tensor) -> str | None:
    """None when ``model`` runs on ``x`` in float64, else why not (one line)."""
    try:
        with torch.no_grad():
            model.double()(x)
    except Exception as exc:  # noqa: BLE001 -- any refusal of the length is the note
        text = " ".join(str(exc).split()) or type(exc).__name__
        return f"length {x.shape[1]} not accepted by the model: {text[:200]}"
    return None


def measure_length(model: nn.Module, x: torch.Tensor, precisions: Sequence[Precision],
                   reference: Precision, device: str = "cpu"
                   ) -> tuple[list[LengthPoint], float]:
    """The points of one length (x: (batch, L, d_in)) and the reference's certain digits."""
    ref = evaluate_exact(model, x, reference)
    digits = reference_digits(model, x, ref, reference)
    points = []
    for p in precisions:
        s = error_summary(evaluate_exact(model, x, p, device), ref)
        if not math.isfinite(s.relative):
            points.append(LengthPoint(x.shape[1], p, NONFINITE))
            continue
        points.append(LengthPoint(x.shape[1], p, "ok", relative=s.relative, digits=s.digits,
                                  max_abs=s.max_abs, mse=s.mse))
    return points, digits


def sweep(model: nn.Module, lengths: Sequence[int], precisions: Sequence[Precision], *,
          d_in: int, batch: int = 1, seed: int = 0, reference: Precision = DEFAULT_REFERENCE,
          device: str = "cpu") -> LengthSweep:
    """:func:`evaluate_lengths` with typed precisions (what the run kinds call)."""
    lengths = check_lengths(lengths)
    check_precision(reference)  # an mpN, or ValueError now
    if d_in < 1 or batch < 1:
        raise LengthError(f"d_in and batch must be positive, got d_in {d_in}, batch {batch}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch's pytree note on copy
        model = copy.deepcopy(model).double().eval()   # the caller's model is left as it is
    x = sweep_inputs(batch, max(lengths), d_in, seed)
    out = LengthSweep(reference)
    for n in lengths:
        xn = x[:, :n].contiguous()
        note = accepted(model, xn)
        if note is not None:
            out.skipped[n] = note
            continue
        points, digits = measure_length(model, xn, precisions, reference, device)
        out.points.extend(points)
        out.truth_digits[n] = digits
    return out


def evaluate_lengths(model: nn.Module, lengths: Sequence[int],
                     precisions: Sequence[Precision | str], *, d_in: int, batch: int = 1,
                     seed: int = 0, reference: Precision | str = "mp100",
                     device: str = "cpu") -> LengthSweep:
    """Relative error of ``model`` against its mpN ``reference`` at each sequence length, in
    each precision (module docstring).

    ``model`` maps (batch, L, d_in) -> (batch, L, d_out) with its weights as they are (it is
    evaluated in float64 and cast per precision, never trained); ``lengths`` distinct
    positive integers; ``batch`` sequences per length; ``device`` where float precisions run.
    The reference costs most: the mp interpreter's time grows like the model's work (L^2 for
    attention), about 2 s at L = 256 for one width-32 attention layer, and mp2N on the first
    sequence checks it. Returns a :class:`LengthSweep`; a length the model rejects is in its
    ``skipped`` notes.
    """
    precs = [as_precision(p) for p in precisions]  # the Python API's edge
    return sweep(model, lengths, precs, d_in=d_in, batch=batch, seed=seed,
                 reference=as_precision(reference), device=device)
