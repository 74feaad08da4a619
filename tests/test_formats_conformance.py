"""Every simulated format against its reference, bit for bit, and per-op semantics on graphs.

References: torch's casts where torch has the dtype (float8_e4m3fn saturates, float8_e5m2
overflows to inf, float16, bfloat16), ml_dtypes where it defines the format (float8_e4m3fn's
non-saturating OCP mode, FP6, FP4), and short references written here (TF32's 13 dropped
bits, directed roundings by search in the sorted grid, MX blocks, integer groups, composite
graphs rounded op by op).
"""

import math

import numpy as np
import pytest
import torch

from precision.formats.binary_format import FORMATS, binary_format
from precision.formats.integer_weights import quantize_weight
from precision.formats.mx import quantize_mx
from precision.formats.op_rounding import RoundResults
from precision.formats.rounding import RandomStream, round_to_format
from precision.precisions import parse_precision

ml_dtypes = pytest.importorskip("ml_dtypes")

#: format -> (reference dtype kind, dtype name): "torch" or "ml".
REFERENCES = {
    "float8_e4m3": ("torch", "float8_e4m3fn"),
    "float8_e5m2": ("torch", "float8_e5m2"),
    "float16": ("torch", "float16"),
    "bfloat16": ("torch", "bfloat16"),
    "float8_e4m3_nan": ("ml", "float8_e4m3fn"),
    "float6_e2m3": ("ml", "float6_e2m3fn"),
    "float6_e3m2": ("ml", "float6_e3m2fn"),
    "float4_e2m1": ("ml", "float4_e2m1fn"),
}


def _reference(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` (float32) converted by the reference library, back as float64."""
    kind, dtype = REFERENCES[name]
    if kind == "torch":
        return torch.from_numpy(x).to(getattr(torch, dtype)).to(torch.float64).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(getattr(ml_dtypes, dtype)).astype(np.float64)


def _grid(name: str) -> np.ndarray:
    """Every finite value of the format, sorted (from the reference's own encodings)."""
    fmt = FORMATS[name]
    if name in ("float16", "bfloat16"):
        codes = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16)
        values = codes.view(getattr(torch, name)).to(torch.float64).numpy()
    else:
        kind, dtype = REFERENCES.get(name, ("ml", None))
        width = 1 + fmt.exponent_bits + fmt.mantissa_bits
        codes = np.arange(2 ** width, dtype=np.uint8)
        if dtype is None:
            raise AssertionError(name)
        ml_type = getattr(ml_dtypes, dtype if kind == "ml" else dtype)
        values = codes.view(ml_type).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _probes(values: np.ndarray, fmt) -> np.ndarray:
    """Representable values, midpoints, their float32 neighbours, overflow, underflow, specials."""
    mids = (values[1:] + values[:-1]) / 2
    mids32 = mids.astype(np.float32)
    assert np.array_equal(mids32.astype(np.float64), mids)   # midpoints are float32 values
    near = np.concatenate([np.nextafter(mids32, np.float32(np.inf)),
                           np.nextafter(mids32, np.float32(-np.inf))])
    big, tiny = fmt.max_finite, fmt.min_subnormal
    edges = np.array([big * 1.01, big * 1.0625, big * 1.2, big * 2, big * 1e3, 3e38,
                      tiny / 2, tiny / 4, tiny * 0.51, tiny * 0.49, tiny * 1.5, 1e-40,
                      np.inf, np.nan], dtype=np.float64)
    edges = np.concatenate([edges, -edges])
    with np.errstate(over="ignore"):
        return np.concatenate([values.astype(np.float32), mids32, near,
                               edges.astype(np.float32)]).astype(np.float32)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit as float64 (signed zeros included), NaN where NaN."""
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b))
                and np.array_equal(a[~nan].view(np.int64), b[~nan].view(np.int64)))


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_rne_matches_the_reference_on_every_value_midpoint_and_edge(name):
    fmt = FORMATS[name]
    x = _probes(_grid(name), fmt)
    want = _reference(x, name)
    if REFERENCES[name][0] == "ml" and fmt.overflow == "saturate":
        # FP6 / FP4 have no NaN; ml_dtypes writes NaN as -0: a simulation keeps the NaN.
        want = np.where(np.isnan(x), np.nan, want)
    for carrier in (torch.float32, torch.float64):     # the cast fast path and the general one
        got = round_to_format(torch.from_numpy(x).to(carrier), fmt).to(torch.float64).numpy()
        assert _same(got, want), (name, carrier, x[got != want][:5], got[got != want][:5])


def test_torch_semantics_are_what_the_formats_state():
    f32 = torch.tensor([1e6, float("inf"), 61440.0, 465.0])
    assert f32[:2].to(torch.float8_e4m3fn).float().tolist() == [448.0, 448.0]   # saturates
    assert math.isinf(f32[2].to(torch.float8_e5m2).float().item())              # to inf
    assert FORMATS["float8_e4m3"].overflow == "saturate"
    assert FORMATS["float8_e5m2"].overflow == "inf"
    sat = round_to_format(f32, FORMATS["float8_e5m2_sat"]).tolist()
    assert sat[:3] == [57344.0, 57344.0, 57344.0]
    assert math.isnan(round_to_format(f32[3:], FORMATS["float8_e4m3_nan"]).item())


def test_tf32_and_custom_formats_against_bit_references():
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 10.0 ** torch.randint(-30, 30, (4000,)),
                   torch.tensor([2.0 ** -140, 3 * 2.0 ** -138, 3.4e38])]).to(torch.float32)
    bits = x.view(torch.int32).to(torch.int64)
    odd = (bits >> 13) & 1
    tf32 = ((bits + 0xFFF + odd) & ~0x1FFF).to(torch.int32).view(torch.float32)
    normal = x.abs() >= 2.0 ** -126          # TF32 keeps float32's subnormal grid coarser:
    got = round_to_format(x, FORMATS["tf32"])
    assert torch.equal(got[normal], tf32[normal])
    assert torch.equal(round_to_format(x[~normal], FORMATS["tf32"]),
                       round_to_format(x[~normal].double(), binary_format("e8m10")).float())
    assert torch.equal(round_to_format(x.double(), binary_format("e5m10")),
                       x.to(torch.float16).double())
    assert torch.equal(round_to_format(x.double(), binary_format("e8m7")),
                       round_to_format(x.double(), FORMATS["bfloat16"]))
    assert binary_format("e11m3") is None and binary_format("e4m52") is None


def _bracketed(name: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Inputs within the format's range -- every value, every midpoint, one random point per
    gap (float32 values) -- with their grid neighbours below and above (equal on a value),
    and the number of midpoints."""
    fmt = FORMATS[name]
    values = _grid(name)
    inside = values[np.abs(values) < fmt.max_finite]
    mids = (inside[1:] + inside[:-1]) / 2
    rng = np.random.default_rng(seed)
    x = np.concatenate([values, mids, rng.uniform(inside[:-1], inside[1:])])
    x = x[np.abs(x) <= fmt.max_finite].astype(np.float32).astype(np.float64)
    lo = values[np.searchsorted(values, x, side="right") - 1]
    hi = values[np.minimum(np.searchsorted(values, x, side="left"), len(values) - 1)]
    return x, lo, hi, len(mids)


@pytest.mark.parametrize("carrier", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e5m2", "float6_e3m2", "bfloat16"])
def test_directed_roundings_against_search_in_the_grid(name, carrier):
    fmt = FORMATS[name]
    x, lo, hi, _ = _bracketed(name, 0)
    want = {"rd": lo, "ru": hi, "rz": np.where(x >= 0, lo, hi)}
    for mode, expected in want.items():
        got = round_to_format(torch.from_numpy(x).to(carrier), fmt, mode).double().numpy()
        assert np.array_equal(got, expected), (name, mode)
    beyond = min(fmt.max_finite * 1.5, 3.4e38)                      # finite in float32
    over = torch.tensor([beyond, -beyond], dtype=carrier)
    top = fmt.max_finite
    far = top if fmt.overflow == "saturate" else math.inf
    assert round_to_format(over, fmt, "rz").tolist() == [top, -top]
    assert round_to_format(over, fmt, "ru").tolist() == [far, -top]
    assert round_to_format(over, fmt, "rd").tolist() == [top, -far]


@pytest.mark.parametrize("carrier", [torch.float32, torch.float64])
@pytest.mark.parametrize("value,low,high", [(1.0 + 2.0 ** -5, 1.0, 1.125),
                                           (-(2.0 ** -8 + 2.0 ** -11), -2.0 ** -8 - 2.0 ** -9,
                                            -2.0 ** -8)])
def test_stochastic_rounding_is_unbiased_in_normal_and_subnormal_range(carrier, value, low,
                                                                        high):
    fmt = FORMATS["float8_e4m3"]
    x = torch.full((20000,), value, dtype=carrier)
    draws = round_to_format(x, fmt, "sr", RandomStream(3)).double()
    assert set(draws.tolist()) == {low, high}
    assert abs(draws.mean().item() - value) < 5 * (high - low) / math.sqrt(len(x))


def test_stochastic_rounding_is_unbiased_reproducible_and_independent():
    fmt = FORMATS["float8_e4m3"]
    x = torch.full((20000,), 1.0 + 2.0 ** -5, dtype=torch.float64)   # 1/4 of a spacing up
    draws = round_to_format(x, fmt, "sr", RandomStream(7))
    assert set(draws.tolist()) == {1.0, 1.125}
    spacing = 0.125
    assert abs(draws.mean().item() - x[0].item()) < 5 * spacing / math.sqrt(len(x))
    again = round_to_format(x, fmt, "sr", RandomStream(7))
    assert torch.equal(draws, again)                                # the seed fixes the bits
    other = RandomStream(7)
    other.uniform((1,))                                             # a later op of the same run
    assert not torch.equal(draws, round_to_format(x, fmt, "sr", other))
    assert not torch.equal(draws, round_to_format(x, fmt, "sr", RandomStream(8)))
    up = (draws > 1.0).double()
    corr = torch.corrcoef(torch.stack([up[:-1], up[1:]]))[0, 1].item()
    assert abs(corr) < 0.05                                         # neighbours independent
    # mean error over seeds -> 0 on many values at once
    torch.manual_seed(1)
    y = torch.rand(500, dtype=torch.float64) * 3
    errs = torch.stack([round_to_format(y, fmt, "sr", RandomStream(s)) - y for s in range(64)])
    assert errs.mean(0).abs().max().item() < 5 * 0.25 / math.sqrt(64)
    assert round_to_format(torch.tensor([1.125], dtype=torch.float64), fmt, "sr",
                           RandomStream(0)).item() == 1.125          # grid values stay


def _mx_reference(v: np.ndarray, element: str) -> np.ndarray:
    """OCP MX v1.0 for one row, written out: X = floor(log2 max|V|) - emax per 32 values."""
    fmt = FORMATS[element]
    out = np.empty_like(v)
    for start in range(0, len(v), 32):
        block = v[start:start + 32]
        amax = np.abs(block).max()
        shared = -127 if amax == 0 else max(math.frexp(amax)[1] - 1 - fmt.emax, -127)
        scaled = np.clip(block / 2.0 ** shared, -fmt.max_finite, fmt.max_finite)
        out[start:start + 32] = _reference(scaled.astype(np.float32), element) * 2.0 ** shared
    return out


@pytest.mark.parametrize("element", ["float8_e4m3", "float8_e5m2", "float6_e2m3",
                                     "float6_e3m2", "float4_e2m1"])
def test_mx_blocks_follow_the_spec(element):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((3, 70)) * 10.0 ** rng.integers(-3, 3, (3, 1))
    v[1, 32:64] = 0.0                                   # an all-zero block
    got = quantize_mx(torch.from_numpy(v).float(), FORMATS[element], dim=1).double().numpy()
    want = np.stack([_mx_reference(row.astype(np.float32).astype(np.float64), element)
                     for row in v])
    assert np.array_equal(got, want)
    along0 = quantize_mx(torch.from_numpy(v.T.copy()), FORMATS[element], dim=0).numpy()
    assert np.array_equal(along0.T, quantize_mx(torch.from_numpy(v), FORMATS[element],
                                                dim=1).numpy())
    bad = torch.tensor([1.0, float("inf")] + [0.5] * 30)
    assert torch.isnan(quantize_mx(bad, FORMATS[element], dim=0)).all()


def test_integer_weights_per_channel_and_per_group():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((5, 70))
    for bits, group in ((8, None), (4, None), (4, 32), (8, 16)):
        got = quantize_weight(torch.from_numpy(w), bits, group).numpy()
        qmax = 2 ** (bits - 1) - 1
        size = group or w.shape[1]
        for r in range(w.shape[0]):
            for start in range(0, w.shape[1], size):
                g = w[r, start:start + size]
                s = np.abs(g).max() / qmax
                want = np.clip(np.round(g / s), -qmax, qmax) * s
                np.testing.assert_array_equal(got[r, start:start + size], want)
                assert len(np.unique(np.round(got[r, start:start + size] / s))) <= 2 * qmax + 1


def _cast(t: torch.Tensor, name: str) -> torch.Tensor:
    return t.to(getattr(torch, name)).to(t.dtype)


def _sequential(a: torch.Tensor, b: torch.Tensor, acc) -> torch.Tensor:
    """A matmul whose every partial sum is rounded to ``acc`` (index order), written out."""
    total = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    for k in range(a.shape[1]):
        total = acc(total + a[:, k:k + 1] * b[k:k + 1, :])
    return total


def test_composite_graphs_against_per_op_rounding():
    p = parse_precision("float8_e4m3")
    torch.manual_seed(5)
    r8 = lambda t: _cast(t, "float8_e4m3fn")  # noqa: E731
    x, y, z = (r8(torch.randn(64, 40)) for _ in range(3))
    w = r8(torch.randn(40, 24))
    with RoundResults(lambda: p):
        fma = x * y + z
        soft = torch.softmax(x, dim=-1)
        prod = x @ w
    assert torch.equal(fma, r8(r8(x * y) + z))
    assert torch.equal(soft, r8(torch.softmax(x, dim=-1)))
    assert torch.equal(prod, r8(x @ w))                       # float32 accumulation
    accs = {"float64": lambda: r8((x.double() @ w.double()).float()),
            "bfloat16": lambda: r8(_sequential(x, w, lambda t: _cast(t, "bfloat16"))),
            "float16": lambda: r8(_sequential(x, w, lambda t: _cast(t, "float16"))),
            "float8_e4m3": lambda: r8(_sequential(x, w, r8))}
    for acc, reference in accs.items():
        q = parse_precision(f"float8_e4m3+acc={acc}")
        with RoundResults(lambda q=q: q):
            got = x @ w
        assert torch.equal(got, reference()), acc
    assert not torch.equal(accs["float8_e4m3"](), accs["float64"]())   # the choice matters


def test_mx_matmul_quantises_operands_along_the_reduction_dim():
    p = parse_precision("mxfp4_e2m1")
    torch.manual_seed(6)
    a, b = torch.randn(8, 64), torch.randn(64, 5)
    with RoundResults(lambda: p):
        got = a @ b
    e2m1 = FORMATS["float4_e2m1"]
    want = quantize_mx(a, e2m1, dim=1) @ quantize_mx(b, e2m1, dim=0)
    assert torch.equal(got, want)
    mode = RoundResults(lambda: p)                  # operands quantised once per mode ...
    with mode:
        first, again = a @ b, a @ b
        a.mul_(3.0)                                 # ... until they change
        changed = a @ b
    assert torch.equal(first, want) and torch.equal(again, want)
    assert torch.equal(changed, quantize_mx(a, e2m1, dim=1) @ quantize_mx(b, e2m1, dim=0))


def test_spellings_round_trip_and_bad_ones_are_one_line_errors():
    from precision.precisions import PrecisionError

    for spec in ("float8_e4m3", "float8_e4m3:sr+seed=3+acc=float32", "mxfp8_e4m3", "tf32:rz",
                 "mxfp4_e2m1+act=bfloat16", "int4_g32", "int8+act=float16", "e5m10:ru",
                 "bfloat16:sr+seed=1", "float32+acc=float64", "float8_e5m2"):
        p = parse_precision(spec)
        assert "/" not in p.name and parse_precision(p.name) == p
    for bad in ("float8_e4m3+seed=2", "float64:rz", "mp50:rz", "float32+act=bfloat16",
                "float8_e4m3+acc=mp50", "int3", "e12m3", "mxfp8_e4m3+acc=int8"):
        with pytest.raises(PrecisionError) as info:
            parse_precision(bad)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("carrier", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e5m2", "float4_e2m1", "tf32",
                                  "bfloat16"])
def test_stochastic_rounding_lands_on_a_neighbour_and_keeps_signs_and_specials(name, carrier):
    fmt = FORMATS[name]
    torch.manual_seed(2)
    x = torch.cat([torch.randn(3000) * 10.0 ** torch.randint(-12, 4, (3000,)),
                   -torch.rand(200) * fmt.min_subnormal]).to(carrier)
    got = round_to_format(x, fmt, "sr", RandomStream(4))
    low, high = round_to_format(x, fmt, "rd"), round_to_format(x, fmt, "ru")
    assert bool(((got == low) | (got == high)).all())
    zeros = got == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(x[zeros]))  # -0 from below
    beyond = min(fmt.max_finite * 1.5, 3.4e38)                   # beyond max where it can be
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), beyond], dtype=carrier)
    edge = round_to_format(special, fmt, "sr", RandomStream(4))
    far = fmt.max_finite if fmt.overflow == "saturate" else math.inf
    assert edge[0].item() == far and edge[1].item() == -far and math.isnan(edge[2].item())
    assert edge[3].item() in (fmt.max_finite, far) or beyond <= fmt.max_finite


def test_random_streams_are_seeded_per_domain_and_uniform_on_their_grid():
    a, b = RandomStream(3, 1), RandomStream(3, 1)
    u = a.uniform32((1000,))
    assert torch.equal(u, b.uniform32((1000,)))                       # reproducible
    assert not torch.equal(u, RandomStream(3, 2).uniform32((1000,)))  # domains apart
    assert not torch.equal(u, a.uniform32((1000,)))                   # the next call: fresh
    assert u.dtype == torch.float32 and 0 <= u.min() and u.max() < 1
    assert torch.equal(u * 2 ** 24, torch.round(u * 2 ** 24))          # 24-bit grid
    bits = a.bits((5000,), 20)
    assert bits.dtype == torch.int32 and 0 <= bits.min() and bits.max() < 2 ** 20
    assert abs(bits.double().mean().item() / 2 ** 20 - 0.5) < 0.02
    w = a.uniform((3, 7))
    assert w.shape == (3, 7) and w.dtype == torch.float64 and 0 <= w.min() and w.max() < 1


@pytest.mark.parametrize("carrier", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e5m2", "float6_e3m2", "float4_e2m1",
                                  "bfloat16", "float16"])
def test_ties_away_against_search_in_the_grid(name, carrier):
    """``rna``: the nearer grid neighbour; at a tie, the one of larger magnitude."""
    fmt = FORMATS[name]
    x, lo, hi, n_mids = _bracketed(name, 1)
    tie = (x - lo) == (hi - x)
    want = np.where(tie, np.where(x >= 0, hi, lo), np.where(x - lo < hi - x, lo, hi))
    got = round_to_format(torch.from_numpy(x).to(carrier), fmt, "rna").double().numpy()
    assert np.array_equal(got, want), (name, x[got != want][:5], got[got != want][:5])
    assert int(tie.sum()) >= n_mids - 2   # the midpoints are ties


#: simulated format -> (gfloat's format, saturate on overflow)
GFLOAT = {"float8_e4m3": ("format_info_ocp_e4m3", True),
          "float8_e5m2": ("format_info_ocp_e5m2", False),
          "float6_e2m3": ("format_info_ocp_e2m3", True),
          "float6_e3m2": ("format_info_ocp_e3m2", True),
          "float4_e2m1": ("format_info_ocp_e2m1", True)}


@pytest.mark.parametrize("mode,gmode", [("rna", "TiesToAway"), ("rne", "TiesToEven"),
                                        ("rz", "TowardZero"), ("ru", "TowardPositive"),
                                        ("rd", "TowardNegative")])
@pytest.mark.parametrize("name", sorted(GFLOAT))
def test_roundings_match_gfloat_on_every_value_midpoint_and_edge(name, mode, gmode):
    """Every rounding mode against gfloat's ``round_float`` (an outside reference) on every
    value of the format, every midpoint, their float32 neighbours and the overflow and
    underflow edges, in both carriers."""
    gfloat = pytest.importorskip("gfloat")
    import gfloat.formats as gformats

    fmt = FORMATS[name]
    info, sat = GFLOAT[name]
    x = _probes(_grid_from_gfloat(getattr(gformats, info)), fmt)
    x = x[np.isfinite(x)]
    want = np.array([gfloat.round_float(getattr(gformats, info), float(v),
                                        getattr(gfloat.RoundMode, gmode), sat=sat)
                     for v in x.tolist()])
    for carrier in (torch.float32, torch.float64):
        got = round_to_format(torch.from_numpy(x).to(carrier), fmt, mode).double().numpy()
        assert _same(got, want), (name, mode, carrier, x[got != want][:5],
                                  got[got != want][:5], want[got != want][:5])


def _grid_from_gfloat(info) -> np.ndarray:
    """Every finite value of a gfloat format (decoded from each code by gfloat)."""
    import gfloat

    values = np.array([gfloat.decode_float(info, code).fval for code in range(2 ** info.k)])
    return np.unique(values[np.isfinite(values)])
