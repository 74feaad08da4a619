"""Training in a format (probes.training.format_training): each step's forward and backward
rounded per op to the format, gradients through rounding by the straight-through estimator,
master weights or none, loss scaling, stochastic rounding from the run's seed; the configs a
format cannot train with are refused in one line."""

import pytest
import torch

from precision.formats.op_rounding import round_values
from precision.precisions import parse_precision
from probes.training.format_training import FormatTraining, LossScale, needs_loss_scaling
from probes.training.recipes import batch_gradient, train
from probes.training.train_config import TrainConfig, TrainConfigError


def _sample(n, gen):
    x = torch.randn(n, 4, 3, generator=gen, dtype=torch.float64)
    return x, 0.5 * x.sum(-1, keepdim=True)


def _predict(m, x):
    return m(x)


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def _train(dtype, steps=120, **settings):
    model = _model()
    cfg = TrainConfig(recipe="constant", steps=steps, batch_size=16, lr=3e-3, dtype=dtype,
                      validation_size=32, **settings)
    result = train(model, _sample, _predict, cfg)
    return result, [p.detach().clone() for p in model.parameters()]


def _on_grid(t, name):
    return torch.equal(round_values(t.to(torch.float32), parse_precision(name)),
                       t.to(torch.float32))


def _one_gradient(name, model=None, loss_scaling="off", step=1, batch=8):
    model = model or _model()
    fmt = FormatTraining(model, parse_precision(name), loss_scaling)
    x, y = _sample(batch, torch.Generator().manual_seed(1))
    value, skipped = fmt.gradient(model, _predict, x, y, step, 0, batch_gradient)
    return fmt, model, value, skipped


@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e5m2", "bfloat16:rz"])
def test_the_gradient_and_the_weights_it_is_taken_at_are_on_the_format_grid(name):
    fmt, model, value, skipped = _one_gradient(name)
    assert not skipped
    for w, m in zip(fmt.work.parameters(), model.parameters(), strict=True):
        assert _on_grid(w.detach(), name)                     # the forward's weights
        assert torch.equal(w.detach(), round_values(m.detach(), parse_precision(name)))
        assert _on_grid(m.grad, name)                        # the backward's results
        assert m.dtype == torch.float32                       # the master weights
    # the per-op rounding is real: the float32 gradient is not on the grid
    native = _model()
    batch_gradient(native, _predict, *(t.float() for t in _sample(8, torch.Generator()
                                                                   .manual_seed(1))))
    assert not all(_on_grid(p.grad, name) for p in native.parameters())


def test_a_format_that_rounds_nothing_trains_as_float32_bit_for_bit():
    """float32 weights trained "as a format" (float32 master weights, every op rounded to
    float32 in a float32 carrier: the identity): the native run's numbers, so the format path
    adds nothing of its own."""
    native, w_native = _train("float32")
    fmt, w_fmt = _train("float32", master_dtype="float32")
    assert native.curve == fmt.curve and native.val_curve == fmt.val_curve
    assert all(torch.equal(a, b) for a, b in zip(w_native, w_fmt, strict=True))


def test_stochastic_rounding_reproduces_from_the_seed_and_changes_with_it():
    a, wa = _train("bfloat16:sr", steps=40)
    b, wb = _train("bfloat16:sr", steps=40)
    c, wc = _train("bfloat16:sr", steps=40, seed=1)
    assert a.curve == b.curve and all(torch.equal(x, y) for x, y in zip(wa, wb, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(wa, wc, strict=True))
    # a seed in the spelling draws the bits (the run's seed still draws the data)
    _, wd = _train("bfloat16:sr+seed=0", steps=40)
    _, we = _train("bfloat16:sr+seed=5", steps=40)
    assert all(torch.equal(x, y) for x, y in zip(wa, wd, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(wa, we, strict=True))


def test_without_master_weights_the_weights_stay_in_the_format_and_sr_keeps_small_updates():
    """master_dtype "none": every update rounded into the format. To nearest, updates below
    half a unit are lost (the weights stall); stochastic rounding keeps them on average."""
    rne, w_rne = _train("float8_e4m3", steps=150, master_dtype="none")
    sr, w_sr = _train("float8_e4m3:sr", steps=150, master_dtype="none")
    master, _ = _train("float8_e4m3", steps=150)
    for w in [*w_rne, *w_sr]:
        assert _on_grid(w, "float8_e4m3")
    assert sr.val_curve[-1][1] < 0.5 * rne.val_curve[-1][1]
    assert master.val_curve[-1][1] < 0.5 * rne.val_curve[-1][1]


def test_loss_scaling_keeps_float8_gradients_from_underflowing():
    """The MSE's gradient with respect to each output, 2 r / n over n = 2048 entries, sits
    below float8_e4m3's smallest subnormal (2^-9) for residuals r below 2: unscaled, the
    backward is flushed to zero; scaled by 2^8 it is not."""
    _, off, _, _ = _one_gradient("float8_e4m3", loss_scaling="off", batch=512)
    zeros_off = sum(int((p.grad == 0).sum()) for p in off.parameters())
    fmt, on, _, skipped = _one_gradient("float8_e4m3", loss_scaling="auto", batch=512)
    zeros_on = sum(int((p.grad == 0).sum()) for p in on.parameters())
    assert fmt.scaler is not None and fmt.scaler.scale == 256.0 and not skipped
    assert zeros_off == sum(p.numel() for p in off.parameters())   # every gradient lost
    assert zeros_on < zeros_off / 4
    assert needs_loss_scaling(parse_precision("float16"))
    assert not needs_loss_scaling(parse_precision("bfloat16:sr"))
    assert not needs_loss_scaling(parse_precision("mxfp8_e4m3"))


def test_a_gradient_that_overflows_the_scale_skips_the_step_and_halves_it():
    model = _model()
    fmt = FormatTraining(model, parse_precision("float8_e4m3"), "dynamic")
    fmt.scaler = LossScale(2.0 ** 30)   # saturates float8_e4m3 (largest finite 448)
    x, y = _sample(8, torch.Generator().manual_seed(1))
    value, skipped = fmt.gradient(model, _predict, x, y, 1, 0, batch_gradient)
    assert skipped and fmt.scaler.scale == 2.0 ** 29 and fmt.scaler.skipped == 1
    assert all(p.grad is None for p in model.parameters())
    s = LossScale(4.0)
    for _ in range(100):
        s.update(False)
    assert s.scale == 8.0 and s.clean == 0


def test_a_format_training_paused_and_resumed_computes_the_uninterrupted_numbers(tmp_path):
    from test_checkpoint import _resumes_bit_identically
    # the loss scale doubles at step 100 (after the pause at 35): its count is restored
    _resumes_bit_identically(TrainConfig(recipe="paper", steps=120, batch_size=8,
                                         step_size=20, dtype="float8_e4m3:sr"), tmp_path)


@pytest.mark.parametrize("settings, message", [
    ({"recipe": "engine", "dtype": "float8_e4m3"}, "trains in float64"),
    ({"dtype": "mp50"}, "cannot be trained in"),
    ({"dtype": "float64+mod[a]=mp30"}, "cannot be trained in"),
    ({"dtype": "e9m99"}, "dtype: unknown precision"),
    ({"dtype": 3}, "dtype must be a precision's name"),
    ({"dtype": "float8_e4m3", "device": "cuda"}, "runs on the CPU"),
    ({"dtype": "float32", "loss_scaling": "dynamic"}, "trains natively"),
    ({"dtype": "float8_e4m3", "master_dtype": "float16"}, "unknown master_dtype"),
])
def test_what_a_format_cannot_train_with_is_one_line(settings, message):
    base = {"recipe": "constant", "steps": 10, "batch_size": 4}
    with pytest.raises(TrainConfigError, match=message) as info:
        TrainConfig(**{**base, **settings})
    assert "\n" not in str(info.value)


def test_the_stored_table_holds_the_canonical_spelling_and_old_ids_stay():
    cfg = TrainConfig(recipe="constant", steps=10, batch_size=4, dtype="Float8_E4M3:rne")
    assert cfg.dtype == "float8_e4m3" and cfg.is_format
    native = TrainConfig(recipe="constant", steps=10, batch_size=4, dtype="float32")
    assert "master_dtype" not in native.table() and "loss_scaling" not in native.table()
    assert TrainConfig(recipe="constant", steps=10, batch_size=4, dtype="bfloat16",
                       master_dtype="float32").table()["master_dtype"] == "float32"


def _cfg(dtype, master=None, recipe="cosine"):
    from probes.store.records import TrainedConfig
    train = {"recipe": recipe, "steps": 10, "dtype": dtype}
    if master is not None:
        train["master_dtype"] = master
    return TrainedConfig.from_json({"family": "transformer", "depth": 1, "width": 8,
                                    "train": train})


def test_the_tables_tell_where_the_weights_were_kept():
    from reports.model_table import trained_in
    assert trained_in(_cfg("float32")) == "float32"
    assert trained_in(_cfg("bfloat16")) == "bfloat16"
    assert trained_in(_cfg("float8_e4m3")) == "float8_e4m3, float32 master"
    assert trained_in(_cfg("bfloat16", "float32")) == "bfloat16, float32 master"
    assert trained_in(_cfg("bfloat16:sr", "none")) == "bfloat16:sr, no master"
    assert trained_in(_cfg("float8_e4m3", recipe="engine")) == "float64"


def _grid(rows):
    import pandas as pd
    cols = ["task", "status", "precision", "family", "depth", "width", "train_weights",
            "train_precision", "log10_mse", "converged"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_the_training_precision_figure_draws_a_line_per_cell_and_way_of_keeping_weights(
        tmp_path):
    from reports import plots
    rows = [("read", "ok", "float64", "transformer", 1, 8, w, t, v, c)
            for w, off in (("float32 master", 0.0), ("no master", 0.5))
            for t, v, c in (("float32", -3.0, True), ("bfloat16:sr", -2.5, True),
                            ("float8_e4m3", -1.0, False))
            for v in [v + off]]
    path = plots.training_precision("read", _grid(rows), tmp_path / "t.png")
    assert path is not None and path.exists() and path.with_suffix(".svg").exists()
    one = [r for r in rows if r[7] == "float32"]   # one training precision: no figure
    assert plots.training_precision("read", _grid(one), tmp_path / "u.png") is None


@pytest.mark.parametrize("scale", [
    {"scale": 256.0, "clean": float("inf"), "skipped": 0},   # an OverflowError traceback
    {"scale": 1e-320, "clean": 0, "skipped": 0},             # trusted: another MSE stored
    {"scale": float("inf"), "clean": 0, "skipped": 0},
    {"scale": 96.0, "clean": 0, "skipped": 0},                # not a power of two
    {"scale": 256.0, "clean": 2.5, "skipped": 0},
    {"scale": 256.0, "clean": 100, "skipped": 0},             # doubles at 100: never kept
    {"scale": 256.0, "clean": 0, "skipped": -1},
    {"scale": 256.0, "clean": 0},
])
def test_a_resumed_loss_scale_outside_what_training_reaches_is_refused(tmp_path, scale):
    """A damaged checkpoint inside its schema: the loss scale state is checked against the
    range the scaler can reach (a power of two its carrier holds; whole counts), and a
    checkpoint that fails is one line naming the file, never used."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    from test_checkpoint import _PauseAfter, _train

    from probes.training.checkpoint import Checkpoint, CheckpointError, Paused

    cfg = TrainConfig(recipe="paper", steps=40, batch_size=8, step_size=20,
                      dtype="float8_e4m3:sr")
    path = tmp_path / "job.ckpt.safetensors"
    with pytest.raises(Paused):
        _train(cfg, _PauseAfter(path, "job", 20))
    with safe_open(str(path), framework="pt") as f:   # the metadata as written
        meta = f.metadata()
    state = json.loads(meta["state"])
    assert set(state["loss_scale"]) == {"scale", "clean", "skipped"}
    state["loss_scale"] = scale
    meta["state"] = json.dumps(state)
    save_file(load_file(str(path)), str(path), metadata=meta)
    with pytest.raises(CheckpointError) as info:
        _train(cfg, Checkpoint(path, "job"))
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert "loss scale" in str(info.value)
