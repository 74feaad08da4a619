import flint
import numpy as np
import pytest
import torch

from precision.backends import backend_for
from precision.precisions import as_precision, parse_precision

PRECISIONS = ["bfloat16", "float16", "float32", "float64", "mp30", "mp100"]


@pytest.mark.parametrize("name", PRECISIONS)
def test_same_code_runs_in_every_backend(name):
    xp = backend_for(as_precision(name))
    A = xp.asarray(np.array([[4.0, 1.0], [1.0, 3.0]]))
    b = xp.asarray([1.0, 2.0])
    assert xp.to_numpy(A @ b).tolist() == [6.0, 7.0]
    assert xp.to_numpy(A.T @ A).tolist() == [[17.0, 7.0], [7.0, 10.0]]
    assert xp.to_float(b @ b) == 5.0
    assert xp.to_float(xp.sum(A)) == 9.0
    assert xp.to_numpy(xp.sum(A, axis=0)).tolist() == [5.0, 4.0]
    assert xp.to_numpy(xp.outer(b, b)).tolist() == [[1.0, 2.0], [2.0, 4.0]]
    assert xp.to_numpy(xp.diag(A)).tolist() == [4.0, 3.0]
    assert xp.to_float(xp.max(b)) == 2.0
    v = xp.copy(b)
    v[0] = b[1] * 3.0
    assert xp.to_numpy(v).tolist() == [6.0, 2.0] and xp.to_numpy(b).tolist() == [1.0, 2.0]
    assert (b[0] < b[1]) and not (b[0] > b[1])
    assert xp.isfinite(b)


@pytest.mark.parametrize("name,bits", [("float32", 24), ("float64", 53), ("mp30", 103),
                                       ("mp100", 336)])
def test_division_rounds_to_the_precision(name, bits):
    xp = backend_for(as_precision(name))
    third = xp.scalar(1.0) / 3.0
    exact = xp.to_exact(third).reshape(-1)[0]
    with_prec = flint.ctx.prec
    flint.ctx.prec = 2000
    try:
        rel = abs(exact * 3 - 1)
        assert rel <= flint.arb(2) ** (-bits)
        assert rel >= flint.arb(2) ** (-bits - 2)  # and is not more precise than it should be
    finally:
        flint.ctx.prec = with_prec


def test_mp_matmul_matches_exact_product_to_working_precision():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 3))
    xp = backend_for(parse_precision("mp50"))
    got = xp.to_exact(xp.asarray(a) @ xp.asarray(b))
    flint.ctx.prec = 1000
    try:
        for i in range(7):
            for j in range(3):
                exact = sum((flint.arb(a[i, k]) * flint.arb(b[k, j]) for k in range(5)),
                            flint.arb(0))
                assert abs(got[i, j] - exact) <= abs(exact) * flint.arb(2) ** -160
    finally:
        flint.ctx.prec = 53


def test_mp_batched_matmul_and_broadcasting():
    xp = backend_for(parse_precision("mp30"))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 2))
    got = xp.to_numpy(xp.asarray(a) @ xp.asarray(b))
    assert np.allclose(got, a @ b, rtol=1e-14)
    row = xp.asarray([1.0, 2.0]).reshape(1, 2)
    col = xp.asarray([10.0, 20.0, 30.0]).reshape(3, 1)
    assert xp.to_numpy(row + col).tolist() == [[11, 12], [21, 22], [31, 32]]


def test_mp_elementwise_functions_are_accurate():
    xp = backend_for(parse_precision("mp50"))
    x = xp.asarray([0.5, 2.0])
    e = xp.to_exact(xp.exp(x))
    flint.ctx.prec = 400
    try:
        assert abs(e[0] - flint.arb(0.5).exp()) < flint.arb(10) ** -49
        assert abs(xp.to_exact(xp.sqrt(x))[1] - flint.arb(2).sqrt()) < flint.arb(10) ** -49
        assert abs(xp.to_exact(xp.log(x))[1] - flint.arb(2).log()) < flint.arb(10) ** -49
    finally:
        flint.ctx.prec = 53


def test_radii_do_not_grow_over_long_iterations():
    # Interval radii would explode over thousands of steps; the backend keeps midpoints only.
    xp = backend_for(parse_precision("mp30"))
    w = xp.asarray([1.0, -1.0])
    M = xp.asarray([[0.6, 0.7], [-0.7, 0.6]])
    for _ in range(3000):
        w = M @ w * 1.0
    for v in xp.to_exact(w):
        assert v.rad() == 0


def test_to_exact_of_float32_is_exact():
    xp = backend_for(parse_precision("float32"))
    v = xp.asarray([0.1])
    e = xp.to_exact(v)[0]
    assert e.rad() == 0 and float(e) == float(np.float32(0.1))


def test_mp_negation_and_abs_keep_full_precision():
    # python-flint rounds unary minus to its global context precision (53 bits by default);
    # the backend must not lose digits there.
    xp = backend_for(parse_precision("mp50"))
    a = xp.asarray([0.3]) + 1e-20
    assert float((-a + a)[0]) == 0.0
    assert float((abs(-a) - xp.asarray([0.3]))[0]) == pytest.approx(1e-20, rel=1e-12)


def test_workprec_nests_restores_on_error_and_decorates():
    from precision.backends.mp_backend import workprec

    old = flint.ctx.prec
    with workprec(200):
        assert flint.ctx.prec == 200
        with workprec(300):
            assert flint.ctx.prec == 300
        assert flint.ctx.prec == 200
    assert flint.ctx.prec == old
    with pytest.raises(ZeroDivisionError), workprec(400):
        raise ZeroDivisionError
    assert flint.ctx.prec == old
    with pytest.raises(ValueError):  # flint's own check: prec >= 2
        with workprec(1):
            pass
    assert flint.ctx.prec == old

    @workprec(128)
    def depth(n: int) -> list[int]:  # recursion: each call restores its caller's precision
        inner = depth(n - 1) if n else []
        return [flint.ctx.prec, *inner]

    assert depth(3) == [128] * 4 and flint.ctx.prec == old
    assert depth.__name__ == "depth"


@pytest.mark.parametrize("name", ["float64", "float32", "float16"])
def test_float_arrays_live_in_torch_memory_and_products_do_not_depend_on_the_address(name):
    """``asarray`` of numpy data (16-byte aligned) gives torch's 64-byte aligned memory, so
    a solver's products are the same bits wherever numpy put its problem (a BLAS kernel's
    last bits can depend on the operands' addresses)."""
    xp = backend_for(parse_precision(name))
    rng = np.random.default_rng(0)
    A, v = rng.standard_normal((64, 48)), rng.standard_normal(48)
    results = set()
    for k in range(8):
        buf = np.empty(A.size + v.size + 16)
        a = buf[k:k + A.size].reshape(A.shape)
        w = buf[k + A.size + 1:k + A.size + 1 + v.size]
        a[...], w[...] = A, v
        ta, tw = xp.asarray(a), xp.asarray(w)
        assert ta.data_ptr() % 64 == 0 and tw.data_ptr() % 64 == 0
        results.add(torch.matmul(ta, tw).double().numpy().tobytes())
    assert len(results) == 1
