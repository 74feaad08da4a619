"""The engine's budget in work (probes.training.work): its FLOP count is the counter's,
a budget ends a run at the same iteration whatever the clock says, and the count survives a
resumed run."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from probes.training import levenberg_marquardt as lm
from probes.training.job import Job
from probes.training.recipes import train
from probes.training.train_config import TrainConfig, TrainConfigError
from probes.training.work import WorkLedger

TASK = {"dim": 4, "n": 8}
ENGINE = TrainConfig(recipe="engine", steps=20, batch_size=16, second_order_steps=40,
                     second_order_batch=8, validation_size=32)


def _job(cfg: TrainConfig, width: int = 16) -> tuple[object, torch.nn.Module]:
    job = Job(family="transformer", task="read", depth=1, width=width, train=cfg,
              task_options=TASK, model_options={"layernorm": False})
    return job.build()


@pytest.mark.parametrize("dense", [False, True])
def test_the_ledger_counts_what_the_flop_counter_sees(dense: bool) -> None:
    """One engine iteration, Krylov or dense path, counted by the ledger (each call's count
    looked up after its first) and by FlopCounterMode over the whole iteration: the two agree
    within 15% (the ledger adds the factorisations and bookkeeping the counter cannot see,
    and counts the reorthogonalisation by formula)."""
    cfg = replace(ENGINE, dense_max_params=100_000 if dense else 0).resolved()
    task, model = _job(cfg)
    model.double()
    torch.manual_seed(0)
    with sdpa_kernel(SDPBackend.MATH):
        engine = lm._Engine(model, task.sample, lambda m, x: task.select(m(x)), cfg,
                            torch.Generator().manual_seed(0))
        st = lm.LMState(curvature=1.0, low=not dense)
        theta = engine.res.flat.get()
        theta, _ = engine.iterate(st, theta, 0, None)     # every key counted once
        before = st.flops
        with FlopCounterMode(display=False) as counter:
            engine.iterate(st, theta, 0, None)
    counted, seen = st.flops - before, counter.get_total_flops()
    assert seen > 0 and 0.85 < counted / seen < 1.15, (counted, seen)


def test_a_work_budget_stops_at_the_same_iteration_whatever_the_clock() -> None:
    """engine_flops ends the engine's phase once its count is reached (stop "work"), the
    record holds the count, and a rerun with a clock that runs 1000x faster stops at the
    same step with the same curve (the budget reads no clock)."""
    cfg = replace(ENGINE, engine_flops=5e9)
    task, model = _job(cfg)
    first = train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    assert first.stop_reason == "work", first.stop_reason
    assert cfg.steps < first.steps < cfg.steps + cfg.second_order_steps
    engine_steps = first.steps - cfg.steps
    assert 5e9 <= first.engine_flops < 5e9 * (1 + 1.5 / (engine_steps - 1))
    task, model = _job(cfg)
    real = lm.time.perf_counter
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lm.time, "perf_counter", lambda: 1000.0 * real())
        again = train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    assert again.steps == first.steps and again.val_curve == first.val_curve
    assert again.engine_flops == first.engine_flops
    # the held-out curve's points carry the work done: 0 in the Adam phase, then rising to
    # the run's count (the time-to-floor curve in work, the same on every machine)
    assert len(first.val_flops) == len(first.val_curve)
    assert all(f == 0.0 for (step, _), f in zip(first.val_curve, first.val_flops, strict=True)
               if step <= cfg.steps)
    assert first.val_flops == sorted(first.val_flops)
    assert first.val_flops[-1] == first.engine_flops == again.val_flops[-1]


def test_without_a_budget_the_count_is_still_recorded() -> None:
    """A run stopped by its iteration cap says "steps" and still records its work."""
    cfg = replace(ENGINE, second_order_steps=3)
    task, model = _job(cfg)
    res = train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    assert res.stop_reason == "steps" and res.engine_flops > 0


def test_the_ledger_counts_a_key_once_and_scales_blocks() -> None:
    """A key is counted once; a call over a block of b rows adds b units."""
    ledger = WorkLedger()
    a, b = torch.randn(8, 8), torch.randn(8, 3)
    ledger.run("mm", torch.mm, a, b)
    assert ledger.flops == 2 * 8 * 8 * 3
    ledger.run("mm", torch.mm, a, b)
    assert ledger.flops == 2 * 2 * 8 * 8 * 3
    ledger.run("rows", torch.mm, b.T, a, units=3)      # 3 rows of (1, 8) @ (8, 8)
    ledger.run("rows", torch.mm, b.T[:1], a, units=1)
    assert ledger.flops == 2 * 2 * 8 * 8 * 3 + 4 * 2 * 8 * 8


def test_a_negative_budget_is_refused_in_one_line() -> None:
    with pytest.raises(TrainConfigError, match="engine_flops"):
        replace(ENGINE, engine_flops=-1.0)


def test_every_built_in_profile_budgets_in_work_not_seconds() -> None:
    """No built-in suite or profile (examples included) stops a training by the clock: its
    budgets are steps and engine iterations (a wall-clock limit would make the stored
    numbers depend on the machine's load)."""
    import tomllib
    from pathlib import Path

    from probes.suite import load_suite
    from probes.training.job import Job as TrainedJob

    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "probes" / "suites").glob("*.toml")) + \
        sorted((root / "examples").glob("*.toml"))
    seen = 0
    for path in files:
        data = tomllib.loads(path.read_text())
        for profile in [None, *data.get("profiles", {})]:
            suite = load_suite(str(path), profile=profile)
            for run in suite.runs:
                if isinstance(run.spec, TrainedJob):
                    seen += 1
                    assert run.spec.train.time_limit is None, (path.name, profile, run.id)
    assert seen > 100


def test_the_convergence_check_is_priced_like_the_engine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A check reports its work: the counter's over the whole check within 15% (its
    iterations, gradients and Hessian products by shape), the same count twice. (Two of the
    check's engine iterations, not 15: the count per iteration is tested above.)"""
    from probes.training import convergence_check as cc
    from probes.training.convergence_check import convergence_check

    monkeypatch.setattr(cc, "CHECK_STEPS", 2)
    task, model = _job(ENGINE, width=4)
    model.double()

    def predict(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return task.select(m(x))

    first = convergence_check(model, task.sample, predict, ENGINE)
    with FlopCounterMode(display=False) as counter:
        again = convergence_check(model, task.sample, predict, ENGINE)
    assert first.flops > 0 and again.flops == first.flops
    assert 0.85 < first.flops / counter.get_total_flops() < 1.15


def test_checks_on_plateaus_keep_their_share_of_the_work() -> None:
    """On a flat held-out curve every check refuses: the checks are spaced so that they take
    at most CHECK_SHARE of the work since the first, and they keep coming (a check is never
    blocked for good). Before the engine's phase (no work counted) MIN_POINTS alone spaces
    them."""
    from probes.training.recipes import Validation

    task, model = _job(ENGINE)
    cfg = replace(ENGINE, until="floor")
    val = Validation(model, task.sample, lambda m, x: task.select(m(x)), cfg, 1000)
    work, cost, per_point = [0.0], 50.0, 3.0   # a check costs ~17 measurements' work
    checks: list[float] = []

    def refuse() -> bool:
        checks.append(work[0])
        val.checked(cost)
        return False

    val.confirm, val.work, val.priced = refuse, lambda: work[0], True
    for step in range(1, 2001):
        work[0] += per_point
        val.measure(step)
    assert len(checks) >= 10 and val.refused == len(checks)
    assert val.check_flops == cost * len(checks)
    share = val.check_flops / (val.check_flops + work[0] - checks[0])
    assert share <= Validation.CHECK_SHARE + cost / work[0], share
    gaps = [b - a for a, b in zip(checks, checks[1:], strict=False)]
    assert min(gaps) >= cost * (1 - Validation.CHECK_SHARE) / Validation.CHECK_SHARE
    unpriced = Validation(model, task.sample, lambda m, x: task.select(m(x)), cfg, 1000)
    seen: list[int] = []
    unpriced.confirm = lambda: seen.append(1) or unpriced.checked(cost) or False
    for step in range(1, 201):
        unpriced.measure(step)
    assert len(seen) == 200 // Validation.MIN_POINTS
