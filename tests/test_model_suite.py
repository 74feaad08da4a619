"""Trained-model suites: grid expansion, validation (one line, exit 2, store untouched), ids."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import solver_store

from precision.cli.main import main
from precision.precisions import parse_precisions
from probes.kinds.trained import record_id
from probes.suite import SuiteError, load_suite

HEAD = """
name = "mine"
precisions = ["float32", "mp50"]
seeds = [0, 1]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
[tasks.rd]
task = "read"
dim = 3
n = 5
"""

GRID = HEAD + """
[models.bc]
family = "baseconv"
tasks = ["mul", "rd"]
depth = [1, 2]
width = 8
layernorm = [true, false]
train = { recipe = ["paper", "adaptive"], steps = 5, batch_size = 4, dtype = "float32" }
"""


def _suite(tmp_path: Path, text: str, **kw):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return load_suite(str(path), **kw)


def test_grid_is_the_product_of_list_valued_keys(tmp_path):
    runs = list(_suite(tmp_path, GRID).runs)
    # 2 tasks x 2 depths x 2 LN x 2 recipes x 2 seeds
    assert len(runs) == 32
    r = runs[0]
    assert r.config["kind"] == "trained" and r.config["precisions"] == ["float32", "mp50"]
    job = {k: v for k, v in r.config.items() if k != "precisions"}
    assert r.ids == tuple(record_id(job, p) for p in parse_precisions("float32,mp50"))
    assert len({i for run in runs for i in run.ids}) == 64


def test_cosine_recipe_with_warmup_and_clip_is_a_train_axis(tmp_path):
    text = GRID.replace('recipe = ["paper", "adaptive"]', 'recipe = ["constant", "cosine"]'
                        ).replace('dtype = "float32"', 'dtype = "float32", warmup = 2, clip = 1.0')
    runs = list(_suite(tmp_path, text).runs)
    assert {r.config["train"]["recipe"] for r in runs} == {"constant", "cosine"}
    assert {(r.config["train"]["warmup"], r.config["train"]["clip"]) for r in runs} == {(2, 1.0)}


def test_profile_overrides_model_grid_and_merges_train(tmp_path):
    text = GRID + """
[profiles.quick]
seeds = [0]
[profiles.quick.models.bc]
depth = [1]
train = { steps = 2 }
"""
    runs = list(_suite(tmp_path, text, profile="quick").runs)
    assert len(runs) == 2 * 2 * 2                     # tasks x LN x recipes
    assert {r.config["train"]["steps"] for r in runs} == {2}
    assert {r.config["train"]["batch_size"] for r in runs} == {4}


BAD_MODEL_SUITES = [
    (GRID.replace('family = "baseconv"', 'family = "mamba"'), "unknown model family 'mamba'"),
    (GRID.replace('tasks = ["mul", "rd"]', 'tasks = ["mul", "sq"]'), "unknown task label 'sq'"),
    (GRID.replace('"paper", "adaptive"', '"paper", "sgd"'), "unknown recipe 'sgd'"),
    (GRID.replace('dtype = "float32"', 'dtype = "float8"'),
     "train dtype: unknown precision 'float8'"),
    (GRID.replace('dtype = "float32"', 'dtype = "mp50"'),
     "train dtype 'mp50' cannot be trained in"),
    (GRID.replace('dim = 4', 'dim = 5'), "needs an even dim"),
    (GRID.replace("width = 8\n", ""), "needs 'width'"),
    (GRID.replace("steps = 5, ", ""), "train needs 'steps'"),
    (GRID.replace("depth = [1, 2]", "depth = [0, 2]"), "depth and width must be positive"),
    (GRID.replace('task = "read"', 'task = "readd"'), "unknown task 'readd'"),
    (GRID.replace("n = 5", "n = 1"), "needs n >= 2"),
    (HEAD, "needs at least one [models."),
    (GRID.replace('precisions = ["float32", "mp50"]', 'precisions = ["float32", "fp8"]'),
     "unknown precision 'fp8'"),
    (GRID.replace("layernorm = [true, false]", "layernorm = [true, false]\nheads = 3"),
     "cannot build model"),
    (GRID.replace('dtype = "float32"', 'dtype = "float32", clip = -1.0'),
     "train clip must be a number >= 0"),
    (GRID.replace('dtype = "float32"', 'dtype = "float32", warmup = 2.5'),
     "train warmup must be a non-negative integer"),
    (GRID.replace('dtype = "float32"', 'dtype = "float32", micro_batch = -8'),
     "train micro_batch must be a non-negative integer"),
]


@pytest.mark.parametrize("text,message", BAD_MODEL_SUITES)
def test_bad_model_suite_is_one_line_before_the_store(tmp_path, text, message):
    with pytest.raises(SuiteError, match=None) as info:
        _suite(tmp_path, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_model_suite_exit_2_store_untouched(tmp_path, capsys):
    db = solver_store(tmp_path, "cg")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    path = tmp_path / "bad.toml"
    path.write_text(GRID.replace('dim = 4', 'dim = 5'))
    capsys.readouterr()
    rc = main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "even dim" in err and "\n" not in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
