"""Array error metrics (in arb) and the floor detector."""

import json
import math

import flint
import numpy as np
import pytest

from precision.metrics import (
    ErrorSummary,
    correct_digits,
    decompose,
    detect_floor,
    error_summary,
    log10_mse,
    max_abs_error,
    mse,
    relative_error,
)


def arr(values, shape=None):
    """Object array of exact arb values (floats converted exactly)."""
    flat = [v if isinstance(v, flint.arb) else flint.arb(v) for v in values]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape) if shape else out


def one_plus_pow10(exponent):
    """arb(1) + 10**exponent, built at a precision that holds it."""
    old = flint.ctx.prec
    flint.ctx.prec = 4 * abs(exponent) + 64
    try:
        return flint.arb(1) + flint.arb(10) ** exponent
    finally:
        flint.ctx.prec = old


# --- array metrics ----------------------------------------------------------------------------


def test_metrics_hand_values():
    est, tru = arr([1.0, 2.0, 3.0]), arr([1.0, 2.5, 2.0])
    assert mse(est, tru) == pytest.approx((0 + 0.25 + 1.0) / 3, rel=1e-15)
    assert max_abs_error(est, tru) == 1.0
    rel = math.sqrt(1.25) / math.sqrt(1 + 6.25 + 4)
    assert relative_error(est, tru) == pytest.approx(rel, rel=1e-15)
    assert correct_digits(est, tru) == pytest.approx(-math.log10(rel), rel=1e-14)
    assert log10_mse(est, tru) == pytest.approx(math.log10(1.25 / 3), rel=1e-14)


def test_two_dimensional_mixed_python_numbers():
    est = arr([0.5, 2, -1.0, 4.0], shape=(2, 2))
    tru = np.array([[0.0, 2], [1.0, 4]], dtype=object)  # plain Python floats / ints
    s = error_summary(est, tru)
    assert s == ErrorSummary(
        mse=(0.25 + 4.0) / 4,
        log10_mse=pytest.approx(math.log10(4.25 / 4)),
        max_abs=2.0,
        relative=pytest.approx(math.sqrt(4.25 / 21)),
        digits=pytest.approx(-math.log10(math.sqrt(4.25 / 21))),
    )


def test_error_1e_minus_120_is_measured_below_float_range():
    est, tru = arr([one_plus_pow10(-120)]), arr([1])
    s = error_summary(est, tru)
    assert s.log10_mse == pytest.approx(-240, abs=1e-9)
    assert s.digits == pytest.approx(120, abs=1e-9)
    assert s.relative == pytest.approx(1e-120, rel=1e-12)
    assert s.max_abs == pytest.approx(1e-120, rel=1e-12)
    assert correct_digits(est, tru) == pytest.approx(120, abs=1e-9)


def test_mse_underflowing_float64_keeps_its_log():
    est, tru = arr([one_plus_pow10(-200), 2]), arr([1, 2])
    s = error_summary(est, tru)
    assert s.mse == 0.0
    assert s.log10_mse == pytest.approx(-400 - math.log10(2), abs=1e-9)
    assert s.digits == pytest.approx(200 + math.log10(math.sqrt(5)), abs=1e-9)


def test_exact_zero_truth_and_non_finite():
    exact = error_summary(arr([1.0, -2.0]), arr([1.0, -2.0]))
    assert (exact.mse, exact.log10_mse, exact.digits) == (0.0, -math.inf, math.inf)
    zero_truth = error_summary(arr([3.0, 4.0]), arr([0.0, 0.0]))
    assert zero_truth.relative == 5.0  # absolute norm
    assert zero_truth.digits == 0.0  # -log10(5) < 0 is clipped
    nan = error_summary(arr([float("nan"), 1.0]), arr([1.0, 1.0]))
    assert math.isnan(nan.mse) and math.isnan(nan.relative) and nan.digits == 0.0
    inf = error_summary(arr([float("inf"), 1.0]), arr([1.0, 1.0]))
    assert inf.mse == math.inf and inf.digits == 0.0


def test_precision_context_restored_and_shape_checked():
    old = flint.ctx.prec
    error_summary(arr([1.0]), arr([2.0]), prec_bits=333)
    assert flint.ctx.prec == old
    with pytest.raises(ValueError):
        error_summary(arr([1.0, 2.0], shape=(1, 2)), arr([1.0, 2.0], shape=(2, 1)))
    assert flint.ctx.prec == old


def test_decompose_hand_values():
    truth, exact, rounded = arr([1.0, 1.0]), arr([1.5, 1.0]), arr([1.5, 1.25])
    d = decompose(rounded, exact, truth)
    assert set(d) == {"total", "approximation", "rounding"}
    assert d["total"].mse == (0.25 + 0.0625) / 2
    assert d["approximation"].mse == 0.125
    assert d["rounding"].mse == 0.03125
    assert d["approximation"].max_abs == 0.5 and d["rounding"].max_abs == 0.25
    assert d["rounding"].relative == pytest.approx(0.25 / math.sqrt(1.5**2 + 1))


# --- floor detector ---------------------------------------------------------------------------


def test_linear_trace_with_jittered_floor():
    rng = np.random.default_rng(0)
    clean = np.maximum(0.5 ** np.arange(120), 1e-14)
    jitter = np.where(clean == 1e-14, rng.uniform(-0.3, 0.3, clean.size), 0.0)
    f = detect_floor((clean * 10**jitter).tolist())
    assert f.kind == "linear" and f.reached
    assert f.rate == pytest.approx(0.5, rel=0.05)
    assert f.order == pytest.approx(1.0, abs=0.1)
    assert 1e-14 / 3 < f.level < 3e-14
    assert f.log10_level == pytest.approx(math.log10(f.level))
    crossing = math.ceil(14 / math.log10(2))  # 0.5**k < 1e-14 from k = 47 on
    assert abs(f.index - crossing) <= 3


@pytest.mark.parametrize("seed", range(5))
def test_noisy_linear_trace_everywhere(seed):
    rng = np.random.default_rng(seed)
    clean = np.maximum(0.5 ** np.arange(150), 1e-14)
    f = detect_floor((clean * 10 ** rng.uniform(-0.1, 0.1, clean.size)).tolist())
    assert f.kind == "linear" and f.rate == pytest.approx(0.5, rel=0.05)
    assert 1e-14 / 3 < f.level < 3e-14 and abs(f.index - 47) <= 3


def test_gradient_descent_wobble_is_linear():
    # Decreases alternate 0.5 / 0.1 decades (optimal-step GD): order 1, rate 10**-0.3.
    logs = np.concatenate([np.cumsum([0.0] + [-0.5, -0.1] * 40), np.full(30, -24.5)])
    f = detect_floor(10.0**logs)
    assert f.kind == "linear"
    assert f.order == pytest.approx(1.0, abs=0.05)
    assert f.rate == pytest.approx(10**-0.3, rel=0.05)


@pytest.mark.parametrize("order,floor_log10", [(2, -100.0), (3, -400.0)])
def test_superlinear_order_from_log10_trace(order, floor_log10):
    logs, v = [], -1.0
    while v > floor_log10:
        logs.append(v)
        v *= order
    n_conv = len(logs)
    logs += [floor_log10] * 8
    trace = [10.0**x if x > -300 else 0.0 for x in logs]  # -400 underflows: log10 is used
    f = detect_floor(trace, log10_trace=logs)
    assert f.kind == "superlinear" and f.reached
    assert f.order == pytest.approx(order, abs=0.2)
    assert f.log10_level == pytest.approx(floor_log10)
    assert f.level == (1e-100 if floor_log10 == -100 else 0.0)
    assert f.index == n_conv
    assert f.rate is None


def test_still_falling_is_not_reached():
    f = detect_floor([0.7**k for k in range(60)])
    assert not f.reached and f.index == 59
    assert f.level == pytest.approx(0.7**59)
    assert f.kind == "linear" and f.rate == pytest.approx(0.7, rel=1e-6)


def test_flattening_inside_the_tail_counts_as_reached():
    trace = [max(0.5**k, 1e-10) for k in range(40)]  # floor from k = 34, tail = last 8
    f = detect_floor(trace)
    assert f.reached and f.level == pytest.approx(1e-10)
    assert 32 <= f.index <= 34  # 0.5**32 = 2.3e-10 is within tol_decades of the floor


def test_sublinear_trace():
    f = detect_floor([1.0 / k**2 for k in range(1, 400)], tol_decades=0.1)
    assert f.kind == "sublinear" and f.rate is None


def test_divergence():
    nan = detect_floor([1.0, 0.1, float("nan"), 0.1])
    assert nan.kind == "diverged" and not nan.reached and nan.index == 2
    assert math.isnan(nan.level) and math.isnan(nan.log10_level)
    assert detect_floor([1.0, float("inf")]).kind == "diverged"
    grown = detect_floor([1e-3, 1e-2, 1e-1, 1e3, 1e4])
    assert grown.kind == "diverged" and grown.index == 3


def test_exact_zero_floor():
    f = detect_floor([1.0, 1e-3, 1e-6, 0.0, 0.0, 0.0, 0.0])
    assert f.level == 0.0 and f.log10_level == -math.inf
    assert f.index == 3 and f.reached
    assert f.kind == "linear" and f.rate == pytest.approx(1e-3)
    # Exact zeros arriving as log10 = -inf (ErrorSummary.log10_mse) behave the same.
    g = detect_floor([0.0] * 5, log10_trace=[0.0, -3.0, -math.inf, -math.inf, -math.inf])
    assert g.log10_level == -math.inf and g.index == 2


def test_degenerate_traces():
    empty = detect_floor([])
    assert (empty.kind, empty.index, empty.reached) == ("none", 0, False)
    assert math.isnan(empty.level)
    one = detect_floor([1e-5])
    assert (one.index, one.kind, one.log10_level) == (0, "none", pytest.approx(-5))
    flat = detect_floor([0.3] * 50)
    assert flat.kind == "none" and flat.index == 0 and flat.level == pytest.approx(0.3)
    short = detect_floor([1.0, 1e-8, 1e-8, 1e-8, 1e-8])
    assert short.kind == "none" and short.index == 1 and short.reached
    with pytest.raises(ValueError):
        detect_floor([1.0, -1.0])
    with pytest.raises(ValueError):
        detect_floor([1.0, 0.5], log10_trace=[0.0])


def test_floor_to_dict_is_json_safe():
    zero = detect_floor([1.0, 1e-3, 0.0, 0.0, 0.0]).to_dict()
    assert zero["log10_level"] == "-inf" and zero["level"] == 0.0
    diverged = detect_floor([1.0, float("nan")]).to_dict()
    assert diverged["level"] is None and diverged["kind"] == "diverged"
    for d in (zero, diverged):
        assert json.loads(json.dumps(d, allow_nan=False)) == d
