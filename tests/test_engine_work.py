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
