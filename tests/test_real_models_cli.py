"""``hf:ClassName`` models through the command line: ``ops`` names their casts, ``evaluate``
measures one sample, ``probe`` trains and evaluates a Bloom (ALiBi: ``pow`` with an integer
exponent tensor) in every precision, and a model the interpreter cannot evaluate is refused
before training with the op, node and module named."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers  # noqa: F401 - the [hf] extra must be installed (no skip)
from torch import nn

from precision.cli.main import main
from probes.store.db import Store

HERE = Path(__file__).resolve()
SHAPE = ["--d-in", "3", "--d-out", "2", "--depth", "1", "--width", "16", "--tokens", "5"]

SUITE = """
name = "hf"
precisions = ["float32", "float64", "mp50"]
seeds = [0]
[tasks.multiply]
task = "multiply"
dim = 2
n = 4
[models.x]
family = "baseconv"
tasks = ["multiply"]
depth = 1
width = 8
train = { recipe = "paper", steps = 10, batch_size = 8, lr = 1e-2 }
test_size = 2
"""


class TrainingDropout(nn.Module):
    """Dropout that samples even in evaluation: PyTorch runs it, mpN cannot (no sampling)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(self.lin(x), 0.5, training=True)


def training_dropout(d_in, d_out, depth, width):
    return TrainingDropout(d_in, d_out)


def test_ops_names_the_float32_casts_of_a_llama_and_their_modules(capsys):
    assert main(["ops", "hf:LlamaModel", *SHAPE]) == 0
    out = capsys.readouterr().out
    casts = out[out.index("float casts"):]
    assert "float64 -> float32" in casts and "float32 -> float64" in casts
    assert "LlamaRMSNorm" in casts and "LlamaRotaryEmbedding" in casts
    assert "rounds below float64 (under casts=keep)" in casts


def test_ops_of_an_unknown_class_is_one_line(capsys):
    assert main(["ops", "hf:NoSuchModel", *SHAPE]) == 2
    err = capsys.readouterr().err.strip()
    assert "no model or config class 'NoSuchModel'" in err and "\n" not in err


def test_evaluate_lists_where_a_llama_rounds(capsys):
    assert main(["evaluate", "hf:LlamaModel", *SHAPE, "--precisions",
                 "float64,float64+casts=promote", "--reference", "mp40"]) == 0
    out = capsys.readouterr().out
    assert "float64: casts round below it" in out and "LlamaRMSNorm" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("float64")}
    assert float(rows["float64"][1]) >= 1e-9                 # kept: the float32 islands
    assert float(rows["float64+casts=promote"][1]) < 1e-12   # promoted: rounding only


def test_probe_of_a_bloom_trains_and_evaluates_in_every_precision(tmp_path, capsys):
    suite = tmp_path / "hf.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    assert main(["probe", "hf:BloomModel", "--suite", str(suite), "--db", str(db),
                 "--no-progress", "--no-report"]) == 0
    assert "casts (one sample, before training)" in capsys.readouterr().out
    with Store(db, create=False) as store:
        rows = store.runs(suite="hf")
    assert {r["precision"] for r in rows} == {"float32", "float64", "mp50"}
    assert all(r["status"] == "ok" for r in rows)


def test_probe_of_a_model_no_precision_can_evaluate_fails_before_training(tmp_path, capsys):
    suite = tmp_path / "hf.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    rc = main(["probe", f"{HERE}:training_dropout", "--suite", str(suite), "--db", str(db),
               "--no-progress", "--no-report", "--precisions", "mp30"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "cannot be evaluated in mp30" in err and "before training" in err
    assert "aten.native_dropout" in err and "(TrainingDropout)" in err and "node " in err
    assert not db.exists() or not Store(db, create=False).runs(suite="hf")


def test_evaluate_a_mamba_in_bfloat16_and_float16(capsys):
    """Mamba keeps its residual stream in float32 (residual_in_fp32): the wrapper's output
    projection takes the hidden state in its own dtype, so a bfloat16 or float16 copy
    evaluates (it failed with 'mat1 and mat2 must have the same dtype')."""
    assert main(["evaluate", "hf:MambaModel", *SHAPE, "--precisions", "bfloat16,float16"]) == 0
    rows = {line.split()[0]: float(line.split()[1]) for line in
            capsys.readouterr().out.splitlines() if line.startswith(("bfloat16", "float16"))}
    assert set(rows) == {"bfloat16", "float16"} and 0 < rows["float16"] < rows["bfloat16"] < 1


class CastsThenMultiplies(nn.Module):
    """Half-precision activations widened to float32 for the next layer (as Mamba keeps its
    residual stream): in bfloat16 that layer's own weights cannot multiply them (PyTorch
    names neither the module nor the op)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(d_in, 8), nn.Linear(8, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(h.float() if h.element_size() < 4 else h)


def islanded(d_in: int, d_out: int, depth: int, width: int) -> nn.Module:
    return CastsThenMultiplies(d_in, d_out)


def test_a_precision_that_cannot_evaluate_names_the_module_and_op(capsys):
    """The failing module and ATen op in one line, exit 2 (as probe's check before
    training), after the rows of the precisions that did evaluate."""
    assert main(["evaluate", f"{HERE}:islanded", *SHAPE, "--precisions",
                 "float32,bfloat16"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "cannot be evaluated in bfloat16" in err
    assert "in module 'b' at addmm" in err and "same dtype" in err
    assert any(line.startswith("float32") for line in captured.out.splitlines())
