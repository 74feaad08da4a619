"""A user's architecture, defined only in this file, through `precision probe` and the API."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from torch import nn

from precision.cli.main import main
from probes.api import FloorAssertionError, assert_floor_below, probe
from probes.store.db import Store

HERE = Path(__file__).resolve()


class GatedMixer(nn.Module):
    """Not registered anywhere: a per-token gated bilinear mixer with a causal token mix."""

    def __init__(self, d_in: int, d_out: int, width: int, max_len: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(d_in, width), nn.Linear(d_in, width)
        self.mix = nn.Parameter(torch.eye(max_len))
        self.out = nn.Linear(width, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        mixed = torch.tril(self.mix[:n, :n]) @ self.b(x)
        return self.out(self.a(x) * mixed)


def gated_mixer(d_in, d_out, depth, width, max_len=64):
    return GatedMixer(d_in, d_out, width, max_len)


def broken_factory(d_in, d_out, depth, width):
    raise RuntimeError("this factory is broken")


def wrong_shape_factory(d_in, d_out, depth, width):
    return nn.Linear(d_in, d_out + 1)


SUITE = """
name = "mine"
precisions = ["float32", "float64", "mp50"]
seeds = [0]
[tasks.multiply]
task = "multiply"
dim = 4
n = 6
[models.baseconv]
family = "baseconv"
tasks = ["multiply"]
depth = 1
width = 8
layernorm = false
train = { recipe = "paper", steps = 150, batch_size = 16, lr = 1e-2 }
test_size = 4
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe")
    suite = folder / "mine.toml"
    suite.write_text(SUITE)
    db = folder / "results.db"
    rc = main(["probe", f"{HERE}:gated_mixer", "--suite", str(suite), "--db", str(db),
               "--no-progress", "--report-dir", str(folder / "report")])
    assert rc == 0
    return folder, suite, db


def test_probe_stores_the_module_with_every_precision(probed):
    folder, _, db = probed
    with Store(db, create=False) as store:
        rows = store.runs(suite="mine")
    assert {r["subject"] for r in rows} == {"gated_mixer"}
    by_prec = {r["precision"]: r for r in rows}
    assert set(by_prec) == {"float32", "float64", "mp50"}
    assert all(r["status"] == "ok" and r["mse"] is not None for r in rows)
    # the same trained weights: float64 and mp50 agree far below the training error
    assert abs(by_prec["float64"]["mse"] - by_prec["mp50"]["mse"]) < 1e-10 * by_prec["mp50"]["mse"]
    dec = by_prec["float32"]["result"]["decomposition"]
    assert dec["rounding"] < -9              # float32 rounding of a small module
    report = (folder / "report" / "mine" / "report.md").read_text()
    assert "gated_mixer" in report


def test_probe_rerun_computes_nothing(probed, capsys):
    folder, suite, db = probed
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    rc = main(["probe", f"{HERE}:gated_mixer", "--suite", str(suite), "--db", str(db),
               "--no-progress", "--no-report"])
    assert rc == 0
    assert "0 to compute" in capsys.readouterr().err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("factory,message", [
    ("broken_factory", "raised RuntimeError: this factory is broken"),
    ("wrong_shape_factory", "expected (2, 6, 2)"),
    ("no_such_factory", "has no callable 'no_such_factory'"),
])
def test_bad_factory_one_line_exit_2_store_untouched(probed, factory, message, capsys):
    _, suite, db = probed
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    rc = main(["probe", f"{HERE}:{factory}", "--suite", str(suite), "--db", str(db),
               "--no-progress", "--no-report"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and "\n" not in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_api_probe_and_assertion_with_expected_measured_where():
    out = probe(gated_mixer, "multiply", width=8, task_options={"dim": 4, "n": 6},
                train={"steps": 150, "batch_size": 16, "lr": 1e-2}, test_size=4,
                precisions=("float64",))
    mse = out["float64"].total
    assert out["float64"].status == "ok" and 0 < mse < 1.0
    # the outcome carries the label and its evidence, as the tables print them
    o = out["float64"]
    assert o.label in ("T", "A", "R") and o.check is not None and o.check.power > 0
    assert (o.label == "T") == (o.converged is False and o.log10_rounding <= o.log10_approximation)
    with pytest.raises(FloorAssertionError) as info:
        assert_floor_below(gated_mixer, "multiply", mse / 1e6, width=8,
                           task_options={"dim": 4, "n": 6},
                           train={"steps": 150, "batch_size": 16, "lr": 1e-2}, test_size=4)
    text = str(info.value)
    assert "expected test MSE <=" in text and "measured" in text and "where: gated_mixer" in text
    assert f"label {o.label}:" in text   # says whether the run was training-limited
    # pytest shows the user's frame, not the library's
    assert "__tracebackhide__" in assert_floor_below.__code__.co_varnames
    assert assert_floor_below(gated_mixer, "multiply", mse * 1.01, width=8,
                              task_options={"dim": 4, "n": 6},
                              train={"steps": 150, "batch_size": 16, "lr": 1e-2},
                              test_size=4).total == pytest.approx(mse, rel=1e-12)


class BesselMixer(nn.Module):
    """Uses a Bessel function, which the arbitrary-precision interpreter does not implement."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.special.bessel_j0(x))


def test_op_without_mp_implementation_is_a_failed_status_not_a_crash():
    out = probe(lambda d_in, d_out, depth, width: BesselMixer(d_in, d_out), "multiply",
                task_options={"dim": 4, "n": 6}, train={"steps": 20, "batch_size": 4},
                test_size=2, precisions=("float64", "mp50"))
    assert out["float64"].status == "ok" and out["float64"].total > 0
    assert out["float64"].log10_rounding is None      # no mp100 reference to split against
    assert out["mp50"].status == "failed"
    assert "bessel_j0" in out["mp50"].error and "\n" not in out["mp50"].error


class TrainingDropout(nn.Module):
    """Samples even in evaluation: PyTorch runs it, mpN cannot."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(self.lin(x), 0.5, training=True)


def test_a_module_no_precision_can_evaluate_is_refused_before_training():
    out = probe(lambda d_in, d_out, depth, width: TrainingDropout(d_in, d_out), "multiply",
                task_options={"dim": 2, "n": 4}, train={"steps": 10**7, "batch_size": 4},
                precisions=("mp30",), time_limit=60)   # training would run past the limit
    assert out["mp30"].status == "failed"
    assert "before training" in out["mp30"].error and "aten.native_dropout" in out["mp30"].error


def test_probe_takes_the_grid_it_is_given(tmp_path, capsys):
    """``probe`` had no --depths / --widths: a quick probe of a user's model ran every cell
    of the suite's grid (width 64 included: 27 minutes for one cell). The grid given replaces
    the suite's; bad values are one line before anything is computed."""
    from probes.suite import load_suite, suite_for_factory

    base = load_suite("primitives", profile="quick", expand=False)
    suite = suite_for_factory(base, f"{HERE}:gated_mixer", tasks=["multiply"],
                              depths=[1, 2], widths=[32, 64])
    assert sorted({(r.spec.depth, r.spec.width) for r in suite.runs}) == [
        (1, 32), (1, 64), (2, 32), (2, 64)]
    full = suite_for_factory(base, f"{HERE}:gated_mixer", tasks=["multiply"])
    assert {(r.spec.depth, r.spec.width) for r in full.runs} == {(1, 32), (2, 32), (3, 32)}
    for flag, value, message in (("--depths", "0", "in [1, 1000000]"),
                                 ("--widths", "3x", "--widths"), ("--depths", "", "empty")):
        rc = main(["probe", f"{HERE}:gated_mixer", "--suite", "primitives", "--profile",
                   "quick", flag, value, "--db", str(tmp_path / "x.db"), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and message in err and "\n" not in err, err
        assert not (tmp_path / "x.db").exists()
