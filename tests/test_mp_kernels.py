"""The fast mp kernels give the same midpoints, bit for bit, as their entry-by-entry
definitions: softmax's numpy object passes against a row-by-row loop, outer products as one
object pass against arb_mat, sigmoid's passes against its scalar form, C arb methods lifted
without a Python frame against the frame-per-entry lift, and the finite flag that lets
+ - * skip their scan for IEEE infinities never hides one."""

from __future__ import annotations

import math

import flint
import numpy as np
import pytest
import torch

from precision.backends.interpreter import OPS
from precision.backends.interpreter.activations import _sigmoid_one, sigmoid
from precision.backends.interpreter.core import NAN, NEG_INF, ZERO, Ctx, lift
from precision.backends.interpreter.reductions import softmax
from precision.backends.mp_backend import MPArray, MPBackend, matmul, workprec
from precision.precisions import parse_precision

aten = torch.ops.aten
P = parse_precision("mp50")


def _ctx() -> Ctx:
    return Ctx(MPBackend(P))


def _reprs(x: MPArray) -> list[str]:
    return [v.mid().repr() for v in x.stripped().a.reshape(-1)]


def _values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Full-precision arb midpoints (x / 7 at the working precision), like activations."""
    with workprec(P.bits):
        flat = [(flint.arb(float(v)) / 7).mid() for v in rng.standard_normal(int(np.prod(shape)))]
    return np.array(flat, dtype=object).reshape(shape)


def _softmax_rows(x: MPArray, log: bool) -> list[str]:
    """Softmax over the last axis, row by row, every op rounded (the definition)."""
    rows = x.a.reshape(-1, x.shape[-1])
    out = []
    with workprec(x.prec):
        for row in rows:
            live = [v.is_finite() for v in row]
            if not any(live):
                out += [NAN] * len(row)
                continue
            m = max(v for v, ok in zip(row, live, strict=True) if ok)
            shifted = [(v - m).mid() if ok else None for v, ok in zip(row, live, strict=True)]
            ex = [s.exp().mid() if s is not None else ZERO for s in shifted]
            tot = ZERO
            for e in ex:
                tot = (tot + e).mid()
            if log:
                lt = tot.log().mid()
                out += [(s - lt).mid() if s is not None else NEG_INF for s in shifted]
            else:
                out += [(e / tot).mid() for e in ex]
    return [v.repr() for v in out]


@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_the_row_by_row_definition_with_masks_and_empty_rows(log):
    rng = np.random.default_rng(0)
    a = _values(rng, (3, 5, 7))
    a[0, 1, 4:] = NEG_INF                   # a causal mask
    a[1, 2, :] = NEG_INF                    # a row with nothing left: NaN
    a[2, 0, 3] = NAN                        # NaN counts as masked
    x = MPArray(a, P.bits, clean=True)
    got = softmax(_ctx(), x, -1, log=log)
    assert _reprs(got) == _softmax_rows(x, log)
    plain = MPArray(_values(rng, (4, 9)), P.bits, clean=True)   # every entry finite
    assert _reprs(softmax(_ctx(), plain, 1, log=log)) == _softmax_rows(plain, log)


def test_softmax_along_a_middle_axis_matches_moving_it_last():
    x = MPArray(_values(np.random.default_rng(1), (2, 6, 3)), P.bits, clean=True)
    moved = MPArray(np.ascontiguousarray(np.moveaxis(x.a, 1, -1)), P.bits, clean=True)
    got = np.moveaxis(softmax(_ctx(), x, 1).a, 1, -1)
    assert [v.repr() for v in got.reshape(-1)] == _softmax_rows(moved, False)


@pytest.mark.parametrize("shapes", [((32, 1), (1, 32)), ((4, 32, 1), (4, 1, 32)),
                                    ((3, 5, 1), (1, 6))])
def test_outer_products_match_arb_mat(shapes):
    rng = np.random.default_rng(2)
    x = MPArray(_values(rng, shapes[0]), P.bits, clean=True, finite=True)
    y = MPArray(_values(rng, shapes[1]), P.bits, clean=True, finite=True)
    fast = matmul(x, y)                                        # one object pass
    slow = matmul(MPArray(x.a, P.bits, clean=True), MPArray(y.a, P.bits, clean=True))
    assert fast.shape == slow.shape == np.matmul(np.zeros(shapes[0]), np.zeros(shapes[1])).shape
    assert _reprs(fast) == _reprs(slow)


def test_sigmoid_matches_its_scalar_form_on_both_sides_of_zero():
    rng = np.random.default_rng(3)
    a = _values(rng, (5, 8)) * 40            # exp over a wide range, both branches
    a[0, 0] = ZERO
    x = MPArray(a, P.bits, finite=True)
    got = sigmoid(_ctx(), x)
    with workprec(P.bits):
        want = [_sigmoid_one(v).repr() for v in x.stripped().a.reshape(-1)]
    assert _reprs(got) == want
    assert got.finite


def test_sigmoid_of_infinities_is_ieee():
    x = MPArray(np.array([flint.arb("inf"), NEG_INF, ZERO], dtype=object), P.bits)
    assert sigmoid(_ctx(), x).to_float64().tolist() == [1.0, 0.0, 0.5]


@pytest.mark.parametrize("name,fallback", [("exp", np.exp), ("log", np.log),
                                           ("tanh", np.tanh), ("erf", math.erf),
                                           ("rsqrt", lambda v: 1.0 / np.sqrt(v))])
def test_c_methods_lift_like_a_python_frame_per_entry(name, fallback):
    rng = np.random.default_rng(4)
    a = np.abs(_values(rng, (6, 5))) if name in ("log", "rsqrt") else _values(rng, (6, 5))
    a[0, 0] = ZERO
    x = MPArray(a, P.bits, clean=True)
    method = getattr(flint.arb, name)
    fast = lift(method, fallback)(_ctx(), x)
    slow = lift(lambda v: method(v), fallback)(_ctx(), x)   # a Python function: one frame each
    assert _reprs(fast) == _reprs(slow)


def test_lifted_non_finite_results_follow_ieee():
    x = MPArray(np.array([ZERO, flint.arb(2), flint.arb("inf")], dtype=object), P.bits)
    assert OPS[aten.log.default](_ctx(), x).to_float64().tolist()[0] == -math.inf
    assert OPS[aten.exp.default](_ctx(), x).to_float64().tolist()[2] == math.inf
    assert OPS[aten.rsqrt.default](_ctx(), x).to_float64().tolist()[0::2] == [math.inf, 0.0]


def test_the_finite_flag_never_hides_an_infinity():
    ctx = _ctx()
    finite = MPArray(np.array([flint.arb(1), flint.arb(2)], dtype=object), P.bits,
                     clean=True, finite=True)
    inf = ctx.arr(np.array([math.inf, 1.0]))
    assert not inf.finite and ctx.arr(np.array([1.0, 2.0])).finite
    total = OPS[aten.add.Tensor](ctx, finite, inf)
    assert total.to_float64().tolist() == [math.inf, 3.0] and not total.finite
    assert OPS[aten.mul.Tensor](ctx, finite, finite).finite          # closed: no scan needed
    assert OPS[aten.sub.Tensor](ctx, finite, math.inf).to_float64().tolist()[0] == -math.inf
    written = MPArray(finite.a.copy(), P.bits, clean=True, finite=True)
    written[0] = math.inf
    assert not written.finite
    assert OPS[aten.add.Tensor](ctx, written, finite).to_float64().tolist()[0] == math.inf


def test_finite_flags_reach_every_value_of_a_finite_model():
    """Inputs and weights are finite, and every op of this block keeps them so: each value
    carries the flag, so no + - * of the forward pass scans its result."""
    from precision.backends.interpreter import MPProgram

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(6)
            self.lin = torch.nn.Linear(6, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k = self.lin(self.norm(x)).chunk(2, dim=-1)
            att = torch.softmax(q @ k.transpose(1, 2), dim=-1)
            return torch.sigmoid(att @ q).permute(0, 2, 1)

    torch.manual_seed(0)
    program = MPProgram(Block().double(), (torch.randn(2, 3, 6, dtype=torch.float64),),
                        keep_intermediates=True)
    program(torch.randn(2, 3, 6, dtype=torch.float64), precision=P)
    floats = {k: v for k, v in program.values.items() if isinstance(v, MPArray)}
    assert floats and [k for k, v in floats.items() if not v.finite] == []


@pytest.mark.parametrize("alpha,scale,input_scale", [(1.0, 1.0, 1.0), (0.5, 2.0, 0.7)])
def test_elu_takes_expm1_only_where_it_is_used(alpha, scale, input_scale):
    """ELU computes expm1 at the entries with x <= 0 (and NaN) only: same midpoints as
    the definition where(x > 0, x, alpha * expm1(input_scale * x)) * scale."""
    import operator

    from precision.backends.interpreter.comparisons import compare, where
    from precision.backends.interpreter.elementwise import _EXPM1

    rng = np.random.default_rng(5)
    a = _values(rng, (4, 7)) * 9
    a[0, 0], a[0, 1], a[0, 2] = ZERO, NAN, NEG_INF
    x = MPArray(a, P.bits, clean=True)
    ctx = _ctx()
    got = OPS[aten.elu.default](ctx, x, alpha, scale, input_scale)
    neg = _EXPM1(ctx, x * input_scale if input_scale != 1 else x) * alpha
    want = where(ctx, compare(operator.gt)(ctx, x, 0), x, neg)
    want = want * scale if scale != 1 else want
    assert _reprs(got) == _reprs(want)
