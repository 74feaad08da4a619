"""A training paused (or killed) and resumed from its checkpoint computes the numbers of an
uninterrupted one, bit for bit; a finished training is returned as it was; a checkpoint of
another job or an unreadable one is a one-line error."""

import math

import pytest
import torch
from conftest import tiny_affine_suite

from precision.models import build_model
from precision.tasks import make_task
from probes.training.checkpoint import Checkpoint, CheckpointError, Paused, Phase
from probes.training.recipes import TrainConfig, train


class _PauseAfter(Checkpoint):
    """Pauses at the ``n``-th look at the clock (a slice that ends after a fixed number of
    steps, so the test does not depend on the machine's speed)."""

    def __init__(self, path, job, n):
        super().__init__(path, job)
        self.n = n

    def pause_due(self):
        self.n -= 1
        return self.n == 0


def _job():
    task = make_task("affine", dim=4, n=6)
    torch.manual_seed(0)
    model = build_model("transformer", d_in=task.d_in, d_out=task.d_out, depth=1, width=8)
    return task, model


def _train(cfg, checkpoint=None):
    task, model = _job()
    result = train(model, task.sample, lambda m, x: task.select(m(x)), cfg, checkpoint)
    return result, [p.detach().clone() for p in model.parameters()]


def _same(a, b):
    (ra, wa), (rb, wb) = a, b
    assert ra.curve == rb.curve and ra.val_curve == rb.val_curve and ra.lr_trace == rb.lr_trace
    assert ra.steps == rb.steps and ra.stop_reason == rb.stop_reason
    assert all(torch.equal(x, y) for x, y in zip(wa, wb, strict=True))


@pytest.mark.parametrize("recipe", [
    {"recipe": "paper", "steps": 120, "batch_size": 8, "step_size": 20},
    {"recipe": "adaptive", "steps": 120, "batch_size": 8, "window": 8},
    {"recipe": "engine", "steps": 40, "batch_size": 8, "second_order_steps": 4,
     "second_order_batch": 8},
])
def test_a_paused_training_resumes_bit_identically(tmp_path, recipe):
    _resumes_bit_identically(TrainConfig(**recipe), tmp_path)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_engine_on_a_gpu_resumes_bit_identically(tmp_path):
    _resumes_bit_identically(TrainConfig(recipe="engine", steps=40, batch_size=8,
                                         second_order_steps=4, second_order_batch=8,
                                         device="cuda"), tmp_path)


def _resumes_bit_identically(cfg, tmp_path):
    whole = _train(cfg)
    path = tmp_path / "job.ckpt.safetensors"
    pauses = []
    for n in (35, 8, 1000):           # three slices; the engine's second pause is in its
        ck = _PauseAfter(path, "job", n)   # second-order phase: it resumes from Adam's end
        try:
            resumed = _train(cfg, ck)
            break
        except Paused as exc:
            pauses.append(str(exc))
            assert path.exists()
    assert pauses[0] == "paused after step 35"
    if cfg.second_order:
        assert pauses[1].startswith("paused in the second-order phase")
    _same(whole, resumed)
    # the finished training is saved with its result: asked again, it is returned as it was
    again = _train(cfg, Checkpoint(path, "job"))
    _same(resumed, again)
    assert again[0].val_times == resumed[0].val_times


@pytest.mark.parametrize("settings", [
    # the engine (dense Cholesky steps, a fresh batch each iteration, the next one held out)
    {"recipe": "engine"},
    # matrix-free Krylov steps with remembered steps, three iterations per batch, the
    # curvature on a growing part of it
    {"recipe": "high-precision", "dense_max_params": 0, "krylov_dim": 6, "lm_memory": 3,
     "lm_refresh": 3, "lm_curvature": 0.25},
    # the Krylov products in float32 (exact again after a rejected iteration)
    {"recipe": "high-precision", "dense_max_params": 0, "krylov_dim": 6, "lm_memory": 3,
     "lm_refresh": 1, "lm_holdout": True, "lm_curvature_dtype": "float32"},
])
def test_the_second_order_phase_resumes_bit_identically_after_any_iteration(tmp_path,
                                                                             settings):
    """A slice that ends after every step: 30 Adam steps and 7 second-order iterations, each
    in its own slice, compute what one uninterrupted training computes."""
    cfg = TrainConfig(steps=30, batch_size=8, second_order_steps=7, second_order_batch=8,
                      validation_points=3, **settings)
    whole = _train(cfg)
    path = tmp_path / "job.ckpt.safetensors"
    pauses = 0
    while True:
        try:
            resumed = _train(cfg, _PauseAfter(path, "job", 1))
            break
        except Paused:
            pauses += 1
            assert pauses < 100
    assert pauses == 37   # one after each step
    assert whole[0].steps == 37 and len(whole[0].val_curve) >= 4
    _same(whole, resumed)


def test_periodic_saves_let_a_killed_training_go_on(tmp_path):
    """A save every step (``every`` 0) and no pause: the file after the run is the finished
    training; one written mid-way (copied before the end) resumes to the same numbers."""
    cfg = TrainConfig(recipe="paper", steps=60, batch_size=8, step_size=10)
    whole = _train(cfg)
    path = tmp_path / "job.ckpt.safetensors"
    mid = tmp_path / "mid.ckpt.safetensors"

    class _CopyAt(Checkpoint):
        def save(self, tensors, state):
            super().save(tensors, state)
            if state.get("done") == 25:
                mid.write_bytes(self.path.read_bytes())

    _train(cfg, _CopyAt(path, "job", every=0.0))
    killed = _train(cfg, Checkpoint(mid, "job"))    # as if killed after step 25's save
    _same(whole, killed)


def test_a_checkpoint_of_another_job_or_unreadable_is_refused(tmp_path):
    cfg = TrainConfig(recipe="paper", steps=10, batch_size=8)
    path = tmp_path / "a.ckpt.safetensors"
    _train(cfg, Checkpoint(path, "job-a"))
    with pytest.raises(CheckpointError, match="not one of job job-b"):
        _train(cfg, Checkpoint(path, "job-b"))
    path.write_bytes(b"\x80\x04 a pickle, not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be read.*delete it"):
        _train(cfg, Checkpoint(path, "job-a"))
    assert path.exists()            # never silently replaced


def test_the_phases_are_the_strings_checkpoint_files_hold(tmp_path):
    """Phase is a str enum: its values are the strings files written before it hold, a
    file's phase reads back as a plain JSON string, and an unknown phase is a one-line
    CheckpointError."""
    assert [p.value for p in Phase] == ["first_order", "second_order",
                                        "second_order_running", "done"]
    cfg = TrainConfig(recipe="paper", steps=5, batch_size=8)
    path = tmp_path / "a.ckpt.safetensors"
    _train(cfg, Checkpoint(path, "job"))
    tensors, state = Checkpoint(path, "job").load()
    assert type(state["phase"]) is str and Phase(state["phase"]) is Phase.DONE
    Checkpoint(path, "job").save(tensors, {**state, "phase": "third_order"})
    with pytest.raises(CheckpointError, match="unknown phase 'third_order'.*delete it"):
        _train(cfg, Checkpoint(path, "job"))


def test_no_checkpoint_no_files(tmp_path):
    cfg = TrainConfig(recipe="paper", steps=5, batch_size=8)
    result, _ = _train(cfg)
    assert result.status == "ok" and math.isfinite(result.curve[-1][1])
    assert not list(tmp_path.iterdir())


SUITE = tiny_affine_suite("tiny_sliced",
                          'recipe = "paper", steps = 80, batch_size = 8, step_size = 20',
                          depth="[1, 2]")


def test_a_sliced_sweep_pauses_then_goes_on_to_the_numbers_of_an_unsliced_one(tmp_path):
    from precision.cli.main import EXIT_PAUSED, main
    from probes.store.db import Store

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    ck = tmp_path / "ck"
    args = ["run", str(suite), "--no-progress", "--no-report"]
    assert main([*args, "--db", str(tmp_path / "plain.db")]) == 0
    sliced = [*args, "--db", str(tmp_path / "sliced.db"), "--checkpoints", str(ck)]
    # a slice of 0 s: every training pauses after its first step, nothing is stored
    assert main([*sliced, "--slice", "0"]) == EXIT_PAUSED
    assert len(list(ck.glob("*.ckpt.safetensors"))) == 2
    with Store(tmp_path / "sliced.db") as store:
        assert store.runs() == []
    assert main(sliced) == 0
    assert not list(ck.glob("*.ckpt.safetensors"))     # stored: the state is gone

    def numbers(db):
        with Store(db) as store:
            return sorted((r["run_id"], r["log10_mse"], r["result"]["train_steps_done"])
                          for r in store.runs())

    assert numbers(tmp_path / "sliced.db") == numbers(tmp_path / "plain.db")


def test_slice_needs_checkpoints(tmp_path, capsys):
    from precision.cli.main import main

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    code = main(["run", str(suite), "--db", str(tmp_path / "r.db"), "--slice", "10",
                 "--no-checkpoints", "--no-progress", "--no-report"])
    assert code == 2 and "--slice needs checkpoints" in capsys.readouterr().err
    code = main(["run", str(suite), "--db", str(tmp_path / "r.db"), "--checkpoints",
                 str(tmp_path / "ck"), "--no-checkpoints", "--no-progress", "--no-report"])
    assert code == 2 and "not both" in capsys.readouterr().err


def test_trainings_keep_their_state_beside_the_store_by_default(tmp_path):
    """A sweep stopped mid-training lost it (checkpoints were off unless --checkpoints was
    given: a cell trained for 16 minutes restarted from zero). The state is now kept beside
    the store by default: the same command goes on from it, to the numbers of an
    uninterrupted sweep, and leaves no folder behind once everything is stored."""
    from precision.cli.main import EXIT_PAUSED, main
    from probes.store.db import Store

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    args = ["run", str(suite), "--no-progress", "--no-report"]
    assert main([*args, "--db", str(tmp_path / "plain.db"), "--no-checkpoints"]) == 0
    assert not (tmp_path / "plain.checkpoints").exists()
    stopped = [*args, "--db", str(tmp_path / "r.db")]
    assert main([*stopped, "--slice", "0"]) == EXIT_PAUSED   # stopped after the first step
    assert len(list((tmp_path / "r.checkpoints").glob("*.ckpt.safetensors"))) == 2
    assert main(stopped) == 0
    assert not (tmp_path / "r.checkpoints").exists()

    def numbers(db):
        with Store(db) as store:
            return sorted((r["run_id"], r["log10_mse"], r["result"]["train_steps_done"])
                          for r in store.runs())

    assert numbers(tmp_path / "r.db") == numbers(tmp_path / "plain.db")


def _paused_checkpoint(tmp_path, cfg):
    """A checkpoint of a training paused in its Adam phase (tensors, state)."""
    path = tmp_path / "a.ckpt.safetensors"
    with pytest.raises(Paused):
        _train(cfg, _PauseAfter(path, "job", 3))
    return path, Checkpoint(path, "job").load()


def _damage_state_empty(tensors, state):
    return tensors, {}


def _damage_no_done(tensors, state):
    return tensors, {k: v for k, v in state.items() if k != "done"}


def _damage_shape(tensors, state):
    name = next(k for k in tensors if k.startswith("model."))
    return {**tensors, name: torch.zeros(3, 1)}, state


def _damage_unknown_tensor(tensors, state):
    return {**tensors, "model.extra.weight": torch.zeros(2)}, state


def _damage_rng(tensors, state):
    return {**tensors, "rng": torch.zeros(5, dtype=torch.uint8)}, state


def _damage_adam(tensors, state):
    name = next(k for k in tensors if k.endswith(".exp_avg"))
    return {**tensors, name: torch.zeros(1)}, state   # would broadcast silently


def _damage_curve(tensors, state):
    return tensors, {**state, "curve": {"points": 5}}


@pytest.mark.parametrize("damage,message", [
    (_damage_state_empty, "unknown phase 'None'"),
    (_damage_no_done, "state 'done' is missing or malformed"),
    (_damage_shape, "model tensor '.*' is torch.float32 of \\(3, 1\\)"),
    (_damage_unknown_tensor, "model tensor 'extra.weight' is unknown"),
    (_damage_rng, "random state 'rng': torch.uint8 of \\(5,\\)"),
    (_damage_adam, "Adam's exp_avg of parameter .* is of \\(1,\\)"),
    (_damage_curve, "KeyError|TypeError"),
])
def test_a_checkpoint_of_the_right_job_but_wrong_inside_is_refused(tmp_path, damage, message):
    """Checked against the job before use: the file named, how to go on, nothing used."""
    cfg = TrainConfig(recipe="paper", steps=20, batch_size=8, step_size=5)
    path, saved = _paused_checkpoint(tmp_path, cfg)
    tensors, state = damage(*saved)
    Checkpoint(path, "job").save(tensors, state)
    with pytest.raises(CheckpointError, match=f"checkpoint {path} does not fit this job "
                       f"\\(.*({message}).*\\); delete it to train this job from the start"):
        _train(cfg, Checkpoint(path, "job"))
    assert path.exists()


def test_a_checkpoint_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    path = tmp_path / "a.ckpt.safetensors"
    os.mkfifo(path)
    with pytest.raises(CheckpointError, match="is not a regular file; delete it"):
        Checkpoint(path, "job").load()


def test_a_damaged_checkpoint_is_a_failed_record_naming_it(tmp_path):
    """Through the command, in a worker too: the job is stored ``failed`` with the file's
    name; the other jobs are measured."""
    import json

    from precision.cli.main import EXIT_PAUSED, main
    from probes.store.db import Store

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    ck = tmp_path / "ck"
    args = ["run", str(suite), "--no-progress", "--no-report", "--db", str(tmp_path / "r.db"),
            "--checkpoints", str(ck), "--jobs", "2"]
    assert main([*args, "--slice", "0"]) == EXIT_PAUSED
    first, second = sorted(ck.glob("*.ckpt.safetensors"))
    job = first.name.removesuffix(".ckpt.safetensors")
    tensors, state = Checkpoint(first, job).load()
    Checkpoint(first, job).save(tensors, json.loads("{}"))
    assert main(args) == 0
    with Store(tmp_path / "r.db") as store:
        rows = store.runs()
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(str(first) in r["result"].get("message", r.get("message", ""))
                          or str(first) in json.dumps(r) for r in failed)
    assert any(r["status"] == "ok" for r in rows)


def test_a_file_where_the_default_checkpoint_folder_goes_is_one_line(tmp_path, capsys):
    from precision.cli.main import main

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    (tmp_path / "r.checkpoints").write_text("the user's")
    code = main(["run", str(suite), "--db", str(tmp_path / "r.db"), "--no-progress",
                 "--no-report"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "is not a folder" in err and "\n" not in err
    assert (tmp_path / "r.checkpoints").read_text() == "the user's"
    assert not (tmp_path / "r.db").exists()
