"""Numerical defects found in review (issue "any machine, any input"), one test each.

Certification of exact zeros, uncertifiable truths as a run's status, the logistic truth's
certificate, the floor detector on slowly falling traces, seed medians and 'falling' in the
tables, claims that see failed / diverged / unpaired runs, rounded scalars in truths, single
rounding into bfloat16 / float16, rounded inputs of low mpN, and exact-zero decompositions.
"""

from __future__ import annotations

import math

import flint
import numpy as np
import pytest
import torch

from precision.backends import backend_for
from precision.backends.mp_backend import exact_array
from precision.backends.torch_backend import round_to_dtype
from precision.metrics import detect_floor
from precision.precisions import as_precision, parse_precision
from precision.problems import logistic_regression
from precision.solvers.measure import _inputs_and_truth, get_solver, make_problem, run_solver
from precision.truth import (
    TruthError,
    inverse_truth,
    least_squares_truth,
    logistic_truth,
)
from reports.floor_cells import floor_cell
from reports.model_table import model_tables
from reports.papers.claims import check_claims
from reports.solver_table import solver_tables

# --- truths ---------------------------------------------------------------------------------


def test_truth_with_an_exact_zero_entry_certifies():
    # w* = (1, 0) exactly: a ball around 0 is never small relative to itself, so the old
    # relative test could not certify it at any precision.
    X = exact_array(np.array([[1.0, 1], [1, 2], [1, 3], [1, 5]]))
    w = least_squares_truth(X, exact_array(np.ones(4)), 512)
    assert abs(float(w[0]) - 1) < 1e-100 and abs(float(w[1])) < 1e-100


def test_singular_truth_is_a_truth_error():
    with pytest.raises(TruthError, match="could not be certified"):
        inverse_truth(exact_array(np.array([[1.0, 2.0], [2.0, 4.0]])), 512)


def test_uncertifiable_truth_is_the_runs_failed_status_not_a_crash():
    # This SPD matrix rounds to an exactly singular one in bfloat16 (found by search): the
    # run is "failed" with a one-line reason, and the same problem in float32 is fine.
    problem = {"kind": "spd", "dim": 2, "kappa": 1e4, "seed": 155}
    res = run_solver("newton_schulz", "bfloat16", problem, {"iters": 5})
    assert res.status == "failed" and "could not be certified" in res.error
    assert "\n" not in res.error
    assert run_solver("newton_schulz", "float32", problem, {"iters": 5}).status == "ok"


def test_logistic_truth_is_certified_by_strong_convexity():
    prob = logistic_regression(dim=4, n_samples=20, mu=0.1, seed=3)
    A, y = exact_array(prob.X), exact_array(prob.y)
    w = logistic_truth(A, y, prob.mu, 512)
    w2 = logistic_truth(A, y, prob.mu, 1024)
    assert max(abs(float(a - b)) for a, b in zip(w, w2, strict=True)) < 1e-70
    # The gradient at the returned point is tiny (what the certificate bounds).
    old = flint.ctx.prec
    flint.ctx.prec = 1024
    try:
        n = len(prob.y)
        grad = [flint.arb(prob.mu) * w[k] for k in range(4)]
        for i in range(n):
            m = sum((A[i, k] * w[k] for k in range(4)), flint.arb(0)) * y[i]
            s = 1 / (1 + m.exp())
            for k in range(4):
                grad[k] -= y[i] * s * A[i, k] / n
        assert max(abs(float(g)) for g in grad) < 1e-70
    finally:
        flint.ctx.prec = old


def test_logistic_truth_that_cannot_be_certified_says_so():
    prob = logistic_regression(dim=3, n_samples=10, mu=0.1, seed=0)
    # mu = 0 removes the strong convexity the certificate needs (and Newton may not converge
    # on separable data): never a silent, uncertified answer.
    with pytest.raises(TruthError):
        logistic_truth(exact_array(prob.X), exact_array(prob.y), 0.0, 128, max_bits=256)


def test_ridge_truth_uses_lambda_as_the_precision_rounds_it():
    spec = get_solver("ridge")
    prob = make_problem("least_squares", {"kind": "gaussian", "dim": 3, "n_samples": 8})
    p = parse_precision("float32")
    xp = backend_for(as_precision(p))
    _, w_true, *_ = _inputs_and_truth(spec, xp, prob, {"lam": 0.1}, 512)
    X, y = xp.to_exact(xp.asarray(prob.X)), xp.to_exact(xp.asarray(prob.y))
    lam32 = flint.arb(float(np.float32(0.1)))
    expected = least_squares_truth(X, y, 512, ridge=lam32)
    decimal = least_squares_truth(X, y, 512, ridge=0.1)
    assert all(a == b for a, b in zip(w_true, expected, strict=True))
    assert any(abs(float(a - b)) > 1e-12 for a, b in zip(w_true, decimal, strict=True))


# --- the floor detector ---------------------------------------------------------------------


def test_slowly_falling_gd_trace_is_not_a_reached_floor():
    # GD at cond(X^T X) = 1e4 still falls after 2000 steps (10^0.26 -> 10^-0.06, with GD's
    # period-2 wobble); it used to be reported as "floor 1.0 @2".
    res = run_solver("gd", "float64", {"kind": "controlled", "dim": 5, "n_samples": 20,
                                       "kappa": 1e4, "seed": 0}, {"iters": 2000})
    assert res.status == "ok"
    assert not res.floor.reached and res.floor.index == 2000


@pytest.mark.parametrize("seed", range(20))
def test_jittery_rounding_floor_is_reached(seed):
    rng = np.random.default_rng(seed)
    trace = np.concatenate([np.linspace(0, -14, 60), -14 + 0.3 * rng.standard_normal(300)])
    floor = detect_floor(10.0**trace)
    assert floor.reached and abs(floor.log10_level + 14) < 0.3


def test_floor_reached_inside_the_tail_and_constant_floors_are_reached():
    step = np.concatenate([np.linspace(0, -10, 200), np.full(40, -10.0), np.full(60, -10.4)])
    assert detect_floor(10.0**step).reached
    assert detect_floor([1e-3] * 50).reached


def test_slow_geometric_fall_with_period_two_wobble_is_still_falling():
    k = np.arange(3000)
    trace = -2e-4 * k + 0.06 * (-1.0) ** k
    assert not detect_floor(10.0**trace).reached


# --- tables ---------------------------------------------------------------------------------


def _row(seed: int, floor_log10: float, *, status: str = "ok", reached: bool = True,
         index: int = 50, subject: str = "gd") -> dict:
    return {"kind": "solver", "suite": "solvers", "task": "ls_gauss", "subject": subject,
            "precision": "float32", "status": status, "error": None,
            "floor_log10": floor_log10 if status == "ok" else None, "log10_mse": floor_log10,
            "floor_index": index, "steps": 200, "created_at": "2026", "run_id": f"r{seed}",
            "config": {"problem": {"seed": seed}, "params": {}},
            "result": {"floor": {"reached": reached}}}


def test_floor_cell_shows_median_spread_and_falling():
    logs = [-15, -14, -13.2, -14.6, -15]
    rows = [{**_row(s, v), "reached": True} for s, v in enumerate(logs)]
    assert floor_cell(rows) == "2.5e-15 ±0.9 @50"    # median -14.6, range 1.8 decades
    rows[0]["reached"] = False
    rows[1] = {**rows[1], "status": "diverged"}
    assert floor_cell(rows).endswith("falling 1/5 diverged 1/5")


def test_solver_table_marks_unreached_floors():
    text = solver_tables([_row(0, -0.06, reached=False, index=2000)])
    assert "8.7e-01 falling" in text and "@2000" not in text


# --- claims ---------------------------------------------------------------------------------


def _claim(rows: list[dict], claim_id: str):
    return next(c for c in check_claims(rows) if c.id == claim_id)


def test_claim_with_only_a_failed_run_says_it_failed():
    c = _claim([_row(0, -14, status="failed")], "001-gd-floor")
    assert c.verdict == "not measured" and "1 run failed" in c.measured


def test_claim_with_a_diverged_run_does_not_hold():
    c = _claim([_row(0, -14), _row(1, -14, status="diverged")], "001-gd-floor")
    assert c.verdict == "does not hold" and "1 run diverged" in c.measured
    c = _claim([_row(0, -14), _row(1, -14, status="nonfinite")], "001-gd-floor")
    assert c.verdict == "does not hold" and "1 run not finite in its precision" in c.measured


def test_claim_on_an_unreached_floor_is_not_measured():
    c = _claim([_row(0, -14), _row(1, -13, reached=False)], "001-gd-floor")
    assert c.verdict == "not measured" and "still falling" in c.measured
    assert _claim([_row(0, -14), _row(1, -13)], "001-gd-floor").verdict == "holds"


def _lsa(subject: str, variant: str, layers: int, loss: float) -> dict:
    return {"kind": "study", "suite": "noisy_regression_lsa", "subject": subject,
            "task": f"layers={layers}", "precision": "float64", "status": "ok",
            "config": {"params": {"layers": layers, "noise": 5, "variant": variant},
                       "seed": 0},
            "result": {"metrics": {"loss": loss}}}


def test_relative_claim_with_a_missing_partner_is_not_a_hold():
    rows = [_lsa("uniform", "diag", 1, 0.9), _lsa("uniform_full", "full", 1, 0.9),
            _lsa("uniform_full", "full", 4, 0.06)]           # no Diag at L = 4
    c = _claim(rows, "002-diag-full")
    assert c.verdict == "not measured" and "layers=4" in c.measured and "no partner" in c.measured
    rows.append(_lsa("uniform", "diag", 4, 0.06))
    assert _claim(rows, "002-diag-full").verdict == "holds"


# --- rounding into the precision ------------------------------------------------------------


def test_bfloat16_and_float16_casts_round_once():
    x = torch.tensor([1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40], dtype=torch.float64)
    bf = round_to_dtype(x, torch.bfloat16)
    assert bf.dtype == torch.bfloat16 and bf[0].item() == 1 + 2**-7   # Tensor.to gives 1.0
    assert round_to_dtype(x, torch.float16)[1].item() == 1 + 2**-10
    assert backend_for(parse_precision("bfloat16")).asarray(x.numpy())[0].item() == 1 + 2**-7
    # Ties go to even, and a carry rolls into the exponent.
    ties = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, 2 - 2**-9], dtype=torch.float64)
    assert round_to_dtype(ties, torch.bfloat16).tolist() == [1.0, 1 + 2**-6, 2.0]


def test_model_in_float64_is_rounded_once_into_bfloat16():
    from precision.evaluate import evaluate_exact

    lin = torch.nn.Linear(1, 1, bias=False).double()
    with torch.no_grad():
        lin.weight.fill_(1 + 2**-8 + 2**-30)
    out = evaluate_exact(lin, torch.ones(1, 1, dtype=torch.float64), "bfloat16")
    assert float(out[0, 0]) == 1 + 2**-7


def test_trained_truth_in_low_mp_uses_the_rounded_inputs():
    from probes.training.measure import _rounded_inputs

    x = torch.tensor([1 / 3, 2.0, 1e-5], dtype=torch.float64)
    p = parse_precision("mp10")
    r = _rounded_inputs(x, p)
    assert r[1].item() == 2.0 and 0 < abs(r[0].item() - 1 / 3) < 1e-9
    assert torch.equal(_rounded_inputs(x, parse_precision("mp50")), x)


def test_exactly_zero_rounding_error_keeps_its_label():
    from probes.training.measure import log10_or_none

    assert log10_or_none(-math.inf) == -math.inf and log10_or_none(math.nan) is None
    row = {"kind": "trained", "task": "read", "subject": "baseconv", "precision": "mp50",
           "status": "ok", "mse": 1e-20, "created_at": "2026", "run_id": "x",
           "config": {"depth": 1, "width": 4},
           "result": {"decomposition": {"approximation": -20.0, "rounding": "-inf"}}}
    assert "1.0e-20 A" in model_tables([row])
