"""Error metrics and the floor detector (DESIGN principles 4 and 5).

Array metrics take numpy object arrays of exact ``flint.arb`` values (``Backend.to_exact``
output, or truths from :mod:`precision.truth`) and compute in arb at 1024 bits, so an mp100
error of 1e-200 is measured, not flushed to zero. :func:`detect_floor` is the one floor
detector used for solver traces, constructions and training curves alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import flint
import numpy as np

#: log10 used for an exact zero error (below any float64 or mpN<=2000 floor).
LOG10_ZERO = -math.inf


@dataclass(frozen=True)
class ErrorSummary:
    """Errors of an estimate against a truth (all entries).

    mse: mean squared error (0.0 if it underflows float64; ``log10_mse`` keeps the value),
    log10_mse: log10 of the MSE computed in arb (-inf when exact),
    max_abs: largest absolute entry error, relative: ||e|| / ||truth|| (Frobenius),
    digits: correct decimal digits = -log10(relative), clipped at 0 (inf when exact).
    """

    mse: float
    log10_mse: float
    max_abs: float
    relative: float
    digits: float


def _arb_array(a: Any) -> np.ndarray:
    arr = np.asarray(a, dtype=object).reshape(-1)
    out = np.empty(arr.shape, dtype=object)
    for i, v in enumerate(arr):
        out[i] = v if isinstance(v, flint.arb) else flint.arb(float(v))
    return out


def _to_float(x: flint.arb) -> float:
    return float(x.mid())


def _log10(x: flint.arb) -> float:
    if x == 0:
        return LOG10_ZERO
    return _to_float(x.mid().log() / flint.arb(10).log())


def error_summary(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> ErrorSummary:
    """All metrics of ``estimate`` against ``truth`` (same shape) in one pass."""
    est, tru = _arb_array(estimate), _arb_array(truth)
    if est.shape != tru.shape:
        raise ValueError(f"shape mismatch: estimate {est.shape} vs truth {tru.shape}")
    old = flint.ctx.prec
    flint.ctx.prec = prec_bits
    try:
        n = len(est)
        if n == 0:
            raise ValueError("error_summary of an empty array")
        if not all(v.is_finite() for v in est):
            nan = math.nan
            return ErrorSummary(nan, nan, nan, nan, 0.0)
        diff = est - tru
        sq = flint.arb(0)
        tsq = flint.arb(0)
        mx = flint.arb(0)
        for d, t in zip(diff, tru, strict=True):
            sq += d * d
            tsq += t * t
            ad = abs(d)
            if ad > mx:
                mx = ad
        sq, tsq = sq.mid(), tsq.mid()
        mse = (sq / n).mid()
        if sq == 0:
            rel = flint.arb(0)
        elif tsq == 0:
            rel = sq.sqrt().mid()
        else:
            rel = (sq / tsq).sqrt().mid()
        log_rel = _log10(rel)
        digits = math.inf if log_rel == LOG10_ZERO else max(0.0, -log_rel)
        return ErrorSummary(
            mse=_to_float(mse), log10_mse=_log10(mse), max_abs=_to_float(mx),
            relative=_to_float(rel), digits=digits,
        )
    finally:
        flint.ctx.prec = old


def mse(estimate: Any, truth: Any) -> float:
    """Mean over entries of (estimate - truth)^2."""
    return error_summary(estimate, truth).mse


def log10_mse(estimate: Any, truth: Any) -> float:
    """log10 of the MSE, exact below the float64 range (-inf when the error is zero)."""
    return error_summary(estimate, truth).log10_mse


def max_abs_error(estimate: Any, truth: Any) -> float:
    """Largest |estimate - truth| entry."""
    return error_summary(estimate, truth).max_abs


def relative_error(estimate: Any, truth: Any) -> float:
    """||estimate - truth|| / ||truth|| (Frobenius; absolute when truth is zero)."""
    return error_summary(estimate, truth).relative


def correct_digits(estimate: Any, truth: Any) -> float:
    """-log10(relative error), >= 0; inf when exact."""
    return error_summary(estimate, truth).digits


def decompose(total_estimate: Any, exact_estimate: Any, truth: Any) -> dict[str, ErrorSummary]:
    """DESIGN principle 4 for weights theta, precision p, input x:
    total = f_p - y*, approximation = f_mp - y*, rounding = f_p - f_mp."""
    return {
        "total": error_summary(total_estimate, truth),
        "approximation": error_summary(exact_estimate, truth),
        "rounding": error_summary(total_estimate, exact_estimate),
    }


@dataclass(frozen=True)
class Floor:
    """The floor of an error trace.

    level / log10_level: plateau value (median of the tail, in log10),
    index: first step from which the trace stays within ``tol_decades`` of the level,
    reached: False if the trace was still falling at its end (level = last value then),
    kind: "linear" | "superlinear" (order >= 1.5 and the last steps drop >= 1 decade) |
      "none" (no decrease before the floor) | "diverged" (NaN/inf, or ends two decades above
      its start),
    rate: (linear only) per-step factor of the trace over the converging segment (10**slope of a
      least-squares line through log10 values; for an MSE trace this is q**2 when the error
      norm contracts by q),
    order: (superlinear only) asymptotic order p of e_{k+1} ~ C e_k^p from the last six
      steps before the floor (see :func:`_order`; unchanged by squaring, so the same for MSE
      and error norms; the last steps matter because Newton-type methods start with a
      linear warm-up).
    """

    level: float
    log10_level: float
    index: int
    reached: bool
    kind: str
    rate: float | None
    order: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: infinities as strings "inf" / "-inf", NaN as None."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if isinstance(v, float) and math.isnan(v):
                v = None
            elif isinstance(v, float) and math.isinf(v):
                v = "inf" if v > 0 else "-inf"
            out[k] = v
        return out


#: log10 substituted for exact zeros inside the fit (keeps arithmetic finite).
_ZERO_CAP = -10000.0


def detect_floor(
    trace: Sequence[float],
    *,
    log10_trace: Sequence[float] | None = None,
    tol_decades: float = 0.5,
    tail_fraction: float = 0.2,
) -> Floor:
    """Plateau level, the step it is reached, and the convergence rate / order of a trace.

    ``trace`` holds nonnegative errors per step (index 0 = initial iterate). Pass
    ``log10_trace`` for values below the float64 range (e.g. -400 for an mp200 floor); it is
    used instead of ``log10(trace)``.
    """
    logs = [float(v) for v in log10_trace] if log10_trace is not None else [
        (math.log10(v) if v > 0 else (-math.inf if v == 0 else math.nan))
        if not (isinstance(v, float) and (math.isnan(v) or math.isinf(v))) else v
        for v in trace
    ]
    n = len(logs)
    if n == 0:
        return Floor(math.nan, math.nan, 0, False, "none", None, None)
    if any(math.isnan(v) or v == math.inf for v in logs) or (
        n > 1 and logs[-1] > logs[0] + 2
    ):
        return Floor(math.nan, math.nan, n - 1, False, "diverged", None, None)
    capped = [max(v, _ZERO_CAP) for v in logs]
    if n == 1:
        return Floor(_pow10(logs[0]), logs[0], 0, True, "none", None, None)

    tail_n = min(n, max(3, int(math.ceil(tail_fraction * n))))
    tail = capped[-tail_n:]
    level = float(np.median(tail))
    # Still falling: the tail itself spans a steady drop larger than the tolerance.
    falling = tail[0] - tail[-1] > 2 * tol_decades and _monotone_share(tail) > 0.8
    if falling:
        level = capped[-1]
        band = level
    else:
        # Rounding noise makes plateaus jitter; the band is as wide as the tail's own spread.
        band = level + max(tol_decades, max(tail) - level)
    # Index: first step after which every value stays within the band (or below it).
    index = n - 1
    for k in range(n - 1, -1, -1):
        if capped[k] <= band:
            index = k
        else:
            break
    log_level = -math.inf if level <= _ZERO_CAP else level

    # Converging segment: steps before the floor, more than a decade above its band (closer
    # in, the floor bends the trace and would bias rate and order).
    steps = [k for k in range(index) if capped[k] > band + 1.0]
    if len(steps) < 3:
        steps = [k for k in range(index) if capped[k] > band]
    conv = [capped[k] for k in steps]
    rate = order = None
    kind = "none"
    if len(conv) >= 2 and conv[0] - conv[-1] > tol_decades:
        slope = float(np.polyfit(np.asarray(steps, dtype=np.float64), np.asarray(conv), 1)[0])
        order = _order(conv)
        h = min(3, (len(conv) - 1) // 2)
        last_drop = conv[-1 - h] - conv[-1] if h >= 1 else 0.0
        # Superlinear needs both a growing drop and a large one (>= 1 decade over the last
        # h steps), so the step-to-step wobble of slow linear traces cannot fake it.
        if order is not None and order >= 1.5 and last_drop >= 1.0:
            kind = "superlinear"
        else:
            kind, order = "linear", None
            rate = 10.0**slope
    return Floor(_pow10(log_level), log_level, index, not falling, kind, rate, order)


def _pow10(x: float) -> float:
    if x == -math.inf or x < -400:
        return 0.0
    return 10.0**x


def _monotone_share(values: Sequence[float]) -> float:
    drops = sum(1 for a, b in zip(values, values[1:], strict=False) if b < a)
    return drops / max(1, len(values) - 1)


def _order(conv: Sequence[float]) -> float | None:
    """Asymptotic order p (e_{k+1} ~ C e_k^p) from the last steps before the floor.

    With h = min(3, (len - 1) // 2), compare the log-drop over the last h steps, D2, with the
    drop over the h steps before, D1: p = (D2 / D1)^(1/h). Linear convergence gives equal
    drops (p = 1); order p multiplies the drop by p every step. Block drops average out the
    step-to-step wobble of GD-type traces that ruins single-step ratios.
    """
    h = min(3, (len(conv) - 1) // 2)
    if h < 1:
        return None
    d1 = conv[-1 - 2 * h] - conv[-1 - h]
    d2 = conv[-1 - h] - conv[-1]
    if d1 <= 0.05 or d2 <= 0:
        return None
    return float((d2 / d1) ** (1.0 / h))
