"""Rows computed on an older version of the problem data are never mixed into tables and
reports with new ones: each suite's newest data version is shown and the rest is counted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from precision.cli.main import main
from precision.deterministic import DATA_VERSION
from reports.data_version import data_version, newest_data_rows

SUITE = """
name = "dv"
precisions = ["float64"]
seeds = [0, 1]
[problems.p]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 6
[solvers.ols_qr]
problems = ["p"]
"""


def test_newest_version_per_suite_is_kept_and_the_rest_counted():
    rows = [{"suite": "a", "config": {"data_version": 2}}, {"suite": "a", "config": {}},
            {"suite": "b", "config": {}}, {"suite": "a", "config": {"data_version": True}}]
    kept, older = newest_data_rows(rows)
    assert kept == [rows[0]] + [rows[2]] and older == 2
    assert [data_version(r) for r in rows] == [2, 1, 1, 1]


def test_rows_of_older_training_targets_are_left_out_per_task():
    """A task's newest target version is kept within its suite; another task's rows (whose
    targets never changed) stay."""
    rows = [{"suite": s, "kind": "trained", "task": t, "config": {"data_version": 2, **c}}
            for s, t, c in (("a", "affine", {}), ("a", "affine", {"target_version": 2}),
                            ("a", "read", {}), ("b", "affine", {}))]
    kept, older = newest_data_rows(rows)
    assert kept == rows[1:] and older == 1


def test_results_and_report_leave_out_rows_of_old_data(tmp_path: Path, capsys):
    suite, db = tmp_path / "dv.toml", tmp_path / "r.db"
    suite.write_text(SUITE, encoding="utf-8")
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    con = sqlite3.connect(db)
    stored = [(i, json.loads(c)) for i, c in con.execute("SELECT run_id, config_json FROM runs")]
    run_id, cfg = stored[1]
    assert cfg["data_version"] == DATA_VERSION
    del cfg["data_version"]  # as a row stored before the version was recorded
    with con:
        con.execute("UPDATE runs SET config_json = ? WHERE run_id = ?", (json.dumps(cfg), run_id))
    con.close()
    capsys.readouterr()
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "1 stored runs computed on an older version of the problem data or training " \
        "targets are left out" in out
    assert "median of 2 seeds" not in out  # the old row is not aggregated with the new
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "1 stored runs computed on an older version of the problem data" in text
