"""Stochastic rounding avoids the stagnation of round-to-nearest: GD and a long dot product."""

import numpy as np

from precision.precisions import parse_precision
from probes.sr_stagnation import dot_error, gd_errors, least_squares_problem


def test_gd_in_fp8_stagnates_under_rne_and_keeps_descending_under_sr():
    X, y = least_squares_problem()
    fmt = parse_precision("float8_e4m3")
    rn = gd_errors(fmt, X, y, 120, (60, 120))
    assert rn[120] > 0.05 and rn[120] >= 0.9 * rn[60]            # stuck far from w*
    sr = [gd_errors(parse_precision(f"float8_e4m3:sr+seed={s}"), X, y, 120, (60, 120),
                    data=fmt) for s in range(3)]
    assert np.median([r[120] for r in sr]) < rn[120] / 4
    assert np.median([r[120] for r in sr]) < np.median([r[60] for r in sr])


def test_long_dot_product_in_bfloat16_stagnates_under_rne_not_under_sr():
    n = 2048
    rn = dot_error(parse_precision("bfloat16+acc=bfloat16"), n)
    sr = [dot_error(parse_precision(f"bfloat16:sr+acc=bfloat16+seed={s}"), n) for s in range(3)]
    assert rn > 0.2                       # the sum stops growing at a few hundred
    assert max(sr) < rn / 3
