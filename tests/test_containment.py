"""A deeper residual model contains a shallower one exactly: embedded with its extra layers'
residual writes zeroed, it computes the shallower model's float64 outputs bit for bit (and
mp50's exactly), which is what lets a deeper cell's floor be held against the cells it
contains (:mod:`precision.models.containment`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from precision.evaluate import evaluate
from precision.models import build_model
from precision.models.containment import ContainmentError, embed_shallower


@pytest.mark.parametrize("family,options", [
    ("transformer", {}), ("transformer", {"ln_attn": False, "ln_mlp": False, "ln_final": False}),
    ("baseconv", {"layernorm": False}), ("baseconv", {"layernorm": True})])
@pytest.mark.parametrize("depths", [(1, 2), (1, 3), (2, 3)])
def test_the_embedded_model_computes_the_shallower_ones_outputs(family, options, depths):
    torch.manual_seed(0)
    small = build_model(family, 5, 3, depths[0], 16, **options).double()
    torch.manual_seed(1)
    big = build_model(family, 5, 3, depths[1], 16, **options).double()
    x = torch.randn(4, 7, 5, dtype=torch.float64)
    with torch.no_grad():
        before = big(x)
        embed_shallower(small, big)
        assert torch.equal(big(x), small(x))
        assert not torch.equal(before, big(x))
    a, b = evaluate(small, x[:1], "mp50"), evaluate(big, x[:1], "mp50")
    assert np.array_equal(np.vectorize(str)(np.asarray(a)), np.vectorize(str)(np.asarray(b)))


def test_what_is_not_contained_is_one_line():
    torch.manual_seed(0)
    with pytest.raises(ContainmentError, match="width or options"):
        embed_shallower(build_model("transformer", 5, 3, 1, 16), build_model("transformer", 5, 3,
                                                                             2, 32))
    with pytest.raises(ContainmentError, match="not contained in depth"):
        embed_shallower(build_model("baseconv", 5, 3, 2, 8), build_model("baseconv", 5, 3, 1, 8))
    with pytest.raises(ContainmentError, match="no exact identity"):
        embed_shallower(build_model("baseconv", 5, 3, 1, 8, residual="inner"),
                        build_model("baseconv", 5, 3, 2, 8, residual="inner"))
    with pytest.raises(ContainmentError, match="not contained in a"):
        embed_shallower(build_model("baseconv", 5, 3, 1, 8), build_model("transformer", 5, 3,
                                                                         2, 8))


def _deeper(row: dict, depth: int, shift: float, **options) -> dict:
    """A copy of a trained record at another depth, its MSE ``shift`` decades away."""
    import copy

    r = copy.deepcopy(row)
    r["run_id"] = f"{row['run_id']}-d{depth}-{shift}"
    r["config"]["depth"] = depth
    r["config"]["model_options"].update(options)
    r["log10_mse"] += shift
    r["mse"] = 10.0 ** r["log10_mse"]
    return r


def test_a_deeper_cell_above_a_cell_it_contains_is_marked_and_never_a():
    """The containment invariant in the console and report tables: a depth-2 cell that
    floors above the depth-1 cell it contains is marked ``<d`` and labelled T (not A); one
    below, or a family with no exact identity, is not marked."""
    from pathlib import Path

    from probes.store.db import Store
    from reports.model_table import CONTAINED_MARK, contained_above_runs, model_tables
    from reports.tables import grid_runs, task_pivot

    shipped = Path(__file__).resolve().parents[1] / "reports" / "stores" / "primitives_floor.db"
    with Store(shipped, create=False, read_only=True) as store:
        rows = [r for r in store.runs() if r["kind"] == "trained" and r["task"] == "read"
                and r["subject"] == "transformer" and r["config"]["depth"] == 1
                and r["config"]["width"] == 64]
    a = [r for r in rows if r["config"]["model_options"].get("layernorm")]
    assert a and "A" in model_tables(a)   # the shipped depth-1 width-64 LN cell: A
    above = [_deeper(r, 2, 1.0) for r in a]
    below = [_deeper(r, 3, -1.0) for r in a]
    assert contained_above_runs(a + above + below) == {r["run_id"] for r in above}
    text = model_tables(a + above + below)
    marked = [line for line in text.splitlines() if CONTAINED_MARK.strip() in line
              and line.startswith("transformer")]
    assert len(marked) == 1 and " 2 " in marked[0] and " A" not in marked[0]
    frame = task_pivot("read", grid_runs(a + above + below)).frame
    deep = frame[frame["depth"] == 2].iloc[0]
    assert all(CONTAINED_MARK.strip() in str(deep[p]) and " T" in str(deep[p])
               for p in ("float32", "float64", "mp50"))
    assert not any(CONTAINED_MARK.strip() in str(v) for v in frame[frame["depth"] != 2]
                   .drop(columns=["depth", "width"]).to_numpy().ravel())
    inner = [_deeper(r, 1, 0.0, residual="inner") for r in a] + \
        [_deeper(r, 2, 1.0, residual="inner") for r in a]
    assert contained_above_runs(inner) == set()


def test_an_output_that_overflows_in_a_precision_is_named_not_diverged():
    """A trained model whose float16 output overflows was stored ``diverged`` (training's
    word) and shown as an empty cell in the report. It is ``nonfinite``: named in the
    record, shown with a legend in the console and report tables, and it refutes a claim about
    that precision as a divergence does."""
    import copy
    from pathlib import Path

    from precision.invariants import NONFINITE
    from precision.precisions import parse_precision
    from precision.tasks import make_task
    from probes.store.db import Store
    from probes.training.measure import measure_precision
    from reports.model_table import NONFINITE_LEGEND, model_tables
    from reports.tables import grid_pivots, grid_runs

    task = make_task("multiply", seed=0, dim=4, n=6)
    model = build_model("baseconv", task.d_in, task.d_out, 1, 8).double()
    with torch.no_grad():
        model.out.weight.mul_(1e8)   # finite in float64, past float16's 65504
    x, _ = task.sample(2, torch.Generator().manual_seed(0))
    out = measure_precision(model, task, x, parse_precision("float16"), {})
    assert out.status == NONFINITE and "not finite in float16" in out.error
    assert measure_precision(model, task, x, parse_precision("float64"), {}).status == "ok"

    shipped = Path(__file__).resolve().parents[1] / "reports" / "stores" / "primitives_floor.db"
    with Store(shipped, create=False, read_only=True) as store:
        rows = [r for r in store.runs() if r["task"] == "read" and r["subject"] == "baseconv"
                and r["config"]["width"] == 32]
    bad = copy.deepcopy([r for r in rows if r["precision"] == "float32"][0])
    bad.update(status=NONFINITE, mse=None, log10_mse=None, error=out.error)
    rows = [r for r in rows if r["precision"] != "float32"] + [bad]
    text = model_tables(rows)
    assert NONFINITE in text and NONFINITE_LEGEND in text
    (pivot,) = [p for p in grid_pivots(grid_runs(rows)) if p.key == "grid-read"]
    assert pivot.frame["float32"].tolist() == [NONFINITE] and "nonfinite = " in pivot.title
