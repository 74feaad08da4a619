"""Study suites: [studies.*] tables -> runs -> store records -> tables and claims."""

from __future__ import annotations

from pathlib import Path

import mpmath
import pytest

from precision.backends import backend_for
from precision.cli.main import main
from precision.precisions import Precision, as_precision
from probes.kinds.study import compute
from probes.run import RunOptions
from probes.store.canonical import config_hash
from probes.store.db import Store
from probes.studies import STUDIES, StudyError, StudyOutcome, per_precision, register_study
from probes.suite import SuiteError, load_suite
from reports.papers.claims import metric_value
from reports.study_table import study_tables


def _check(params: dict) -> None:
    if params["iters"] < 1:
        raise StudyError("iters must be >= 1")


@register_study("test.newton_sqrt2", {"iters": 8, "x0": 1.0}, validate=_check)
@per_precision
def newton_sqrt2(params: dict, precision: Precision, seed: int) -> StudyOutcome:
    """Heron's iteration for sqrt(2) in the given precision (a real, tiny study)."""
    xp = backend_for(as_precision(precision))
    two = xp.asarray([2.0])
    x = xp.asarray([params["x0"]])
    truth = mpmath.sqrt(2)
    errs = []
    for _ in range(params["iters"]):
        x = (x + two / x) * xp.asarray([0.5])
        errs.append(float(abs(mpmath.mpf(xp.to_exact(x)[0]) - truth)))
    return StudyOutcome(metrics={"error": errs[-1], "first": errs[0]}, primary="error",
                        series={"error": errs})


def _suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text('name = "st"\nprecisions = ["float32", "float64", "mp50"]\n' + body)
    return path


def test_study_grid_expands_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _suite(tmp_path, '[studies.heron]\nstudy = "test.newton_sqrt2"\niters = [2, 8]\n')
    runs = load_suite(str(path)).runs
    assert len(runs) == 2                               # one run per grid point and seed ...
    assert [r.label for r in runs] == ["iters=2", "iters=8"]
    assert all(len(r.ids) == 3 for r in runs)           # ... one record per precision
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "st / heron (test.newton_sqrt2)" in out and "iters=8" in out
    with Store(db, create=False) as store:
        rows = {(r["task"], r["precision"]): r for r in store.runs(suite="st")}
        assert all(r["kind"] == "study" and r["status"] == "ok" for r in rows.values())
        # 2 Heron steps from 1: 1.5, 1.41667 -> error 2.45e-3 in every precision
        assert metric_value(rows[("iters=2", "float64")], "result.error") == pytest.approx(
            2.4531e-3, rel=1e-3)
        # converged: the error is the precision's rounding of sqrt(2)
        assert 0 < rows[("iters=8", "float32")]["mse"] < 1e-7
        assert 0 < rows[("iters=8", "float64")]["mse"] < 3e-16
        assert rows[("iters=8", "mp50")]["mse"] < 1e-49
        trace = store.series(rows[("iters=8", "float64")]["run_id"], "error")["error"]
        assert len(trace) == 8 and trace[0][1] == pytest.approx(0.0857864, rel=1e-5)
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
    assert "0 computed" in capsys.readouterr().out


def test_study_report_and_text_table(tmp_path: Path) -> None:
    path = _suite(tmp_path, '[studies.heron]\nstudy = "test.newton_sqrt2"\n')
    db = tmp_path / "r.db"
    out = tmp_path / "rep"
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--report-dir",
                 str(out)]) == 0
    md = (out / "st" / "report.md").read_text()
    assert "st / heron (test.newton_sqrt2)" in md
    assert (out / "st" / "figures" / "study-st-heron.png").exists()
    with Store(db, create=False) as store:
        text = study_tables(store.runs(suite="st"))
    assert text.splitlines()[1].split() == ["grid", "point", "precision", "error", "first"]


@pytest.mark.parametrize("body, message", [
    ('[studies.x]\nstudy = "nope.study"\n', "unknown study 'nope.study'"),
    ('[studies.x]\nstudy = "test.newton_sqrt2"\nsteps = 3\n', "has no parameter(s) steps"),
    ('[studies.x]\nstudy = "test.newton_sqrt2"\niters = 0\n', "iters must be >= 1"),
    ('[studies.x]\nstudy = "test.newton_sqrt2"\niters = []\n', "grid axis 'iters' is empty"),
    ('[studies.x]\niters = 3\n', "needs study ="),
    ('[studies.x]\nstudy = "test.newton_sqrt2"\nprecisions = ["float33"]\n', "float33"),
])
def test_bad_study_entries_are_one_line(tmp_path: Path, body: str, message: str,
                                        capsys: pytest.CaptureFixture) -> None:
    path = _suite(tmp_path, body)
    with pytest.raises(SuiteError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_suite(str(path))
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--db", str(db), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message.split("(")[0] in err
    assert not db.exists()


def test_a_study_that_raises_is_a_failed_run(tmp_path: Path) -> None:
    @register_study("test.broken", {})
    @per_precision
    def broken(params: dict, precision: Precision, seed: int) -> StudyOutcome:
        """Always fails."""
        raise FloatingPointError("overflow in step 3")

    try:
        path = _suite(tmp_path, '[studies.b]\nstudy = "test.broken"\nprecisions = ["float64"]\n'
                      '[studies.heron]\nstudy = "test.newton_sqrt2"\nprecisions = ["float64"]\n')
        db = tmp_path / "r.db"
        assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
        with Store(db, create=False) as store:
            rows = {r["subject"]: r for r in store.runs(suite="st")}
        assert rows["b"]["status"] == "failed" and "overflow in step 3" in rows["b"]["error"]
        assert rows["heron"]["status"] == "ok"
    finally:
        STUDIES.pop("test.broken", None)


def test_one_call_per_run_and_todays_record_ids(tmp_path: Path) -> None:
    """A run covers every precision of its grid point and seed: the study is called once
    (a trained model is trained once), and each precision's record keeps the id and config
    of a one-precision record: the hash of the config with that precision."""
    calls: list[tuple[str, ...]] = []

    @register_study("test.once", {"scale": 1.0})
    def once(params: dict, precisions: tuple[Precision, ...], seed: int
             ) -> list[StudyOutcome]:
        """Counts its calls; fails in float32 only."""
        calls.append(tuple(p.name for p in precisions))
        if "float32" not in calls[-1]:
            return [StudyOutcome(metrics={"x": params["scale"] * seed}) for _ in precisions]
        return [StudyOutcome.failed(FloatingPointError("float32 overflow"))
                if p.name == "float32" else StudyOutcome(metrics={"x": params["scale"] * seed})
                for p in precisions]

    try:
        path = _suite(tmp_path, 'seeds = [3, 4]\n[studies.o]\nstudy = "test.once"\n'
                      'scale = [1.0, 2.0]\nprecisions = ["float32", "float64"]\n')
        runs = load_suite(str(path)).runs
        assert len(runs) == 4 and [len(r.precisions) for r in runs] == [2] * 4
        run = runs[0]
        base = {"version": 2, "kind": "study", "suite": "st", "study": "test.once",
                "study_version": 1, "entry": "o", "params": {"scale": 1.0}, "seed": 3,
                "data_version": run.config["data_version"]}
        assert run.config == {**base, "precisions": ["float32", "float64"]}
        assert run.ids == tuple(config_hash({**base, "precision": p})
                                for p in ("float32", "float64"))
        assert run.run_id not in run.ids                   # the run's id only schedules it
        records = compute(run, RunOptions())
        assert calls == [("float32", "float64")]           # one call for both precisions
        assert [r.run_id for r in records] == list(run.ids)
        assert [r.config for r in records] == [{**base, "precision": p}
                                               for p in ("float32", "float64")]
        # a failure in one precision is that precision's record, not the other's
        assert [r.status for r in records] == ["failed", "ok"]
        assert records[0].error == "FloatingPointError: float32 overflow"
        assert records[1].result["metrics"] == {"x": 3.0}
        db = tmp_path / "r.db"
        calls.clear()
        assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
        assert len(calls) == 4
        with Store(db, create=False) as store:
            stored = store.runs(suite="st")
        assert sorted(r["run_id"] for r in stored) == sorted(i for r in runs for i in r.ids)
    finally:
        STUDIES.pop("test.once", None)


def test_a_study_that_raises_fails_every_precision_of_its_run(tmp_path: Path) -> None:
    @register_study("test.untrainable", {})
    def untrainable(params: dict, precisions: tuple[Precision, ...], seed: int
                    ) -> list[StudyOutcome]:
        """Training fails before any precision is measured."""
        raise FloatingPointError("loss became nan")

    try:
        path = _suite(tmp_path, '[studies.u]\nstudy = "test.untrainable"\n')
        [run] = load_suite(str(path)).runs
        records = compute(run, RunOptions())
        assert [r.precision for r in records] == ["float32", "float64", "mp50"]
        assert all(r.status == "failed" and "loss became nan" in r.error for r in records)
    finally:
        STUDIES.pop("test.untrainable", None)
