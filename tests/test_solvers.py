"""The reference solvers reproduce the floors and rates the foundation issue asks for."""

import math

import pytest

from precision.solvers.measure import SolverError, run_solver

GAUSS = {"kind": "gaussian", "dim": 5, "n_samples": 20}
KAPPA_1E6 = {"kind": "controlled", "dim": 5, "n_samples": 20, "kappa": 1e6}  # cond(X) = 1e3
SPD = {"kind": "spd", "dim": 5, "kappa": 1e2}


@pytest.mark.parametrize(
    "precision,low,high",
    [("float32", -16.0, -13.0), ("float64", -34.0, -28.0), ("mp50", -104.0, -90.0)],
)
def test_gd_floor_per_precision(precision, low, high):
    res = run_solver("gd", precision, GAUSS, {"iters": 800})
    assert res.status == "ok"
    floor = res.floor
    assert floor.reached and floor.kind == "linear"
    assert low < floor.log10_level < high
    # Linear rate of the MSE trace = q^2, q = (kappa-1)/(kappa+1) of H = X^T X / N.
    assert 0.3 < floor.rate < 0.8
    assert floor.index < 800


def test_gd_rate_matches_theory():
    import numpy as np

    from precision.problems import gaussian_least_squares

    prob = gaussian_least_squares(5, 20)
    ev = np.linalg.eigvalsh(prob.X.T @ prob.X / 20)
    q = (ev[-1] - ev[0]) / (ev[-1] + ev[0])
    res = run_solver("gd", "mp50", GAUSS, {"iters": 800})
    assert res.floor.rate == pytest.approx(q**2, rel=0.05)


def test_cg_mp50_reaches_below_1e90_within_d_steps():
    res = run_solver("cg", "mp50", GAUSS, {"iters": 15})
    log10 = [s.log10_mse for s in res.steps]
    assert min(log10[: 5 + 1]) < -90  # D = 5 steps
    assert log10[0] > -2


@pytest.mark.parametrize("solver,order", [("newton_schulz", 2.0), ("newton_schulz_p", 3.0)])
def test_newton_schulz_order_in_mp50(solver, order):
    params = {"iters": 40} if solver == "newton_schulz" else {"iters": 25, "order": 3}
    res = run_solver(solver, "mp50", SPD, params)
    assert res.floor.kind == "superlinear"
    assert res.floor.order == pytest.approx(order, abs=0.05)
    assert res.floor.log10_level < -90
    # Correct digits multiply by the order once the quadratic phase starts.
    digits = [s.digits for s in res.steps]
    k = next(i for i, d in enumerate(digits) if d > 3)
    assert digits[k + 1] / digits[k] == pytest.approx(order, rel=0.25)


def test_normal_equations_lose_kappa_squared_in_float32():
    normal = run_solver("ols_normal", "float32", KAPPA_1E6)
    qr = run_solver("ols_qr", "float32", KAPPA_1E6)
    # Theory: relative error ~ kappa(X)^2 u (normal eq.) vs kappa(X) u (QR) with kappa = 1e3.
    assert normal.final.log10_mse > qr.final.log10_mse + 4


def test_breakdown_is_a_result_not_an_exception():
    res = run_solver("ols_normal", "bfloat16", KAPPA_1E6)
    assert res.status == "failed" and "pivot" in res.error
    res = run_solver("newton_schulz", "bfloat16", {"kind": "spd", "dim": 5, "kappa": 1e4},
                     {"iters": 45})
    assert res.status == "diverged" and res.floor.kind == "diverged"


def test_logistic_newton_reaches_mp50_floor_quadratically():
    prob = {"kind": "logistic", "dim": 5, "n_samples": 26, "mu": 0.1}
    for solver in ("newton", "damped_newton"):
        res = run_solver(solver, "mp50", prob)
        assert res.floor.log10_level < -95
        assert res.floor.kind == "superlinear"


def test_same_inputs_same_numbers():
    a = run_solver("nesterov", "float32", GAUSS, {"iters": 100})
    b = run_solver("nesterov", "float32", GAUSS, {"iters": 100})
    assert [s.log10_mse for s in a.steps] == [s.log10_mse for s in b.steps]


def test_user_errors_raise_solver_error():
    with pytest.raises(SolverError, match="unknown solver"):
        run_solver("gauss_seidel", "float32", GAUSS)
    with pytest.raises(SolverError, match="no parameter"):
        run_solver("gd", "float32", GAUSS, {"stepsize": 0.1})
    with pytest.raises(SolverError, match="dim"):
        run_solver("gd", "float32", {"kind": "gaussian", "dim": 0, "n_samples": 3})


def test_direct_solvers_in_every_precision_finite():
    for p in ("float16", "bfloat16", "float32", "float64", "mp30"):
        res = run_solver("ols_qr", p, GAUSS)
        assert res.status == "ok" and math.isfinite(res.final.log10_mse)
