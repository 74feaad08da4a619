"""MX block quantisation against gfloat's (an outside reference), bit for bit, and the
shared-exponent rule at a block max just below a power of two.

gfloat's ``quantize_block`` scales a block by 2^X from a ``compute_scale`` callable, rounds
every element with its ``round_float`` (saturating) and decodes the encoded block. Its own
``compute_scale_amax`` takes X = floor(log2(amax)) - emax_elem with log2 in floating point (the
``+scale=log2`` rule); ``_exact_scale`` below is the spec's floor(log2 amax) read off amax's
binary exponent (the default rule), so the same gfloat element rounding is the reference for
both. Every test counts its element comparisons and prints them (``pytest -s``; also recorded
as the test's ``comparisons`` property).
"""

import math

import numpy as np
import pytest
import torch

from precision.formats.binary_format import MX_FORMATS, MX_INT8_ELEMENT, mx_element
from precision.formats.mx import quantize_mx
from precision.formats.op_rounding import RoundResults
from precision.formats.rounding import RandomStream, round_to_format
from precision.precisions import parse_precision

gfloat = pytest.importorskip("gfloat")
gformats = pytest.importorskip("gfloat.formats")

#: our rounding mode -> gfloat's
MODES = {"rne": "TiesToEven", "rna": "TiesToAway", "rz": "TowardZero", "ru": "TowardPositive",
         "rd": "TowardNegative"}
DTYPES = {np.float32: torch.float32, np.float64: torch.float64}


def _exact_scale(emax: float, vals: np.ndarray) -> float:
    """OCP MX v1.0 Sec. 6.3's scale, written out: 2^(floor(log2 amax) - emax) with the floor
    from amax's binary exponent (math.frexp: amax = f 2^e, 1/2 <= f < 1), clamped to E8M0's
    2^-127 .. 2^127; an all-zero block takes 2^-127."""
    amax = float(np.max(np.abs(vals)))
    if amax == 0.0:
        return 2.0 ** -127
    return 2.0 ** min(max(math.frexp(amax)[1] - 1 - emax, -127), 127)


def _gfloat_blocks(name: str, v: np.ndarray, mode: str, scale: str) -> np.ndarray:
    """gfloat's quantisation of each row of ``v`` (one block of 32 per row) by the scale rule
    ``scale`` ("exact": :func:`_exact_scale`, "log2": gfloat's ``compute_scale_amax``)."""
    info = getattr(gformats, f"format_info_{name}")
    compute = _exact_scale if scale == "exact" else gfloat.compute_scale_amax
    rounding = getattr(gfloat.RoundMode, MODES[mode])
    return np.stack([gfloat.quantize_block(info, row, compute, rounding) for row in v])


def _ours(name: str, v: np.ndarray, mode: str, scale: str) -> np.ndarray:
    """quantize_mx of each row of ``v`` (in ``v``'s dtype), as float64."""
    t = torch.from_numpy(v)
    return quantize_mx(t, mx_element(name), dim=1, mode=mode, scale=scale).double().numpy()


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit as float64 (signed zeros included)."""
    return a.shape == b.shape and bool(np.array_equal(a.view(np.int64), b.view(np.int64)))


def _report(record_property, what: str, count: int) -> None:
    record_property("comparisons", count)
    print(f"\nconformance {what}: {count} comparisons, 0 differ")


def test_the_mxint8_element_grid_is_gfloats():
    """Every code of gfloat's OCP INT8 element decodes to k 2^-6, -128 <= k <= 127: our
    element's range is [-2, 127/64] on the grid 2^-6 and emax_elem is 0."""
    info = gformats.format_info_ocp_int8
    values = sorted(gfloat.decode_float(info, code).fval for code in range(256))
    assert values == [k / 64 for k in range(-128, 128)]
    assert info.emax == MX_INT8_ELEMENT.emax == 0
    assert MX_INT8_ELEMENT.min_finite == info.min == -2.0
    assert MX_INT8_ELEMENT.max_finite == info.max == 127 / 64
    assert MX_INT8_ELEMENT.min_subnormal == 2.0 ** -6
    assert gformats.format_info_mxint8.k == 32 and MX_FORMATS["mxint8"] == info.name


def _element_probes(dtype) -> np.ndarray:
    """Scaled element values in (-2, 2): every element but -2 (whose magnitude would raise
    the block's exponent), every midpoint, the carrier neighbours of both, the saturation
    band (127/64, 2) and its negative (-2, -127/64), and random points."""
    values = np.arange(-127, 128) / 64
    mids = (np.arange(-128, 127) + 0.5) / 64
    grid = np.concatenate([values, mids]).astype(dtype)
    near = np.concatenate([np.nextafter(grid, dtype(np.inf)), np.nextafter(grid, dtype(-np.inf))])
    below_two = np.nextafter(dtype(2), dtype(0))
    band = np.array([127.25, 127.5, 127.75, 127.99], dtype=np.float64) / 64
    band = np.concatenate([band, [float(below_two)]]).astype(dtype)
    rng = np.random.default_rng(8)
    x = np.concatenate([grid, near, band, -band, rng.uniform(-2, 2, 400).astype(dtype)])
    keep = (np.abs(x) < 2) & ((x == 0) | (np.abs(x) >= 2.0 ** -100))   # exact when scaled
    return x[keep]


def _ties_away_slips(units: np.ndarray) -> np.ndarray:
    """Where gfloat's TiesToAway is not IEEE 754's roundTiesToAway: it rounds away when
    ``delta + 0.5 >= 1.0`` in float64, and for an element below one spacing (delta = |x| in
    spacings, exact to 2^-1074) a delta of 1/2 - 2^-54 sums to 1.0 (the tie of 1 - 2^-54
    goes to even), so gfloat rounds x = -+(1/2 - 2^-54) spacing away from zero where
    roundTiesToAway gives 0. Only a float64 carrier holds such an x; our rounding is IEEE's."""
    delta = np.abs(units)
    return (delta > 0) & (delta < 0.5) & (delta + 0.5 >= 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_mxint8_elements_against_gfloat(mode, dtype, record_property):
    """Every element, midpoint, neighbour and the saturation band, at four block exponents,
    each block anchored by +-2^X so that its shared exponent is X; both scale rules (the
    anchor is a power of two, where they agree)."""
    x = _element_probes(dtype)
    x = np.concatenate([x, np.zeros((-len(x)) % 31, dtype=dtype)])   # 31 probes a block
    probes = x.reshape(-1, 31)
    count = slips = 0
    for exponent in (0, -7, 9, 60):
        anchor = np.where(np.arange(len(probes)) % 2 == 0, 1.0, -1.0)[:, None]
        v = (np.concatenate([anchor, probes], axis=1) * 2.0 ** exponent).astype(dtype)
        assert np.array_equal(v / 2.0 ** exponent, np.concatenate([anchor, probes], axis=1))
        units = v.astype(np.float64) / 2.0 ** (exponent - 6)          # V_i / 2^X in 2^-6
        slip = _ties_away_slips(units) if mode == "rna" else np.zeros(v.shape, bool)
        for scale in ("exact", "log2"):
            got, want = _ours("mxint8", v, mode, scale), _gfloat_blocks("mxint8", v, mode, scale)
            want = np.where(slip, 0.0, want)     # IEEE: |x| < half a spacing rounds to (+)0
            bad = got != want
            assert _same(got, want), (mode, exponent, scale, v[bad][:4], got[bad][:4],
                                      want[bad][:4])
            count += got.size
        slips += int(slip.sum())
    # the edges the probes reach: -2 is an element (rounded to from (-2, -127/64)), +2 is not
    top = np.array([[1.0, 127.75 / 64, -127.75 / 64] + [0.0] * 29], dtype=dtype)
    edge = _ours("mxint8", top, mode, "exact")[0, 1:3]
    want_edge = {"rne": [127 / 64, -2.0], "rna": [127 / 64, -2.0], "rz": [127 / 64, -127 / 64],
                 "ru": [127 / 64, -127 / 64], "rd": [127 / 64, -2.0]}[mode]
    assert edge.tolist() == want_edge
    assert slips == (2 * 4 if (mode, dtype) == ("rna", np.float64) else 0)  # +-(1/2 - 2^-54)
    _report(record_property, f"mxint8 elements {mode} {dtype.__name__}", count)


def _random_blocks(dtype) -> np.ndarray:
    """Blocks of 32 across E8M0's range (normal values times 10^-30 .. 10^30 per block, an
    all-zero block, blocks of mixed magnitude and one of float32 subnormals)."""
    rng = np.random.default_rng(5)
    v = rng.standard_normal((64, 32)) * 10.0 ** rng.integers(-30, 31, (64, 1))
    v[3] = 0.0
    v[4, :16] *= 1e-6                                      # elements far below the block max
    v[5] = rng.standard_normal(32) * 1e-39                 # float32 subnormals (E8M0's floor)
    v[6, ::2] = 0.0
    return v.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MX_FORMATS))
def test_random_blocks_against_gfloat_in_every_mode_and_rule(name, dtype, record_property):
    """Random blocks in every MX format, every deterministic rounding and both scale rules
    (no block max sits near a power of two, so the rules agree here)."""
    v = _random_blocks(dtype)
    count = 0
    for mode in sorted(MODES):
        for scale in ("exact", "log2"):
            got, want = _ours(name, v, mode, scale), _gfloat_blocks(name, v, mode, scale)
            bad = got != want
            assert _same(got, want), (name, mode, scale, v[bad][:4], got[bad][:4], want[bad][:4])
            count += got.size
    _report(record_property, f"{name} random blocks {dtype.__name__}", count)


def _blocks_below_powers_of_two(dtype) -> np.ndarray:
    """Blocks whose max is 2^k (1 - j ulp) for k across E8M0's range, kept where the
    floating-point floor(log2(amax)) in ``dtype`` is k (the exact floor is k - 1): the block
    max at a random position and sign, the rest uniform below it."""
    bits = 24 if dtype == np.float32 else 53
    rng = np.random.default_rng(11)
    rows = []
    for k in [*range(-104, -1, 5), *range(3, 121, 5)]:      # X inside E8M0's range
        for j in (1, 2, 5, 17):
            amax = dtype(2.0 ** k * (1 - j * 2.0 ** -bits))
            if np.floor(np.log2(amax)) != k:
                continue
            row = (rng.uniform(-1, 1, 32) * float(amax)).astype(dtype)
            row[rng.integers(32)] = amax * rng.choice([-1, 1])
            rows.append(row)
    return np.array(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MX_FORMATS))
def test_the_scale_rule_just_below_a_power_of_two(name, dtype, record_property):
    """Where gfloat's floating-point log2 picks the next exponent: ``+scale=log2`` matches
    gfloat's own ``quantize_block`` bit for bit, the default (exact floor, the spec's) matches
    gfloat's element rounding under the exact scale, and under rne the two rules differ on
    every block (the block max saturates to max_elem 2^X under the exact rule, is
    2^(emax + 1) 2^X under log2; a rounding toward zero can land both on the same value)."""
    v = _blocks_below_powers_of_two(dtype)
    assert len(v) > 80
    count = 0
    for mode in sorted(MODES):
        log2 = _ours(name, v, mode, "log2")
        want = _gfloat_blocks(name, v, mode, "log2")
        assert _same(log2, want), (name, mode)
        exact = _ours(name, v, mode, "exact")
        assert _same(exact, _gfloat_blocks(name, v, mode, "exact")), (name, mode)
        if mode == "rne":                    # the default differs from gfloat on every block
            assert bool((exact != want).any(axis=1).all())
        count += 2 * log2.size
    at = np.abs(v).argmax(axis=1)[:, None]                  # the block max, signed
    top = np.take_along_axis(v, at, 1)[:, 0].astype(np.float64)
    element = mx_element(name)
    exact = np.take_along_axis(_ours(name, v, "rne", "exact"), at, 1)[:, 0]
    log2 = np.take_along_axis(_ours(name, v, "rne", "log2"), at, 1)[:, 0]
    shared = 2.0 ** (np.frexp(top)[1] - 1 - element.emax)         # 2^X, the exact X
    edge = np.where(top > 0, element.max_finite, -element.min_finite)  # MXINT8 reaches -2
    assert np.array_equal(exact, np.sign(top) * edge * shared)
    assert np.array_equal(log2, np.sign(top) * 2.0 ** (element.emax + 1) * shared)
    _report(record_property, f"{name} below a power of two {dtype.__name__}", count)


@pytest.mark.parametrize("rule", ["exact", "log2"])
def test_mxint8_stochastic_rounding_lands_on_a_neighbour_unbiased(rule):
    """``sr`` (which gfloat draws from other bits) lands on the rd or ru result of the same
    block, both sides, and is unbiased per element."""
    rng = np.random.default_rng(9)
    v = torch.from_numpy(rng.standard_normal((64, 32)) * 3.0)
    el = MX_INT8_ELEMENT
    low = quantize_mx(v, el, dim=1, mode="rd", scale=rule)
    high = quantize_mx(v, el, dim=1, mode="ru", scale=rule)
    draws = torch.stack([quantize_mx(v, el, dim=1, mode="sr", stream=RandomStream(s),
                                     scale=rule) for s in range(200)])
    assert bool(((draws == low) | (draws == high)).all())
    assert bool((draws == low).any()) and bool((draws == high).any())
    inside = low != high                                 # not on the grid, not saturated
    spacing = (high - low)[inside]
    bias = (draws.mean(0) - v)[inside] / spacing
    assert bias.abs().max().item() < 5 * 0.5 / math.sqrt(200)
    with pytest.raises(ValueError, match="two's-complement"):
        round_to_format(v, el)


def test_mxint8_and_the_scale_switch_reach_the_per_op_matmul():
    """``mxint8`` and ``+scale=log2`` under the per-op mode: each product's operands are
    quantised along the reduction dim by the precision's rule (two cached operands apart)."""
    torch.manual_seed(6)
    a, b = torch.randn(8, 64), torch.randn(64, 5)
    a[:, 0] = 2.0 ** 5 * (1 - 2.0 ** -24)              # every row's first block: below 2^5
    for spec, rule in (("mxint8", "exact"), ("mxint8+scale=log2", "log2")):
        p = parse_precision(spec)
        with RoundResults(lambda p=p: p):
            got = a @ b
        el = p.element_format
        want = quantize_mx(a, el, 1, scale=rule) @ quantize_mx(b, el, 0, scale=rule)
        assert torch.equal(got, want), spec
    mode = RoundResults(lambda: parse_precision("mxint8"))
    with mode:
        exact = a @ b
    mode.choose = lambda: parse_precision("mxint8+scale=log2")
    with mode:
        log2 = a @ b                                   # not the exact rule's cached operands
    assert not torch.equal(exact, log2)
