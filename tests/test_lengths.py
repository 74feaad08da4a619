"""Error against sequence length (issue #28, Build 5) and a reference whose certain digits are
measured (Build 6): the Python API, the length kind's records, the CLI's refusals."""

from __future__ import annotations

from pathlib import Path

import flint
import numpy as np
import pytest
import torch

from precision.backends.mp_backend import workprec
from precision.cli.main import main
from precision.evaluate import error_decomposition
from precision.lengths import LengthError, check_lengths, evaluate_lengths, sweep_inputs
from precision.models import build_model
from precision.reference import certain_digits
from probes.kinds.length import model_for_length
from probes.run import SuiteError
from probes.store.db import Store
from probes.store.records import LengthConfig, LengthResult, config_of, result_of
from probes.suite import load_suite
from probes.training.job import Job
from probes.training.train_config import TrainConfig
from reports.build import build_report

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "zoo" / "llama.py") + ":llama"

SUITE = """
name = "tiny"
precisions = ["bfloat16", "float64"]
seeds = [0]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
[models.tf]
family = "transformer"
tasks = ["mul"]
depth = 1
width = [4]
train = { recipe = "paper", steps = 3, batch_size = 2 }
test_size = 2
"""


def _tiny_transformer(max_len: int = 0) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("transformer", 3, 2, 1, 4, max_len=max_len)


def test_sweep_inputs_are_exact_in_every_precision():
    x = sweep_inputs(2, 50, 3, seed=1)
    assert x.shape == (2, 50, 3) and x.abs().max() <= 4
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert torch.equal(x.to(dtype).to(torch.float64), x)


def test_error_grows_with_fewer_bits_and_the_reference_is_certain():
    sweep = evaluate_lengths(_tiny_transformer(), [4, 16], ["bfloat16", "float32", "float64",
                                                            "mp100"], d_in=3)
    assert sweep.lengths == [4, 16] and not sweep.skipped
    rel = {(pt.length, pt.precision.name): pt.relative for pt in sweep.points}
    for n in (4, 16):
        assert 1e-5 < rel[(n, "bfloat16")] < 0.1
        assert rel[(n, "float32")] < 1e-4
        assert rel[(n, "float64")] < 1e-12
        assert rel[(n, "float64")] < rel[(n, "float32")] < rel[(n, "bfloat16")]
        assert rel[(n, "mp100")] == 0.0      # the reference against itself
        assert sweep.truth_digits[n] >= 90


def test_a_fixed_max_length_gets_a_note_for_the_longer_lengths():
    sweep = evaluate_lengths(_tiny_transformer(max_len=8), [4, 8, 9], ["float64"], d_in=3)
    assert sweep.lengths == [4, 8]
    assert list(sweep.skipped) == [9] and "not accepted" in sweep.skipped[9]
    assert "\n" not in sweep.skipped[9]


@pytest.mark.parametrize("bad", [[], [0], [4, 4], [2.5], "16", [True], 16])
def test_bad_lengths_are_one_line(bad):
    with pytest.raises(LengthError):
        check_lengths(bad)


def test_certain_digits_measure_the_agreement_and_are_capped():
    ref = np.array([flint.arb(1), flint.arb(2)], dtype=object)
    with workprec(400):
        check = np.array([(flint.arb(1) + flint.arb(10) ** -30).mid(), flint.arb(2)],
                         dtype=object)
    assert 29 < certain_digits(ref, check, 100) < 32
    assert certain_digits(ref, ref, 100) == 100


def test_error_decomposition_reports_the_reference_digits():
    model, x = _tiny_transformer(), sweep_inputs(2, 5, 3, seed=0)
    parts = error_decomposition(model, x, np.zeros((2, 5, 2)), "float32")
    assert parts["reference"].digits >= 90
    assert "reference" not in error_decomposition(model, x, np.zeros((2, 5, 2)), "float32",
                                                  check_reference=False)


def test_a_rope_model_is_rebuilt_longer_with_its_weights():
    job = Job(family=LLAMA, task="multiply", depth=1, width=4,
              train=TrainConfig(recipe="paper", steps=1, batch_size=2),
              task_options={"dim": 4, "n": 6})
    task, model = job.build()
    longer = model_for_length(job, task, model.double(), 32)
    assert longer is not model
    x = sweep_inputs(1, 32, task.d_in, seed=0)
    with torch.no_grad():
        longer(x)                                        # accepts 32 tokens
        assert torch.equal(longer(x[:, :task.n_tokens]), model(x[:, :task.n_tokens]))
    transformer = build_model("transformer", 3, 1, 1, 4, max_len=task.n_tokens).double()
    builtin = Job(family="transformer", task="multiply", depth=1, width=4,
                  train=job.train, task_options={"dim": 4, "n": 6})
    assert model_for_length(builtin, task, transformer, 32) is transformer  # learned positions


def test_run_with_lengths_stores_length_records_and_reuses_them(tmp_path, capsys):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    argv = ["run", str(suite), "--db", str(db), "--no-progress", "--no-report",
            "--lengths", "4,9"]
    assert main(argv) == 0
    with Store(db) as store:
        rows = [r for r in store.runs() if r["kind"] == "length"]
        trained = [r for r in store.runs() if r["kind"] == "trained"]
    assert len(rows) == 4 and len(trained) == 2
    assert all(result_of(r).truth_digits >= 90 for r in trained)
    for r in rows:
        cfg, res = config_of(r), result_of(r)
        assert isinstance(cfg, LengthConfig) and isinstance(res, LengthResult)
        if cfg.length == 4:
            assert r["status"] == "ok" and res.truth_digits >= 90
            assert res.relative < (1e-12 if r["precision"] == "float64" else 0.1)
        else:   # the transformer's learned positions cover the task's 6 tokens
            assert r["status"] == "failed" and "not accepted" in r["error"]
    out = capsys.readouterr().out
    assert "log10 relative error against mp100 by sequence length" in " ".join(out.split())
    assert "ref digits" in out                   # the trained table shows the check
    assert main(argv) == 0
    assert "0 to compute" in capsys.readouterr().err
    with Store(db, read_only=True) as store:
        report = build_report(store, None, tmp_path / "report")
    md = report.markdown.read_text()
    assert "## Error against sequence length" in md and "not accepted" in md
    assert (report.folder / "figures" / "lengths.png").is_file()
    assert "length" in (report.folder / "data" / "length-runs.csv").read_text()


def test_bad_lengths_in_a_suite_are_one_line(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE + "lengths = [4, 0]\n")
    with pytest.raises(SuiteError, match=r"\[models.tf\]: a length must be an integer"):
        load_suite(str(suite))


@pytest.mark.parametrize("lengths,message", [("abc", "comma-separated positive integers"),
                                             ("4,0", "a length must be an integer"),
                                             ("4,4", "given twice")])
def test_bad_lengths_on_the_command_line_store_nothing(tmp_path, capsys, lengths, message):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report",
                 "--lengths", lengths]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not db.exists()
