"""002 trained LSA study: training, per-layer read-out, implicit linear model, decomposition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from precision.cli.main import main
from precision.models.linear_attention import LSA, implicit_linear_model
from precision.precisions import parse_precision
from probes.store.db import Store
from probes.studies import StudyError, get_study
from probes.studies import noisy_regression_lsa as nrl
from probes.studies.noisy_regression_data import sample_batch
from probes.studies.noisy_regression_lsa import (
    constrr_loss,
    oracle_mse,
    ridge_predictions,
    tokens,
)
from probes.suite import load_suite
from probes.training.recipes import train

TINY = {"d": 3, "n": 8, "batch": 64, "eval_size": 400, "lr": 1e-2}  # tiny sizes


def run(precision: str = "float64", seed: int = 0, **given: object):  # noqa: ANN201
    spec = get_study("noisy_regression.lsa")
    return spec.fn(spec.resolve({**TINY, **given}), (parse_precision(precision),), seed)[0]


def test_tiny_training_reduces_the_loss() -> None:
    before = run(variant="diag", layers=1, noise="uniform:1", steps=0)
    after = run(variant="diag", layers=1, noise="uniform:1", steps=80)
    # untrained (init 0.02): y_hat ~ 0, so 0.5 * (E[y_t^2] - oracle) ~ 0.5 * d = 1.5 - oracle
    assert 1.0 < before.metrics["loss"] < 1.6
    assert after.metrics["loss"] < 0.6 * before.metrics["loss"]
    curve = after.series["train_curve"]
    assert curve[-1][0] == 80 and curve[-1][1] < curve[0][1]
    again = run(variant="diag", layers=1, noise="uniform:1", steps=80)
    assert again.metrics["loss"] == after.metrics["loss"]  # seeded: same numbers


@pytest.mark.parametrize("param, heads", [("full", 2), ("diag", 2), ("gdpp", 1)])
def test_implicit_linear_model_equals_forward_pass(param: str, heads: int) -> None:
    torch.manual_seed(3)
    model = LSA(4, depth=5, heads=heads, param=param, init_scale=0.15).double()
    model.requires_grad_(False)
    b = sample_batch(16, 4, 9, "uniform:1", np.random.default_rng(0))
    e = tokens(b)
    im = implicit_linear_model(model, e)
    assert im.w.shape == (16, 6, 4) and im.M.shape == (16, 6, 4, 4)
    pred = model(e)[:, -1, 0]
    implied = (im.w[:, -1] * e[:, -1, :4]).sum(-1)
    scale = float(pred.abs().max())
    assert scale > 1e-3
    assert float((implied - pred).abs().max()) / scale < 1e-12
    # every layer's tokens: x_i^l = M^l x_i + y_i u^l, y_i^l = a^l y_i - <w^l, x_i>
    h = e
    for layer in range(model.depth):
        h = model.step(h, layer)
        x_l = e[:, :-1, :4] @ im.M[:, layer + 1].transpose(1, 2) \
            + e[:, :-1, 4:] * im.u[:, layer + 1, None, :]
        y_l = im.a[:, layer + 1, None] * e[:, :-1, 4] \
            - (e[:, :-1, :4] @ im.w[:, layer + 1, :, None])[..., 0]
        assert float((x_l - h[:, :-1, :4]).abs().max()) < 1e-12 * float(h.abs().max())
        assert float((y_l - h[:, :-1, 4]).abs().max()) < 1e-12 * float(h.abs().max())


def test_printed_plus_sign_of_lemma_4_2_fails() -> None:
    """The README misprint: with M^{l+1} = (I + A) M + b w^T the x-tokens of layer 2 differ."""
    torch.manual_seed(0)
    model = LSA(3, depth=2, param="full", init_scale=0.3).double().requires_grad_(False)
    e = tokens(sample_batch(4, 3, 6, 0, np.random.default_rng(1)))
    im = implicit_linear_model(model, e)
    G = model.layer_matrix(model.step(e, 0), 1)
    A, bvec = G[:, :3, :3], G[:, :3, 3]
    plus = (torch.eye(3) + A) @ im.M[:, 1] + bvec[:, :, None] * im.w[:, 1, None, :]
    assert float((plus - im.M[:, 2]).abs().max()) > 1e-3 * float(im.M[:, 2].abs().max())


def test_study_metrics_per_layer_and_implicit(monkeypatch: pytest.MonkeyPatch) -> None:
    """One run in float32 and float64: trained once, each precision measured."""
    trainings = []

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        trainings.append(args[3].recipe)
        return train(*args, **kwargs)

    monkeypatch.setattr(nrl, "train", counted)
    spec = get_study("noisy_regression.lsa")
    params = spec.resolve({**TINY, "variant": "full", "layers": 3, "noise": "uniform:2",
                           "steps": 5})
    f32, out = spec.fn(params, (parse_precision("float32"), parse_precision("float64")), 0)
    assert trainings == ["constant"]
    layer = out.series["layer_loss"]
    assert [i for i, _ in layer] == [1, 2, 3]
    assert layer[-1][1] == out.metrics["loss"]
    assert out.metrics["implicit_rel_dev"] < 1e-12
    assert out.metrics["implicit_tokens_rel_dev"] < 1e-12
    assert 1e-9 < f32.metrics["implicit_rel_dev"] < 1e-4
    assert f32.metrics["loss"] == pytest.approx(out.metrics["loss"], rel=1e-4)
    assert f32.series["train_curve"] == out.series["train_curve"]
    assert out.metrics == run(variant="full", layers=3, noise="uniform:2", steps=5).metrics


def test_decomposition_float32_float64_mp50() -> None:
    out = run(variant="gdpp", layers=2, noise=0, steps=40, eval_size=60, decompose=True)
    m = out.metrics
    assert m["approximation"] == m["loss_mp50"] > 1e-4
    assert m["loss_float64"] == pytest.approx(m["loss_mp50"], rel=1e-10)
    assert m["rounding"] == pytest.approx(m["loss_float32"] - m["loss_float64"])
    assert 1e-18 < m["rounding_float32"] < 1e-8
    assert m["rounding_float64"] < 1e-26


def test_oracle_and_constrr() -> None:
    b = sample_batch(3000, 5, 12, "fixed:2", np.random.default_rng(5))
    tune = sample_batch(3000, 5, 12, "fixed:2", np.random.default_rng(6))
    # ridge with the true lambda beats every other constant lambda on average
    oracle = oracle_mse(b)
    for lam in (0.0, 1.0, 16.0):
        assert np.mean((ridge_predictions(b, lam) - b.y_query) ** 2) > oracle
    loss, lam = constrr_loss(b, tune)
    assert 2.0 < lam < 8.0        # fixed sigma = 2: the tuned constant is near sigma^2 = 4
    assert abs(loss) < 0.01        # = the oracle up to sampling (sigma is the same for all)


@pytest.mark.parametrize("given, message", [
    ({"variant": "dense"}, "variant must be one of"),
    ({"layers": 0}, "layers must be an integer"),
    ({"layers": 2.5}, "layers must be an integer"),
    ({"noise": "gauss:1"}, "unknown noise distribution"),
    ({"noise": "uniform:-1"}, "noise levels must be finite"),
    ({"schedule": "linear"}, "schedule must be constant or cosine"),
    ({"train_dtype": "float16"}, "train_dtype must be float32 or float64"),
    ({"second_order_steps": 5}, "needs train_dtype"),
    ({"clip": -1.0}, "clip must be a number >= 0"),
    ({"warmup": -3}, "warmup must be an integer"),
    ({"lr": 0}, "lr must be a positive number"),
    ({"steps": -1}, "steps must be an integer"),
    ({"eval_size": 1}, "eval_size must be an integer"),
    ({"variant": "gdpp", "heads": 2}, "heads must be 1"),
    ({"decompose": "yes"}, "decompose must be true or false"),
    ({"batch": True}, "batch must be an integer"),
    ({"profile_points": -1}, "profile_points must be an integer"),
    ({"profile_size": 1}, "profile_size must be an integer"),
])
def test_bad_parameters_raise_study_error(given: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message) as info:
        get_study("noisy_regression.lsa").resolve(given)
    assert "\n" not in str(info.value)


def test_suite_loads_and_a_tiny_suite_runs(tmp_path: Path) -> None:
    suite = load_suite("noisy_regression_lsa", profile="quick")
    runs = suite.runs
    assert len(runs) >= 12 and all(r.config["study"] == "noisy_regression.lsa" for r in runs)
    path = tmp_path / "s.toml"
    path.write_text('name = "t"\nprecisions = ["float64"]\n[studies.diag]\n'
                    'study = "noisy_regression.lsa"\nvariant = "diag"\nlayers = [1, 2]\n'
                    'd = 3\nn = 8\nsteps = 3\nbatch = 16\neval_size = 50\n')
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
    with Store(db, create=False) as store:
        rows = {r["task"]: r for r in store.runs(suite="t")}
        assert set(rows) == {"layers=1", "layers=2"}
        assert all(r["status"] == "ok" and r["mse"] > 0 for r in rows.values())
        trace = store.series(rows["layers=2"]["run_id"], "layer_loss")["layer_loss"]
        assert [s for s, _ in trace] == [1, 2]


def test_sigma_profile_of_the_zero_model_is_half_of_signal_minus_oracle() -> None:
    """A model predicting ~0 (init 1e-12, no training) has adjusted loss
    0.5 * (mean y_t^2 - oracle MSE) at each sigma: the profile's seeded fixed-sigma sets."""
    out = run(variant="diag", layers=1, noise="choice:1,3", steps=0, init_scale=1e-12,
              profile_points=5, profile_size=300)
    sig, prof = out.series["sigma"], out.series["sigma_profile"]
    assert sig == [0.0, 1.0, 2.0, 3.0, 4.0]  # 0 .. max + 1 with the support points 1, 3
    for i, s in enumerate(sig):
        b = sample_batch(300, 3, 8, f"fixed:{s!r}", np.random.default_rng([20240, 5, i]))
        assert prof[i] == pytest.approx(0.5 * (np.mean(b.y_query**2) - oracle_mse(b)),
                                        rel=1e-9)
    assert prof[0] > prof[-1]          # the oracle gets worse with sigma, so the gap shrinks
    m = out.metrics
    assert m["profile_peak"] == max(prof) and m["profile_peak_sigma"] == sig[prof.index(max(prof))]
    assert m["profile_in_dist"] == pytest.approx((prof[1] + prof[3]) / 2)
    assert m["profile_outside"] == pytest.approx(prof[4])


def test_sigma_profile_averages_to_the_mixed_noise_loss() -> None:
    """Trained tiny Diag on U(0, 1): the profile averaged over the sigma law estimates the same
    expectation as the mixed-noise evaluation loss."""
    out = run(variant="diag", layers=2, noise="uniform:1", steps=150, eval_size=6000,
              profile_points=9, profile_size=3000)
    m = out.metrics
    assert m["profile_in_dist"] == pytest.approx(m["loss"], rel=0.1)
    assert "sigma_profile" not in run(variant="diag", layers=1, steps=0).series
