"""004 studies: Lemma 4's closed form, the ridge limit, population GD, heads (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from precision.backends import backend_for
from precision.models.softmax_icl import SoftmaxICL
from precision.precisions import parse_precision
from probes.studies import StudyError, get_study
from probes.studies import population_loss as pl
from probes.studies.representations import (
    cone_gap,
    limit_weights,
    monte_carlo_loss,
    single_head_gap_bound,
)
from probes.suite import load_suite

torch.set_num_threads(1)

TINY = {"d": 2, "N": 2, "K": 4, "m": 2, "tau": 0.5, "beta": 2.0, "heads": 4}


def _run(name: str, precision: str = "float64", seed: int = 0, **given: object) -> dict:
    spec = get_study(name)
    return spec.fn(spec.resolve(given), (parse_precision(precision),), seed)[0].metrics


def _setup(xp, prob: pl.RepresentationProblem) -> dict:
    T = xp.asarray(prob.tokens)
    Zhat = xp.asarray(prob.features)
    Z = Zhat[:, : prob.n_prompt]
    return {"T": T, "V": T[:, : prob.n_prompt], "Zhat": Zhat, "Z": Z,
            "M": pl.gram(xp, Z, prob.m_tau), "A": pl.ridge_limit(xp, Z, Zhat, prob.m_tau)}


PROB = pl.representation_problem(0, d=3, N=3, K=6, m=2, tau=0.5)
Q0 = 2.0 * np.random.default_rng(5).standard_normal((4, 3, 3))
W0 = np.random.default_rng(6).standard_normal((4, 6))


def test_closed_form_matches_monte_carlo_of_the_model() -> None:
    xp = backend_for(parse_precision("float64"))
    a = _setup(xp, PROB)
    S = pl.attention(xp, a["V"], a["T"], xp.asarray(Q0))
    floor = pl.loss_floor(xp, a["Z"], a["Zhat"], PROB.m_tau)
    closed = xp.to_float(pl.population_loss(xp, a["M"], a["A"], S, xp.asarray(W0), floor))
    direct = xp.to_float(pl.population_loss_direct(
        xp, a["Z"], a["Zhat"], PROB.m_tau, pl.a_hat(xp, S, xp.asarray(W0))))
    assert closed == pytest.approx(direct, rel=1e-13)          # eq. 29 = App. H.1 form
    model = SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W0), PROB.n_prompt)
    mc, se = monte_carlo_loss(PROB, model, 40000, seed=0)
    assert abs(mc - closed) < 4 * se and se < 0.02 * closed
    # at the ridge limit the loss is L* (corrected); the printed L* is rejected by MC
    W_lim = limit_weights(PROB, Q0)
    assert W_lim is not None
    lstar = xp.to_float(floor)
    printed = xp.to_float(pl.loss_floor(xp, a["Z"], a["Zhat"], PROB.m_tau, printed=True))
    assert lstar - printed == pytest.approx((6 - 3) * PROB.m_tau / 12, rel=1e-12)
    model = SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W_lim), PROB.n_prompt)
    mc_l, se_l = monte_carlo_loss(PROB, model, 40000, seed=1)
    assert abs(mc_l - lstar) < 4 * se_l
    assert (mc_l - printed) / se_l > 20


def test_model_a_hat_and_forward_agree_with_the_solver() -> None:
    xp = backend_for(parse_precision("float64"))
    a = _setup(xp, PROB)
    Ahat = xp.to_numpy(pl.a_hat(xp, pl.attention(xp, a["V"], a["T"], xp.asarray(Q0)),
                                xp.asarray(W0)))
    model = SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W0), PROB.n_prompt)
    tokens = torch.tensor(PROB.tokens.T)
    assert np.allclose(model.a_hat(tokens).detach().numpy(), Ahat, atol=1e-14)
    y = torch.randn(5, PROB.n_prompt, dtype=torch.float64, generator=torch.Generator()
                    .manual_seed(0))
    out = model(SoftmaxICL.embed(tokens, y))[..., 0].detach().numpy()
    assert np.allclose(out, y.numpy() @ Ahat, atol=1e-13)      # y_hat_k = <y, A_hat_k> (eq. 6)


@pytest.mark.parametrize("name, tol", [("float64", 1e-13), ("mp50", 1e-45)])
def test_ridge_limit_equals_eq64_and_direct_ridge(name: str, tol: float) -> None:
    m = _run("representations.closed_form", name, **TINY, samples=1000)
    assert m["ridge_forms_diff"] < tol and m["ridge_vs_direct"] < tol
    assert m["loss_forms_rel_diff"] < tol
    # and directly: A^T y = (y, Z^Q^T lambda_hat) with lambda_hat of eq. 65
    xp = backend_for(parse_precision(name))
    a = _setup(xp, PROB)
    y = xp.asarray([0.3, -1.2, 0.7])
    pred = pl.ridge_predictions(xp, a["Z"], a["Zhat"], y, PROB.m_tau)
    assert xp.to_float(xp.max(xp.abs(a["A"].T @ y - pred))) < tol
    Z, Zq = PROB.features[:, :3], PROB.features[:, 3:]
    lam = np.linalg.solve(Z @ Z.T + PROB.m_tau * np.eye(2), Z @ np.array([0.3, -1.2, 0.7]))
    assert np.allclose(xp.to_numpy(pred)[3:], Zq.T @ lam, atol=1e-13)


def test_gradient_matches_autograd() -> None:
    xp = backend_for(parse_precision("float64"))
    a = _setup(xp, PROB)
    Q = torch.tensor(Q0, requires_grad=True)
    W = torch.tensor(W0, requires_grad=True)
    S = pl.attention(xp, a["V"], a["T"], Q)
    loss = pl.loss_gap(xp, a["M"], pl.a_hat(xp, S, W) - a["A"])
    loss.backward()
    gap, gQ, gW, _ = pl.population_grad(xp, a["V"], a["T"], a["M"], a["A"],
                                        torch.tensor(Q0), torch.tensor(W0))
    assert float(gap) == pytest.approx(loss.item(), rel=1e-14)
    assert torch.allclose(gQ, Q.grad, atol=1e-13) and torch.allclose(gW, W.grad, atol=1e-13)


def test_gd_converges_linearly_within_thm1_bound() -> None:
    m = _run("representations.population_gd", **TINY, iters=600)
    assert m["max_abs_err"] < 1e-14 and m["floor_log10"] < -14.5
    assert 0.7 < m["err_rate"] < 0.9                    # measured 0.816 per iteration
    assert m["gap_rate"] == pytest.approx(m["err_rate"] ** 2, rel=0.05)
    assert m["gap_rate"] < m["gap_rate_bound"] < 1 and m["thm1_bound_holds"] == 1.0
    assert m["thm1_steps_satisfied"] == 0.0 and m["thm1_gamma_min"] > 1.0
    th = _run("representations.population_gd", **TINY, step_rule="theorem", iters=600)
    assert th["thm1_steps_satisfied"] == 1.0 and th["thm1_bound_holds"] == 1.0
    assert th["gap_rate"] < th["gap_rate_bound"] < 1


def test_mp50_reaches_its_floor() -> None:
    m = _run("representations.population_gd", "mp50", **TINY, iters=700, record_every=20)
    assert m["max_abs_err"] < 1e-40 and m["floor_log10"] < -45
    assert m["ridge_pred_err"] < 1e-40          # predictions = ridge regression (eq. 15-16)
    f32 = _run("representations.population_gd", "float32", **TINY, iters=300)
    assert 1e-8 < f32["max_abs_err"] < 1e-5 and 1e-8 < f32["ridge_pred_err"] < 1e-4


def test_one_head_keeps_a_positive_gap_and_enough_heads_reach_the_limit() -> None:
    bound, mixed = single_head_gap_bound(PROB)
    assert mixed >= 1 and bound > 1e-3
    other = pl.representation_problem(1, d=3, N=3, K=6, m=2, tau=0.5)
    assert single_head_gap_bound(other) == (0.0, 0)      # one-signed columns: no certificate
    h1 = _run("representations.heads", **{**TINY, "d": 3, "N": 3, "K": 6, "heads": 1},
              iters=500)
    assert h1["single_head_gap_bound"] == pytest.approx(bound)
    assert h1["gap_final"] >= bound and h1["rank_c_min"] == 1 and h1["zeta0"] == 0
    h6 = _run("representations.heads", **{**TINY, "d": 3, "N": 3, "K": 6, "heads": 6},
              iters=1500)
    assert h6["gap_final"] < 1e-20 and h6["rank_c_min"] == 3 and h6["zeta0"] > 0


def test_from_weights_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    SoftmaxICL.from_weights(torch.tensor(Q0), torch.tensor(W0), 3)
    assert torch.equal(torch.rand(2), expected)


def test_cone_gap_small_cases() -> None:
    M = np.eye(2)
    assert cone_gap(M, np.array([1.0, 2.0])) == 0.0
    assert cone_gap(M, np.array([-1.0, -2.0])) == 0.0
    assert cone_gap(M, np.array([1.0, -3.0])) == pytest.approx(1.0)   # u = (0, -3)
    M2 = np.array([[2.0, 1.0], [1.0, 2.0]])
    # a = (1, -1) lies in no orthant, so the optimum is on an axis: brute force over the axes
    a = np.array([1.0, -1.0])
    grid = np.linspace(-3, 3, 601)
    ref = min(min(float((np.array([0, c]) - a) @ M2 @ (np.array([0, c]) - a)),
                  float((np.array([c, 0]) - a) @ M2 @ (np.array([c, 0]) - a))) for c in grid)
    assert cone_gap(M2, a) == pytest.approx(ref, abs=1e-4)


@pytest.mark.parametrize("given, message", [
    ({"N": 4, "K": 4}, "need N < K"),
    ({"tau": 0.0}, "tau must be a finite number > 0"),
    ({"heads": 0}, r"heads must be an integer in \[1, 1024\]"),
    ({"d": 2.5}, r"d must be an integer in \[1, 64\]"),
    ({"step": 2.0}, "step must lie in"),
    ({"iters": 105, "record_every": 10}, "must be a multiple of record_every"),
    ({"step_rule": "fast"}, "step_rule must be one of"),
    ({"gamma": -1.0}, "gamma must be a finite number > 0"),
])
def test_bad_gd_params_raise(given: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message):
        get_study("representations.population_gd").resolve(given)


@pytest.mark.parametrize("given, message", [
    ({"samples": 10}, "samples must be >= 1000"),
    ({"w_scale": 0}, "w_scale must be a finite number > 0"),
    ({"beta": float("inf")}, "beta must be a finite number > 0"),
])
def test_bad_closed_form_params_raise(given: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message):
        get_study("representations.closed_form").resolve(given)


def test_theorem_steps_need_rank_condition() -> None:
    spec = get_study("representations.population_gd")
    params = spec.resolve({**TINY, "heads": 1, "step_rule": "theorem", "iters": 10})
    [out] = spec.fn(params, (parse_precision("float64"),), 0)
    assert out.status == "failed" and out.error.startswith("StudyError: ")
    assert "needs zeta0 > 0" in out.error


def test_suite_quick_profile_expands() -> None:
    runs = load_suite("representations", profile="quick").runs
    labels = sorted((r.subject, r.label, p.name) for r in runs for p in r.precisions)
    assert len(runs) == 8 and len(labels) == 11    # one run per grid point, all its precisions
    assert ("heads", "heads=1", "float64") in labels and ("gd", "gd", "mp50") in labels
