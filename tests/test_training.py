"""Training recipes (probes/training/recipes.py): determinism, divergence, schedulers, and the
high-precision recipe's floor against the paper recipe (001 App. D.1) on a small MULTIPLY."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from precision.models import build_model
from probes.training.recipes import AdaptiveLR, TrainConfig, batch_gradient, train


def multiply_sampler(d: int, n: int):
    """MULTIPLY (001 Sec. 3.2): x (batch, n, d) ~ N(0, 1), y = x[..., :d/2] * x[..., d/2:]."""
    h = d // 2

    def sample(batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, n, d, generator=gen, dtype=torch.float64)
        return x, x[..., :h] * x[..., h:]

    return sample


def linreg_sampler(d: int, n: int, noise: float):
    """y = x A + noise * eps, x (batch, n, d), A fixed (d, 2): a linear model is realizable
    up to the noise floor."""
    A = torch.linspace(-1.0, 1.0, 2 * d, dtype=torch.float64).view(d, 2)

    def sample(batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, n, d, generator=gen, dtype=torch.float64)
        eps = torch.randn(batch, n, 2, generator=gen, dtype=torch.float64)
        return x, x @ A + noise * eps

    return sample, A


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: these models are tiny, and on a shared 2-core box two spinning
    OpenMP threads make each step ~10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def call(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)


def fresh_mse(model: nn.Module, sample, seed: int = 12345, batch: int = 256) -> float:
    """float64 MSE on ``batch`` fresh sequences."""
    x, y = sample(batch, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return float((model(x.double()) - y).pow(2).mean())


def small_baseconv(seed: int = 0, d: int = 4, n: int = 8, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return build_model("baseconv", d, d // 2, depth=1, width=width, max_len=n, layernorm=False)


def linear_model(d: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(d, 2)


@pytest.mark.parametrize("recipe", ["paper", "adaptive", "high-precision"])
def test_rerun_is_bit_identical(recipe: str) -> None:
    sample = multiply_sampler(4, 8)
    cfg = TrainConfig(recipe=recipe, steps=60, batch_size=16, window=10,
                      second_order_steps=3, second_order_batch=16)
    runs = []
    for _ in range(2):
        model = small_baseconv()
        res = train(model, sample, call, cfg)
        runs.append((res, torch.cat([p.detach().flatten() for p in model.parameters()])))
    (a, pa), (b, pb) = runs
    assert a.status == b.status == "ok"
    assert a.curve == b.curve and a.lr_trace == b.lr_trace and a.steps == b.steps
    assert torch.equal(pa, pb)
    assert pa.dtype == torch.float64


def test_global_rng_untouched() -> None:
    model = small_baseconv()
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    train(model, multiply_sampler(4, 8), call,
          TrainConfig(recipe="paper", steps=5, batch_size=4))
    assert torch.equal(torch.rand(3), expected)


def test_huge_lr_diverges_without_raising() -> None:
    model = small_baseconv()
    res = train(model, multiply_sampler(4, 8), call,
                TrainConfig(recipe="paper", steps=200, batch_size=8, lr=1e30))
    assert res.status == "diverged"
    assert "step" in res.message and res.steps < 200
    assert all(p.dtype == torch.float64 for p in model.parameters())


def test_paper_lr_follows_steplr() -> None:
    res = train(small_baseconv(), multiply_sampler(4, 8), call,
                TrainConfig(recipe="paper", steps=35, batch_size=4, lr=1e-3, step_size=10,
                            gamma=0.5))
    expected = [(0, 1e-3), (10, 5e-4), (20, 2.5e-4), (30, 1.25e-4)]
    assert len(res.lr_trace) == len(expected)
    for (s, lr), (es, elr) in zip(res.lr_trace, expected, strict=True):
        assert s == es and lr == pytest.approx(elr, rel=1e-12)
    assert res.steps == 35 and res.curve[-1][0] == 35


def test_curve_is_subsampled_and_keeps_last_step() -> None:
    res = train(small_baseconv(), multiply_sampler(4, 8), call,
                TrainConfig(recipe="paper", steps=97, batch_size=4, curve_points=10))
    assert len(res.curve) <= 10 and res.curve[-1][0] == 97
    assert all(math.isfinite(v) for _, v in res.curve)


def test_adaptive_rule_unit() -> None:
    """Consistent gradients + falling loss raise the lr; pure-noise gradients lower it."""
    p = nn.Parameter(torch.zeros(50, dtype=torch.float64))
    cfg = TrainConfig(recipe="adaptive", steps=0, batch_size=1, lr=1e-3, window=20)
    up = AdaptiveLR(torch.optim.Adam([p], lr=cfg.lr), cfg)
    gen = torch.Generator().manual_seed(0)
    g0 = torch.ones(50, dtype=torch.float64)
    changed = [up.observe(g0 + 0.01 * torch.randn(50, generator=gen, dtype=torch.float64),
                          1.0 - 0.01 * k) for k in range(20)]
    assert changed[-1] and up.lr == pytest.approx(1e-3 * cfg.lr_up)
    down = AdaptiveLR(torch.optim.Adam([p], lr=cfg.lr), cfg)
    changed = [down.observe(torch.randn(50, generator=gen, dtype=torch.float64), 1.0)
               for _ in range(20)]
    assert changed[-1] and down.lr == pytest.approx(1e-3 * cfg.lr_down)
    assert down.opt.param_groups[0]["lr"] == down.lr
    # bounded: many noisy windows never go below lr * lr_min_factor
    for _ in range(40 * 20):
        down.observe(torch.randn(50, generator=gen, dtype=torch.float64), 1.0)
    assert down.lr == pytest.approx(1e-3 * cfg.lr_min_factor)


def test_adaptive_increases_on_clean_and_decreases_on_noisy_problem() -> None:
    clean, _ = linreg_sampler(6, 8, noise=0.0)
    res = train(linear_model(6), clean, call,
                TrainConfig(recipe="adaptive", steps=400, batch_size=8, lr=1e-4, window=25))
    assert max(lr for _, lr in res.lr_trace) > 1e-4
    noisy, _ = linreg_sampler(6, 8, noise=1.0)
    res = train(linear_model(6), noisy, call,
                TrainConfig(recipe="adaptive", steps=2000, batch_size=8, lr=3e-2, window=25))
    assert min(lr for _, lr in res.lr_trace) < 3e-2


def test_adaptive_beats_paper_on_noisy_regression() -> None:
    """Same steps; error of the learned map against the noiseless target (the excess risk)."""
    noisy, A = linreg_sampler(6, 8, noise=1.0)
    errors = {}
    for recipe in ("paper", "adaptive"):
        model = linear_model(6)
        res = train(model, noisy, call,
                    TrainConfig(recipe=recipe, steps=3000, batch_size=8, lr=1e-2, window=50))
        assert res.status == "ok"
        with torch.no_grad():
            errors[recipe] = float((model.weight.T - A).pow(2).sum() + model.bias.pow(2).sum())
    assert errors["adaptive"] <= errors["paper"]
    assert errors["adaptive"] < 0.3 * errors["paper"], errors


def test_high_precision_beats_paper_on_small_multiply() -> None:
    """D=4, N=8, 1-layer BaseConv (width 8, no LayerNorm): high-precision reaches < 1e-12
    test MSE; the paper recipe with the same wall budget stays above 1e-8."""
    sample = multiply_sampler(4, 8)
    model = small_baseconv()
    hp = train(model, sample, call,
               TrainConfig(recipe="high-precision", steps=400, batch_size=64,
                           second_order_steps=15, second_order_batch=64))
    assert hp.status == "ok"
    assert all(p.dtype == torch.float64 for p in model.parameters())
    hp_mse = fresh_mse(model, sample)
    paper_model = small_baseconv()
    paper = train(paper_model, sample, call,
                  TrainConfig(recipe="paper", steps=10**7, batch_size=64,
                              time_limit=hp.wall_time))
    assert paper.status == "ok" and paper.steps > 400
    paper_mse = fresh_mse(paper_model, sample)
    assert all(p.dtype == torch.float64 for p in paper_model.parameters())
    assert hp_mse < 1e-12, hp_mse
    assert paper_mse > 1e-8, paper_mse


def test_sample_jacobian_equals_batch_jacobian() -> None:
    """The LM phase's per-sample Jacobian (vmap of jacrev) is the whole-batch Jacobian, for a
    BaseConv with LayerNorm and a softmax Transformer, multi-entry targets (batch, n, 2)."""
    from torch.func import functional_call

    from probes.training.levenberg_marquardt import (
        _batch_jacobian,
        _Flat,
        _Predictor,
        _sample_jacobian,
    )

    torch.manual_seed(0)
    models = [build_model("baseconv", 4, 2, depth=2, width=8, max_len=8, layernorm=True),
              build_model("transformer", 4, 2, depth=1, width=8, max_len=8)]
    x, y = multiply_sampler(4, 8)(16, torch.Generator().manual_seed(1))
    for model in models:
        wrapper, flat = _Predictor(model.double(), call), _Flat(model)
        theta = flat.get()

        def res(th: torch.Tensor, wrapper=wrapper, flat=flat) -> torch.Tensor:
            return (functional_call(wrapper, flat.as_dict(th), (x,)) - y).flatten()

        def res_one(th: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor, wrapper=wrapper,
                    flat=flat) -> torch.Tensor:
            return (functional_call(wrapper, flat.as_dict(th), (xb[None],)) - yb[None]
                    ).flatten()

        batch = _batch_jacobian(res, theta, res(theta))
        sample = _sample_jacobian(res_one, theta, x, y)
        assert batch.shape == sample.shape == (16 * 8 * 2, theta.numel())
        assert float((batch - sample).abs().max()) <= 1e-14 * float(batch.abs().max())


class _DataDependent(nn.Module):
    """A linear map with Python control flow on the input values: vmap over samples cannot
    run it (a batched tensor has no single truth value), the whole-batch Jacobian can."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool((x.abs() > 1e6).any()):
            x = x.clamp(-1e6, 1e6)
        return self.lin(x)


def test_second_order_falls_back_when_vmap_cannot_batch_the_model() -> None:
    sample, A = linreg_sampler(3, 4, noise=0.0)
    torch.manual_seed(0)
    model = _DataDependent(3)
    res = train(model, sample, call, TrainConfig(recipe="high-precision", steps=0,
                                                 batch_size=8, second_order_steps=5,
                                                 second_order_batch=16))
    assert res.status == "ok" and res.steps == 5
    assert float((model.lin.weight.detach().T - A).abs().max()) < 1e-10


def test_constant_and_cosine_recipes_warm_up_decay_and_clip() -> None:
    from probes.training.recipes import scheduled_rate

    cos = TrainConfig(recipe="cosine", steps=110, batch_size=8, lr=1e-2, warmup=10)
    assert scheduled_rate(cos, 5) == pytest.approx(5e-3)            # warm-up: linear
    assert scheduled_rate(cos, 11) == pytest.approx(1e-2)           # cosine starts at lr
    assert scheduled_rate(cos, 61) == pytest.approx(5e-3)           # half way: lr / 2
    assert scheduled_rate(cos, 110) < 1e-5                          # -> 0 at the end
    const = TrainConfig(recipe="constant", steps=110, batch_size=8, lr=1e-2, warmup=10)
    assert scheduled_rate(const, 3) == pytest.approx(3e-3) and scheduled_rate(const, 90) == 1e-2
    sample, A = linreg_sampler(3, 4, noise=0.0)
    # Adam's first step is lr * g / (|g| + eps) per entry: ~lr unclipped; with the gradient
    # clipped to norm 1e-12 (<< eps = 1e-8) it shrinks to ~lr * 1e-4, so clipping is applied
    moved = {}
    for clip in (0.0, 1e-12):
        model = linear_model(3)
        w0 = model.weight.detach().clone()
        res = train(model, sample, call, TrainConfig(recipe="constant", steps=1, batch_size=8,
                                                    lr=1e-1, clip=clip, dtype="float64"))
        assert res.status == "ok"
        moved[clip] = float((model.weight.detach() - w0.double()).abs().max())
    assert moved[0.0] == pytest.approx(0.1, rel=1e-3) and moved[1e-12] < 1e-4
    model = linear_model(3)
    res = train(model, sample, call, TrainConfig(recipe="cosine", steps=300, batch_size=32,
                                                lr=5e-2, warmup=20, clip=1.0, dtype="float64"))
    assert res.status == "ok" and fresh_mse(model, sample) < 1e-3
    with pytest.raises(ValueError, match="clip must be a number >= 0"):  # when it is made
        TrainConfig(recipe="constant", steps=1, batch_size=8, clip=-1.0)


@pytest.mark.parametrize("rows", [30, 120])   # M < P: the M x M kernel form; M > P: P x P
def test_cholesky_step_equals_the_eigenbasis_step(rows: int) -> None:
    """The engine's Cholesky step is the high-precision recipe's eigenbasis
    step for the same damping: (S J^T J S + mu I) z = S J^T r, d = -S z, and the same
    predicted decrease, in both of its forms."""
    from probes.training.levenberg_marquardt import _CholeskyModel, _dense_model

    gen = torch.Generator().manual_seed(3)
    jac = torch.randn(rows, 60, generator=gen, dtype=torch.float64) \
        * torch.logspace(-3, 1, 60, dtype=torch.float64)   # badly scaled columns
    r = torch.randn(rows, generator=gen, dtype=torch.float64)
    eig, chol = _dense_model(jac, r), _CholeskyModel(jac, r)
    assert chol.kernel == (rows < 60)
    assert math.isclose(chol.top(200), eig.top(), rel_tol=1e-6)
    for mu in (1e-6, 1e-2, 10.0):
        (d1, p1), (d2, p2) = eig.step(mu), chol.step(mu)
        assert float((d1 - d2).norm()) <= 1e-9 * float(d1.norm()), mu
        assert math.isclose(p1, p2, rel_tol=1e-9), mu
    assert chol.step(-1e6)[1] == -1.0   # not positive definite: a rejected try, no error


def test_engine_reaches_a_realizable_floor_and_times_its_curve() -> None:
    """AFFINE-like map y = x h (D=4, N=6) by a 1-layer, 2-head Transformer without
    LayerNorm: after 100 Adam steps (held-out MSE ~1e-1), 40 Levenberg-Marquardt iterations
    on fresh batches bring it below 1e-6 (~1e-9 seen); the validation
    curve carries a wall time per point, non-decreasing and within the run's wall time."""
    h = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)

    def sample(batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, 6, 4, generator=gen, dtype=torch.float64)
        return x, x @ h[:, None]

    torch.manual_seed(0)
    model = build_model("transformer", 4, 1, depth=1, width=8, heads=2, max_len=6,
                        ln_attn=False, ln_mlp=False, ln_final=False)
    res = train(model, sample, call,
                TrainConfig(recipe="engine", steps=100, batch_size=32,
                            second_order_steps=40, second_order_batch=200))
    assert res.status == "ok" and res.steps == 140, res.message
    assert all(p.dtype == torch.float64 for p in model.parameters())
    after_adam = dict(res.val_curve)[100]
    assert after_adam > 1e-3 and fresh_mse(model, sample) < 1e-6
    assert len(res.val_times) == len(res.val_curve) > 10
    assert all(a <= b for a, b in zip(res.val_times, res.val_times[1:], strict=False))
    assert 0.0 <= res.val_times[0] and res.val_times[-1] <= res.wall_time


def test_micro_batches_accumulate_the_batch_gradient() -> None:
    """batch_gradient in passes of 3 sequences (the last one short) adds the one-pass gradient
    and returns the one-pass MSE, up to float64 rounding; a non-finite pass adds nothing."""
    sample = multiply_sampler(4, 8)
    x, y = sample(10, torch.Generator().manual_seed(3))
    grads, losses = [], []
    for micro in (0, 3):
        model = small_baseconv().double()
        losses.append(batch_gradient(model, call, x, y, micro))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert losses[0] > 0.1
    assert losses[1] == pytest.approx(losses[0], rel=1e-13)
    assert torch.allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)
    assert grads[0].abs().max() > 1e-3
    model = small_baseconv().double()
    x_bad = x.clone()
    x_bad[4, 0, 0] = float("nan")          # in the second pass
    assert math.isnan(batch_gradient(model, call, x_bad, y, 3))
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


def test_micro_batched_training_follows_the_one_pass_run() -> None:
    """Same recipe with micro_batch 8 of a batch of 32: the same loss curve up to rounding
    growth over 30 Adam steps, and a negative micro_batch is refused."""
    sample = multiply_sampler(4, 8)
    curves = []
    for micro in (0, 8):
        res = train(small_baseconv(), sample, call,
                    TrainConfig(recipe="paper", steps=30, batch_size=32, dtype="float64",
                                lr=1e-2, micro_batch=micro))
        assert res.status == "ok"
        curves.append([v for _, v in res.curve])
    assert curves[0][-1] < 0.9 * curves[0][0]
    assert curves[1] == pytest.approx(curves[0], rel=1e-9)
    with pytest.raises(ValueError, match="micro_batch"):
        train(small_baseconv(), sample, call,
              TrainConfig(recipe="paper", steps=1, batch_size=4, micro_batch=-1))


def test_the_config_carries_its_precisions_typed_and_stores_their_spelling() -> None:
    """``dtype`` and ``lm_curvature_dtype`` are carried as Precision values (made once, with
    the config); the stored, hashed table holds the spellings, so run ids do not move; one
    table gives every torch dtype a format names."""
    import json

    from precision.precisions import FLOAT_BITS, PrecisionError, parse_precision, torch_dtype_of

    cfg = TrainConfig(recipe="paper", steps=1, batch_size=2, dtype="bfloat16")
    assert cfg.precision == parse_precision("bfloat16") == cfg.training_precision
    assert cfg.training_precision.torch_dtype == torch.bfloat16
    assert cfg.table()["dtype"] == "bfloat16" and '"dtype": "bfloat16"' in json.dumps(cfg.table())
    engine = TrainConfig(recipe="engine", steps=1, batch_size=2, dtype="float32").resolved()
    assert engine.training_precision.torch_dtype == torch.float64   # second order: float64
    assert engine.curvature_precision.torch_dtype == torch.float32
    assert engine.table()["dtype"] == "float32"
    assert {n: torch_dtype_of(n) for n in FLOAT_BITS} == {
        "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
        "float64": torch.float64}
    assert torch_dtype_of("float8_e5m2") == torch.float8_e5m2
    with pytest.raises(PrecisionError, match="no torch dtype"):
        torch_dtype_of("mp50")
