"""``localize``: units that partition a model's ops, (a) / (b) attribution, the search's set
meets the target and none of it can be dropped, bad input is one line; the command stores
records of kind ``localize`` and the report shows their table and figure."""

import math

import pytest
import torch
from conftest import tiny_affine_suite
from torch import nn

from precision.cli.main import main
from precision.evaluate import evaluate_assigned, evaluate_exact
from precision.formats.module_assignment import carrier_for
from precision.localize import (
    TRUTH,
    LocalizeError,
    _owned_ops,
    assignment,
    block_of,
    localize,
    unit_labels,
    units_of,
)
from precision.metrics import error_summary
from precision.precisions import Precision
from probes.store.db import Store
from probes.store.records import LocalizeResult
from reports.build import build_report

BF16, F64 = Precision("bfloat16"), Precision("float64")


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mix = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(),
                                 nn.Linear(2 * width, width), nn.Identity())

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.mix(self.norm(h))   # the residual additions: the block's own ops
        return h + self.mlp(h)


class Small(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(2))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = block(h)
        return h * 0.5                    # an op of the model itself


def _setup() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(1, 6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    return Small().double().eval(), x


def test_units_partition_the_ops_and_weights_and_merge_by_depth():
    model, x = _setup()
    total_ops = sum(sum(ops.values()) for ops in _owned_ops(model, x).values())
    total_weights = sum(p.numel() for p in model.parameters())
    for depth in (None, 1, 2, 3):
        units = units_of(model, x, depth)
        assert sum(u.ops for u in units) == total_ops
        assert sum(u.weights for u in units) == total_weights
        assert units[0].path == "" and units[0].ops >= 1   # the model's own multiply
    paths = {u.path for u in units_of(model, x)}
    assert {"blocks.0", "blocks.0.norm", "blocks.0.mlp.0", "blocks.0.mlp.1"} <= paths
    assert "blocks.0.mlp.3" not in paths and "blocks" not in paths  # Identity, ModuleList
    assert {u.path for u in units_of(model, x, 2)} == {"", "blocks.0", "blocks.1"}
    assert block_of("model.layers.3.mlp") == "model.layers.3" and block_of("out") == ""
    assert block_of("blocks.1::add") == "blocks.1"


def test_units_by_op_split_a_blocks_own_ops_and_still_partition_the_model():
    """``localize`` could not look inside a module's own forward: a block's residual additions
    (or a custom forward's exp and mask) were one unit, ``blocks.0 (own ops)``. With
    ``ops=True`` each op is a unit ``PATH::OP``, in both paths, and the units still
    partition the model: all of them in bfloat16 is the model in bfloat16."""
    model, x = _setup()
    units = units_of(model, x, ops=True)
    paths = [u.path for u in units]
    assert {"blocks.0::add", "blocks.1::add", "::mul"} <= set(paths)
    assert "blocks.0" not in paths                      # no weights of its own, no ops left
    assert "blocks.0.mix" in paths and "blocks.0.mix::addmm" not in paths   # leaves stay whole
    assert sum(u.ops for u in units) == sum(u.ops for u in units_of(model, x))
    labels = unit_labels(paths)
    assert labels["::mul"] == "(root)::mul" and labels["blocks.0::add"] == "blocks.0::add"
    for reference in (F64, Precision("mp30", 30)):
        loc = localize(model, x, BF16, reference, ops=True)
        whole = localize(model, x, BF16, reference)
        assert loc.all_low == whole.all_low and loc.all_reference == whole.all_reference
        assert loc.alone_low["blocks.0::add"] > 0.0
    with pytest.raises(LocalizeError, match="give one of them"):
        units_of(model, x, 2, ops=True)


def test_attribution_and_search_meet_the_target_with_no_unit_to_spare():
    model, x = _setup()
    loc = localize(model, x, BF16, F64, target=2e-3, depth=3)
    truth = evaluate_exact(model, x, TRUTH)
    # every unit in the reference is the plain float64 model, bit for bit
    plain = error_summary(evaluate_exact(model, x, F64), truth).relative
    assert loc.all_reference == plain
    assert loc.all_low > 100 * loc.all_reference
    for u in loc.units:   # each unit rounds something: alone in bfloat16 it is seen
        assert loc.alone_low[u.path] > 1e3 * loc.all_reference
        assert math.isfinite(loc.alone_reference[u.path])
    # the set found meets the target, and dropping any one unit of it does not
    carrier = carrier_for([BF16, F64])
    def error(kept: set[str]) -> float:
        p = assignment(loc.units, {u.path for u in loc.units} - kept, BF16, F64)
        return error_summary(evaluate_assigned(model, x, p, carrier=carrier), truth).relative

    assert loc.kept is not None and loc.kept_error is not None
    assert error(set(loc.kept)) == loc.kept_error <= 2e-3
    for path in loc.kept:
        assert error(set(loc.kept) - {path}) > 2e-3
    lines = loc.lines()
    assert lines[1].split()[0] == loc.ranked()[0].name and "target" in lines[-1]


def test_bad_input_is_one_line():
    model, x = _setup()
    with pytest.raises(LocalizeError, match="never met") as info:
        localize(model, x, BF16, Precision("float32"), target=1e-12)
    assert "\n" not in str(info.value)
    with pytest.raises(LocalizeError, match=r"module glob \[\*\.attn\] matches no module"):
        localize(model, x, BF16, F64, modules=["*.attn"])


def test_the_command_stores_records_the_report_shows(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["localize", "transformer", "--precision", "bf16", "--depth", "1", "--width",
                 "8", "--tokens", "4", "--d-in", "3", "--d-out", "2", "--unit-depth", "2",
                 "--target", "1e-2", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0 and "(a) alone bfloat16" in out and "keep" in out
    with Store(db, create=False) as store:
        rows = store.runs(suite="localize")
        results = [LocalizeResult.from_json(r["result"]) for r in rows]
        assert {r["kind"] for r in rows} == {"localize"} and len(rows) >= 4
        assert sorted(r.rank for r in results) == list(range(1, len(rows) + 1))
        assert all(r.kept_error is not None and r.kept_error <= 1e-2 for r in results)
        report = build_report(store, None, tmp_path / "report")
    text = report.markdown.read_text()
    assert "Which modules limit the error" in text and "figures/localize.png" in text
    for bad, message in ((["nosuchfamily"], "unknown factory"),
                         (["transformer", "--reference", "bf16"], "more precise"),
                         (["transformer", "--target", "-1"], "positive relative error")):
        assert main(["localize", *bad, "--precision", "bf16", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def test_localize_a_trained_model_from_its_weights_file(tmp_path, capsys):
    """--weights: the trained model of a --save-weights file, its shapes from the file, its
    input from its task; the records name the task and the weights' job; a file of another
    family, or not a weights file, is one line."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(tiny_affine_suite(
        "tiny_weights", 'recipe = "paper", steps = 20, batch_size = 8', test_size=4))
    weights = tmp_path / "w"
    db = tmp_path / "r.db"
    assert main(["run", str(suite), "--db", str(db), "--save-weights", str(weights),
                 "--no-progress", "--no-report"]) == 0
    (file,) = weights.glob("*.safetensors")
    capsys.readouterr()
    assert main(["localize", "baseconv", "--weights", str(file), "--precision", "bf16",
                 "--db", str(db)]) == 0
    assert "(a) alone bfloat16" in capsys.readouterr().out
    with Store(db, create=False) as store:
        rows = store.runs(suite="localize")
    assert rows and {r["task"] for r in rows} == {"affine"}
    assert {r["config"]["weights"] for r in rows} == {file.stem}
    assert {tuple(r["config"][k] for k in ("d_in", "d_out", "depth", "width", "tokens"))
            for r in rows} == {(3, 1, 1, 8, 4)}          # from the file, not the defaults
    for bad, message in ((["transformer", "--weights", str(file)], "holds a 'baseconv' model"),
                         (["baseconv", "--weights", str(suite)], "--weights:")):
        assert main(["localize", *bad, "--precision", "bf16", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
