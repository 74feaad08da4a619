"""tools/compare_stores.py: the check that a refactor left every stored number as it was."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from results.store import RunRecord, Store

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_stores", ROOT / "tools/compare_stores.py")
compare_stores = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_stores)

RECORD = RunRecord(run_id="r1", suite="s", kind="solver", subject="gd", task="p",
                   precision="float64", status="ok", mse=1e-30, log10_mse=-30.0, steps=3,
                   wall_time=1.0, worker="a:1", config={"iters": 3},
                   result={"floor": {"level": 1e-30}, "train_seconds": 5.0,
                           "provenance": {"threads": 1}},
                   series={"log10_mse": [-1.0, -10.0, -30.0]})


def _store(path: Path, record: RunRecord) -> str:
    with Store(str(path)) as store:
        store.write_runs([record])
    return str(path)


def test_equal_numbers_with_other_timings_compare_equal(tmp_path: Path) -> None:
    a = _store(tmp_path / "a.db", RECORD)
    other_timing = dataclasses.replace(
        RECORD, wall_time=9.0, worker="b:2",
        result={**RECORD.result, "train_seconds": 7.0, "provenance": {"threads": 2}})
    b = _store(tmp_path / "b.db", other_timing)
    assert compare_stores.compare(a, b) == []


def test_any_changed_number_or_missing_run_is_reported(tmp_path: Path) -> None:
    a = _store(tmp_path / "a.db", RECORD)
    changes = {"mse": dataclasses.replace(RECORD, mse=1.0000000000000002e-30),
               "result_json": dataclasses.replace(
                   RECORD, result={**RECORD.result, "floor": {"level": 2e-30}}),
               "series": dataclasses.replace(RECORD, series={"log10_mse": [-1.0, -10.0, -29.0]}),
               "only in": dataclasses.replace(RECORD, run_id="r2")}
    for what, changed in changes.items():
        b = _store(tmp_path / f"{what}.db", changed)
        diffs = compare_stores.compare(a, b)
        assert diffs and any(what in d for d in diffs), (what, diffs)
