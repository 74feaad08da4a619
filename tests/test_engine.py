"""The second-order engine (probes.training.recipe_book "engine"): it leaves a saddle
Adam sits on, its convergence check refuses a saddle, and the floor profile trains every cell
with one setting."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from probes.suite import load_suite
from probes.training.convergence_check import (
    CHECK_CURVATURE,
    CHECK_DRIFT,
    CHECK_GAIN,
    CHECK_MIN_BATCH,
    CHECK_POWER,
    check_sizes,
    convergence_check,
    gradient_drift,
)
from probes.training.job import Job
from probes.training.recipe_book import RECIPES
from probes.training.recipes import train
from probes.training.train_config import TrainConfig
from reports.model_table import limit_label

# READ (001 eq. 5) on D = 4, N = 8: the target copies row i into row j. Predicting the mean
# at row j (attention that has not found position i) is the saddle: MSE ~ 1/N of the
# entries' variance, ~1e-1 here.
TASK = {"dim": 4, "n": 8}


def _read_job(cfg: TrainConfig) -> tuple[Job, torch.nn.Module, object]:
    job = Job(family="transformer", task="read", depth=1, width=16, train=cfg,
              task_options=TASK, model_options={"layernorm": False})
    task, model = job.build()
    return job, model, task


def _trained(cfg: TrainConfig) -> tuple[torch.nn.Module, object, float]:
    _, model, task = _read_job(cfg)
    res = train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    assert res.status == "ok", res.message
    return model, task, res.val_curve[-1][1]


ADAM = TrainConfig(recipe="paper", steps=400, batch_size=32, validation_size=64)
ENGINE = TrainConfig(recipe="engine", steps=100, batch_size=32, second_order_steps=20,
                     second_order_batch=8, validation_size=64)


def test_the_engine_leaves_the_read_saddle_that_adam_sits_on() -> None:
    """400 paper-recipe Adam steps stay on the plateau (held-out MSE > 5e-2); 100 Adam steps
    and 20 engine iterations go three orders below it (~1e-4 seen)."""
    _, _, adam = _trained(ADAM)
    _, _, engine = _trained(ENGINE)
    assert adam > 5e-2
    assert engine < 1e-3 and engine < adam / 100


def test_the_convergence_check_refuses_a_saddle() -> None:
    """The Adam model on the plateau: a few Gauss-Newton steps lower its held-out MSE by more
    than CHECK_GAIN, so it is not converged and its label is T, never A; the evidence (gain,
    gradient norm) is finite."""
    model, task, _ = _trained(ADAM)
    check = convergence_check(model, task.sample, lambda m, x: task.select(m(x)), ADAM)
    assert check.gain > CHECK_GAIN and not check.converged
    assert check.drift > CHECK_DRIFT   # independent batches agree on the way down (8.7 seen)
    assert math.isfinite(check.grad_norm) and check.grad_norm > 0
    assert check.after < check.before
    assert limit_label(check.converged, math.log10(check.after), -30.0) == "T"


def test_gradient_drift_tells_a_stationary_point_from_a_slope() -> None:
    """y = A x + noise, a linear model: at A itself the expected gradient is zero and the
    drift is noise (|z| well under CHECK_DRIFT); a step away from A, independent batches
    agree on the gradient and the drift is far above it."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 6, generator=gen, dtype=torch.float64)

    def sample(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 6, generator=g, dtype=torch.float64)
        return x, x @ a.T + 0.1 * torch.randn(n, 6, generator=g, dtype=torch.float64)

    model = torch.nn.Linear(6, 6, bias=False).double()
    predict = lambda m, x: m(x)  # noqa: E731
    with torch.no_grad():
        model.weight.copy_(a)
    at_minimum = gradient_drift(model, sample, predict, seed=1)
    with torch.no_grad():
        model.weight.add_(0.2)
    on_slope = gradient_drift(model, sample, predict, seed=1)
    assert abs(at_minimum) < CHECK_DRIFT / 2
    assert on_slope > 1.5 * CHECK_DRIFT   # 8.8 seen (K = 8 batches bound the z-score)


class _Product(torch.nn.Module):
    """y_hat = a b x: at a = b = 0 a saddle whose gradient is zero by symmetry and whose
    Gauss-Newton curvature is zero (J = [b x, a x] = 0), so neither the drift nor a few
    Gauss-Newton steps can tell it from a floor; its Hessian [[0, -2], [-2, 0]] E[x^2] can."""

    def __init__(self, a: float, b: float) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.tensor(b, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.a * self.b


def _identity_sample(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 4, 1, generator=g, dtype=torch.float64)
    return x, x


def test_the_convergence_check_refuses_a_symmetric_saddle_by_its_curvature() -> None:
    """At a = b = 0 the check's gain is 1 and the drift is noise, but the Hessian has an
    eigenvalue -lambda_max: not converged. At the minimum a = b = 1 it converges."""
    predict = lambda m, x: m(x)  # noqa: E731
    cfg = TrainConfig(recipe="engine", steps=0, batch_size=8)
    saddle = convergence_check(_Product(0.0, 0.0), _identity_sample, predict, cfg)
    assert saddle.gain <= CHECK_GAIN and not saddle.drift > CHECK_DRIFT
    assert saddle.curvature < CHECK_CURVATURE and math.isclose(saddle.curvature, -1.0,
                                                                  rel_tol=1e-6)
    assert not saddle.converged
    minimum = convergence_check(_Product(1.0, 1.0), _identity_sample, predict, cfg)
    assert minimum.curvature >= -1e-9 and minimum.converged


class _Wide(torch.nn.Module):
    """A 128 -> 56 -> 1 linear map per token: 7,281 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(128, 56, dtype=torch.float64)
        self.b = torch.nn.Linear(56, 1, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


def _teacher_sample(tokens: int):
    """Data a copy of a seeded :class:`_Wide` fits exactly: ``tokens`` residuals a sample."""
    torch.manual_seed(3)
    teacher = _Wide()

    def sample(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, tokens, 128, generator=g, dtype=torch.float64)
        with torch.no_grad():
            return x, teacher(x)
    return sample


def test_the_convergence_check_does_not_count_where_it_sees_too_few_residuals() -> None:
    """The model is the teacher (held-out MSE 0: at its minimum). With one residual a
    sample, 128 samples (the check's largest batch) hold 0.018 residuals per parameter: the
    check cannot see, so it does not pass, whatever its measurements say; with 8 residuals
    a sample its batches grow to hold CHECK_POWER per parameter and it passes."""
    predict = lambda m, x: m(x)  # noqa: E731
    cfg = TrainConfig(recipe="engine", steps=0, batch_size=8)
    for tokens, powered in ((1, False), (8, True)):
        torch.manual_seed(3)
        check = convergence_check(_Wide(), _teacher_sample(tokens), predict, cfg)
        assert check.before == 0.0 and check.gain == 1.0
        assert check.powered is powered and check.converged is powered
        assert (check.power >= CHECK_POWER) is powered


def test_the_check_sizes_its_batches_in_residuals() -> None:
    """READ's grid (800 residuals a sample) keeps the smallest batches; AFFINE at depth 3,
    width 64 (40 a sample, 153k parameters) grows them to reach CHECK_POWER; fixed-N least
    squares (1 a sample) cannot, and stays small and underpowered."""
    engine = TrainConfig(recipe="engine", steps=0, batch_size=8, second_order_batch=8
                         ).resolved()
    read = check_sizes(155_284, 800, engine)
    assert (read.batch, read.held_out, read.drift_batch) == (CHECK_MIN_BATCH, 128, 128)
    affine = check_sizes(153_153, 40, engine)
    assert affine.batch == math.ceil(CHECK_POWER * 153_153 / 40) > CHECK_MIN_BATCH
    assert affine.power >= CHECK_POWER and affine.held_out > 128
    fixed_n = check_sizes(201_921, 1, engine)
    assert fixed_n.batch == CHECK_MIN_BATCH and fixed_n.power < CHECK_POWER


def test_the_engine_ends_on_its_best_validation_weights() -> None:
    """keep_best: the final model's held-out MSE is the lowest the curve measured."""
    _, model, task = _read_job(ENGINE)
    res = train(model, task.sample, lambda m, x: task.select(m(x)), ENGINE)
    values = [v for _, v in res.val_curve]
    assert values[-1] == min(values)


def test_recipes_are_objects_the_engine_fixes_its_second_order_settings() -> None:
    """The engine recipe's settings replace the config's (resolved()); paper has none."""
    cfg = ENGINE.resolved()
    for key, value in RECIPES["engine"].settings:
        assert getattr(cfg, key) == value
    assert ADAM.resolved() == ADAM
    assert RECIPES["engine"].second_order and not RECIPES["paper"].second_order


def test_the_floor_profile_trains_every_cell_with_one_setting() -> None:
    """primitives --profile floor: Transformer with and without LayerNorm and BaseConv, depth
    1-3, width 32 and 64, READ / AFFINE / MULTIPLY (54 cells), plus 2 seeds of two cells;
    their stored train configs are one and the same, and the job configs differ only in the
    cell's own axes."""
    suite = load_suite("primitives", profile="floor")
    runs = suite.runs
    grid = [r for r in runs if r.spec.label != "transformer_spread"]
    cells = {(r.spec.label, r.spec.model_options.get("layernorm"), r.spec.depth,
              r.spec.width, r.spec.task) for r in grid}
    assert len(grid) == len(cells) == 54
    spread = [r for r in runs if r.spec.label == "transformer_spread"]
    assert sorted((r.spec.task, r.spec.seed) for r in spread) == [
        ("affine", 1), ("affine", 2), ("read", 1), ("read", 2)]
    trains = {str(sorted(r.config["train"].items())) for r in runs}
    assert len(trains) == 1
    assert {r.spec.train.recipe for r in runs} == {"engine"}
    axes = {"entry", "family", "task", "problem_label", "task_options", "model_options",
            "depth", "width", "seed", "precisions", "target_version"}
    first = runs[0].config
    for r in runs:
        keys = r.config.keys() | first.keys()
        assert {k for k in keys if r.config.get(k) != first.get(k)} <= axes


def test_the_least_squares_floor_profile_shares_the_primitives_train_setting() -> None:
    """least_squares --profile floor: every least-squares form (in-context, fixed N, features
    k = 0, 1, 2, explicit gradient), Transformer and BaseConv, depth and width as axes, all
    trained with the one setting of the primitives floor profile (the high-precision entry
    keeps its own recipe)."""
    floor = load_suite("least_squares", profile="floor").runs
    prims = load_suite("primitives", profile="floor").runs
    engine = [r for r in floor if r.spec.train.recipe == "engine"]
    assert {str(sorted(r.config["train"].items())) for r in engine} == {
        str(sorted(r.config["train"].items())) for r in prims}
    forms = {(r.spec.family, r.config["problem_label"]) for r in engine}
    for task in ("ls_fixed_n", "ls_feature_k0", "ls_feature_k1", "ls_feature_k2",
                 "explicit_gradient_k2"):
        assert {("transformer", task), ("baseconv", task)} <= forms
    assert ("transformer", "ls_parallel") in forms
    assert max(r.spec.depth for r in engine if r.spec.task == "ls_parallel") <= 4
    assert {r.spec.width for r in engine if r.spec.task == "ls_fixed_n"} == {32, 64}


def test_the_floor_setting_measures_on_a_cadence_its_iteration_cap_does_not_set() -> None:
    """The floor profiles' budget is a cap of engine iterations, no wall-clock limit (the
    floor may end a cell first): the held-out curve is measured every ``validation_every``
    iterations, its own cadence, not ``validation_points`` spread over the cap."""
    prims = load_suite("primitives", profile="floor").runs
    cfg = prims[0].spec.train
    assert cfg.validation_every == 3 and cfg.second_order_steps == 400
    assert cfg.time_limit is None
    # Training: measurements at every validation_every-th iteration after Adam, then the end,
    # whatever the Adam phase's own cadence (here every 5 steps: 20 steps, 4 points), which
    # once applied on top of it (one measurement in lcm(4, 5) = 20 iterations: none here).
    every = replace(ENGINE, steps=20, second_order_steps=9, validation_every=4,
                    validation_points=4)
    _, model, task = _read_job(every)
    res = train(model, task.sample, lambda m, x: task.select(m(x)), every)
    assert res.status == "ok", res.message
    engine_steps = [step for step, _ in res.val_curve if step > 20]
    assert engine_steps[:2] == [24, 28] and engine_steps[-1] == res.steps
    assert all(s % 4 == 0 for s in engine_steps[:-1])
    assert [step for step, _ in res.val_curve if step <= 20] == [5, 10, 15, 20]


def test_a_setting_added_later_keeps_older_records_ids() -> None:
    """``validation_every``, ``engine_flops``, ``master_dtype``, ``loss_scaling`` and
    ``start`` came after stores existed: the stored (hashed) train table holds each only when
    it is set, so a config that leaves them at their defaults has the same table, and so the
    same record ids, as before they existed."""
    from probes.training.train_config import SUITE_KEYS

    later = {"validation_every", "engine_flops", "master_dtype", "loss_scaling", "start"}
    table = ENGINE.table()
    assert not later & set(table)
    assert set(table) == set(SUITE_KEYS) - later
    assert replace(ENGINE, validation_every=3).table() == {**table, "validation_every": 3}
    assert replace(ENGINE, engine_flops=1e12).table() == {**table, "engine_flops": 1e12}
    assert replace(ENGINE, dtype="bfloat16", master_dtype="float32", recipe="constant"
                   ).table()["master_dtype"] == "float32"
    assert replace(ENGINE, start="contained").table() == {**table, "start": "contained"}
    assert TrainConfig.from_table(table) == ENGINE


def test_paper_length_scales_the_step_period_with_the_run() -> None:
    """001 App. E.2: StepLR's period is steps / 100, so 200 steps decay the rate every 2."""
    task, model = Job(family="baseconv", task="multiply", depth=1, width=8,
                      train=TrainConfig(recipe="paper-length", steps=200, batch_size=4),
                      task_options={"dim": 4, "n": 6}).build()
    cfg = TrainConfig(recipe="paper-length", steps=200, batch_size=4, validation_size=0)
    res = train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    changes = [step for step, _ in res.lr_trace[1:]]
    assert changes[:3] == [2, 4, 6] and len(changes) == 100
    assert math.isclose(res.lr_trace[-1][1], 1e-3 * 0.9 ** 100, rel_tol=1e-9)


def test_report_shows_float64_training_for_the_engine() -> None:
    """The engine trains in float64 whatever the stored ``dtype`` says; the report's "train"
    column says what the run did."""
    from probes.store.records import TrainedConfig
    from reports.model_table import train_dtype

    engine = TrainedConfig(train={"recipe": "engine", "dtype": "float32"})
    paper = TrainedConfig(train={"recipe": "paper", "dtype": "float32"})
    assert (train_dtype(engine), train_dtype(paper)) == ("float64", "float32")


def test_curvature_minibatch_scales_the_subset_to_the_batch() -> None:
    """lm_curvature: J^T J from a subset, times batch / subset. On a batch that is its first
    half twice, the half's curvature x 2 is the whole batch's, so the Krylov model (its
    curvature eigenvalues and its steps) is the same; an unscaled subset would halve them."""
    from probes.training import levenberg_marquardt as lm

    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 3).double()
    wrapper = lm._Predictor(lin, lambda m, xb: m(xb))
    flat = lm._Flat(lin)
    theta = flat.get()
    half = torch.randn(20, 6, dtype=torch.float64), torch.randn(20, 3, dtype=torch.float64)
    x, y = torch.cat([half[0]] * 2), torch.cat([half[1]] * 2)

    def residuals(xb: torch.Tensor, yb: torch.Tensor):
        return lambda th: (torch.func.functional_call(wrapper, flat.as_dict(th), (xb,))
                           - yb).flatten()

    whole = lm._krylov_model(residuals(x, y), theta, 21, 0, [], None)
    sub = lm._krylov_model(residuals(x, y), theta, 21, 0, [], None,
                           curvature=(residuals(*half), 2.0))
    top = float(whole.evals.max())

    def distinct(evals: torch.Tensor) -> list[float]:
        """The eigenvalues without repeats. J^T J of a Linear(6, 3) is three copies of one
        7 x 7 block, so Lanczos from the gradient sees 7 values; whether rounding noise
        carries it on into the copies (all 21) depends on the CPU's kernels."""
        out: list[float] = []
        for v in sorted(float(e) for e in evals):
            if not out or v - out[-1] > 1e-9 * top:
                out.append(v)
        return out

    assert len(distinct(whole.evals)) == len(distinct(sub.evals)) == 7
    assert all(math.isclose(a, b, rel_tol=1e-9)
               for a, b in zip(distinct(sub.evals), distinct(whole.evals), strict=True))
    assert torch.allclose(sub.step(1e-3 * top)[0], whole.step(1e-3 * top)[0], rtol=1e-7)
    unscaled = lm._krylov_model(residuals(x, y), theta, 21, 0, [], None,
                                curvature=(residuals(*half), 1.0))
    assert float(unscaled.evals.max()) < 0.6 * top


def test_until_floor_does_not_stop_at_a_plateau_the_check_refuses() -> None:
    """Adam sits on the saddle a = b = 0 (its gradient is exactly zero): the held-out curve is
    flat, but a flat curve stops training only where the convergence check passes, so the
    run goes on to its budget, counting the refused plateaus; at the minimum a = b = 1 the
    plateau is confirmed, and the confirming check is the one the run's label uses."""
    predict = lambda m, x: m(x)  # noqa: E731
    cfg = TrainConfig(recipe="constant", steps=300, batch_size=8, lr=1e-3, until="floor",
                      validation_points=100)
    saddle = train(_Product(0.0, 0.0), _identity_sample, predict, cfg)
    assert saddle.stop_reason == "steps" and saddle.steps == 300
    assert saddle.refused_floors >= 2 and saddle.check is None
    minimum = train(_Product(1.0, 1.0), _identity_sample, predict, cfg)
    assert minimum.stop_reason == "floor" and minimum.steps < 300
    assert minimum.refused_floors == 0 and minimum.check is not None
    assert minimum.check.converged and minimum.check.curvature >= -1e-9


def test_the_curvature_sub_batch_grows_when_no_step_is_accepted() -> None:
    """lm_curvature is where the Krylov path's curvature fraction starts: steps are placed
    from that part of each batch while they are accepted, and each iteration with no
    acceptable step doubles it (up to the whole batch). A linear model on exact linear data:
    the first steps reach the solution from an eighth of the batch, then nothing can lower
    the loss, and the fraction grows 1/8 -> 1/4 -> 1/2 -> 1. (At the solution a step is
    accepted or not by rounding noise of ~1e-35, which differs between kernels: the run is
    long enough for three rejections on any of them.)"""
    from probes.training import levenberg_marquardt as lm

    W = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def sample(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 6, generator=gen, dtype=torch.float64)
        return x, x @ W.T

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).double()
    cfg = TrainConfig(recipe="high-precision", steps=0, batch_size=8, second_order_steps=150,
                      second_order_batch=512, dense_max_params=0, lm_curvature=0.125,
                      lm_refresh=1, lm_holdout=True, krylov_dim=21, lm_memory=2,
                      lm_damping=1e-9, lm_scan=2)
    losses: list[float] = []
    state = lm.LMState()
    fractions: list[float | None] = []

    def after(step: int, loss: float, sync) -> bool:
        losses.append(loss)
        fractions.append(state.curvature)
        return False

    lm.levenberg_marquardt(model, sample, lambda m, x: m(x), cfg,
                           torch.Generator().manual_seed(2), 0, None, after, state)
    solved = next(i for i, v in enumerate(losses) if v < 1e-20)
    assert fractions[solved] == 0.125     # the solution was reached from an eighth
    assert fractions[-1] == 1.0 and 0.25 in fractions and 0.5 in fractions
    assert fractions == sorted(fractions)


def test_float32_curvature_products_give_the_float64_krylov_model_to_float32_accuracy() -> None:
    """``low``: the Krylov products from the same residuals computed in float32 (the gradient
    stays float64): the curvature eigenvalues and the damped step agree with the float64
    model's to float32's relative accuracy, and the gradient side is untouched."""
    from probes.training import levenberg_marquardt as lm

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(),
                              torch.nn.Linear(16, 2)).double()
    wrapper = lm._Predictor(net, lambda m, xb: m(xb))
    flat = lm._Flat(net)
    theta = flat.get()
    x, y = torch.randn(64, 5, dtype=torch.float64), torch.randn(64, 2, dtype=torch.float64)

    def res(th: torch.Tensor) -> torch.Tensor:
        return (torch.func.functional_call(wrapper, flat.as_dict(th), (x,)) - y).flatten()

    def low(th: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(wrapper, flat.as_dict(th.float()), (x.float(),))
        assert out.dtype == torch.float32
        return (out - y.float()).flatten()

    exact = lm._krylov_model(res, theta, 12, 0, [], None)
    cheap = lm._krylov_model(res, theta, 12, 0, [], None, low=low)
    top = float(exact.evals.max())
    assert cheap.V.dtype == torch.float64
    assert not torch.equal(cheap.evals, exact.evals)     # the products were float32's
    assert torch.allclose(cheap.evals, exact.evals, rtol=1e-4, atol=1e-5 * top)
    d_exact, pred_exact = exact.step(1e-2 * top)
    d_cheap, pred_cheap = cheap.step(1e-2 * top)
    assert float((d_cheap - d_exact).norm()) < 1e-4 * float(d_exact.norm())
    assert math.isclose(pred_cheap, pred_exact, rel_tol=1e-4)


def test_krylov_stopping_rule_is_hessian_free_relative_progress() -> None:
    """q_j - q_(j-w) < w tol q_j with w = max(10, j / 10): a model decrease that still
    grows by 1% a direction does not stop the basis, one that has levelled off does; fewer
    than w + 1 directions never stop it."""
    from probes.training import levenberg_marquardt as lm

    growing = [1.0 + 0.01 * j for j in range(60)]
    levelled = [1.0 - 0.5 ** j for j in range(1, 40)]
    assert not lm._krylov_converged(growing, 5e-4)
    assert lm._krylov_converged(levelled, 5e-4)
    assert not lm._krylov_converged(levelled[:10], 5e-4)
    first = next(j for j in range(11, 40) if lm._krylov_converged(levelled[:j], 5e-4))
    # 0.5^(j-10) (1 - 0.5^10) < 10 * 5e-4 (1 - 0.5^j) first holds at j = 18
    assert first == 18


def test_adaptive_krylov_basis_stops_where_the_model_decrease_has_converged() -> None:
    """krylov_tol: on least squares with singular values 1 .. 1e-3 and a gradient that
    weights the large ones (y = A theta*), the damped model's decrease is reached by a few
    Lanczos directions; the adaptive basis stops there, well short of the cap k = 40, and
    its step's predicted decrease is within 1% of the full basis's. With tol = 0 the basis
    takes every one of the k products."""
    from probes.training import levenberg_marquardt as lm

    gen = torch.Generator().manual_seed(0)
    M, P = 200, 60
    U = torch.linalg.qr(torch.randn(M, P, generator=gen, dtype=torch.float64))[0]
    V = torch.linalg.qr(torch.randn(P, P, generator=gen, dtype=torch.float64))[0]
    A = U @ torch.diag(torch.logspace(0, -3, P, dtype=torch.float64)) @ V.T
    y = A @ torch.randn(P, generator=gen, dtype=torch.float64)
    theta = torch.zeros(P, dtype=torch.float64)

    def res(th: torch.Tensor) -> torch.Tensor:
        return A @ th - y

    mu = 1e-3
    full = lm._krylov_model(res, theta, 40, 0, [], None)
    short = lm._krylov_model(res, theta, 40, 0, [], None, tol=5e-4, damping=mu)
    assert full.evals.numel() == 40
    assert 10 < short.evals.numel() < 30
    pred_full, pred_short = full.step(mu)[1], short.step(mu)[1]
    assert pred_short <= pred_full * (1 + 1e-9)
    assert pred_short > 0.99 * pred_full
