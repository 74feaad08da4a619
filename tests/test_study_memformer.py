"""003 Memformer study: baselines vs closed forms, training, precision agreement, bad params."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from precision.cli.main import main
from precision.evaluate import evaluate_method
from precision.models.memformer import Memformer
from precision.precisions import parse_precision
from probes.store.db import Store
from probes.studies import StudyError, get_study, memformer
from probes.studies.memformer import (
    DEFAULTS,
    baseline_losses,
    build,
    compare,
    covariance,
    evaluation_set,
    model_losses,
    sample_instances,
    train,
)
from probes.suite import load_suite
from probes.training.recipes import train as train_model
from reports.papers.claims import metric_value

F64 = parse_precision("float64")
TINY = {**DEFAULTS, "d": 3, "n": 6, "eigenvalues": [1.0, 0.5, 0.25], "B": 4, "steps": 60}


def _instance(params: dict, seed: int, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         float]:
    tokens, target = evaluation_set(params, seed)
    e = tokens[i].numpy()
    d = params["d"]
    return e[:-1, :d], e[:-1, d], e[-1, :d], float(target[i])


def test_data_follow_sec_3_3() -> None:
    """Sigma = U^T diag(ev) U: the roots multiply to Sigma, Sigma^-1; y = w*^T x exactly."""
    params = {**DEFAULTS, "data": "non-isotropic"}
    root, inv_root, inv = covariance(params, 7)
    sigma = root @ root
    assert np.allclose(np.sort(np.linalg.eigvalsh(sigma)), [0.25, 0.5, 1, 1, 1], atol=1e-12)
    assert np.allclose(inv_root @ inv_root, inv, atol=1e-12)
    assert np.allclose(sigma @ inv, np.eye(5), atol=1e-12)
    assert not np.allclose(covariance(params, 8)[0], root)          # a new U per seed
    tokens, target = evaluation_set({**params, "B": 3}, 7)
    assert tokens.shape == (3, 21, 6) and float(tokens[:, -1, 5].abs().max()) == 0.0
    iso = covariance({**params, "data": "isotropic"}, 7)[0]
    assert np.array_equal(iso, np.eye(5))


def test_cg_is_exact_after_d_steps_and_momentum_matches_closed_form() -> None:
    params = {**TINY, "data": "isotropic", "depth": 3}
    tokens, target = evaluation_set(params, 0)
    out = baseline_losses(params, tokens, target, F64, 0)
    assert out["cg"].shape == (4, 4)
    assert np.all(out["cg"][:, -1] < 1e-24)                          # d = 3 steps: exact
    assert np.all(out["cg"][:, 0] == target.numpy() ** 2)           # w_0 = 0
    X, y, xq, t = _instance(params, 0, 2)
    n = X.shape[0]
    H, b = X.T @ X / n, X.T @ y / n
    # heavy ball, eta = 0.005, beta = 0.9: w1 = eta b, w2 = w1 - eta (H w1 - b) + beta w1
    w1 = 0.005 * b
    w2 = w1 - 0.005 * (H @ w1 - b) + 0.9 * w1
    assert out["heavy_ball"][2, 2] == pytest.approx((xq @ w2 - t) ** 2, rel=1e-12)
    # Nesterov, eta = 0.03, beta = 0.9: v = w1 + beta w1, w2 = v - eta (H v - b)
    w1 = 0.03 * b
    v = w1 + 0.9 * w1
    w2 = v - 0.03 * (H @ v - b)
    assert out["nesterov"][2, 2] == pytest.approx((xq @ w2 - t) ** 2, rel=1e-12)
    # preconditioned GD with P = Sigma^-1 = I and step 0.8
    w1 = 0.8 * b
    assert out["pgd"][2, 1] == pytest.approx((xq @ w1 - t) ** 2, rel=1e-12)


def test_lsa_layer_is_preconditioned_gd_step() -> None:
    """Lemma 1 (with the README's sign fix): one layer with A_0 = c I predicts x_q^T (c b)."""
    params = {**TINY, "model": "lsa", "depth": 1, "init_scale": 1.0}
    model = build(params, 0)
    with torch.no_grad():
        model.A.copy_(0.7 * torch.eye(3, dtype=torch.float64).expand(1, 1, 3, 3))
    tokens, target = evaluation_set(params, 0)
    pred = model.query_per_layer(tokens)[1, 0].item()
    X, y, xq, _ = _instance(params, 0, 1)
    assert pred == pytest.approx(xq @ (0.7 * X.T @ y / X.shape[0]), rel=1e-12)


def test_y_row_fast_path_equals_token_form() -> None:
    """Without B blocks only the y row is propagated; the token form (gdpp with B = 0) agrees."""
    torch.manual_seed(3)
    fast = Memformer(3, depth=3, heads=2, memory="lfom", gamma="full", max_len=7).double()
    full = Memformer(3, depth=3, heads=2, memory="lfom", gamma="full", max_len=7,
                     gdpp=True).double()
    with torch.no_grad():
        fast.Gamma.copy_(1 + 0.3 * torch.randn_like(fast.Gamma))
        full.A.copy_(fast.A)
        full.Gamma.copy_(fast.Gamma)
    tokens, _ = evaluation_set(TINY, 1)
    a, b = fast.query_per_layer(tokens), full.query_per_layer(tokens)
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-13)
    assert torch.equal(fast(tokens)[:, -1, 0], a[:, -1])


def test_short_training_lowers_the_loss() -> None:
    params = {**TINY, "model": "cgd", "lr": 0.02}
    _, curve = train(params, 0)
    assert curve[0][0] == 0 and curve[-1][0] == 59
    assert curve[-1][1] < 0.2 * curve[0][1]
    [out] = compare(params, (F64,), 0)
    assert out.status == "ok" and out.primary == "loss"
    trace = out.series["loss_model"]
    assert len(trace) == 4 and trace[-1] < 0.2 * trace[0]
    assert out.metrics["loss"] == pytest.approx(trace[-1])
    assert out.metrics["ratio_vs_cg"] == pytest.approx(trace[-1] / out.series["loss_cg"][-1])
    assert out.info["fixed_batch"] and out.info["instances"] == 4
    assert compare(params, (F64,), 0)[0].metrics == out.metrics      # same seed, same numbers


def test_training_is_adam_with_each_matrix_clipped() -> None:
    """The shared training loop (probes.training.recipes) with per-matrix clipping hooks gives
    the
    weights and curve of the plain loop of Sec. 3.3, bit for bit: Adam, the gradient of every
    parameter matrix clipped to norm ``clip`` separately, a fresh batch every ``resample``
    steps, the curve every 100 steps (0-based) and at the last step."""
    params = {**TINY, "model": "lfom_full", "B": 200, "steps": 230, "resample": 40,
              "lr": 0.05, "clip": 0.02}
    model, curve = train(params, 3)
    ref = build(params, 3)
    root, inv_root, _ = covariance(params, 3)
    rng = np.random.default_rng([3, 1])
    opt = torch.optim.Adam(ref.parameters(), lr=params["lr"])
    ref_curve = []
    for step in range(params["steps"]):
        if step % params["resample"] == 0:
            tokens, target = sample_instances(params, root, inv_root, params["B"], rng)
        loss = (ref(tokens)[:, -1, 0] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in ref.parameters():
            torch.nn.utils.clip_grad_norm_([p], params["clip"])
        opt.step()
        if step % 100 == 0 or step == params["steps"] - 1:
            ref_curve.append((step, float(loss.detach())))
    assert curve == ref_curve and [s for s, _ in curve] == [0, 100, 200, 229]
    for a, b in zip(model.parameters(), ref.parameters(), strict=True):
        assert torch.equal(a, b)


def test_one_training_per_run_for_all_precisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run in float64 and float32 trains its model once and each counterpart (lsa for
    ratio_vs_lsa, 1 head for ratio_vs_one_head) once; each precision measures those
    weights, as a one-precision run would."""
    trainings = []

    def counted(model, sample, predict, cfg):  # noqa: ANN001, ANN202
        trainings.append((type(model).__name__, model.memory, model.heads))
        return train_model(model, sample, predict, cfg)

    monkeypatch.setattr(memformer, "train_model", counted)
    params = {**TINY, "model": "cgd", "heads": 2, "steps": 20}
    f64, f32 = compare(params, (F64, parse_precision("float32")), 0)
    assert trainings == [("Memformer", "cgd", 2), ("Memformer", "none", 2),
                         ("Memformer", "cgd", 1)]
    assert f64.series["train_loss"] == f32.series["train_loss"]
    assert f64.metrics["ratio_vs_lsa"] is not None and f64.metrics["ratio_vs_one_head"]
    assert f32.metrics["loss"] == pytest.approx(f64.metrics["loss"], rel=1e-5)
    assert f32.metrics["loss"] != f64.metrics["loss"]
    assert compare(params, (F64,), 0)[0].metrics == f64.metrics


def test_mp50_evaluation_agrees_with_float64_on_random_weights() -> None:
    params = {**TINY, "model": "gdpp", "heads": 2}
    model = build(params, 5)
    with torch.no_grad():
        model.B.copy_(0.05 * torch.randn(model.B.shape, generator=torch.Generator()
                                         .manual_seed(1), dtype=torch.float64))
    tokens, target = evaluation_set(params, 5)
    f64 = evaluate_method(model, "query_per_layer", tokens, "float64")
    mp = evaluate_method(model, "query_per_layer", tokens, "mp50")
    diff = max(abs(float(a - b)) for a, b in zip(f64.reshape(-1), mp.reshape(-1), strict=True))
    scale = max(abs(float(b)) for b in mp.reshape(-1))
    assert 0 < diff / scale < 1e-12
    l64 = model_losses(model, tokens, target, F64)
    lmp = model_losses(model, tokens, target, parse_precision("mp50"))
    assert np.allclose(l64, lmp, rtol=1e-10, atol=0)
    l32 = model_losses(model, tokens, target, parse_precision("float32"))
    assert 1e-9 < np.max(np.abs(l32 - lmp) / lmp) < 1e-3


@pytest.mark.parametrize("change, message", [
    ({"data": "gaussian"}, "data must be one of"),
    ({"model": "transformer"}, "model must be one of"),
    ({"heads": 0}, "heads must be an integer"),
    ({"B": 2.5}, "B must be an integer"),
    ({"depth": 0}, "depth must be an integer"),
    ({"lr": -1.0}, "lr must be a positive number"),
    ({"clip": 0}, "clip must be a positive number"),
    ({"nesterov_beta": 1.0}, "nesterov_beta must be in"),
    ({"batch_mode": "sometimes"}, "batch_mode must be one of"),
    ({"eigenvalues": [1.0, 2.0]}, "eigenvalues must be a list of d = 5"),
    ({"eigenvalues": [1.0, 1.0, 0.0, 1.0, 1.0]}, "eigenvalues must be positive"),
    ({"pgd_step": "big"}, "pgd_step must be a positive number"),
])
def test_bad_parameters_raise_study_error(change: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message) as err:
        get_study("memformer.compare").resolve(change)
    assert "\n" not in str(err.value)


def test_quick_profile_expands() -> None:
    runs = load_suite("memformer", profile="quick").runs
    by_entry: dict[str, list[int]] = {}
    for r in runs:
        by_entry.setdefault(r.subject, []).append(len(r.ids))
    assert by_entry == {"training_batches": [1] * 12, "fresh": [1] * 20, "heads": [1] * 6,
                        "precision": [3] * 4}    # one run: float32, float64 and mp50
    full = load_suite("memformer").runs
    assert len(full) == 5 * (40 + 10 + 10 + 2)
    assert sum(len(r.ids) for r in full) == 5 * (40 + 10 + 10 + 6)


def test_suite_run_stores_metrics(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text('name = "mt"\nprecisions = ["float64"]\nseeds = [0]\n'
                    '[studies.tb]\nstudy = "memformer.compare"\nd = 3\nn = 6\n'
                    'eigenvalues = [[1.0, 0.5, 0.25]]\nB = 2\nsteps = 40\nlr = 0.02\n'
                    'model = ["lsa", "cgd"]\n')
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
    with Store(db, create=False) as store:
        rows = {r["task"]: r for r in store.runs(suite="mt")}
        assert set(rows) == {"model=lsa", "model=cgd"}
        assert all(r["status"] == "ok" for r in rows.values())
        assert metric_value(rows["model=lsa"], "result.ratio_vs_lsa") is None
        ratio = metric_value(rows["model=cgd"], "result.ratio_vs_lsa")
        assert ratio is not None and ratio > 0
        loss = metric_value(rows["model=cgd"], "result.loss")
        assert rows["model=cgd"]["mse"] == pytest.approx(loss)
        trace = store.series(rows["model=cgd"]["run_id"], "loss_cg")["loss_cg"]
        assert len(trace) == 4 and trace[-1][1] < 1e-20               # CG exact in d steps
