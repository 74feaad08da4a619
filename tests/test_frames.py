"""The store as DataFrames (probes.runs / probes.series): the stored values, filters, flat
config / result columns, traces long and wide, and reading that never writes."""

import hashlib
import math
import sqlite3

import pandas as pd
import pytest

import probes
from probes.store.db import RunRecord, Store, StoreError
from probes.store.frames import RUN_FRAME_COLUMNS


def _solver(run_id: str, precision: str, floor: float, seed: int) -> RunRecord:
    return RunRecord(
        run_id=run_id, suite="solvers", kind="solver", subject="gd", task="ls_gauss",
        precision=precision, status="ok", mse=10.0**floor, log10_mse=floor, floor_log10=floor,
        floor_index=40 + seed, rate=math.nan, steps=200,
        config={"problem": {"seed": seed, "kappa": 1e6}, "params": {"step": "optimal"}},
        result={"floor": {"reached": True}, "v": math.inf},
        series={"log10_mse": [(0, 0.0), (10, -3.5), (20, floor), (30, math.nan)],
                "grad": [1.0, 0.5]})


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        store.write_runs([_solver("a", "float32", -14.0, 0), _solver("b", "mp50", -99.5, 0),
                          _solver("c", "float32", -13.0, 1)])
        store.write_run(RunRecord(
            run_id="t", suite="primitives", kind="trained", subject="transformer", task="read",
            precision="float32", status="failed", error="diverged at step 3",
            config={"depth": 2, "width": 64, "train": {"recipe": "paper"}},
            result={"decomposition": {"approximation": -7.25, "rounding": "-inf"},
                    "columns": ["x", "y"]}))
    return path


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def test_runs_one_row_per_run_with_the_stored_values(db):
    runs = probes.runs(db)
    assert tuple(runs.columns) == RUN_FRAME_COLUMNS
    # the store's order: suite, kind, task, subject, precision, run_id
    assert runs["run_id"].tolist() == ["t", "a", "c", "b"]
    a = runs.set_index("run_id").loc["a"]
    assert a["floor_log10"] == -14.0 and a["mse"] == 1e-14 and a["floor_index"] == 40
    assert math.isnan(a["rate"])                            # NaN is stored as NULL
    assert a["config"] == {"params": {"step": "optimal"}, "problem": {"kappa": 1e6, "seed": 0}}
    assert a["result"] == {"floor": {"reached": True}, "v": "inf"}
    assert a["created_at"].endswith("Z")
    t = runs.set_index("run_id").loc["t"]
    assert t["status"] == "failed" and t["error"] == "diverged at step 3"
    assert math.isnan(t["floor_log10"])
    assert runs["floor_log10"].dtype == "float64"


def test_runs_filters_take_a_value_or_a_list(db):
    assert probes.runs(db, suite="solvers", precision="float32")["run_id"].tolist() == \
        ["a", "c"]
    assert probes.runs(db, precision=["mp50", "float32"], kind="solver")["run_id"].tolist() \
        == ["a", "c", "b"]
    assert probes.runs(db, status="failed")["run_id"].tolist() == ["t"]
    assert probes.runs(db, subject="gd", task="ls_gauss", precision=[])["run_id"].empty
    none = probes.runs(db, suite="nope")
    assert none.empty and tuple(none.columns) == RUN_FRAME_COLUMNS
    with Store(db) as store:  # the same filters on the store itself
        assert [r["run_id"] for r in store.runs(precision=("mp50",))] == ["b"]


def test_flatten_gives_one_column_per_leaf_and_reads_non_finite_numbers(db):
    runs = probes.runs(db, flatten=True).set_index("run_id")
    assert "config" not in runs and "result" not in runs
    assert {"config.problem.seed", "config.problem.kappa", "config.params.step",
            "config.depth", "config.train.recipe", "result.floor.reached",
            "result.decomposition.rounding", "result.v", "result.columns"} <= set(runs)
    assert runs.loc["c", "config.problem.seed"] == 1
    assert runs.loc["c", "config.params.step"] == "optimal"
    assert math.isnan(runs.loc["c", "config.depth"])          # a key the run lacks
    assert runs.loc["t", "config.depth"] == 2
    # the JSON strings "-inf" / "inf" of the store read back as floats in numeric columns
    assert runs.loc["t", "result.decomposition.rounding"] == -math.inf
    assert runs.loc["t", "result.decomposition.approximation"] == -7.25
    assert runs.loc["a", "result.v"] == math.inf and runs["result.v"].dtype == "float64"
    assert runs.loc["t", "result.columns"] == ["x", "y"]       # lists stay cells
    config_columns = [c for c in runs.columns if c.startswith("config.")]
    assert config_columns == sorted(config_columns)
    assert probes.runs(db, suite="nope", flatten=True).empty


def test_series_long_and_wide(db):
    s = probes.series(db, "a")
    assert list(s.columns) == ["run_id", "name", "step", "value"]
    trace = s[s["name"] == "log10_mse"]
    assert trace["step"].tolist() == [0, 10, 20, 30]
    assert trace["value"].tolist()[:3] == [0.0, -3.5, -14.0] and math.isnan(trace["value"].iloc[3])
    assert s[s["name"] == "grad"][["step", "value"]].values.tolist() == [[0, 1.0], [1, 0.5]]
    wide = probes.series(db, "a", wide=True)
    assert wide.index.name == "step" and list(wide.columns) == ["grad", "log10_mse"]
    assert wide.loc[10, "log10_mse"] == -3.5 and math.isnan(wide.loc[10, "grad"])
    both = probes.series(db, ["b", "a"], "log10_mse")
    assert both["run_id"].tolist() == ["b"] * 4 + ["a"] * 4        # in the order given
    assert both["value"].tolist()[2] == -99.5
    wide = probes.series(db, ["a", "b"], ["log10_mse"], wide=True)
    assert wide[("b", "log10_mse")][20] == -99.5 and wide[("a", "log10_mse")][20] == -14.0
    assert probes.series(db, "t").empty                      # a run without traces
    with pytest.raises(StoreError, match="no run nope"):
        probes.series(db, ["a", "nope"])


def test_an_open_store_can_be_passed_and_stays_open(db):
    with Store(db) as store:
        assert probes.runs(store, kind="trained")["run_id"].tolist() == ["t"]
        assert len(probes.series(store, "b")) == 6
        assert store.count() == 4


def test_reading_never_writes(db, tmp_path):
    before = _digest(tmp_path)
    probes.runs(db)
    probes.series(db, "a")
    assert _digest(tmp_path) == before                       # no -wal / -shm left behind
    with Store(db, read_only=True) as store:
        with pytest.raises(StoreError, match="not writable"):
            store.write_run(_solver("d", "float64", -30.0, 0))
        with pytest.raises(StoreError, match="not writable"):
            store.delete_runs(run_id="a")
    assert _digest(tmp_path) == before


def test_a_missing_path_or_a_file_that_is_not_a_store_is_refused(tmp_path):
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no results store"):
        probes.runs(missing)
    assert not missing.exists()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    empty = tmp_path / "empty.db"
    empty.touch()
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = _digest(tmp_path)
    for path in (text, empty, other):
        with pytest.raises(StoreError, match="not a precision results store"):
            probes.runs(path)
        with pytest.raises(StoreError, match="not a precision results store"):
            probes.series(path, "a")
    assert _digest(tmp_path) == before


def test_the_report_tables_read_the_same_frame(db):
    from reports.tables import solver_runs

    with Store(db) as store:
        rows = store.runs()
    report = solver_runs(rows).set_index("run_id")
    frame = probes.runs_frame(rows).set_index("run_id")
    for column in ("floor_log10", "mse", "floor_index", "created_at"):  # int64 / float64
        pd.testing.assert_series_equal(report[column], frame.loc[report.index, column],
                                       check_dtype=False)
    assert probes.runs(db).equals(frame.reset_index()[list(RUN_FRAME_COLUMNS)])
