"""Error metrics and the floor detector.

Array metrics take numpy object arrays of exact ``flint.arb`` values (``Backend.to_exact``
output, or truths from :mod:`precision.truth`; plain Python floats and ints are accepted and
converted exactly) and compute in arb at ``prec_bits`` (1024 by default), so an mp100 error of
1e-200 is measured, not flushed to zero. Every arb operation rounds its result *relative* to its
own magnitude, so 1024 bits give ~300 correct digits of each metric whatever the magnitudes.

:func:`detect_floor` is the one floor detector used for solver traces, constructions and
training curves alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import flint
import numpy as np

from precision import deterministic
from precision.backends.mp_backend import workprec

__all__ = [
    "ZERO_LOG10_CAP",
    "ErrorSummary",
    "Floor",
    "correct_digits",
    "decompose",
    "detect_floor",
    "error_summary",
    "log10_mse",
    "max_abs_error",
    "mse",
    "relative_error",
]

# ---------------------------------------------------------------------------------------------
# Array error metrics
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorSummary:
    """Errors of an estimate against a truth, over all entries.

    - ``mse``: mean squared error (0.0 when it underflows float64; ``log10_mse`` keeps it),
    - ``log10_mse``: log10 of the MSE computed in arb (-inf when the estimate is exact),
    - ``max_abs``: largest absolute entry error,
    - ``relative``: ||estimate - truth||_2 / ||truth||_2 (Frobenius; the absolute norm when the
      truth is zero),
    - ``digits``: correct decimal digits, -log10(relative) computed in arb, clipped at 0 from
      below, ``inf`` when the estimate is exact.

    A NaN entry makes every field NaN except ``digits`` (0.0); an infinite entry (and no NaN)
    makes them ``inf`` (``digits`` 0.0).
    """

    mse: float
    log10_mse: float
    max_abs: float
    relative: float
    digits: float


def _flat_arb(a: Any, name: str) -> tuple[tuple[int, ...], list[flint.arb]]:
    """Shape of ``a`` and its entries as arb midpoints (floats and ints converted exactly)."""
    if hasattr(a, "detach"):  # a torch tensor (bfloat16 has no numpy dtype): float64 holds it
        a = a.detach().cpu().double().numpy()
    arr = np.asarray(a, dtype=object)
    out: list[flint.arb] = []
    for v in arr.reshape(-1).tolist():
        if isinstance(v, flint.arb):
            out.append(v.mid())
        elif isinstance(v, bool):
            out.append(flint.arb(int(v)))
        elif isinstance(v, int | float):
            out.append(flint.arb(v))
        elif isinstance(v, np.integer):
            out.append(flint.arb(int(v)))
        elif isinstance(v, np.floating):
            out.append(flint.arb(float(v)))  # exact for float16/32/64
        else:
            raise TypeError(f"{name}: unsupported entry type {type(v).__name__}")
    return arr.shape, out


def _to_float(x: flint.arb) -> float:
    """float of the midpoint (0.0 on underflow, +-inf on overflow)."""
    return float(x.mid())


def _log10(x: flint.arb) -> float:
    """log10 of a nonnegative arb computed in arb (-inf for an exact zero)."""
    if x == 0:
        return -math.inf
    return _to_float(x.mid().log_base(10))


def _non_finite(values: Sequence[flint.arb]) -> float | None:
    """NaN if any entry is NaN, inf if any is infinite, else None."""
    bad = [v for v in values if not v.is_finite()]
    if not bad:
        return None
    return math.nan if any(v.is_nan() for v in bad) else math.inf


def _summarize(est: Sequence[flint.arb], ref: Sequence[flint.arb]) -> ErrorSummary:
    """One pass over the entry differences (call inside :class:`workprec`)."""
    n = len(est)
    if n == 0:
        raise ValueError("error metrics of an empty array")
    special = _non_finite([*est, *ref])
    if special is not None:
        return ErrorSummary(special, special, special, special, 0.0)
    err_sq = flint.arb(0)
    ref_sq = flint.arb(0)
    max_abs = flint.arb(0)
    for e, r in zip(est, ref, strict=True):
        d = (e - r).mid()
        err_sq += d * d
        ref_sq += r * r
        ad = abs(d)
        if ad > max_abs:
            max_abs = ad
    err_sq, ref_sq = err_sq.mid(), ref_sq.mid()
    mse_value = (err_sq / n).mid()
    if err_sq == 0:
        rel = flint.arb(0)
    elif ref_sq == 0:
        rel = err_sq.sqrt().mid()
    else:
        rel = (err_sq / ref_sq).sqrt().mid()
    log_rel = _log10(rel)
    return ErrorSummary(
        mse=_to_float(mse_value),
        log10_mse=_log10(mse_value),
        max_abs=_to_float(max_abs),
        relative=_to_float(rel),
        digits=math.inf if log_rel == -math.inf else max(0.0, -log_rel),
    )


def _pair(estimate: Any, truth: Any) -> tuple[list[flint.arb], list[flint.arb]]:
    shape_e, est = _flat_arb(estimate, "estimate")
    shape_t, tru = _flat_arb(truth, "truth")
    if shape_e != shape_t:
        raise ValueError(f"shape mismatch: estimate {shape_e} vs truth {shape_t}")
    return est, tru


def error_summary(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> ErrorSummary:
    """All metrics of ``estimate`` against ``truth`` (same shape, any ndim) in one pass."""
    with workprec(prec_bits):
        return _summarize(*_pair(estimate, truth))


def mse(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> float:
    """Mean over all entries of (estimate - truth)^2 (0.0 if it underflows float64)."""
    return error_summary(estimate, truth, prec_bits=prec_bits).mse


def log10_mse(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> float:
    """log10 of the MSE computed in arb, so 1e-400 gives -400.0; -inf when exact."""
    return error_summary(estimate, truth, prec_bits=prec_bits).log10_mse


def max_abs_error(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> float:
    """Largest |estimate - truth| over all entries."""
    return error_summary(estimate, truth, prec_bits=prec_bits).max_abs


def relative_error(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> float:
    """||estimate - truth||_2 / ||truth||_2 over all entries (absolute norm if truth is 0)."""
    return error_summary(estimate, truth, prec_bits=prec_bits).relative


def correct_digits(estimate: Any, truth: Any, *, prec_bits: int = 1024) -> float:
    """-log10(relative error) computed in arb (right below float range), >= 0; inf if exact."""
    return error_summary(estimate, truth, prec_bits=prec_bits).digits


def decompose(
    total_estimate: Any, exact_estimate: Any, truth: Any, *, prec_bits: int = 1024
) -> dict[str, ErrorSummary]:
    """Error decomposition (total vs approximation vs rounding) of one subject, precision p,
    input x.

    With f_p the output computed in precision p, f_mp the same computation in high precision
    and y* the truth: total = f_p - y*, approximation = f_mp - y*, rounding = f_p - f_mp. The
    rounding summary's ``relative`` / ``digits`` are measured against f_mp.
    """
    shape_p, f_p = _flat_arb(total_estimate, "total_estimate")
    shape_mp, f_mp = _flat_arb(exact_estimate, "exact_estimate")
    shape_y, y = _flat_arb(truth, "truth")
    if not shape_p == shape_mp == shape_y:
        raise ValueError(f"shape mismatch: {shape_p}, {shape_mp}, {shape_y}")
    with workprec(prec_bits):
        return {
            "total": _summarize(f_p, y),
            "approximation": _summarize(f_mp, y),
            "rounding": _summarize(f_p, f_mp),
        }


# ---------------------------------------------------------------------------------------------
# Floor detector
# ---------------------------------------------------------------------------------------------

#: log10 used internally for an exact-zero error: below any representable floor (an mp2000
#: MSE floor is ~1e-4000) yet finite, so fits stay finite. Exact zeros never enter the rate /
#: order fits; a plateau of exact zeros is reported as ``level`` 0.0, ``log10_level`` -inf.
ZERO_LOG10_CAP = -1.0e6

#: Margin (decades) above the floor band that a point must clear to belong to the converging
#: segment used for ``rate`` and ``order``: near the floor, rounding noise bends the trace.
_SEGMENT_MARGIN = 1.0

#: A trace that ends more than this many decades above its start is "diverged".
_DIVERGE_DECADES = 2.0


@dataclass(frozen=True)
class Floor:
    """The floor (plateau) of an error trace, where it starts, and how the trace got there.

    - ``level`` / ``log10_level``: plateau value, the median of the tail's log10 values
      (``level`` underflows to 0.0 below float64 range; ``log10_level`` does not). For an
      unreached floor, the last value. NaN for "diverged" and empty traces.
    - ``index``: first step from which the trace stays within the floor band (or below it)
      until the end; the last index when the floor is not reached; for "diverged", the first
      non-finite step (or the step from which the trace stays > 2 decades above its start).
    - ``reached``: False when the trace is still falling at its end (see :func:`detect_floor`).
    - ``kind``: "linear" | "superlinear" | "sublinear" | "none" | "diverged".
    - ``rate``: for "linear" only, the per-step factor of the trace values over the converging
      segment, 10**slope of a least-squares line through the log10 values. For an MSE trace
      this is q**2 when the error norm contracts by q per step.
    - ``order``: estimated order of convergence p (e_{k+1} ~ C e_k^p) over the converging
      segment: ~1 for linear, ~2 for Newton(-Schulz), ~3 for order-3 Newton-Schulz. Squaring
      an error (norm -> MSE) doubles every log, which cancels in the ratios, so the order of
      an MSE trace equals that of the error norm. None when fewer than one usable ratio.
    """

    level: float
    log10_level: float
    index: int
    reached: bool
    kind: str
    rate: float | None
    order: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (``json.dumps(..., allow_nan=False)`` works).

        Infinities become the strings "inf" / "-inf" (an exact-zero floor keeps its meaning),
        NaN becomes None; other floats, ints, bools and strings are unchanged.
        """
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if isinstance(value, float) and math.isnan(value):
                value = None
            elif isinstance(value, float) and math.isinf(value):
                value = "inf" if value > 0 else "-inf"
            out[key] = value
        return out


def _trace_logs(trace: Sequence[float], log10_trace: Sequence[float] | None) -> list[float]:
    """log10 of each trace value: -inf for 0, NaN for NaN, +inf for inf."""
    if log10_trace is not None:
        logs = [float(v) for v in log10_trace]
        if len(trace) and len(trace) != len(logs):
            raise ValueError(f"trace has {len(trace)} values, log10_trace {len(logs)}")
        return logs
    logs = []
    for v in trace:
        v = float(v)
        if math.isnan(v) or v == math.inf:
            logs.append(v)
        elif v < 0:
            raise ValueError(f"error trace values must be nonnegative, got {v}")
        else:
            logs.append(math.log10(v) if v > 0 else -math.inf)
    return logs


def _pow10(log_value: float) -> float:
    if math.isnan(log_value):
        return math.nan
    if log_value < -400:  # below the smallest float64 subnormal
        return 0.0
    try:
        return 10.0**log_value
    except OverflowError:
        return math.inf


def _slope(values: np.ndarray) -> float:
    """Least-squares slope of values against their position."""
    if len(values) < 2:
        return 0.0
    return deterministic.linear_fit(np.arange(len(values), dtype=np.float64), values)[0]


#: Smallest fitted drop (decades) across a tail that can count as "still falling": a trace
#: that changes less than this over its whole tail is flat for any measurement purpose.
_MIN_FALL_DECADES = 1e-3

#: The tail is cut into this many blocks (fewer for short tails, at least
#: :data:`_MIN_FALL_BLOCKS`) whose means must fall strictly one after another for a "steady"
#: fall: white rounding jitter does that with probability 1/8! = 2.5e-5 (1/6! = 1.4e-3 for
#: six), and averaging over a block removes GD's period-2 wobble.
_FALL_BLOCKS = 8
_MIN_FALL_BLOCKS = 6


def _still_falling(tail: np.ndarray, tol: float) -> bool:
    """The tail is still converging, by either of two tests:

    - **fast**: its least-squares line drops by more than ``tol`` decades (and by more than
      three times the scatter around that line) across the tail, and by more than
      ``tol / 2`` across its second half (so a trace that flattened within the tail has
      reached its floor, and a jittering floor whose last point is low has too);
    - **steady**: the means of :data:`_FALL_BLOCKS` consecutive blocks of the tail fall
      strictly, by more than :data:`_MIN_FALL_DECADES` in all. A slowly converging trace (GD
      at kappa 1e4 drops ~1e-4 decades a step) is still falling however small its drop per
      step; a rounding floor jitters around a flat line and a floor reached inside the tail
      has equal (or rising) blocks after it.
    """
    if len(tail) < 3:
        return len(tail) == 2 and tail[0] - tail[1] > tol
    half = tail[len(tail) // 2 :]
    pos = np.arange(len(tail), dtype=np.float64)
    slope, intercept = deterministic.linear_fit(pos, tail)     # no LAPACK: the same on
    drop = -float(slope) * (len(tail) - 1)                       # every machine
    resid = tail - (slope * pos + intercept)
    scatter = math.sqrt(deterministic.mean((resid - deterministic.mean(resid)) ** 2))
    if drop > max(tol, 3 * scatter) and -_slope(half) * (len(half) - 1) > tol / 2:
        return True
    blocks = min(_FALL_BLOCKS, len(tail))
    if blocks < _MIN_FALL_BLOCKS:
        return False
    means = np.array([deterministic.mean(part) for part in np.array_split(tail, blocks)])
    return bool(np.all(np.diff(means) < 0) and means[0] - means[-1] > _MIN_FALL_DECADES)


def _plateau(tail: np.ndarray, tol: float) -> tuple[float, float]:
    """Level (median) and upper band edge of the plateau formed by ``tail``.

    Leading tail points still descending into the plateau (higher than the median by more than
    ``2 tol`` plus the plateau's downward spread) are trimmed first. The band reaches
    ``max(tol, highest plateau point - level)`` above the level, so the jitter of a noisy
    rounding floor stays inside it.
    """
    level = float(np.median(tail))
    finite = tail[tail > ZERO_LOG10_CAP]
    down = level - float(finite.min()) if len(finite) and level > ZERO_LOG10_CAP else 0.0
    keep = np.nonzero(tail <= level + 2 * tol + down)[0]
    plateau = tail[keep[0] :] if len(keep) else tail
    level = float(np.median(plateau))
    return level, level + max(tol, float(plateau.max()) - level)


def _decelerating(seg: np.ndarray) -> bool:
    """The log-decrease per step keeps shrinking: over a segment of >= 12 points split in
    thirds, each third's fitted drop per step is below 3/4 of the previous third's (1/k and
    k**-a traces do this; a geometric trace after a fast first step does not)."""
    if len(seg) < 12:
        return False
    s1, s2, s3 = (-_slope(part) for part in np.array_split(seg, 3))
    return s1 > 0 and s2 < 0.75 * s1 and s3 < 0.75 * s2


def _order(seg: np.ndarray) -> float | None:
    """Order of convergence from successive log-decrease ratios.

    With L = log10 values and d_k = L_k - L_{k+1}, the single-step estimate is
    p_k = d_{k+1} / d_k = log(e_{k+1}/e_k) / log(e_k/e_{k-1}). Over a window of w steps,
    D_k = L_k - L_{k+w} and p_k = (D_{k+w} / D_k)**(1/w), which is exact for a constant order
    (the decreases grow by p per step) and averages out step-to-step noise and the period-2
    wobble of gradient descent with the optimal step (decreases alternating a, b, a, b).
    w = 1 for segments shorter than 8 points (superlinear traces are short), else the even
    number 2 * max(1, len // 20). Only ratios whose two decreases both exceed
    w * min(0.05, median(d) / 4) decades count (warm-up steps that barely move are skipped);
    the order is their median, None when there is none.
    """
    d = -np.diff(seg)
    positive = d[d > 0]
    if len(positive) < 2:
        return None
    thr = min(0.05, float(np.median(positive)) / 4)
    w = 1 if len(seg) < 8 else 2 * max(1, len(seg) // 20)
    big = seg[:-w] - seg[w:]  # big[k] = D_k
    ratios = [
        float((big[k + w] / big[k]) ** (1.0 / w))
        for k in range(len(big) - w)
        if big[k] > w * thr and big[k + w] > w * thr
    ]
    return float(np.median(ratios)) if ratios else None


def detect_floor(
    trace: Sequence[float],
    *,
    log10_trace: Sequence[float] | None = None,
    tol_decades: float = 0.5,
    tail_fraction: float = 0.2,
    min_tail: int = 3,
    window: int | None = None,
) -> Floor:
    """Plateau level, the step where it starts, and the convergence kind, rate and order.

    ``trace`` holds nonnegative errors per step (index 0 = initial iterate). ``log10_trace``,
    if given, replaces ``log10(trace)`` (pass it for values below float64 range, e.g. -400 for
    an mp200 floor; -inf there means an exact zero). Everything works on log10 values; an
    exact 0.0 counts as :data:`ZERO_LOG10_CAP` (-1e6).

    Steps:

    1. **Diverged**: any NaN / +inf, or a last value more than 2 decades above the first.
    2. **Tail**: the last ``tail_fraction`` of the trace (at least ``min_tail`` points when
       available; a caller whose traces are short raises it so that the steady test applies).
       If it is still falling (:func:`_still_falling`: its least-squares line drops more than
       ``tol_decades``, or its block means fall steadily), the floor is **not reached**:
       level = last value, index = last index.
    3. **Plateau**: level = median of the tail's log10 values (after trimming leading points
       still descending into it); band = level + max(``tol_decades``, plateau jitter);
       ``index`` = first step after which every value stays in the band or below it.
    4. **Converging segment**: steps 0 .. the last step before ``index`` that lies more than
       1 decade above the band (all steps when the floor is not reached). With fewer than 3
       points, or a net drop <= ``tol_decades``, kind = "none".
    5. **Kind**: ``order`` (see :func:`_order`) >= 1.5 -> "superlinear"; else "sublinear" if
       the trace decelerates (see :func:`_decelerating`: slower than any geometric
       sequence) or, on a segment of >= 12 points, order < 0.8; else "linear" with ``rate`` =
       10**slope of the segment's line (short noisy segments default to "linear").

    ``window``: the trace ran ``window`` steps past the step its floor was predicted at (000's
    kappa sweep, past eq. 3.3's count), so the floor is judged against that prediction
    instead of steps 1-5: level = median of the last ``window`` values, band = max(level +
    2 tol, their highest + tol) (one query's error jitters by ~3 decades a step), ``index``
    as in 3., ``reached`` iff it lies before the window and the level is finite; NaN counts
    as +inf, exact zeros as -1e6 (no -inf), and kind is "none".
    """
    tol = float(tol_decades)
    logs = _trace_logs(trace, log10_trace)
    n = len(logs)
    if n == 0:
        return Floor(math.nan, math.nan, 0, False, "none", None, None)
    x = np.maximum(np.nan_to_num(np.asarray(logs, dtype=np.float64), nan=np.inf), ZERO_LOG10_CAP)
    if window is not None:
        tail = x[-max(1, min(window, n)):]
        level = float(np.median(tail))
        above = np.nonzero(x > max(level + 2 * tol, float(np.max(tail)) + tol))[0]
        index = int(above[-1]) + 1 if len(above) else 0
        reached = bool(np.isfinite(level)) and index <= n - len(tail)
        return Floor(_pow10(level), level, index, reached, "none", None, None)

    bad = next((k for k, v in enumerate(logs) if math.isnan(v) or v == math.inf), None)
    if bad is None and logs[-1] > logs[0] + _DIVERGE_DECADES:
        bad = n - 1
        while bad > 0 and logs[bad - 1] > logs[0] + _DIVERGE_DECADES:
            bad -= 1
    if bad is not None:
        return Floor(math.nan, math.nan, bad, False, "diverged", None, None)

    tail_n = min(n, max(min_tail, 3, math.ceil(tail_fraction * n)))
    tail = x[-tail_n:]

    if _still_falling(tail, tol):
        reached = False
        log_level, index, seg_end = float(x[-1]), n - 1, n - 1
    else:
        reached = True
        log_level, band = _plateau(tail, tol)
        above = np.nonzero(x > band)[0]
        index = int(above[-1]) + 1 if len(above) else 0
        index = min(index, n - 1)
        clear = np.nonzero(x[:index] > band + _SEGMENT_MARGIN)[0]
        if len(clear) < 3:
            clear = np.nonzero(x[:index] > band)[0]
        seg_end = int(clear[-1]) if len(clear) else -1

    if log_level <= ZERO_LOG10_CAP:
        log_level = -math.inf
    floor = {"level": _pow10(log_level), "log10_level": log_level, "index": index}

    seg = x[: seg_end + 1]
    zeros = np.nonzero(seg <= ZERO_LOG10_CAP)[0]
    if len(zeros):  # an exact zero ends the segment: it has no finite log to fit
        seg = seg[: zeros[0]]
    if len(seg) < 3 or seg[0] - seg[-1] <= tol:
        return Floor(**floor, reached=reached, kind="none", rate=None, order=None)

    order = _order(seg)
    if order is not None and order >= 1.5:
        return Floor(**floor, reached=reached, kind="superlinear", rate=None, order=order)
    if _decelerating(seg) or (order is not None and order < 0.8 and len(seg) >= 12):
        return Floor(**floor, reached=reached, kind="sublinear", rate=None, order=order)
    rate = 10.0 ** _slope(seg)
    return Floor(**floor, reached=reached, kind="linear", rate=rate, order=order)
