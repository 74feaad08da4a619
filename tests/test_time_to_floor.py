"""Time to floor: wall seconds of training to each held-out MSE level per depth x width cell,
read from the stored validation curve and the seconds of its points."""

import pytest
from conftest import tiny_affine_suite

from precision.cli.main import main
from probes.store.db import Store
from reports.build import build_report
from reports.time_to_floor import LEVELS, time_to, time_to_floor_pivots


def test_time_to_is_the_first_point_at_or_below_the_level():
    curve = [(0, 0.0), (10, -2.5), (20, -4.0), (30, -3.0), (40, -6.5)]
    seconds = [(0, 0.0), (10, 1.5), (20, 3.0), (30, 4.5), (40, 6.0)]
    assert time_to(curve, seconds, -2) == 1.5
    assert time_to(curve, seconds, -4) == 3.0          # reached exactly: counts
    assert time_to(curve, seconds, -6) == 6.0
    assert time_to(curve, seconds, -8) is None
    assert time_to([(0, None), (10, -3.0)], seconds, -2) == 1.5   # a 0 MSE has no log


SUITE = tiny_affine_suite("tiny_timed", 'recipe = "paper", steps = 60, batch_size = 8',
                          depth="[1, 2]", extra="""
[models.baseconv_engine]
family = "baseconv"
tasks = ["affine"]
depth = 1
width = 8
layernorm = false
test_size = 8
[models.baseconv_engine.train]
recipe = "engine"
steps = 30
batch_size = 8
second_order_steps = 4
second_order_batch = 8
""")


@pytest.fixture(scope="module")
def timed_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("timed")
    suite = folder / "tiny.toml"
    suite.write_text(SUITE)
    db = folder / "r.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    return db


def test_a_row_per_cell_with_the_seconds_to_each_level(timed_store):
    with Store(timed_store) as store:
        rows = store.runs()
        pivots = time_to_floor_pivots(rows, "affine",
                                      lambda rid, name: store.series(rid, name).get(name, []))
        trained = {r["config"]["depth"]: r["result"]["train_wall_time"] for r in rows
                   if r["subject"] == "baseconv"}
    (table,) = pivots   # one table for the task, every model in it
    assert table.key == "time-affine" and table.meta == {"task": "affine"}
    # each record names the settings its recipe fixed (not part of its id)
    settings = {r["subject"]: r["result"]["recipe_settings"] for r in rows}
    assert settings["baseconv"] == {}
    assert settings["baseconv_engine"]["lm_curvature_dtype"] == "float32"
    assert settings["baseconv_engine"]["keep_best"] is True
    frame = table.frame
    engine_name = "baseconv_engine, no LN, engine, trained in float64"
    paper = frame.loc[["baseconv, no LN"]]
    engine = frame.loc[[engine_name]]
    assert list(paper["depth"]) == [1, 2] and list(paper["width"]) == [8, 8]
    assert list(frame.columns) == ["depth", "width"] + [f"to 1e{lv}" for lv in LEVELS] + [
        "lowest held-out MSE", "stopped by", "second-order iterations", "engine FLOPs"]
    assert set(paper["stopped by"]) == {"steps"}
    for depth, (_, cells) in zip((1, 2), paper.iterrows(), strict=True):
        # 60 Adam steps do not reach 1e-12: the cell shows the budget it had
        assert cells[f"to 1e{LEVELS[-1]}"] == f"> {trained[depth]:.1f} s"
        assert 0 < float(cells["lowest held-out MSE"]) < 10
    # the engine's row says how many second-order iterations it did, and their pace
    first = engine[engine["depth"] == 1].iloc[0]
    count, _, each = first["second-order iterations"].partition(" x ")
    assert int(count) == 4 and each.endswith(" s") and float(each[:-2]) > 0
    # ... and the work they did, counted; a paper-recipe row has none
    assert float(first["engine FLOPs"]) > 0
    assert set(paper["engine FLOPs"]) == {"-"}


def test_the_report_shows_the_table_and_the_figure(timed_store, tmp_path):
    with Store(timed_store) as store:
        report = build_report(store, None, tmp_path / "rep")
    text = report.markdown.read_text()
    assert "affine: wall seconds of training to each held-out MSE" in text
    assert "| baseconv, no LN | 1 | 8 |" in text
    assert list((tmp_path / "rep").rglob("*-time.png")), "no time-to-floor figure"


def test_records_stored_before_the_seconds_give_no_row(timed_store):
    with Store(timed_store) as store:
        rows = store.runs()
        assert time_to_floor_pivots(rows, "affine", lambda rid, name: []) == []
