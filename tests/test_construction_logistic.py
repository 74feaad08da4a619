"""000 Thm 5.2 / App. C: damped Newton for regularised logistic regression in 11 + 2k layers.

The construction approximates sigma-derived terms, products and the step size with ReLU
gadgets of N intervals and inverts the Hessian with k Newton–Schulz steps, so it matches
the damped Newton step up to an error that falls like N^-2 until Newton–Schulz dominates.
Numbers below are for the seeded problem of 000 Sec. 6 (d = 5, n = 26, mu = 0.1, seed 0).
"""

import functools
import math

import numpy as np
import pytest
import torch

from precision.backends import backend_for
from precision.constructions import logistic_newton as ln
from precision.evaluate import evaluate_exact
from precision.metrics import error_summary
from precision.precisions import as_precision, parse_precision
from precision.problems import logistic_regression
from precision.solvers.linalg import cholesky_solve
from precision.solvers.newton_logistic import logistic_grad_hess, newton_logistic

D, NS = 5, 26
PROB = logistic_regression(D, NS, mu=0.1, seed=0)
A, Y, MU = PROB.X, PROB.y, PROB.mu


def ref_step(precision: str, x0: np.ndarray) -> np.ndarray:
    """One damped Newton step from x0 (the loop body of newton_logistic) as exact values."""
    xp = backend_for(as_precision(precision))
    x = xp.asarray(x0)
    grad, H = logistic_grad_hess(xp, xp.asarray(A), xp.asarray(Y), x, MU)
    step = cholesky_solve(xp, H, grad)
    lam = xp.sqrt(abs(grad @ step))
    return xp.to_exact(x - step / (lam + 1.0))


def first_iterate() -> np.ndarray:
    xp = backend_for(parse_precision("float64"))
    return xp.to_numpy(newton_logistic(xp, xp.asarray(A), xp.asarray(Y), mu=MU, iters=1,
                                       damped=True)[1])


@pytest.fixture(autouse=True)
def _one_thread():
    """The models are small (26 tokens) but have wide MLPs: with the intra-op thread pool on a
    busy machine a float64 forward pass took 6 s instead of 0.1 s. Restored after each test."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


X0S = {"zero": np.zeros(D), "w1": first_iterate()}
REF64 = {name: np.array([float(v) for v in ref_step("float64", x0)]) for name, x0 in X0S.items()}


def run64(model: torch.nn.Module, x0: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return ln.read_iterate(model(ln.tokens(A, Y, x0)).numpy(), D)


@functools.cache
def built(N: int, k: int) -> torch.nn.Module:
    return ln.damped_newton(D, NS, MU, N=N, k=k)


def step_error(N: int, k: int, x0name: str) -> float:
    out = run64(built(N, k), X0S[x0name])
    return float(np.linalg.norm(out - REF64[x0name]))


def test_shape_and_depth():
    model = ln.damped_newton(D, NS, MU, N=8, k=3, steps=2)
    assert ln.layers_per_step(3) == 17 and model.depth == 34
    out = model(ln.tokens(A, Y)).detach()
    assert out.shape == (1, NS, 7 * D + 4)
    # Output has the input's format (000 eq. C.3): only the x block changed.
    x_rows = ln.rows(D)["x"]
    inp = ln.tokens(A, Y)
    keep = torch.ones(7 * D + 4, dtype=torch.bool)
    keep[x_rows] = False
    assert torch.equal(out[..., keep], inp[..., keep])
    assert torch.allclose(out[0, :, x_rows], out[0, :1, x_rows].expand(NS, D))
    with pytest.raises(ValueError, match="n >= d"):
        ln.tokens(A[:3], Y[:3])
    with pytest.raises(ValueError, match="damping"):
        ln.damped_newton(D, NS, MU, damping="none")


def test_gadget_interpolates_and_clamps():
    knots = ln.uniform_knots(-4.0, 4.0, 16)
    const, coefs = ln.pl_gadget(lambda v: 1 / (1 + v.exp()), knots)
    t = np.array(knots)
    np.testing.assert_allclose(ln.pl_eval(t, const, coefs, knots), 1 / (1 + np.exp(t)),
                               atol=1e-14)
    # Constant outside the interval; O(h^2) between knots.
    assert ln.pl_eval(np.array([-9.0]), const, coefs, knots)[0] == pytest.approx(
        1 / (1 + math.exp(-4.0)), abs=1e-14)
    assert ln.pl_eval(np.array([9.0]), const, coefs, knots)[0] == pytest.approx(
        1 / (1 + math.exp(4.0)), abs=1e-14)
    mid = (t[:-1] + t[1:]) / 2
    err = np.max(np.abs(ln.pl_eval(mid, const, coefs, knots) - 1 / (1 + np.exp(mid))))
    assert 1e-3 < err < 0.5 ** 2 / 8 * 0.1  # h^2 / 8 max|f''|, h = 1/2, |sigma''| < 0.1


@pytest.mark.parametrize("x0name", ["zero", "w1"])
def test_error_falls_like_n_squared(x0name):
    """One Newton step, k = 10 (Newton–Schulz converged): error ~ N^-2 in the gadget width.
    Measured (seed 0): x0 = 0: 1.7e-2, 5.3e-3, 1.2e-3, 3.0e-4 for N = 16, 32, 64, 128;
    x0 = w1: 2.0e-2, 8.1e-3, 1.7e-3, 1.7e-4."""
    errs = [step_error(N, 10, x0name) for N in (16, 32, 64, 128)]
    assert all(b < a / 2 for a, b in zip(errs, errs[1:], strict=False)), errs
    slope = math.log(errs[-1] / errs[0]) / math.log(8)
    assert slope < -1.7, (slope, errs)
    assert errs[-1] < 5e-4


def test_error_falls_with_newton_schulz_steps_until_width_dominates():
    """N = 128: the inversion error shrinks quadratically in k (0.34, 0.17, 4.4e-2, 3.3e-3,
    2.8e-4 for k = 2..6) until the gadgets' N^-2 error (3e-4) is the floor (k = 6..10)."""
    errs = {k: step_error(128, k, "zero") for k in (2, 3, 4, 5, 6, 8, 10)}
    seq = [errs[k] for k in (2, 3, 4, 5, 6)]
    assert all(b < a for a, b in zip(seq, seq[1:], strict=False)), errs
    assert errs[4] / errs[6] > 50
    assert errs[2] > 0.1
    assert errs[6] == pytest.approx(errs[10], rel=0.1)
    assert errs[8] == pytest.approx(errs[10], rel=0.01)
    assert errs[10] == pytest.approx(3.0e-4, rel=0.2)


def test_perturbed_weight_breaks_the_step():
    """A single weight changed by 1e-2 in a layer whose effect no later layer undoes (the
    gadget for d_i, the Hessian's mu, the gradient's mu, the step-size gadget, the update)
    moves the step by far more than the construction's own error (1.7e-4 at N = 128). (A
    weight of a middle Newton–Schulz step would not do: the iteration corrects it.)"""
    N, k = 128, 8
    model = built(N, k)  # restored exactly below
    x0, want = X0S["w1"], REF64["w1"]
    base = float(np.linalg.norm(run64(model, x0) - want))
    assert base < 3e-4
    r = ln.rows(D)
    L = 4 + 2 * k  # 0-based index of layer 2k + 5
    cases = [
        (model.mlp[0][2].weight, (r["s"].start, N + 1)),           # Step 1: d_i gadget's f(t_0)
        (model.WV, (1, 0, r["G"].start + 2, r["I"].start + 2)),    # n mu I in the Hessian
        (model.WV, (L + 1, 1, r["G"].start + 1, r["x"].start + 1)),  # mu x in the gradient
        (model.mlp[L + 4][2].weight, (r["s"].start, N + 1)),       # step-size gadget's f(t_0)
        (model.WV, (L + 6, 0, r["x"].start + 3, r["T"].start + 3)),  # the update
    ]
    for param, idx in cases:
        saved = param[idx].item()
        with torch.no_grad():
            param[idx] = saved + 1e-2
        err = float(np.linalg.norm(run64(model, x0) - want))
        with torch.no_grad():
            param[idx] = saved
        assert err > 8 * base, (idx, err, base)  # measured: 11x to 34x
    assert float(np.linalg.norm(run64(model, x0) - want)) == base


def test_mp50_agrees_with_float64_and_has_the_same_approximation_error():
    """Through evaluate_exact() (exported graph, 50 digits): the model's output equals the float64
    run to float64 level, and its distance to damped Newton computed in mp50 is the float64
    distance (the gadgets' approximation error, not rounding)."""
    model = ln.damped_newton(D, NS, MU, N=8, k=3)  # 17 layers: one export (~6 s)
    x = ln.tokens(A, Y, X0S["w1"])
    mp = ln.read_iterate(evaluate_exact(model, x, "mp50"), D)
    f64 = ln.read_iterate(evaluate_exact(model, x, "float64"), D)
    f32 = ln.read_iterate(evaluate_exact(model, x, "float32"), D)
    assert error_summary(f64, mp).log10_mse < -29
    assert -16 < error_summary(f32, mp).log10_mse < -10
    e_mp = error_summary(mp, ref_step("mp50", X0S["w1"]))
    e_64 = error_summary(f64, ref_step("float64", X0S["w1"]))
    assert e_mp.log10_mse == pytest.approx(e_64.log10_mse, abs=1e-9)
    assert -4 < e_mp.log10_mse < -1


def test_registered_construction_runs_per_step():
    from precision.constructions.measure import run_construction

    res = run_construction("logistic_newton", "float64",
                           {"kind": "logistic", "dim": D, "n_samples": NS, "mu": MU},
                           {"N": 64, "k": 8, "steps": 6})
    assert res.status == "ok" and len(res.steps) == 6
    # Converges to the fixed point of the approximate map: ~1.4e-4 from w* (N^-2 level).
    assert -8.5 < res.steps[-1].log10_mse < -7.5
    assert -8.5 < res.reference[-1].log10_mse < -7.5  # damped Newton has reached w*
