"""Trained jobs end to end: recipes reach their floors, decomposition, iterated gradients,
divergence as a status, bit-identical reruns, kill and resume of a trained sweep."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from precision.cli.main import main
from precision.precisions import parse_precisions
from probes.store.db import Store
from probes.training.job import Job
from probes.training.measure import run_trained as _run_trained

ROOT = Path(__file__).resolve().parents[1]


def job(**over):
    cfg = {"family": "baseconv", "task": "multiply", "task_options": {"dim": 4, "n": 6},
           "model_options": {"layernorm": False, "residual": "none"}, "depth": 1, "width": 4,
           "seed": 0, "train": {"recipe": "high-precision", "steps": 300, "batch_size": 16,
                                "dtype": "float64", "second_order_steps": 40},
           "test_size": 4, "iterate": 0, "precisions": ["float32", "float64", "mp50"]}
    cfg.update(over)
    return cfg


def run_trained(cfg):
    return _run_trained(Job.from_config(cfg), parse_precisions(cfg["precisions"]))


@pytest.fixture(scope="module")
def multiply_outcome():
    return run_trained(job())


def test_high_precision_recipe_reaches_the_precisions_floor(multiply_outcome):
    out = {o.precision: o for o in multiply_outcome.per_precision}
    assert all(o.status == "ok" for o in out.values())
    # the weights represent MULTIPLY to ~float64 level: mp50's total error is approximation
    assert out["mp50"].total < 1e-20
    assert out["float64"].total < 1e-26
    # float32 evaluation of the same weights is limited by float32 rounding, not the weights
    assert out["float32"].log10_rounding > out["float32"].log10_approximation + 3
    assert -17 < out["float32"].log10_total < -12


def test_rerun_is_bit_identical(multiply_outcome):
    again = run_trained(job())
    assert [o.total for o in again.per_precision] == \
        [o.total for o in multiply_outcome.per_precision]
    assert again.training.curve == multiply_outcome.training.curve


def test_divergence_is_a_status_not_an_exception():
    out = run_trained(job(train={"recipe": "paper", "steps": 50, "batch_size": 8,
                                 "lr": 1e30}))
    assert out.training.status == "diverged"
    assert all(o.status == "diverged" and "step" in o.error for o in out.per_precision)


def test_iterated_explicit_gradient_converges_to_the_gradient_error():
    """001 Sec. 5.1.2: the trained gradient model, iterated w <- w - eta model(...), converges
    like GD (a 1-layer BaseConv without residual can represent the k = 2 gradient exactly).
    300 LM iterations reach it (1e-30 seen); 150 left the run on its slope, where the number
    depends on the CPU's kernels (1e-9 on one machine, 1.5e-7 on another)."""
    cfg = job(task="explicit_gradient", task_options={"dim": 2, "n": 8, "k": 2}, width=8,
              iterate=40, precisions=["float64", "mp50"], test_size=4)
    cfg["train"]["second_order_steps"] = 300
    out = {o.precision: o for o in run_trained(cfg).per_precision}
    grad_mse = out["mp50"].total
    assert grad_mse < 1e-12
    for prec in ("float64", "mp50"):
        trace, floor = out[prec].iterate_trace, out[prec].floor
        assert len(trace) == 40 and out[prec].status == "ok"
        assert trace[0] > -2 and trace[-1] < -7               # 6+ decades of GD progress
        assert all(b < a for a, b in zip(trace[:8], trace[1:9], strict=True))
        assert floor is not None and abs(floor.log10_level - trace[-1]) < 0.5


SUITE = """
name = "killme"
precisions = ["float64"]
seeds = [0, 1, 2]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
[models.bc]
family = "baseconv"
tasks = ["mul"]
depth = 1
width = 4
layernorm = false
train = { recipe = "paper", steps = 300, batch_size = 8 }
test_size = 2
"""


def test_killed_trained_sweep_resumes_without_loss_or_duplicates(tmp_path):
    suite = tmp_path / "killme.toml"
    suite.write_text(SUITE)
    db = tmp_path / "results.db"
    cmd = [sys.executable, "-m", "precision", "run", str(suite), "--db", str(db),
           "--no-progress", "--no-report"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    if con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] >= 2:
                        break
            except sqlite3.Error:
                pass
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(db, create=False) as store:
        partial = store.count("killme")
    assert 2 <= partial < 3     # (a run is ~7 s: the third is mid-way)
    assert main([*cmd[3:]]) == 0
    with Store(db, create=False) as store:
        rows = store.runs(suite="killme")
    assert len(rows) == 3 and len({r["run_id"] for r in rows}) == 3
    assert all(r["status"] == "ok" for r in rows)
