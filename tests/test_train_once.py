"""Train once, measure many: a trained job's weights and training record are kept beside the
store under the job's id, and every later measurement of the job (another precision, a length
sweep, a localize) reads them, trains nothing and stores the numbers a fresh training
stores."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

import probes.training.measure as measure
from precision.cli.main import main
from probes.kinds.trained import job_config
from probes.run import RunOptions, weights_folder
from probes.runner import run_suite
from probes.store.db import Store
from probes.suite import load_suite, suite_with_lengths
from probes.training.weights import read_header

SUITE = """
name = "once"
precisions = ["float32", "mp30"]
seeds = [0]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
[models.tf]
family = "transformer"
tasks = ["mul"]
depth = 1
width = [8]
test_size = 4
train.recipe = "engine"
train.steps = 12
train.batch_size = 8
train.second_order_steps = 2
train.second_order_batch = 4
"""


def _sweep(path: Path, db: Path, precisions: list[str], weights: Path | None,
           lengths: list[int] | None = None) -> int:
    """Run the suite into ``db``; the trainings it did."""
    suite = load_suite(str(path), precisions=precisions)
    if lengths:
        suite = suite_with_lengths(suite, lengths)
    before = measure.TRAININGS
    with Store(db) as store:
        run_suite(suite, store, options=RunOptions(
            weights_dir=None if weights is None else str(weights)))
    return measure.TRAININGS - before


def _numbers(db: Path) -> dict[str, tuple]:
    """Every stored number of ``db`` by run id (timings left out)."""
    con = sqlite3.connect(db)
    rows = {}
    for rid, mse, floor, steps, result in con.execute(
            "SELECT run_id, mse, floor_log10, steps, result_json FROM runs"):
        res = {k: v for k, v in json.loads(result).items()
               if k != "provenance" and not k.endswith(("wall_time", "_seconds"))}
        rows[rid] = (mse, floor, steps, res)
    for rid, name, step, value in con.execute("SELECT run_id, name, step, value FROM series"):
        if not name.endswith("_seconds"):
            rows[rid] += ((name, step, value),)
    con.close()
    return rows


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One store measured from kept weights (trained once, then a new precision and a length
    sweep), one trained afresh for every measurement."""
    tmp = tmp_path_factory.mktemp("once")
    path = tmp / "once.toml"
    path.write_text(SUITE)
    kept, fresh = tmp / "kept.db", tmp / "fresh.db"
    folder = Path(weights_folder(kept))
    trainings = [_sweep(path, kept, ["float32"], folder),
                 _sweep(path, kept, ["float32", "float64"], folder, [6])]
    fresh_trainings = _sweep(path, fresh, ["float32", "float64"], None, [6])
    # the length run goes first (longest first) and trains without the convergence check;
    # the trained run then reads its weights and runs the check once, keeping it in the file
    lazy = tmp / "lazy.db"
    lazy_trainings = _sweep(path, lazy, ["float32", "float64"], tmp / "lazy.weights", [6])
    return {"kept": kept, "fresh": fresh, "lazy": lazy, "folder": folder,
            "trainings": trainings, "fresh_trainings": fresh_trainings,
            "lazy_trainings": lazy_trainings}


def test_a_second_measurement_trains_nothing(stores):
    assert stores["trainings"] == [1, 0]          # a new precision and a length sweep: read
    assert stores["fresh_trainings"] == 2         # without kept weights each trains again
    assert stores["lazy_trainings"] == 1
    files = list(stores["folder"].glob("*.safetensors"))
    assert len(files) == 1
    record = json.loads(read_header(files[0])[1]["training"])
    assert record["training"]["status"] == "ok" and record["check"]["gain"] > 0


def test_measured_from_weights_is_bit_identical_to_trained_afresh(stores):
    kept, fresh = _numbers(stores["kept"]), _numbers(stores["fresh"])
    assert kept.keys() == fresh.keys() and len(kept) == 4   # 2 trained, 2 length records
    assert kept == fresh
    assert _numbers(stores["lazy"]) == fresh


def test_a_trained_record_holds_the_engines_work(stores):
    """Each trained record stores the engine's FLOPs (its budget's unit) and the held-out
    curve's work per point (``val_flops``), counted the same from kept weights as afresh."""
    con = sqlite3.connect(stores["fresh"])
    results = [json.loads(r) for (r,) in
               con.execute("SELECT result_json FROM runs WHERE kind = 'trained'")]
    names = {name for (name,) in con.execute("SELECT DISTINCT name FROM series")}
    con.close()
    assert results and all(r["engine_flops"] > 0 for r in results)
    assert "val_flops" in names


def test_localize_reads_the_trained_weights(stores, capsys):
    con = sqlite3.connect(stores["kept"])
    (rid,) = con.execute("SELECT run_id FROM runs WHERE kind = 'trained' LIMIT 1").fetchone()
    con.close()
    before = measure.TRAININGS
    assert main(["localize", "transformer", "--trained", rid, "--db", str(stores["kept"]),
                 "--precision", "bfloat16"]) == 0
    assert measure.TRAININGS == before
    assert "records of kind localize" in capsys.readouterr().out
    assert main(["localize", "transformer", "--trained", "nope", "--db",
                 str(stores["kept"]), "--precision", "bfloat16"]) == 2
    assert "no trained record 'nope'" in capsys.readouterr().err


def test_weights_of_another_job_are_not_read(stores, tmp_path):
    """A file under a job's name that holds another job's config is trained over."""
    (src,) = stores["folder"].glob("*.safetensors")
    suite = load_suite(str(stores["kept"].parent / "once.toml"), precisions=["float32"])
    job = replace(suite.runs[0].spec, seed=1)
    target = measure.weights_path(tmp_path, job_config(job))
    shutil.copy(src, target)       # the seed-0 job's weights under the seed-1 job's name
    before = measure.TRAININGS
    trained = measure.trained_model(job, folder=tmp_path, job_config=job_config(job))
    assert measure.TRAININGS == before + 1 and not trained.loaded
    assert measure.trained_model(job, folder=tmp_path, job_config=job_config(job)).loaded


def test_records_of_kept_weights_name_the_code_that_trained_them(tmp_path, monkeypatch):
    """Kept weights are measured by later code: each record's provenance says which code
    trained its weights beside the code that measured them, and its report line shows the
    difference."""
    import probes.training.recipes as recipes
    from precision.provenance import code_version, provenance_line

    path = tmp_path / "once.toml"
    path.write_text(SUITE)
    db = tmp_path / "kept.db"
    folder = Path(weights_folder(db))
    with monkeypatch.context() as patched:
        patched.setattr(recipes, "code_version", lambda: "git 0ld0ld0ld0ld")
        assert _sweep(path, db, ["float32"], folder) == 1
    assert _sweep(path, db, ["float32", "float64"], folder) == 0   # read, not trained
    con = sqlite3.connect(db)
    prov = {json.loads(c)["precision"]: json.loads(r)["provenance"] for c, r in
            con.execute("SELECT config_json, result_json FROM runs WHERE kind = 'trained'")}
    con.close()
    assert {p["trained_by"] for p in prov.values()} == {"git 0ld0ld0ld0ld"}
    assert prov["float64"]["code"] == code_version() != "git 0ld0ld0ld0ld"
    assert provenance_line(prov["float64"]).endswith("weights trained by code git 0ld0ld0ld0ld")


def test_localize_refuses_a_weights_file_of_another_job(stores, tmp_path, capsys):
    """``localize --trained RUN_ID`` with the job's weights file swapped for another job's
    localized the other job's model (exit 0); ``run`` noticed and retrained. Now the file is
    checked against the record that names it, in one line, and not used."""
    (src,) = stores["folder"].glob("*.safetensors")
    db = tmp_path / "kept.db"
    shutil.copy(stores["kept"], db)
    folder = Path(weights_folder(db))
    folder.mkdir()
    suite = load_suite(str(stores["kept"].parent / "once.toml"), precisions=["float32"])
    other = replace(suite.runs[0].spec, seed=1)
    shutil.copy(src, folder / src.name)
    con = sqlite3.connect(db)
    (rid,) = con.execute("SELECT run_id FROM runs WHERE kind = 'trained' LIMIT 1").fetchone()
    con.close()
    assert main(["localize", "transformer", "--trained", rid, "--db", str(db),
                 "--precision", "bfloat16"]) == 0
    capsys.readouterr()
    from probes.training.weights import save_weights

    trained = measure.trained_model(other, check=False)   # the seed-1 job, trained here
    save_weights(trained.model, folder / src.name, job_config(other))   # swapped in
    assert main(["localize", "transformer", "--trained", rid, "--db", str(db),
                 "--precision", "bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "holds the weights of another job" in err and len(err.strip().splitlines()) == 1


def test_a_weights_file_of_nans_is_damage_not_a_divergence(stores, tmp_path):
    """Every float of a weights file set to NaN: it was trusted and the record became
    ``diverged`` ("model output not finite"). Stored weights are always finite (a diverged
    training keeps none), so the file is refused as damaged and the job trains again."""
    import torch
    from safetensors.torch import load_file, save_file

    from probes.training.weights import WeightsError, load_trained_model

    (src,) = stores["folder"].glob("*.safetensors")
    _, meta = read_header(src)
    tensors = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
               for k, v in load_file(str(src)).items()}
    bad = tmp_path / src.name
    save_file(tensors, str(bad), metadata=meta)
    with pytest.raises(WeightsError, match="damaged: tensor .* NaN or Inf"):
        load_trained_model(bad)
    suite = load_suite(str(stores["kept"].parent / "once.toml"), precisions=["float32"])
    job = suite.runs[0].spec
    before = measure.TRAININGS
    trained = measure.trained_model(job, folder=tmp_path, job_config=job_config(job),
                                    check=False)
    assert measure.TRAININGS == before + 1 and not trained.loaded
    assert trained.result.status == "ok"


def _train_in_child(args):
    job, folder, config = args
    trained = measure.trained_model(job, folder=folder, job_config=config, check=False)
    return trained.loaded, measure.TRAININGS


def test_two_workers_that_want_one_job_train_it_once(tmp_path):
    """A job's trained run and its length run (or two Dask workers) could both train the same
    job at once, nothing locking its weights file. Now the first trains, the second waits
    and reads what it kept."""
    import multiprocessing

    path = tmp_path / "once.toml"
    path.write_text(SUITE)
    job = load_suite(str(path), precisions=["float32"]).runs[0].spec
    config = job_config(job)
    folder = tmp_path / "w"
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map(_train_in_child, [(job, folder, config)] * 2)
    assert sorted(loaded for loaded, _ in got) == [False, True]   # one trained, one read
    assert len(list(folder.glob("*.safetensors"))) == 1
