"""`precision merge`: the runs another store holds (a lent GPU's, say) are copied whole, with
their traces and dates; a run already in the target is never replaced, and one computed
with other numbers is counted; bad sources are one-line errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_store import record

from precision.cli.main import main
from probes.store.db import Store, StoreError


def _store(path: Path, *records) -> Path:
    with Store(path) as s:
        s.write_runs(list(records))
    return path


def test_merge_copies_what_the_target_lacks_and_keeps_what_it_has(tmp_path, capsys):
    gpu = _store(tmp_path / "gpu.db", record("a", n=3), record("b", n=4), record("c"))
    other_numbers = dataclasses.replace(record("b"), mse=2e-14)
    cpu = _store(tmp_path / "cpu.db", other_numbers, record("c"))
    with Store(gpu, read_only=True) as s:
        dates = {r["run_id"]: r["created_at"] for r in s.runs()}
    assert main(["merge", str(gpu), "--db", str(cpu)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == (f"merged 1 run from {gpu} into {cpu}; 2 already there, 1 of them with "
                   f"other numbers (kept {cpu}'s)")
    with Store(cpu, read_only=True) as s:
        runs = {r["run_id"]: r for r in s.runs()}
        assert set(runs) == {"a", "b", "c"}
        assert runs["a"]["created_at"] == dates["a"]          # the run as it was computed
        assert [v for _, v in s.series("a")["log10_mse"]] == [0.0, 1.0, 2.0]
        assert runs["b"]["mse"] == 2e-14                       # never replaced
        assert len(s.series("b")["log10_mse"]) == 5
    # again: nothing left to copy; the source was only read
    assert main(["merge", str(gpu), "--db", str(cpu)]) == 0
    assert capsys.readouterr().out.startswith(f"merged 0 runs from {gpu}")
    with Store(gpu, read_only=True) as s:
        assert s.count() == 3


def test_merge_into_a_new_store_and_from_several(tmp_path, capsys):
    one = _store(tmp_path / "one.db", record("a"))
    two = _store(tmp_path / "two.db", record("b"), record("a"))
    target = tmp_path / "all.db"
    assert main(["merge", str(one), str(two), "--db", str(target)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("merged 1 run ") and lines[1].endswith("; 1 already there")
    with Store(target, read_only=True) as s:
        assert [r["run_id"] for r in s.runs()] == ["a", "b"]


def test_bad_sources_are_one_line_errors(tmp_path, capsys):
    db = _store(tmp_path / "r.db", record("a"))
    assert main(["merge", str(tmp_path / "missing.db"), "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"no results store at {tmp_path / 'missing.db'}") and "\n" not in err
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n")
    assert main(["merge", str(text), "--db", str(db)]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and text.read_text() == "not a store\n"
    with Store(db) as s, pytest.raises(StoreError, match="into itself"):
        s.merge_from(s)
    assert main(["merge", str(db), "--db", str(db)]) != 0
    assert "into itself" in capsys.readouterr().err
    with Store(db, read_only=True) as s:
        assert s.count() == 1


@pytest.mark.parametrize("field,value,problem", [
    ("subject", "a\x00b", "contains NUL"), ("task", "x/y", "contains '/'"),
    ("suite", "s" * 5000, "5000 characters"), ("subject", "ab\u202ecd", "U+202E"),
    ("precision", "e\u0665m2", "not a precision"),   # skipped as malformed, named
])
def test_merge_refuses_names_the_name_rule_refuses_at_entry(tmp_path, capsys, field, value,
                                                            problem):
    """A store written by other means may hold names ``run`` refuses at entry; a merge does
    not let them in, and says which run and why."""
    bad = dataclasses.replace(record("bad"), **{field: value})
    source = _store(tmp_path / "src.db", record("good"), bad)
    target = tmp_path / "t.db"
    assert main(["merge", str(source), "--db", str(target)]) == 0
    captured = capsys.readouterr()
    out = captured.out.strip()
    assert out.startswith(f"merged 1 run from {source}") and "\n" not in out
    if field != "precision":
        assert "refused 1 whose names a store does not take (first: run bad: its " in out
    assert problem in out + captured.err
    with Store(target, read_only=True) as s:
        assert [r["run_id"] for r in s.runs()] == ["good"]
