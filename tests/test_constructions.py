"""Constructions are exact up to rounding, and break when a single weight is perturbed."""

import math

import flint
import numpy as np
import pytest
import torch

from precision.backends import backend_for
from precision.constructions import baseconv_primitives as prim
from precision.constructions.lsa_gd import preconditioned_gd, tokens
from precision.evaluate import evaluate_exact
from precision.metrics import error_summary
from precision.precisions import as_precision, parse_precision
from precision.problems import gaussian_least_squares
from precision.solvers.gd import gd

N, D = 6, 5
RNG = np.random.default_rng(0)
U = RNG.standard_normal((2, N, D))


def exact(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = [flint.arb(float(v)) for v in a.reshape(-1)]
    return out


def targets(name: str) -> tuple[torch.nn.Module, np.ndarray]:
    if name == "read":
        model, want = prim.read(N, D, i=1, j=4, a=1, b=4), U.copy()
        want[:, 4] = U[:, 1]
        return model, want[:, :, 1:4]
    if name == "affine":
        H = RNG.standard_normal((D, 3))
        return prim.affine(N, H), None  # compared against exact u @ H below
    return prim.multiply(N, D, a=0, b=2, d_out=2), None  # exact product below


def truth_of(name: str, model: torch.nn.Module, want: np.ndarray | None) -> np.ndarray:
    if want is not None:
        return exact(want)
    old = flint.ctx.prec
    flint.ctx.prec = 600  # products of float64 values are exact at 600 bits
    try:
        u = exact(U)
        if name == "multiply":
            return u[:, :, 0:2] * u[:, :, 2:4]
        return np.einsum("bnd,dk->bnk", u, exact(model.out.weight.detach().numpy().T))
    finally:
        flint.ctx.prec = old


@pytest.mark.parametrize("name", ["read", "affine", "multiply"])
def test_primitive_exact_up_to_rounding(name):
    model, want = targets(name)
    truth = truth_of(name, model, want)
    x = torch.as_tensor(U)
    assert error_summary(evaluate_exact(model, x, "mp50"), truth).log10_mse < -90
    f32 = error_summary(evaluate_exact(model, x, "float32"), truth)
    assert f32.relative < 4 * parse_precision("float32").unit_roundoff * 10
    # Perturbing any single non-zero weight breaks the construction.
    for pname, p in model.named_parameters():
        nz = torch.nonzero(p)
        if len(nz) == 0:
            continue
        idx = tuple(nz[len(nz) // 2].tolist())
        with torch.no_grad():
            p[idx] += 1e-3
        err = error_summary(evaluate_exact(model, x, "mp50"), truth).log10_mse
        with torch.no_grad():
            p[idx] -= 1e-3
        assert err > -20, f"perturbing {pname}{list(idx)} left the output exact"


def test_read_needs_i_le_j():
    with pytest.raises(ValueError, match="i <= j"):
        prim.read(N, D, i=4, j=1, a=0, b=2)


def test_lsa_runs_gd_layer_by_layer():
    prob = gaussian_least_squares(4, 12, seed=3)
    eta = 0.5
    x = tokens(prob.X, prob.y, prob.X_query[0])
    xp = backend_for(parse_precision("mp50"))
    iterates = gd(xp, xp.asarray(prob.X), xp.asarray(prob.y), step=eta, iters=6)
    q = xp.asarray(prob.X_query[0])
    for layers in range(1, 7):
        model = preconditioned_gd(4, layers, eta)
        pred = evaluate_exact(model, x, "mp50")[0, -1, 0]
        gd_pred = xp.to_exact(q @ iterates[layers]).reshape(-1)[0]
        old = flint.ctx.prec
        flint.ctx.prec = 600
        try:
            assert abs(pred - gd_pred) < flint.arb(10) ** -45
        finally:
            flint.ctx.prec = old
        f64 = evaluate_exact(model, x, "float64")[0, -1, 0]
        assert abs(float(f64) - float(gd_pred)) < 1e-12 * max(1.0, abs(float(gd_pred)))
    with torch.no_grad():
        model.A[2, 1, 0] += 1e-3
    bad = evaluate_exact(model, x, "mp50")[0, -1, 0]
    assert abs(float(bad) - float(gd_pred)) > 1e-8


def test_linear_attention_runs_newton_schulz():
    from precision.constructions import lsa_newton
    from precision.constructions.layers import layerwise
    from precision.problems import spd_matrix
    from precision.solvers.newton_schulz import newton_schulz

    d, steps = 3, 15
    A = spd_matrix(d, 10.0, seed=1)
    # A power of two below 1/||A||_F^2, so X0 = alpha A^T is exact in every precision.
    alpha = 2.0 ** -int(np.ceil(np.log2(float(np.sum(A * A)))))
    X0 = alpha * A.T
    x = lsa_newton.tokens(X0, A)
    xp = backend_for(parse_precision("mp50"))
    ref = newton_schulz(xp, xp.asarray(A), iters=steps, alpha=alpha)
    old = flint.ctx.prec
    flint.ctx.prec = 800
    try:
        inv = np.array(flint.arb_mat(d, d, [flint.arb(float(v)) for v in A.reshape(-1)])
                       .inv().mid().entries(), dtype=object).reshape(d, d)
    finally:
        flint.ctx.prec = old
    digits = {}
    # the 30-layer model one layer at a time (one export a layer), read after every step
    outs = layerwise(lsa_newton.newton_schulz(d, steps), x, parse_precision("mp50"),
                     lambda h: h[:, :, :d], every=2)
    assert len(outs) == steps
    for t in (12, 13, 14, 15):
        got = lsa_newton.read_inverse(outs[t - 1][None], d)
        want = xp.to_exact(ref[t])
        assert error_summary(got, want).log10_mse < -95  # the construction = the algorithm
        digits[t] = error_summary(got, inv).digits
    # Quadratic convergence to A^{-1}: correct digits double per step up to mp50's floor.
    assert digits[13] == pytest.approx(2 * digits[12], rel=0.05)
    assert digits[14] == pytest.approx(2 * digits[13], rel=0.05)
    assert digits[15] > 49
    model = lsa_newton.newton_schulz(d, 2)
    with torch.no_grad():
        model.WQ[3, 0, 1, 2 * d + 1] += 1e-3
    bad = lsa_newton.read_inverse(evaluate_exact(model, x, "mp50"), d)
    assert error_summary(bad, xp.to_exact(ref[2])).log10_mse > -20


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_least_squares_in_3_plus_t_layers_equals_ols(mu):
    from precision.constructions import lsa_newton
    from precision.truth import least_squares_truth

    d, n, steps = 3, 8, 16
    prob = gaussian_least_squares(d, n, seed=7)
    A, y, a = prob.X, prob.y, prob.X_query[0]
    R = A.T @ A + mu * np.eye(d)
    eps = 2.0 ** -int(np.ceil(np.log2(float(np.sum(R * R)))))
    x = lsa_newton.ls_tokens(A, y, a)
    model = lsa_newton.least_squares(d, steps, eps, mu)
    got = lsa_newton.ls_prediction(evaluate_exact(model, x, "mp50"), d)
    # Truth: ridge/OLS prediction a^T (A^T A + mu I)^{-1} A^T y (the solvers' scaling is 1/n).
    w = least_squares_truth(exact(A), exact(y), 800, ridge=mu / n)
    old = flint.ctx.prec
    flint.ctx.prec = 800
    try:
        want = sum((flint.arb(float(a[k])) * w[k] for k in range(d)), flint.arb(0))
        assert abs(got - want) < flint.arb(10) ** -45 * abs(want)
    finally:
        flint.ctx.prec = old
    f32 = lsa_newton.ls_prediction(evaluate_exact(model, x, "float32"), d)
    assert abs(float(f32) - float(want)) < 1e-3 * abs(float(want))
    # Newton–Schulz corrects a perturbed *middle* step by itself, so perturb weights whose
    # effect no later layer can undo: the formation of R (layer 1), the last Newton step,
    # and the read-out layers.
    for layer, head, i, j in [(0, 0, d, 3 * d), (steps, 0, 0, d), (steps + 1, 0, 0, 3 * d),
                              (steps + 2, 0, 0, 4 * d)]:
        with torch.no_grad():
            model.WK[layer, head, i, j] += 1e-3 if (layer, i) != (0, d) else 0.0
            model.WV[layer, head, i, j] += 1e-3 if (layer, i) == (0, d) else 0.0
        bad = lsa_newton.ls_prediction(evaluate_exact(model, x, "mp50"), d)
        with torch.no_grad():
            model.WK[layer, head, i, j] -= 1e-3 if (layer, i) != (0, d) else 0.0
            model.WV[layer, head, i, j] -= 1e-3 if (layer, i) == (0, d) else 0.0
        assert abs(float(bad) - float(want)) > 1e-10, (layer, head, i, j)


def test_construction_runs_per_layer_and_suite_stores_them(tmp_path):
    from precision.cli.main import main
    from precision.constructions.measure import run_construction
    from probes.store.db import Store

    res = run_construction("lsa_newton_schulz", "mp50", {"kind": "spd", "dim": 3,
                                                         "kappa": 10.0}, {"steps": 15})
    assert res.floor.kind == "superlinear" and res.floor.order == pytest.approx(2, abs=0.05)
    assert res.floor.log10_level < -95
    assert max(s.log10_mse for s in res.reference) < -95  # the model = the algorithm
    gd_run = run_construction("lsa_gd", "float32", {"kind": "gaussian", "dim": 4,
                                                    "n_samples": 40}, {"layers": 40})
    # GD's float32 floor (001 Fig. 5: ~1e-14). Its digits depend on the CPU's summation
    # kernels (AVX-512 / AVX2 / default differ 100x), so the bounds come from the unit
    # roundoff u: above (u/100)^2 (not a float64 floor), below (200 u)^2 (200 = the order of
    # the number of rounded terms an output accumulates, D N + layers).
    u32 = parse_precision("float32").unit_roundoff
    assert 2 * math.log10(u32 / 100) < gd_run.floor.log10_level < 2 * math.log10(200 * u32)
    db = tmp_path / "r.db"
    rc = main(["run", "constructions", "--db", str(db), "--precisions", "float32",
               "--no-progress", "--report-dir", str(tmp_path / "rep")])
    assert rc == 0
    with Store(db) as store:
        rows = store.runs(kind="construction")
        assert {r["subject"] for r in rows} >= {"lsa_gd", "lsa_newton_schulz", "baseconv_gd",
                                                "baseconv_gd_noncausal", "baseconv_read"}
        bc = next(r for r in rows if r["subject"] == "baseconv_gd")
        # 001 Fig. 5: ~1e-14 in float32; kernel-independent bounds as for lsa_gd above
        assert 2 * math.log10(u32 / 100) < bc["floor_log10"] < 2 * math.log10(200 * u32)
        series = store.series(rows[0]["run_id"])
        assert "log10_mse_vs_algorithm" in series and "log10_mse" in series


def test_symmetric_newton_schulz_one_layer_per_step():
    from precision.constructions import lsa_newton
    from precision.problems import spd_matrix
    from precision.solvers.newton_schulz import newton_schulz

    d, steps = 3, 14
    A = spd_matrix(d, 10.0, seed=2)
    alpha = 2.0 ** -int(np.ceil(np.log2(float(np.sum(A * A)))))
    x = lsa_newton.symmetric_tokens(alpha * A, A)
    xp = backend_for(parse_precision("mp50"))
    ref = newton_schulz(xp, xp.asarray(A), iters=steps, alpha=alpha)
    model = lsa_newton.newton_schulz_symmetric(d, steps)
    assert model.depth == steps  # one layer per step, half of Lemma 4.1's general case
    got = lsa_newton.read_inverse(evaluate_exact(model, x, "mp50"), d)
    assert error_summary(got, xp.to_exact(ref[steps])).log10_mse < -95
    with torch.no_grad():
        model.WQ[steps - 1, 1, 0, 2 * d] += 1e-3  # the last step's identity read
    bad = lsa_newton.read_inverse(evaluate_exact(model, x, "mp50"), d)
    assert error_summary(bad, xp.to_exact(ref[steps])).log10_mse > -20


def test_gdpp_preconditioning_reaches_ols_in_few_layers():
    from precision.constructions.lsa_gdpp import gdpp
    from precision.truth import least_squares_truth

    prob = gaussian_least_squares(4, 10, seed=5)
    x = tokens(prob.X, prob.y, prob.X_query[0])
    w = least_squares_truth(exact(prob.X), exact(prob.y), 800)
    old = flint.ctx.prec
    flint.ctx.prec = 800
    want = sum((flint.arb(float(prob.X_query[0][k])) * w[k] for k in range(4)), flint.arb(0))
    flint.ctx.prec = old
    errs = []
    for pre in (2, 4, 6, 8):
        got = evaluate_exact(gdpp(prob.X, pre, 4), x, "mp50")[0, -1, 0]
        errs.append(error_summary(np.array([got], dtype=object),
                                  np.array([want], dtype=object)).log10_mse)
    # Preconditioning makes Sigma ~ c I fast (kappa -> 1 + 2 eps^2): the error collapses.
    assert errs[0] > errs[1] > errs[2]
    assert errs[-1] < -90
    # GD++ corrects a perturbed step in later layers (like Newton–Schulz), so perturb the
    # step of a one-GD-layer model, whose output that step alone determines.
    model = gdpp(prob.X, 8, 1)
    good = evaluate_exact(model, x, "mp50")[0, -1, 0]
    with torch.no_grad():
        model.w[8, 1] *= 1.001
    bad = evaluate_exact(model, x, "mp50")[0, -1, 0]
    assert abs(float(good) - float(want)) < 1e-12 < abs(float(bad) - float(want))


def test_causal_baseconv_runs_gradient_descent():
    from precision.constructions import baseconv_gd

    d, n, steps = 3, 8, 5
    prob = gaussian_least_squares(d, n, seed=11)
    eta = 0.5
    x = baseconv_gd.tokens(prob.X, prob.y, prob.X_query[0])
    xp = backend_for(parse_precision("mp50"))
    iterates = gd(xp, xp.asarray(prob.X), xp.asarray(prob.y), step=eta, iters=steps)
    q = xp.asarray(prob.X_query[0])
    for k in (1, 3, 5):
        model = baseconv_gd.gradient_descent(d, n, eta, k)
        got = evaluate_exact(model, x, "mp50")[0, -1, 0]
        want = xp.to_exact(q @ iterates[k]).reshape(-1)[0]
        old = flint.ctx.prec
        flint.ctx.prec = 600
        try:
            assert abs(got - want) < flint.arb(10) ** -45 * max(abs(want), flint.arb(1))
        finally:
            flint.ctx.prec = old
        f32 = float(evaluate_exact(model, x, "float32")[0, -1, 0])
        assert abs(f32 - float(want)) < 1e-5
    lay = baseconv_gd._layout(d)
    with torch.no_grad():  # the last GD layer's (eta/n) b_0 weight
        w_out = model.layers[2 + steps - 1].w_out.weight
        assert w_out[lay["w"].start, lay["s"].start] != 0
        w_out[lay["w"].start, lay["s"].start] *= 1.001
    bad = evaluate_exact(model, x, "mp50")[0, -1, 0]
    assert abs(float(bad) - float(want)) > 1e-10


# --- non-causal BaseConv GD (001 App. C.2.1) and the primitives as suite subjects ----------


class _StepStates(torch.nn.Module):
    """The non-causal GD model's residual stream after every layer (batch, layers, N, width)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.model.inp(x)
        outs = []
        for layer in self.model.layers:
            h = layer(h)
            outs.append(h)
        return torch.stack(outs, dim=1)


def test_noncausal_baseconv_filter_is_two_sided():
    from precision.models.baseconv import BaseConv, BaseConvConfig

    torch.manual_seed(0)
    causal = BaseConv(BaseConvConfig(d_in=2, d_out=1, width=3, max_len=5))
    assert causal.cfg.causal and causal.layers[0].filter.shape == (3, 5)
    model = BaseConv(BaseConvConfig(d_in=2, d_out=1, width=3, max_len=5, causal=False)).double()
    layer = model.layers[0]
    assert layer.filter.shape == (3, 9)
    u = torch.randn(2, 4, 3, dtype=torch.float64)  # shorter than max_len
    k = layer.filter.detach()
    want = torch.zeros_like(u)
    for t in range(4):
        for s in range(4):
            want[:, t] += k[:, t - s + 4] * u[:, s]      # lag t - s, lag 0 at tap max_len - 1
    assert torch.allclose(layer.mix(u), want, rtol=0, atol=1e-14)
    x = torch.randn(1, 4, 2, dtype=torch.float64)
    f64 = evaluate_exact(model, x, "float64")
    assert error_summary(evaluate_exact(model, x, "mp50"), f64).relative < 1e-14
    with pytest.raises(ValueError, match="short"):
        BaseConv(BaseConvConfig(d_in=2, d_out=1, short=True, causal=False))


@pytest.mark.parametrize("prec", ["float64", "mp50"])
def test_noncausal_baseconv_runs_gd_layer_by_layer(prec):
    from precision.constructions import baseconv_gd as bg

    d, n, steps = 3, 8, 3
    prob = gaussian_least_squares(d, n, seed=11)
    eta = bg.exact_step(0.6, n)
    assert eta != 0.6 and bg.exact_step(eta, n) == eta  # 24-bit eta/n, exact weight
    model = bg.gradient_descent_noncausal(d, n, eta, steps)
    assert model.cfg.width == bg.width_noncausal(d) == 5 * d + 3 and len(model.layers) == 10
    lay = bg._layout_noncausal(d)
    x = bg.tokens_noncausal(prob.X, prob.y, prob.X_query[0])
    xp = backend_for(as_precision(prec))
    X, y = xp.asarray(prob.X), xp.asarray(prob.y)
    iterates = gd(xp, X, y, step=eta, iters=steps)
    states = evaluate_exact(_StepStates(model), x, prec)[0]   # (layers, n + 1, width)
    tol = -90 if prec == "mp50" else -26
    for t in range(steps):
        w = iterates[t]
        r = X @ w - y
        # layer 1: r_i = w_t^T x_i - y_i (0 at the query token)
        got_r = states[3 * t][:, lay["r"].start]
        assert error_summary(got_r[:n], xp.to_exact(r)).log10_mse < tol
        assert got_r[n] == 0
        # layer 2: g_i = r_i x_i
        got_g = states[3 * t + 1][:n, lay["g"]]
        assert error_summary(got_g, xp.to_exact(r.reshape(-1, 1) * X)).log10_mse < tol
        # layer 3: every token holds w_{t+1}; r and g are cleared exactly
        after = states[3 * t + 2]
        want = np.tile(xp.to_exact(iterates[t + 1]), (n + 1, 1))
        assert error_summary(after[:, lay["w"]], want).log10_mse < tol
        assert all(v == 0 for v in after[:, lay["r"].start: lay["g"].stop].reshape(-1))
    # the read-out layer writes w^T x_q into the output channel at the last token
    out = states[3 * steps][n:, lay["o"]].reshape(-1)
    assert model.out.weight[0, lay["o"].start] == 1
    want = xp.to_exact(xp.asarray(prob.X_query[0]) @ iterates[steps]).reshape(-1)
    assert error_summary(out, want).log10_mse < tol


def test_noncausal_baseconv_gd_breaks_when_one_weight_changes():
    from precision.constructions import baseconv_gd as bg

    d, n = 3, 8
    prob = gaussian_least_squares(d, n, seed=4)
    model = bg.gradient_descent_noncausal(d, n, bg.exact_step(0.5, n), 2)
    # w_0 != 0, so the first step's products w ⊙ x are not all zero
    x = bg.tokens_noncausal(prob.X, prob.y, prob.X_query[0], w0=np.array([0.5, -1.0, 2.0]))
    good = evaluate_exact(model, x, "mp50")
    # every parameter of the first GD step and of the read-out layer
    params = [(f"layers.{k}.{name}", p) for k in (0, 1, 2, 6)
              for name, p in model.layers[k].named_parameters()]
    checked = 0
    for pname, p in params:
        nz = torch.nonzero(p)
        if len(nz) == 0:
            continue
        idx = tuple(nz[len(nz) // 2].tolist())
        with torch.no_grad():
            p[idx] *= 1.001
        err = error_summary(evaluate_exact(model, x, "mp50"), good).log10_mse
        with torch.no_grad():
            p[idx] /= 1.001
        assert err > -30, f"changing {pname}{list(idx)} left the output unchanged"
        checked += 1
    assert checked >= 12
    assert error_summary(evaluate_exact(model, x, "mp50"), good).log10_mse == -np.inf


def test_noncausal_gd_construction_in_registry():
    from precision.constructions.measure import run_construction

    prob = {"kind": "gaussian", "dim": 4, "n_samples": 40}
    res = run_construction("baseconv_gd_noncausal", "mp50", prob, {"iters": 8})
    assert max(s.log10_mse for s in res.reference) < -95      # = GD in 50 digits
    res32 = run_construction("baseconv_gd_noncausal", "float32", prob, {"iters": 40})
    assert res32.floor.reached and res32.floor.log10_level < -12   # float32 rounding level
    assert max(s.log10_mse for s in res32.reference) < -12


def test_primitive_problems_are_seeded_and_checked():
    from precision.problems import primitive_problem
    from precision.solvers.measure import SolverError, make_problem

    a = make_problem("primitive", {"kind": "read", "dim": 20, "seq_len": 40, "seed": 3})
    b = primitive_problem("read", 20, 40, seed=3)
    assert np.array_equal(a.u, b.u) and a.task.describe() == b.task.describe()
    assert a.u.shape == (40, 20) and a.task.i < a.task.j and (a.task.a, a.task.b) == (0, 20)
    aff = primitive_problem("affine", seed=1)
    assert aff.task.H.shape == (20, 1)
    mul = primitive_problem("multiply", seed=1)
    assert (mul.task.a, mul.task.b, mul.task.d_out) == (0, 10, 10)
    with pytest.raises(SolverError, match="kind"):
        make_problem("primitive", {"kind": "square"})
    with pytest.raises(SolverError, match="i < j"):
        make_problem("primitive", {"kind": "read", "i": 5, "j": 2})
    with pytest.raises(SolverError, match="no option i"):
        make_problem("primitive", {"kind": "affine", "i": 1})


def test_primitive_constructions_in_the_suite(tmp_path):
    from precision.cli.main import main
    from precision.constructions.measure import run_construction
    from precision.solvers.measure import SolverError
    from probes.store.db import Store

    db = tmp_path / "p.db"
    names = ["baseconv_read", "baseconv_affine", "baseconv_multiply"]
    rc = main(["run", "constructions", "--db", str(db), "--solvers", ",".join(names),
               "--precisions", "float32,mp50", "--no-progress", "--no-report"])
    assert rc == 0
    with Store(db) as store:
        rows = store.runs(kind="construction")
    assert {(r["subject"], r["precision"]) for r in rows} == {
        (n, p) for n in names for p in ("float32", "mp50")}
    for r in rows:
        assert r["status"] == "ok" and r["steps"] == 1
        if r["precision"] == "mp50":
            assert r["log10_mse"] < -90
        else:
            assert r["log10_mse"] < -12.5       # float32 rounding of outputs of size ~1-5
            assert float(r["result"]["max_log10_mse_vs_algorithm"]) < -12.5
    # float32: the error is the rounding of the output, relative ~ u = 6e-8
    res = run_construction("baseconv_affine", "float32", {"kind": "affine", "seed": 0})
    assert res.steps[0].relative < 4 * parse_precision("float32").unit_roundoff
    with pytest.raises(SolverError, match="kind 'read'"):
        run_construction("baseconv_read", "float32", {"kind": "affine"})


# --- 000 Thm 4.2 / Remark 4.4, Lemma 4.1 (symmetric), 002 Thm 5.1 as registered subjects --

_LS = {"kind": "gaussian", "dim": 4, "n_samples": 40}
_INV = {"kind": "spd", "dim": 3, "kappa": 10.0}
_NEW = [("lsa_least_squares", _LS, {"steps": 14}),
        ("lsa_ridge", _LS, {"steps": 14, "mu": 4.0}),
        ("lsa_newton_schulz_sym", _INV, {"steps": 17}),
        ("lsa_gdpp", _LS, {"precondition": 8, "gd_steps": 6})]


@pytest.mark.parametrize("prec", ["float64", "mp50"])
@pytest.mark.parametrize("name,problem,params", _NEW, ids=[c[0] for c in _NEW])
def test_new_constructions_match_algorithm_and_truth(name, problem, params, prec):
    from precision.constructions.measure import run_construction

    res = run_construction(name, prec, problem, params)
    assert res.status == "ok"
    n_points = params.get("steps", params.get("precondition", 0) + params.get("gd_steps", 0))
    assert len(res.steps) == len(res.reference) == n_points
    vs_alg = max(s.log10_mse for s in res.reference)
    if prec == "mp50":
        assert vs_alg < -80            # the model = its algorithm in the same precision
        assert res.floor.log10_level < -95 and res.steps[-1].log10_mse < -95
    else:
        assert vs_alg < -24            # float64 rounding level (outputs of size ~1-10)
        assert -34 < res.floor.log10_level < -28 and res.steps[-1].log10_mse < -28
    assert res.steps[0].log10_mse > -3     # the first step is far from the truth


def test_ridge_construction_differs_from_ols_and_checks_mu():
    from precision.constructions.measure import run_construction
    from precision.solvers.measure import SolverError

    ols = run_construction("lsa_least_squares", "float64", _LS, {"steps": 12})
    ridge = run_construction("lsa_ridge", "float64", _LS, {"steps": 12, "mu": 40.0})
    # each converges to its own truth; the ridge truth is not the OLS one
    assert ols.steps[-1].log10_mse < -28 and ridge.steps[-1].log10_mse < -28
    assert ols.steps[-1].mse != ridge.steps[-1].mse
    with pytest.raises(SolverError, match="mu"):
        run_construction("lsa_ridge", "float64", _LS, {"steps": 2, "mu": 0.1})


def test_gd_plus_plus_reference_gd_phase_is_gd_on_preconditioned_features():
    from precision.solvers.gd import gd_plus_plus

    prob = gaussian_least_squares(3, 9, seed=2)
    xp = backend_for(parse_precision("float64"))
    X, y, q = (xp.asarray(a) for a in (prob.X, prob.y, prob.X_query[0]))
    g, eta = 0.01, 0.02
    preds = gd_plus_plus(xp, X, y, q, weights=[(-g, 0.0), (0.0, -eta), (0.0, -eta)])
    assert float(preds[1]) == 0.0                    # preconditioning leaves y_q = 0
    M = np.eye(3) - g * prob.X.T @ prob.X            # X' = X M, x_q' = M x_q
    Xp, qp = prob.X @ M, M @ prob.X_query[0]
    w = np.zeros(3)
    for t in (2, 3):                                  # w <- w + eta X'^T (y - X' w)
        w = w + eta * Xp.T @ (prob.y - Xp @ w)
        assert float(preds[t]) == pytest.approx(qp @ w, rel=1e-12)


@pytest.mark.parametrize("prec", ["float32", "mp50"])
def test_layerwise_evaluation_equals_whole_model(prec):
    """One layer exported and re-loaded per layer gives the whole model's numbers exactly."""
    from precision.constructions.layers import layerwise as _layerwise
    from precision.models.linear_attention import LinearTransformer

    torch.manual_seed(0)
    model = LinearTransformer(width=5, depth=3, heads=2, mlp_width=7, init_scale=0.3).double()
    x = torch.randn(1, 4, 5, dtype=torch.float64)
    outs = _layerwise(model, x, parse_precision(prec), lambda h: h[:, 1:3, :2])
    assert len(outs) == 3
    want = evaluate_exact(model, x, prec)[0, 1:3, :2]
    assert error_summary(outs[-1], want).log10_mse == -np.inf
    lsa = preconditioned_gd(4, 5, 0.3)
    prob = gaussian_least_squares(4, 12, seed=3)
    tok = tokens(prob.X, prob.y, prob.X_query[0])
    per = _layerwise(lsa, tok, parse_precision(prec), lambda e: -e[:, -1, 4:5])
    for layers in (1, 5):
        whole = evaluate_exact(preconditioned_gd(4, layers, 0.3), tok, prec)[0, -1]
        assert error_summary(per[layers - 1], whole).log10_mse == -np.inf


# --- READ in one softmax-attention head (the `primitives` grid's depth-1 Transformer) ------

def test_transformer_read_is_exact_up_to_its_logit_gap():
    from precision.constructions.measure import run_construction
    from precision.constructions.transformer_read import read

    prob = {"kind": "read", "seed": 0}
    mse = {p: run_construction("transformer_read", p, prob).steps[0].mse
           for p in ("float32", "float64", "mp50")}
    assert mse["float32"] < 1e-14        # the rounding of u_j - (u_i + u_j), u ~ N(0, 1)
    assert mse["float64"] < 1e-28
    assert mse["mp50"] < 1e-90
    # the leak of every unwanted key is ~exp(-gap): MSE ~ exp(-2 gap)
    m8, m12 = (run_construction("transformer_read", "float64", prob, {"gap": g}).steps[0].mse
               for g in (8.0, 12.0))
    assert 1e-8 < m8 < 1e-5 and 1e-5 * m8 < m12 < 1e-3 * m8
    with pytest.raises(ValueError, match="width >= D \\+ 3"):
        read(40, 20, 3, 9, width=22)
    with pytest.raises(ValueError, match="i < j"):
        read(40, 20, 9, 3)


def test_the_depth_1_width_32_grid_cell_represents_read_exactly():
    """The construction is the grid's cell itself (same parameter names and shapes, 15,188
    parameters): a trained cell at MSE ~1/N (row j zeroed) is on a plateau, ~28 decades
    above what the architecture holds."""
    from precision.constructions.transformer_read import read
    from probes.training.job import Job
    from probes.training.train_config import TrainConfig

    job = Job(family="transformer", task="read", depth=1, width=32,
              train=TrainConfig(recipe="engine", steps=1, batch_size=8),
              task_options={"dim": 20, "n": 40}, model_options={"layernorm": False})
    task, model = job.build()
    model.load_state_dict(read(40, 20, task.i, task.j, width=32).state_dict())
    x, y = task.sample(256, torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = task.select(model.double()(x.double()))
    assert sum(p.numel() for p in model.parameters()) == 15188
    assert float((out - y.double()).pow(2).mean()) < 1e-28


def test_the_layernorm_cell_holds_read_to_its_constant_channels():
    """LayerNorm is scale-free, so the LN cell holds READ only approximately: with constant
    channels +-K the relative error is ~t^2 / (4 K^2), an MSE ~K^-4 (mp50: no rounding to
    hide it; K = 1e4 -> 1e6 lowers it ~1e8x), ~1e-25 at the default K = 1e8, far below the
    1e-8 the grid's training aims at; the weights load into the grid's LN cell (15,380
    parameters). A single constant channel would leave an error first order in 1/K."""
    from precision.constructions.measure import run_construction
    from precision.constructions.transformer_read import read
    from probes.training.job import Job
    from probes.training.train_config import TrainConfig

    prob = {"kind": "read", "seed": 0}
    mse = {p: run_construction("transformer_read_ln", p, prob).steps[0].mse
           for p in ("float32", "float64", "mp50")}
    assert mse["float32"] < 1e-11 and mse["float64"] < 1e-22
    assert 1e-28 < mse["mp50"] < 1e-22           # the construction's own error, not rounding
    m4, m6 = (run_construction("transformer_read_ln", "mp50", prob, {"scale": k}).steps[0].mse
              for k in (1e4, 1e6))
    assert 1e7 < m4 / m6 < 1e9
    with pytest.raises(ValueError, match="width >= D \\+ 6 = 26 with LayerNorm"):
        read(40, 20, 3, 9, width=25, layernorm=True)

    job = Job(family="transformer", task="read", depth=1, width=32,
              train=TrainConfig(recipe="engine", steps=1, batch_size=8),
              task_options={"dim": 20, "n": 40}, model_options={"layernorm": True})
    task, model = job.build()
    model.load_state_dict(read(40, 20, task.i, task.j, width=32, layernorm=True).state_dict())
    x, y = task.sample(256, torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = task.select(model.double()(x.double()))
    assert sum(p.numel() for p in model.parameters()) == 15380
    assert float((out - y.double()).pow(2).mean()) < 1e-20
