"""tools/compare_stores.py: the check that a refactor left every stored number as it was."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from probes.store.db import RunRecord, Store

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


def test_map_ids_compares_old_trained_records_under_their_new_ids(tmp_path: Path) -> None:
    """A trained record of config version 3 equals the record version 4 writes, under the id
    ``config_hash`` gives its migrated config (copies dropped, ``solver`` -> ``entry``, the
    train table resolved)."""
    from probes.store.canonical import config_hash
    from probes.training.train_config import TrainConfig

    train = {"recipe": "paper", "steps": 40, "batch_size": 8}
    new_config = {"version": 4, "kind": "trained", "entry": "tf", "depth": 1,
                  "model_options": {"layernorm": True},
                  "train": TrainConfig.from_table(train).table(), "precision": "float64"}
    old_config = {**{k: v for k, v in new_config.items() if k != "entry"}, "version": 3,
                  "solver": "tf", "train": train, "layernorm": True, "train_steps": 40}
    trained = dataclasses.replace(RECORD, kind="trained", run_id=config_hash(old_config),
                                  config=old_config)
    a = _store(tmp_path / "old.db", trained)
    b = _store(tmp_path / "new.db", dataclasses.replace(
        trained, run_id=config_hash(new_config), config=new_config))
    assert any("only in" in d for d in compare_stores.compare(a, b))
    mapped: dict[str, str] = {}
    assert compare_stores.compare(a, b, map_ids=mapped) == []
    assert mapped == {config_hash(old_config): config_hash(new_config)}
    c = _store(tmp_path / "changed.db", dataclasses.replace(
        trained, run_id=config_hash(new_config), config=new_config, mse=2e-30))
    assert any("mse differs" in d for d in compare_stores.compare(a, c, map_ids={}))
