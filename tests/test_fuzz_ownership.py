"""A property-based fuzzer of what a command owns and what a result is a function of
(Hypothesis; derandomized and bounded, as :mod:`test_fuzz_entry_points`).

Properties:

* **symlinked output folders**: a report folder whose ``figures/``, ``tables/`` or ``data/``
  is a symlink to the user's folder, with a manifest listing any names (the user's files,
  ``..``, absolute paths): the report is written or refused in one line, and nothing
  outside the report's own sub-folders is removed or changed;
* **mutated modules between calls**: any sequence of changes to a module between mpN
  evaluations (a sub-module replaced, a weight edited in place, an instance ``forward``, a
  hook, an attribute) gives the changed module's output, and every earlier output's
  ``.digits`` still certifies the values it holds;
* **permuted layouts**: the same input values in any strided view give the same bits in
  every float and simulated precision;
* **damaged states inside their schema**: a format training's checkpoint whose loss scale
  state is any JSON value resumes only when the state is one the scaler can reach, else one
  :class:`CheckpointError` naming the file.

``PRECISION_FUZZ_EXAMPLES`` scales the examples per property.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch import nn

from precision.evaluate import evaluate

SCALE = float(os.environ.get("PRECISION_FUZZ_EXAMPLES", 1))


def fuzz(n: int) -> settings:
    return settings(max_examples=max(1, int(n * SCALE)), derandomize=True, deadline=None,
                    database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])


# --- symlinked output folders ---------------------------------------------------------------

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from conftest import solver_store

    return solver_store(tmp_path_factory.mktemp("own"), "gd")


USER_FILES = ["precious.csv", "holiday.png", "solver-runs.csv", "paper-fig1.svg"]
manifest_lines = st.lists(st.one_of(
    st.sampled_from([f"{sub}/{name}" for sub in ("data", "figures", "tables")
                     for name in USER_FILES]),
    st.sampled_from(["data/../../theirs/precious.csv", "../theirs/holiday.png",
                     "/theirs/budget.csv", "figures/./holiday.png", "data", "."]),
    st.text(max_size=30).filter(lambda t: "\n" not in t and "\r" not in t)), max_size=6)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@fuzz(5)
@given(linked=st.sets(st.sampled_from(["data", "figures", "tables"])),
       lines=manifest_lines, built=st.booleans())
def test_a_report_never_reaches_outside_its_own_folders(linked, lines, built, store, tmp_path,
                                                        capsys):
    from precision.cli.main import main

    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    out, theirs = work / "rep", work / "theirs"
    theirs.mkdir(parents=True)
    for name in USER_FILES + ["budget.csv"]:
        (theirs / name).write_text("the user's")
    if built:
        assert main(["report", "--db", str(store), "--out", str(out)]) == 0
    out.mkdir(parents=True, exist_ok=True)
    (out / ".report-files").write_text("".join(line.replace("/theirs", str(theirs)) + "\n"
                                               for line in lines))
    for sub in linked:
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).symlink_to(theirs, target_is_directory=True)
    before = _snapshot(theirs)
    capsys.readouterr()
    rc = main(["report", "--db", str(store), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert _snapshot(theirs) == before
    if linked:
        assert rc == 2 and "symlink" in err and "\n" not in err and "Traceback" not in err
    else:
        assert rc == 0, err


# --- mutated modules between calls ----------------------------------------------------------

def _mutate(model: nn.Sequential, how: int, k: int) -> None:
    """One change a user makes to a model between two calls."""
    with torch.no_grad():
        if how == 0:
            model[1] = [nn.Tanh(), nn.ReLU(), nn.Sigmoid(), nn.GELU()][k % 4]
        elif how == 1:
            model[0].weight.add_(0.25 * (k % 3 + 1))
        elif how == 2:
            model[2].bias.mul_(-1.0 - k % 2)
        elif how == 3:
            factor = float(k % 3 + 2)
            model.forward = lambda x, f=factor: nn.Sequential.forward(model, x) * f
        elif how == 4:
            if "forward" in model.__dict__:
                del model.forward
        elif how == 5:
            model[2].register_forward_hook(lambda _m, _i, o, s=k % 5: o + s)
        elif how == 6:
            model[3].eps = 10.0 ** -(k % 4 + 1)


@fuzz(12)
@given(changes=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 100)), min_size=1,
                        max_size=4), seed=st.integers(0, 2**16))
def test_an_mp_output_belongs_to_the_module_as_it_was_called(changes, seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.LayerNorm(4))
    model = model.double()
    x = torch.randn(2, 3, dtype=torch.float64)
    outputs = []
    for how, k in [(None, 0), *changes]:
        if how is not None:
            _mutate(model, how, k)
        out = evaluate(model, x, "mp30")
        with torch.no_grad():
            want = model(x)
        assert (out.to_float() - want).abs().max() <= 1e-12 * (1 + want.abs().max())
        outputs.append(out)
    for out in outputs:   # read after every later change
        try:
            assert out.digits >= 25
        except ValueError as exc:   # a copy cannot recompute it: said, never a wrong count
            assert "read .digits before changing the model" in str(exc)
            assert any(how == 3 for how, _ in changes)   # a forward closing over the model


# --- permuted layouts -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def transformer() -> nn.Module:
    from precision.models import build_model

    torch.manual_seed(4)
    return build_model("transformer", 3, 3, 1, 8)


@fuzz(12)
@given(perm=st.permutations([0, 1, 2]), step=st.integers(1, 3), flip=st.booleans(),
       spelling=st.sampled_from(["float16", "bfloat16", "float32", "float8_e4m3",
                                 "mxfp8_e4m3", "float8_e5m2", "float64+mod[blocks*]=float16"]),
       seed=st.integers(0, 2**16))
def test_any_input_layout_gives_the_same_bits(perm, step, flip, spelling, seed, transformer):
    g = torch.Generator().manual_seed(seed)
    shape = [2, 5, 3]   # (batch, tokens, d_in)
    base = torch.randn([shape[i] * (step if i == 2 else 1) for i in perm], generator=g,
                       dtype=torch.float64)
    inverse = [perm.index(i) for i in range(3)]
    x = base.permute(*inverse)[..., ::step]   # a strided view of shape (2, 5, 3)
    if flip:
        x = x.flip(0)
    assert tuple(x.shape) == tuple(shape)
    a = evaluate(transformer, x, spelling)
    b = evaluate(transformer, x.contiguous(), spelling)
    assert torch.equal(a, b)


# --- damaged states inside their schema -----------------------------------------------------

@pytest.fixture(scope="module")
def paused_format(tmp_path_factory):
    """A float8 training paused in its Adam phase: its file's tensors and metadata."""
    from safetensors import safe_open
    from safetensors.torch import load_file
    from test_checkpoint import _PauseAfter, _train

    from probes.training.checkpoint import Paused
    from probes.training.recipes import TrainConfig

    cfg = TrainConfig(recipe="paper", steps=30, batch_size=8, step_size=10,
                      dtype="float8_e4m3:sr")
    path = tmp_path_factory.mktemp("pf") / "job.ckpt.safetensors"
    with pytest.raises(Paused):
        _train(cfg, _PauseAfter(path, "job", 10))
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    return cfg, load_file(str(path)), meta


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70),
                    st.sampled_from([2.0 ** k for k in (-200, -150, -149, -10, 0, 8, 127, 128)]),
                    st.booleans(), st.none(), st.text(max_size=4))


@fuzz(30)
@given(scale=numbers, clean=numbers, skipped=numbers, drop=st.booleans())
@example(scale=256.0, clean=0, skipped=0, drop=False)            # as saved: resumes
@example(scale=2.0 ** -20, clean=99, skipped=7, drop=False)      # reachable: resumes
@example(scale=1e-320, clean=0, skipped=0, drop=False)           # was trusted
@example(scale=256.0, clean=float("inf"), skipped=0, drop=False)   # was a traceback
def test_a_loss_scale_state_resumes_only_when_reachable(scale, clean, skipped, drop,
                                                        paused_format, tmp_path):
    from safetensors.torch import save_file
    from test_checkpoint import _train

    from probes.training.checkpoint import Checkpoint, CheckpointError

    cfg, tensors, meta = paused_format
    state = json.loads(meta["state"])
    state["loss_scale"] = {"scale": scale, "clean": clean, "skipped": skipped}
    if drop:
        del state["loss_scale"]["skipped"]
    path = tmp_path / "job.ckpt.safetensors"
    path.unlink(missing_ok=True)
    try:
        text = json.dumps(state, allow_nan=True)
    except ValueError:
        return
    save_file(tensors, str(path), metadata={**meta, "state": text})

    def whole(v, top):
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < top

    reachable = (not drop and isinstance(scale, int | float) and not isinstance(scale, bool)
                 and math.isfinite(scale) and 2.0 ** -149 <= scale <= 3.4028234663852886e38
                 and math.frexp(scale)[0] == 0.5 and whole(clean, 100) and whole(skipped, 2**53))
    try:
        result, _ = _train(cfg, Checkpoint(path, "job"))
    except CheckpointError as exc:
        assert not reachable, exc
        assert str(path) in str(exc) and "\n" not in str(exc)
    else:
        assert reachable and result.steps == cfg.steps
