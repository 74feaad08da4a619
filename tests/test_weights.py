"""Trained weights: saved as safetensors, reloaded to the same numbers, never unpickled."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from precision.cli.main import main
from precision.precisions import as_precision
from probes.store.db import Store
from probes.training.job import Job
from probes.training.measure import TEST_SEED_OFFSET, measure_precision
from probes.training.weights import WeightsError, load_trained_model, load_weights, save_weights

SUITE = """
name = "w"
precisions = ["float32", "float64"]
seeds = [0]
[tasks.mul]
task = "multiply"
dim = 4
n = 4
[models.bc]
family = "baseconv"
tasks = ["mul"]
depth = 1
width = [4, 8]
layernorm = false
train = { recipe = "paper", steps = 30, batch_size = 8 }
test_size = 4
"""


def test_saved_weights_reproduce_the_stored_numbers(tmp_path: Path) -> None:
    suite = tmp_path / "w.toml"
    suite.write_text(SUITE)
    db, folder = tmp_path / "r.db", tmp_path / "weights"
    assert main(["run", str(suite), "--db", str(db), "--save-weights", str(folder),
                 "--no-progress", "--no-report"]) == 0
    files = sorted(folder.glob("*.safetensors"))
    assert len(files) == 2 and not list(folder.glob("*.tmp*"))
    with Store(db, create=False) as store:
        stored = {(r["config"]["width"], r["precision"]): r["mse"] for r in store.runs()}
    for path in files:
        model, job = load_trained_model(path)
        for p in model.parameters():            # float32 training: float32 values
            assert torch.equal(p, p.float().double())
        task, _ = Job.from_config(job).build()
        gen = torch.Generator().manual_seed(job["seed"] + TEST_SEED_OFFSET)
        x_test, _ = task.sample(job["test_size"], gen)
        out = measure_precision(model.double(), task, x_test, as_precision("float64"), {})
        assert out.total == stored[(job["width"], "float64")]


class _Payload:
    """Unpickling this would create a file: the proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (Path.touch, (Path(self.marker),))


def test_a_pickle_is_refused_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(pickle.dumps(_Payload(str(marker))))
    torch_file = tmp_path / "model.pt"
    torch.save({"w": _Payload(str(marker))}, torch_file)
    for path in (bad, torch_file):
        with pytest.raises(WeightsError, match="not a safetensors weights file"):
            load_weights(path)
    assert not marker.exists()


def test_foreign_or_mismatched_files(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(plain))
    with pytest.raises(WeightsError, match="no job config"):
        load_weights(plain)
    with pytest.raises(WeightsError, match="no weights file"):
        load_weights(tmp_path / "missing.safetensors")
    job = {"family": "baseconv", "task": "multiply", "task_options": {"dim": 4, "n": 4},
           "model_options": {"layernorm": False}, "depth": 1, "width": 4, "seed": 0,
           "train": {"recipe": "paper", "steps": 5, "batch_size": 4}}
    _, model = Job.from_config(job).build()
    path = save_weights(model, tmp_path / "m.safetensors", {**job, "width": 8})
    with pytest.raises(WeightsError, match="does not fit the model"):
        load_trained_model(path)


def test_a_factory_model_loads_with_the_factory_the_caller_names(tmp_path: Path) -> None:
    factory = tmp_path / "my_models.py"
    factory.write_text(
        "import torch\n"
        "def make(d_in, d_out, depth, width, max_len=0):\n"
        "    return torch.nn.Sequential(torch.nn.Linear(d_in, width), torch.nn.Tanh(),\n"
        "                               torch.nn.Linear(width, d_out))\n")
    spec = f"{factory}:make"
    job = {"family": spec, "task": "multiply", "task_options": {"dim": 4, "n": 4},
           "model_options": {}, "depth": 1, "width": 6, "seed": 0,
           "train": {"recipe": "paper", "steps": 5, "batch_size": 4}}
    _, model = Job.from_config(job).build()
    path = save_weights(model, tmp_path / "mine.safetensors", job)
    with pytest.raises(WeightsError, match="which loading never imports"):
        load_trained_model(path)
    loaded, stored = load_trained_model(path, factory=spec)       # named by the caller
    assert stored["family"] == spec
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value)
    wrong = {**job, "width": 7}
    path = save_weights(model, tmp_path / "wrong.safetensors", wrong)
    with pytest.raises(WeightsError, match=r"does not fit the model of its job config: "
                                           r"0.bias is \(6,\), the model's \(7,\)"):
        load_trained_model(path, factory=spec)
