"""A cell starts from the best thing it contains (``train.start = "contained"``): the job one
layer shallower, trained once and embedded with its new layer the identity. The start is a
function of the job alone (the same numbers whatever else the sweep ran, and in whatever
order), and the record says where training started."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import torch
from conftest import tiny_affine_suite

import probes.training.measure as measure
from probes.kinds.trained import job_config
from probes.run import RunOptions, weights_folder
from probes.runner import run_suite
from probes.store.db import Store
from probes.suite import load_suite


def _suite(depth: str, steps: int, lm: int) -> str:
    """conftest's tiny BaseConv on AFFINE (outer residual: deeper models contain shallower
    ones), trained by the engine from the contained start."""
    return tiny_affine_suite("warm", f'recipe = "engine", steps = {steps}, batch_size = 8, '
                             f'second_order_steps = {lm}, second_order_batch = 4, '
                             'start = "contained"', depth=depth, test_size=4)


def _sweep(folder: Path, name: str, depth: str, steps: int = 30, lm: int = 2) -> dict:
    path = folder / f"{name}.toml"
    path.write_text(_suite(depth, steps, lm))
    db = folder / f"{name}.db"
    with Store(db) as store:
        run_suite(load_suite(str(path)), store,
                  options=RunOptions(weights_dir=str(weights_folder(db))))
    con = sqlite3.connect(db)
    rows = {json.loads(c)["depth"]: (json.loads(c), json.loads(r), mse) for c, r, mse in
            con.execute("SELECT config_json, result_json, mse FROM runs")}
    con.close()
    return rows


def test_each_depth_starts_from_the_one_it_contains_and_says_so(tmp_path):
    rows = _sweep(tmp_path, "all", "[1, 2, 3]")
    assert "start" not in rows[1][0]["train"]          # depth 1: nothing to contain: fresh
    assert "start" not in rows[1][1]
    ids = {d: measure.config_hash({k: v for k, v in rows[d][0].items() if k != "precision"})
           for d in rows}
    assert rows[2][1]["start"].startswith(f"contained {ids[1]} (depth 1")
    assert rows[3][1]["start"].startswith(f"contained {ids[2]} (depth 2")
    # only depth 3, in a store of its own: its chain is trained on the way, same numbers
    before = measure.TRAININGS
    alone = _sweep(tmp_path, "alone", "3")
    assert measure.TRAININGS - before == 3
    assert alone[3][2] == rows[3][2] and alone[3][1]["start"] == rows[3][1]["start"]


def test_without_training_the_deeper_model_computes_the_contained_one(tmp_path):
    """With no step at all, the depth-2 model that started from the depth-1 one computes its
    outputs exactly: the start is the embedding, nothing else."""
    suite = tmp_path / "s.toml"
    suite.write_text(_suite("[1, 2]", 0, 0))
    jobs = {run.spec.depth: run.spec for run in load_suite(str(suite)).runs}
    one = measure.trained_model(jobs[1], check=False)
    two = measure.trained_model(jobs[2], folder=tmp_path / "w", job_config=job_config(jobs[2]),
                                check=False)
    assert two.result.start.startswith("contained ")
    x = one.task.sample(3, torch.Generator().manual_seed(5))[0]
    with torch.no_grad():
        assert torch.equal(one.model(x), two.model(x))
