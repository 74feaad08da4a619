"""The record schema (probes/store/records.py): the writer's JSON reads back typed, a store of an
older version still reads, and a claim the schema does not allow is a one-line error.

``tests/fixtures/store_v0.db`` was written by the code of data version 2 before the schema
(its trained configs still hold the top-level copies ``layernorm`` / ``train_steps``), from
the suite ``tests/fixtures/store_v0.toml``; the numbers asserted here are the ones that code
printed and reported.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

import probes
from precision.cli.main import main
from probes.store.canonical import canonical_json
from probes.store.db import Store
from probes.store.records import (
    StudyConfig,
    StudyResult,
    SubjectConfig,
    SubjectResult,
    TrainedConfig,
    TrainedResult,
    config_of,
    metric_problem,
    result_of,
)
from reports.build import build_report
from reports.papers.claims import ClaimsError, check_claims, load_claims

FIXTURE = Path(__file__).parent / "fixtures" / "store_v0.db"


@pytest.fixture(scope="module")
def v0(tmp_path_factory) -> Path:
    """A copy of the fixture (reading must not touch the committed file)."""
    path = tmp_path_factory.mktemp("v0") / "store_v0.db"
    shutil.copyfile(FIXTURE, path)
    return path


def _rows(path: Path) -> list[dict]:
    with Store(path, read_only=True) as store:
        return store.runs()


def test_every_stored_result_reads_back_to_the_same_json(v0):
    """from_json then to_json gives the stored result key for key: the schema names every
    key the writer wrote (a study's extra keys in ``info``)."""
    rows = _rows(v0)
    assert {r["kind"] for r in rows} == {"trained", "solver", "construction", "study"}
    for r in rows:
        res = result_of(r)
        assert type(res) is {"trained": TrainedResult, "solver": SubjectResult,
                             "construction": SubjectResult, "study": StudyResult}[r["kind"]]
        assert canonical_json(res.to_json()) == canonical_json(r["result"]), r["run_id"]


def test_typed_configs_and_results_of_the_old_store(v0):
    rows = {(r["kind"], r["subject"], r["precision"], r["task"], str(r["config"].get("seed")),
             str(r["config"].get("problem", {}).get("seed")), str(r["config"].get("layernorm"))):
            r for r in _rows(v0)}
    tf = rows[("trained", "transformer", "float32", "small", "0", "None", "True")]
    cfg = config_of(tf)
    assert isinstance(cfg, TrainedConfig)
    assert (cfg.depth, cfg.width, cfg.layernorm, cfg.train_steps, cfg.recipe, cfg.data_version,
            cfg.model_options) == (1, 8, True, 40, "paper", 2, {"layernorm": True})
    res = TrainedResult.from_json(tf["result"])
    assert res.train_converged is False and res.rounding < -10 < res.approximation
    assert res.rounding == tf["result"]["decomposition"]["rounding"]
    assert res.metric("rounding") == res.rounding and res.metric("floor_source") is None
    gd = rows[("solver", "gd", "float64", "ls_gauss", "None", "1", "None")]
    assert SubjectConfig.from_json(gd["config"]).seed == 1
    assert SubjectConfig.from_json(gd["config"]).params == {"iters": 80, "step": "optimal"}
    lsa = rows[("construction", "lsa_gd", "float32", "ls_gauss", "None", "0", "None")]
    assert SubjectResult.from_json(lsa["result"]).max_log10_mse_vs_algorithm == pytest.approx(
        -12.89313729110381, abs=0)
    study = next(r for r in rows.values() if r["kind"] == "study")
    sc, sr = StudyConfig.from_json(study["config"]), StudyResult.from_json(study["result"])
    assert (sc.study, sc.entry, sc.params["kappa"]) == ("newton.kappa_sweep", "ls_kappa", 10.0)
    assert sr.primary == "steps_to_floor" and sr.column_order[0] == "steps_to_floor"
    assert sr.info == {"construction": "lsa_least_squares", "alpha": 1.4901161193847656e-08}
    assert sr.metric("predicted_steps") == 17.0 and sr.metric("no_such_metric") is None


def test_missing_keys_read_as_defaults_and_unknown_ones_are_ignored():
    cfg = TrainedConfig.from_json({"depth": 2, "width": 4, "data_version": True, "extra": 1})
    assert (cfg.depth, cfg.layernorm, cfg.train_steps, cfg.data_version) == (2, None, None, 1)
    assert config_of({"kind": "unknown", "config": {"data_version": 3}}).data_version == 3
    res = TrainedResult.from_json({"decomposition": {"approximation": "-inf",
                                                     "rounding": "nan"}})
    assert res.approximation == -float("inf") and res.rounding is None
    assert res.floor_reached and not SubjectResult.from_json(
        {"floor": {"reached": False}}).floor_reached


def test_the_old_store_reads_prints_and_reports_the_numbers_it_was_made_with(v0, tmp_path,
                                                                              capsys):
    frame = probes.runs(v0, kind="trained", precision="float32")
    assert len(frame) == 6 and set(frame["subject"]) == {"baseconv", "transformer"}
    # the CLI tables, as the code that wrote the store printed them
    assert main(["results", "--db", str(v0)]) == 0
    out = capsys.readouterr().out
    assert "gd      3.0e-15 ±0.4 @57 falling 1/2  8.9e-18 ±2.2 falling" in out
    assert "ols_qr  8.7e-14 ±0.2                  5.0e-31 ±0.3" in out
    assert ("transformer  1      8      yes  paper   float32  40     0     5.6e-01 T  "
            "5.6e-01 T") in out
    assert "baseconv     1      8      no   paper   float32  40     1     1.5e+00 T" in out
    assert "kappa=10    0     17              17               -28.07" in out
    # the report
    with Store(v0, read_only=True) as store:
        rep = build_report(store, None, tmp_path / "report")
    md = rep.markdown.read_text()
    assert "26 runs (ok 26)" in md
    assert "| gd | 3.0e-15 ±0.4 @57 falling 1/2 | 8.9e-18 ±2.2 falling |" in md
    assert "| lsa_gd | 1.8e-04 ±0.6 @9 | 1.8e-04 ±0.6 @9 |" in md
    assert "**small: test MSE by model, depth and width in each precision" in md
    assert "| transformer, LN | 1 | 8 | 8.0e-01 [5.6e-01, 1.1e+00] T |" in md
    assert "| kappa=10 | 0 | 17 | 17 | -28.07 | 0 | 1 | 1.674 |" in md
    with open(rep.folder / "data" / "model-runs.csv", newline="") as f:
        models = list(csv.DictReader(f))
    first = models[0]
    assert (first["subject"], first["seed"], first["train_steps"], first["converged"]) == (
        "baseconv, no LN", "0", "40", "False")
    assert float(first["log10_mse"]) == 0.046819657025315535
    assert float(first["rounding"]) == -16.03655461155925
    assert {m["subject"] for m in models} == {"baseconv, no LN", "transformer, LN",
                                              "transformer, no LN"}
    assert FIXTURE.read_bytes() == v0.read_bytes()    # reading wrote nothing


# --- claims: selectors checked against the schema when the file is loaded -----------------

CLAIM = """
[[claim]]
id = "x-1"
paper = "x"
where = "here"
claim = "c"
published = "p"
[claim.check]
suite = "s"
kind = "{kind}"
metric = "{metric}"
min = 0.0
max = 1.0
command = "precision run s"
{extra}
"""


def _load(kind: str = "trained", metric: str = "log10_mse", extra: str = "") -> None:
    load_claims(CLAIM.format(kind=kind, metric=metric, extra=extra))


def test_the_shipped_claims_pass_the_schema():
    claims = load_claims()
    assert len(claims) >= 40
    assert {c["check"]["kind"] for c in claims if "check" in c} == {
        "trained", "solver", "construction", "study"}


@pytest.mark.parametrize(("kind", "metric", "extra", "message"), [
    ("trained", "result.roundng", "", "unknown metric 'result.roundng' of a trained run"),
    ("solver", "result.approximation", "", "unknown metric 'result.approximation'"),
    ("study", "floor_log", "", "unknown metric 'floor_log'"),
    ("study", "result.a.b", "", "'result.a.b' is not result.<study metric>"),
    ("trained", "log10_mse", "[claim.check.config]\ndepht = 2", "unknown config key 'depht'"),
    ("trained", "log10_mse", "[claim.check.config]\nlayernorm = true",
     "unknown config key 'layernorm'"),
    ("trained", "log10_mse", "[claim.check.config]\n\"depth.x\" = 2", "is not a table"),
    ("study", "result.loss", "[claim.check.config]\n\"parms.layers\" = 2",
     "unknown config key 'parms'"),
    ("study", "result.loss", "[claim.check.relative_to]\nsubject = \"u\"\npair_on = [\"sed\"]",
     "unknown config key 'sed'"),
    ("study", "result.loss", "min_train_steps = 10", "min_train_steps applies to trained"),
    ("model", "log10_mse", "", "kind must be one of"),
    ("trained", "log10_mse", "subjet = \"t\"", "unknown check key 'subjet'"),
])
def test_a_claim_the_schema_does_not_allow_is_one_line_naming_it(kind, metric, extra,
                                                                   message):
    with pytest.raises(ClaimsError, match="claim 'x-1'") as err:
        _load(kind, metric, extra)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_claims_the_schema_allows_load():
    _load("trained", "result.rounding", "[claim.check.config]\n\"model_options.layernorm\" = true"
          "\n\"train.recipe\" = \"paper\"\ndepth = 2")
    _load("study", "result.anything_a_study_measures", "[claim.check.config]\n"
          "\"params.layers\" = 2\nseed = 0")
    assert metric_problem("construction", "result.max_log10_mse_vs_algorithm") is None


def test_a_trained_claim_reads_the_budget_from_train_steps_of_old_and_new_records():
    def row(config: dict, log10: float) -> dict:
        return {"kind": "trained", "suite": "primitives", "subject": "transformer",
                "task": "read", "precision": "float32", "status": "ok", "log10_mse": log10,
                "config": {"depth": 2, **config}, "result": {"train_converged": True}}

    old = row({"train_steps": 2000, "train": {"steps": 2000}}, -12.0)   # before the schema
    new = row({"train": {"steps": 2000}}, -12.0)
    for r in (old, new):
        c = next(c for c in check_claims([r]) if c.id == "001-read-affine")
        assert c.verdict == "not measured" and "trained 2000 steps" in c.command
    long = row({"train": {"steps": 200_000}}, -12.0)
    c = next(c for c in check_claims([long]) if c.id == "001-read-affine")
    assert c.verdict == "holds" and c.measured == "read MSE 1.0e-12"
