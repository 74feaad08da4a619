import math

import flint
import numpy as np
import pytest

from precision.metrics import decompose, detect_floor, error_summary


def arr(values):
    out = np.empty(len(values), dtype=object)
    out[:] = [flint.arb(v) if not isinstance(v, flint.arb) else v for v in values]
    return out


def test_error_summary_hand_values():
    s = error_summary(arr([1.0, 2.0, 3.0]), arr([1.0, 2.5, 2.0]))
    assert s.mse == pytest.approx((0 + 0.25 + 1.0) / 3)
    assert s.max_abs == 1.0
    assert s.relative == pytest.approx(math.sqrt(1.25) / math.sqrt(1 + 6.25 + 4))
    assert s.digits == pytest.approx(-math.log10(s.relative))
    assert s.log10_mse == pytest.approx(math.log10(1.25 / 3))


def test_error_below_float_range_is_measured():
    old = flint.ctx.prec
    flint.ctx.prec = 2000
    try:
        est = arr([flint.arb(1) + flint.arb(10) ** -200, flint.arb(2)])
    finally:
        flint.ctx.prec = old
    s = error_summary(est, arr([1.0, 2.0]))
    assert s.mse == 0.0  # underflows float64 ...
    assert s.log10_mse == pytest.approx(-400 - math.log10(2), abs=1e-9)  # ... but not here
    assert s.digits == pytest.approx(200 + math.log10(math.sqrt(5)), abs=1e-9)


def test_exact_estimate():
    s = error_summary(arr([1.0, -2.0]), arr([1.0, -2.0]))
    assert s.mse == 0.0 and s.log10_mse == -math.inf and s.digits == math.inf


def test_decompose_splits_total_into_approximation_and_rounding():
    truth, exact, rounded = arr([1.0, 1.0]), arr([1.5, 1.0]), arr([1.5, 1.25])
    d = decompose(rounded, exact, truth)
    assert d["approximation"].mse == pytest.approx(0.125)
    assert d["rounding"].mse == pytest.approx(0.03125)
    assert d["total"].mse == pytest.approx((0.25 + 0.0625) / 2)


def test_floor_of_linear_trace_with_jittered_plateau():
    rng = np.random.default_rng(0)
    clean = [max(0.5**k, 1e-14) for k in range(120)]
    trace = [v * 10 ** rng.uniform(-0.3, 0.3) if v == 1e-14 else v for v in clean]
    f = detect_floor(trace)
    assert f.kind == "linear" and f.reached
    assert f.rate == pytest.approx(0.5, rel=0.05)
    assert 1e-14 / 3 < f.level < 3e-14
    crossing = math.ceil(14 / math.log10(2))  # 0.5^k = 1e-14 at k = 46.5
    assert abs(f.index - crossing) <= 3


@pytest.mark.parametrize("order", [2, 3])
def test_superlinear_order_below_float_range(order):
    logs, v = [], -1.0
    while v > -100:
        logs.append(v)
        v = order * v
    logs += [-100.0] * 5
    f = detect_floor([0.0] * len(logs), log10_trace=logs)
    assert f.kind == "superlinear"
    assert f.order == pytest.approx(order, abs=0.2)
    assert f.log10_level == pytest.approx(-100)
    assert f.level == pytest.approx(1e-100)
    assert f.index == len(logs) - 5


def test_still_falling_and_diverged_and_exact():
    falling = detect_floor([0.5**k for k in range(30)])
    assert not falling.reached and falling.index == 29
    assert detect_floor([1.0, 0.1, float("nan")]).kind == "diverged"
    assert detect_floor([1e-3, 1e-2, 1e3]).kind == "diverged"
    exact = detect_floor([1.0, 1e-3, 0.0, 0.0, 0.0])
    assert exact.log10_level == -math.inf and exact.index == 2
    assert detect_floor([]).kind == "none"
    assert detect_floor([1e-5]).index == 0


def test_floor_to_dict_is_json_safe():
    import json

    f = detect_floor([1.0, 1e-3, 0.0, 0.0, 0.0])
    text = json.dumps(f.to_dict(), allow_nan=False)
    assert '"-inf"' in text
