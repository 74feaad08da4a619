"""Values held as a batch of ``arb_mat``s (``MPArray.batch``) give the same arb values, bit
for bit, as the object arrays: ``+ - *`` by a number per slice, negation, outer products
(both ways of computing them), running sums and matrix products against their object-array
definitions; moves of whole 2-d slices keep the form; IEEE infinities still take the
entrywise path; and the recurrent states of DeltaNet and linear attention never leave the
form across the token loop."""

from __future__ import annotations

import math

import flint
import numpy as np
import pytest
import torch

from precision.backends.interpreter import OPS, MPProgram
from precision.backends.interpreter.core import Ctx
from precision.backends.mat_batch import MatBatch, OuterProducts
from precision.backends.mp_backend import MPArray, MPBackend, matmul, workprec
from precision.precisions import parse_precision

aten = torch.ops.aten
P = parse_precision("mp50")


def _ctx() -> Ctx:
    return Ctx(MPBackend(P))


def _values(rng: np.random.Generator, shape: tuple[int, ...], radii: bool = False
            ) -> np.ndarray:
    """Full-precision arb values (x / 7 at the working precision); with ``radii`` the balls
    arb's rounding leaves (what sums and products carry before they are stripped)."""
    with workprec(P.bits):
        flat = [flint.arb(float(v)) / 7 for v in rng.standard_normal(int(np.prod(shape)))]
    if not radii:
        flat = [v.mid() for v in flat]
    return np.array(flat, dtype=object).reshape(shape)


def _raw(a: np.ndarray) -> list[str]:
    """Midpoint and radius of every entry, as they stand."""
    return [v.repr() for v in np.asarray(a).reshape(-1)]


def _mids(x: MPArray) -> list[str]:
    return [v.mid().repr() for v in x.a.reshape(-1)]


def _held(a: np.ndarray, exact: bool = False) -> MPArray:
    """``a`` held as a batch (finite)."""
    return MPArray.of_batch(MatBatch.from_entries(a, exact), P.bits, True)


def _plain(a: np.ndarray, clean: bool = False) -> MPArray:
    return MPArray(a, P.bits, clean=clean, finite=True)


@pytest.mark.parametrize("op", ["add", "sub", "rsub"])
def test_sums_and_differences_of_a_batch_are_arb_add_and_sub_per_entry(op):
    rng = np.random.default_rng(0)
    a, b = _values(rng, (2, 3, 4, 5), radii=True), _values(rng, (2, 3, 4, 5), radii=True)
    with workprec(P.bits):
        want = {"add": a + b, "sub": a - b, "rsub": b - a}[op]
    for x, y in ((_held(a), _held(b)), (_held(a), _plain(b)), (_plain(a), _held(b))):
        for read_batch in (True, False):      # a sum with an object array is pending
            got = x + y if op == "add" else x - y if op == "sub" else y - x
            assert got.batchable and got.finite
            if read_batch:
                assert _raw(got.as_batch().entries()) == _raw(want)
            assert _raw(got.a) == _raw(want)          # same midpoints and same radii


@pytest.mark.parametrize("factor_shape", [(3, 1, 1), (1, 1), (), "int", "float"])
def test_scaling_a_batch_by_a_number_per_slice_is_arb_mul_per_entry(factor_shape):
    rng = np.random.default_rng(1)
    a = _values(rng, (3, 4, 6))
    if isinstance(factor_shape, tuple):
        f = _values(rng, factor_shape)
        factor = MPArray(f, P.bits, clean=True, finite=True)
    else:
        factor = f = 3 if factor_shape == "int" else 0.3
    with workprec(P.bits):
        fa = f if isinstance(f, np.ndarray) else np.array((+flint.arb(f)).mid(), dtype=object)
        want = np.asarray(fa * a, dtype=object)
    for got in (factor * _held(a, exact=True), _held(a, exact=True) * factor):
        assert got.batch is not None
        assert _mids(got) == [v.mid().repr() for v in want.reshape(-1)]
    with workprec(P.bits):
        negated = -a
    assert _raw((-_held(a)).a) == _raw(negated)


@pytest.mark.parametrize("shapes", [((4, 32, 1), (4, 1, 32)), ((2, 3, 5, 1), (2, 3, 1, 7)),
                                    ((3, 6, 1), (1, 1, 4)), ((5, 1), (1, 6))])
def test_outer_products_give_the_same_balls_both_ways(shapes):
    """A pending outer product read as entries (object products) and as a batch (arb_mat
    products with inner dimension 1) holds the same balls, radii included."""
    rng = np.random.default_rng(2)
    col, row = _values(rng, shapes[0], radii=True), _values(rng, shapes[1], radii=True)
    with workprec(P.bits):
        want = np.asarray(col * row, dtype=object)
        pending = OuterProducts(col, row)
        assert _raw(pending.entries()) == _raw(want)
        assert _raw(pending.batch().entries()) == _raw(want)
        # a factor held as a batch (the delta rule's (S k - v) of a product)
        held = OuterProducts(MatBatch.from_entries(np.broadcast_to(col, want.shape[:-1] + (1,)),
                                                   False), row)
        assert _raw(held.batch().entries()) == _raw(want)
    by_mul = _plain(col) * _plain(row)                      # the broadcast product
    by_matmul = matmul(_plain(col), _plain(row))            # a product of inner dimension 1
    assert by_mul.batchable and by_matmul.batchable
    assert _raw(by_mul.a) == _raw(by_matmul.a) == _raw(want)


def test_matrix_products_of_batches_match_the_object_form():
    """A product of batch operands gives what converting the object arrays gives, and what
    the operands' midpoints give, for the classical and the block algorithm of arb_mat."""
    rng = np.random.default_rng(3)
    for sa, sb in [((4, 32, 32), (4, 32, 1)), ((2, 12, 16), (16, 9)), ((3, 1, 8), (3, 8, 8))]:
        a, b = _values(rng, sa, radii=True), _values(rng, sb, radii=True)
        want = matmul(MPArray(a.copy(), P.bits), MPArray(b.copy(), P.bits))
        with workprec(P.bits):
            mids = np.vectorize(lambda v: v.mid(), otypes=[object])
            ref = matmul(MPArray(mids(a), P.bits, clean=True),
                         MPArray(mids(b), P.bits, clean=True))
        got = matmul(_held(a), _held(b))
        assert got.batch is not None and got.clean
        assert _raw(got.a) == _raw(want.a) == _raw(ref.a)


@pytest.mark.parametrize("sa,sb", [((3, 3), (3, 3)), ((2, 5, 4), (4, 2)),
                                   ((9, 8), (8, 9)), ((2, 16, 16), (16, 16))])
def test_a_product_of_operands_with_wide_radii_keeps_every_digit(sa, sb):
    """Radii far above the working precision's rounding (1e-5, what a sum of iterates can
    carry) change no digit of a product: arb's dot product and block algorithm lower the
    precision of a result to what its operands' radii leave certain, so the product must
    see the midpoints only, for small (classical) and large (block) shapes alike. Before
    the fix, a 3 x 3 product of such operands kept ~14 of mp50's digits."""
    rng = np.random.default_rng(5)
    a, b = _values(rng, sa), _values(rng, sb)
    with workprec(P.bits):
        wide = np.vectorize(lambda v: v + flint.arb(0, 1e-5), otypes=[object])
        want = matmul(MPArray(a.copy(), P.bits, clean=True), MPArray(b.copy(), P.bits,
                                                                     clean=True))
        got = matmul(MPArray(wide(a), P.bits), MPArray(wide(b), P.bits))
        held = matmul(_held(wide(a)), _held(wide(b)))
    assert _raw(got.a) == _raw(want.a) == _raw(held.a)


def test_running_sums_of_a_batch_match_the_object_accumulate():
    rng = np.random.default_rng(4)
    a = _values(rng, (2, 5, 3, 4), radii=True)
    ctx = _ctx()
    for dim in (0, 1, -3):
        want = OPS[aten.cumsum.default](ctx, _plain(a.copy()), dim)
        got = OPS[aten.cumsum.default](ctx, _held(a), dim)
        assert got.batch is not None
        assert _raw(got.a) == _raw(want.a)


def test_moves_of_whole_slices_keep_the_batch_and_the_values():
    rng = np.random.default_rng(5)
    a = _values(rng, (2, 3, 4, 5))
    ctx = _ctx()
    moves = [
        (aten.view.default, ([6, 4, 5],)), (aten.view.default, ([3, -1, 4, 5],)),
        (aten.expand.default, ([2, 2, 3, 4, 5],)), (aten.unsqueeze.default, (1,)),
        (aten.select.int, (1, -1)), (aten.slice.Tensor, (1, 1, 3)),
        (aten.permute.default, ([1, 0, 3, 2],)), (aten.transpose.int, (-1, -2)),
        (aten.squeeze.dims, ([0],)),
    ]
    for op, args in moves:
        want = OPS[op](ctx, _plain(a), *args)
        got = OPS[op](ctx, _held(a), *args)
        assert got.batch is not None, op
        assert got.shape == want.shape and _raw(got.a) == _raw(want.a), op
    parts = [_held(a), _held(_values(rng, (2, 1, 4, 5)))]
    joined = OPS[aten.cat.default](ctx, parts, 1)
    assert joined.batch is not None
    assert _raw(joined.a) == _raw(np.concatenate([parts[0].a, parts[1].a], axis=1))
    # a move that cuts the slices falls back to the object array
    cut = OPS[aten.view.default](ctx, _held(a), [2, 3, 20])
    assert cut.batch is None and _raw(cut.a) == _raw(a.reshape(2, 3, 20))


def test_infinities_take_the_entrywise_ieee_path():
    """A product with an infinite entry is not known finite, so its sum is done entry by
    entry with the IEEE fix-up (inf + 1 = inf, not an indeterminate ball)."""
    ctx = _ctx()
    x = ctx.arr(np.array([[math.inf, 1.0], [2.0, 3.0]]))
    eye = ctx.arr(np.eye(2))
    prod = OPS[aten.mm.default](ctx, x, eye)
    assert not prod.finite
    total = OPS[aten.add.Tensor](ctx, prod, ctx.arr(np.ones((2, 2))))
    assert total.to_float64().tolist()[0][0] == math.inf


def test_writing_into_a_product_updates_what_later_products_read():
    ctx = _ctx()
    prod = OPS[aten.mm.default](ctx, ctx.arr(np.eye(2)), ctx.arr(np.eye(2)))
    assert prod.batch is not None
    prod[0, 1] = 5.0                              # read as entries, then written in place
    assert prod.batch is None
    again = prod @ ctx.arr(np.eye(2))
    assert again.to_float64().tolist() == [[1.0, 5.0], [0.0, 1.0]]


@pytest.mark.parametrize("name,state", [("deltanet", "sub"), ("linear_attention", "cumsum")])
def test_recurrent_states_stay_in_arb_mat_across_the_token_loop(name, state):
    """Every (B, W, W) state of DeltaNet (S_t = S_t-1 - beta (S k - v) k^T) and every
    running sum of linear attention is still held as a batch when the forward pass ends:
    no op read its entries. The outputs are the object-array ones (checked against the
    float64 model here; digit for digit against the object path by the tests above)."""
    from probes.factory import load_factory

    torch.manual_seed(0)
    model = load_factory(f"examples/zoo/{name}.py:{name}")(5, 5, 1, 8, max_len=6).double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    program = MPProgram(model.eval(), (x,), keep_intermediates=True)
    out = program(x, precision=P)
    states = [v for k, v in program.values.items() if k.startswith(state)
              and isinstance(v, MPArray) and v.ndim >= 3 and v.shape[-2:] == (8, 8)]
    assert len(states) >= (6 if name == "deltanet" else 1)
    assert all(v.batch is not None for v in states)
    with torch.no_grad():
        ref = model(x).numpy()
    assert np.abs(out.to_float64() - ref).max() < 1e-12
