import math
import multiprocessing as mp
import sqlite3

import pytest

from probes.store.canonical import config_hash
from probes.store.db import RunRecord, Store, StoreError


def record(run_id: str, n: int = 5, suite: str = "s") -> RunRecord:
    return RunRecord(
        run_id=run_id, suite=suite, kind="solver", subject="gd", task="t", precision="float32",
        status="ok", mse=1e-14, log10_mse=-14.0, floor_log10=-math.inf, rate=math.nan,
        config={"x": 1}, result={"v": math.inf}, series={"log10_mse": [float(i) for i in range(n)]},
    )


def test_round_trip_and_no_duplicates(tmp_path):
    with Store(tmp_path / "r.db") as s:
        assert s.write_run(record("a"))
        assert not s.write_run(record("a", n=9))
        assert s.has_run("a") and s.count() == 1 and s.suites() == ["s"]
        row = s.runs()[0]
        assert row["mse"] == 1e-14 and row["floor_log10"] == -math.inf and row["rate"] is None
        assert row["config"] == {"x": 1} and row["result"] == {"v": "inf"}
        assert [v for _, v in s.series("a")["log10_mse"]] == [0.0, 1.0, 2.0, 3.0, 4.0]
        with pytest.raises(StoreError, match="unknown run column"):
            s.runs(colour="red")


def test_config_hash_is_stable_and_order_free():
    assert config_hash({"a": 1, "b": [1.0, 2]}) == config_hash({"b": [1.0, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    assert len(config_hash({})) == 16


def _writer(path: str, offset: int) -> None:
    with Store(path) as s:
        for i in range(50):
            s.write_run(record(f"r{offset + i}"))


def test_two_processes_share_a_store(tmp_path):
    path = str(tmp_path / "r.db")
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, off)) for off in (0, 25)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 75
    assert con.execute("SELECT COUNT(*) FROM series").fetchone()[0] == 75 * 5


def test_not_a_store_and_missing_store(tmp_path):
    bogus = tmp_path / "x.db"
    bogus.write_text("hello\n" * 1000)
    with pytest.raises(StoreError, match="not a precision results store"):
        Store(bogus)
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no results store"):
        Store(missing, create=False)
    assert not missing.exists()


def test_delete_suite(tmp_path):
    with Store(tmp_path / "r.db") as s:
        s.write_run(record("a", suite="one"))
        s.write_run(record("b", suite="two"))
        assert s.delete_suite("one") == 1
        assert s.suites() == ["two"] and s.series("a") == {}


def test_delete_runs_by_filters_and_dry_run(tmp_path):
    with Store(tmp_path / "r.db") as s:
        s.write_run(record("a", suite="one"))
        s.write_run(record("b", suite="one"))
        s.write_run(record("c", suite="two"))
        assert s.delete_runs(suite="one", dry_run=True) == 2 and s.count() == 3
        assert s.delete_runs(suite="one", run_id="a") == 1
        assert s.count() == 2 and s.series("a") == {} and s.series("b")
        assert s.delete_runs(status="failed") == 0
        with pytest.raises(StoreError, match="at least one filter"):
            s.delete_runs()
        with pytest.raises(StoreError, match="unknown run column"):
            s.delete_runs(colour="red")


def test_check_writable_catches_damage_and_read_only(tmp_path, monkeypatch):
    path = tmp_path / "r.db"
    with Store(path) as s:
        s.write_run(record("a"))
        s.check_writable()  # intact and writable
        assert s.runs(suite="s")[0]["run_id"] == "a"
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'series'").fetchone()[0]
    con.close()
    with open(path, "r+b") as f:
        f.seek(page * (root - 1))
        f.write(b"\x0d" + bytes(range(1, 256)) * (page // 256))
    with pytest.raises(StoreError, match="is damaged"):  # refused when opened
        Store(path, create=False)
    # A read-only connection: reading works, the write probe fails (nothing is written).
    fresh = tmp_path / "ro.db"
    with Store(fresh) as s:
        s.write_run(record("a"))
    real = sqlite3.connect
    monkeypatch.setattr("probes.store.db.sqlite3.connect",
                        lambda target, *a, uri=False, **k: real(
                            (target if uri else fresh.absolute().as_uri()).split("?")[0]
                            + "?mode=ro", *a, uri=True, **k))
    with Store(fresh) as s:
        assert s.count() == 1
        with pytest.raises(StoreError, match="not writable"):
            s.check_writable()
        with pytest.raises(StoreError, match="not writable"):
            s.write_run(record("b"))


@pytest.mark.parametrize("version", ["-1", "0", "\u0665", "two", None, "2"])
def test_a_store_claiming_a_version_no_toolkit_wrote_is_refused_untouched(tmp_path, version):
    """schema_version must be a whole number >= 1 (ASCII): -1, 0, another script's digit
    or text is not a store; a newer one is refused as newer. The file is not written."""
    import hashlib
    import sqlite3

    path = tmp_path / "r.db"
    with Store(path) as s:
        s.write_runs([record("a")])
    con = sqlite3.connect(path)
    if version is None:
        con.execute("DELETE FROM meta WHERE key = 'schema_version'")
    else:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    con.commit()
    con.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    expected = "newer than this toolkit" if version == "2" else "is not a precision results"
    with pytest.raises(StoreError, match=expected):
        Store(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
