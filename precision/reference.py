"""How many digits of a model's high-precision reference are certain.

Every model error in this toolkit is measured against the same weights evaluated in a high
precision mpN (the *reference*, ``f_mpN``; mp100 by default). The mp backend keeps no ball
radii (:mod:`precision.backends.mp_backend`: an mpN run is an N-digit floating-point machine),
so the reference is checked the other way: the same model is evaluated again in mp2N on a
subset of the inputs, and the reference's certain digits are

    truth_digits = min(N, -log10(||f_mpN - f_mp2N||_2 / ||f_mp2N||_2))

on that subset (Frobenius norms over every output entry, :func:`precision.metrics.error_summary`).
mp2N's own error is ~10^-N times smaller than mpN's, so the agreement measures mpN's error; the
cap at N says no more than the N digits mpN holds. A reference with fewer certain digits than
the errors it measures (e.g. 10 certain digits under a float64 rounding error of 1e-16) does
not support them, and the reports show the figure beside every model result.
:func:`precision.evaluate.reference_digits` evaluates the check for a model.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from precision.metrics import error_summary
from precision.precisions import Precision

#: The reference of a trained model's errors: mp100 with every cast promoted (the model's
#: mathematics; its float32 islands are part of what the decomposition measures).
MODEL_REFERENCE = Precision("mp100", 100, casts="promote")

#: Sequences (first entries of the batch axis) the mp2N check is evaluated on.
CHECK_SUBSET = 1


def check_precision(reference: Precision) -> Precision:
    """mp2N, the precision that checks the reference mpN."""
    if not reference.is_mp or reference.digits is None:
        raise ValueError(f"the reference must be an mpN precision, not {reference.name}")
    return replace(reference, format=f"mp{2 * reference.digits}",
                   digits=2 * reference.digits)   # the same cast policy


def certain_digits(reference: np.ndarray, check: np.ndarray, reference_digits: int) -> float:
    """Digits of ``reference`` (mpN outputs, any shape) that ``check`` (mp2N outputs of the
    same inputs, same shape) confirms: -log10 of their relative Frobenius distance, at most
    ``reference_digits`` (N); 0.0 when either is not finite."""
    summary = error_summary(reference, check)
    if math.isnan(summary.digits):
        return 0.0
    return float(min(summary.digits, reference_digits))
