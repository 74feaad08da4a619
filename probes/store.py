"""The SQLite results store (DESIGN principle 7).

One file, WAL journal, ``synchronous=FULL``: a run is its row in ``runs`` plus its traces in
``series``, written in one ``BEGIN IMMEDIATE`` transaction, so a SIGKILL either leaves the
whole run or none of it. Runs are keyed by the hash of their resolved config
(:func:`config_hash`); writing an id that exists is a no-op, so re-runs and racing processes
never duplicate a row. Two processes may share a store: writers wait (``busy_timeout``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

SCHEMA_VERSION = 1

RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "suite", "kind", "subject", "task", "precision", "status", "error", "mse",
    "log10_mse", "floor_log10", "floor_index", "rate", "conv_order", "steps", "wall_time",
    "worker", "created_at", "config_json", "result_json",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, suite TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL,
    task TEXT NOT NULL, precision TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    mse REAL, log10_mse REAL, floor_log10 REAL, floor_index INTEGER, rate REAL,
    conv_order REAL, steps INTEGER, wall_time REAL, worker TEXT, created_at TEXT NOT NULL,
    config_json TEXT NOT NULL, result_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_suite ON runs (suite);
CREATE TABLE IF NOT EXISTS series (
    run_id TEXT NOT NULL REFERENCES runs (run_id), name TEXT NOT NULL, step INTEGER NOT NULL,
    value REAL, PRIMARY KEY (run_id, name, step)
);
"""


class StoreError(Exception):
    """A store that cannot be opened, read or queried (one line, for the CLI)."""


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces, NaN/inf as strings)."""
    return json.dumps(_json_safe(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def config_hash(config: dict[str, Any]) -> str:
    """Stable id of a resolved run config: sha256 of its canonical JSON, 16 hex chars."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


@dataclass
class RunRecord:
    """One finished run. ``series`` maps a trace name to values (step = position) or to
    ``(step, value)`` pairs (for subsampled traces)."""

    run_id: str
    suite: str
    kind: str
    subject: str
    task: str
    precision: str
    status: str
    error: str | None = None
    mse: float | None = None
    log10_mse: float | None = None
    floor_log10: float | None = None
    floor_index: int | None = None
    rate: float | None = None
    conv_order: float | None = None
    steps: int | None = None
    wall_time: float | None = None
    worker: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[Any]] = field(default_factory=dict)


def _real(x: Any) -> Any:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


class Store:
    """Results store in one SQLite file. ``create=False`` refuses to create a missing file."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"no results store at {self.path}")
        try:
            self._con = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            self._con.execute("PRAGMA busy_timeout = 60000")
            mode = self._con.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None:
                raise sqlite3.DatabaseError("journal mode")
            self._con.execute("PRAGMA synchronous = FULL")
            self._con.execute("PRAGMA foreign_keys = ON")
            self._con.executescript(_SCHEMA)
            self._check_version()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a precision results store ({exc})"
            ) from None

    def _check_version(self) -> None:
        row = self._con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._con.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {row[0]}, newer than this toolkit's "
                f"{SCHEMA_VERSION}; upgrade precision"
            )

    # --- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ------------------------------------------------------------------
    def write_run(self, record: RunRecord) -> bool:
        """Insert the run and its series in one transaction; False if the id already exists."""
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        values = (
            record.run_id, record.suite, record.kind, record.subject, record.task,
            record.precision, record.status, record.error, _real(record.mse),
            _real(record.log10_mse), _real(record.floor_log10), record.floor_index,
            _real(record.rate), _real(record.conv_order), record.steps, _real(record.wall_time),
            record.worker, created, canonical_json(record.config), canonical_json(record.result),
        )
        rows = []
        for name, values_ in record.series.items():
            for pos, item in enumerate(values_):
                step, value = item if isinstance(item, tuple | list) else (pos, item)
                rows.append((record.run_id, name, int(step), _real(value)))
        with self._transaction() as con:
            cur = con.execute(
                f"INSERT OR IGNORE INTO runs ({', '.join(RUN_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                values,
            )
            written = cur.rowcount == 1
            if written and rows:
                con.executemany(
                    "INSERT INTO series (run_id, name, step, value) VALUES (?, ?, ?, ?)", rows
                )
        return written

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error (also KeyboardInterrupt)."""
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def delete_suite(self, suite: str) -> int:
        """Remove every run of ``suite`` (and its series); returns how many runs."""
        with self._transaction() as con:
            con.execute(
                "DELETE FROM series WHERE run_id IN (SELECT run_id FROM runs WHERE suite = ?)",
                (suite,),
            )
            n = con.execute("DELETE FROM runs WHERE suite = ?", (suite,)).rowcount
        return n

    # --- reading ------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        return self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() \
            is not None

    def done_ids(self, suite: str | None = None) -> set[str]:
        if suite is None:
            return {r[0] for r in self._con.execute("SELECT run_id FROM runs")}
        return {r[0] for r in self._con.execute("SELECT run_id FROM runs WHERE suite = ?",
                                                 (suite,))}

    def suites(self) -> list[str]:
        return [r[0] for r in self._con.execute("SELECT DISTINCT suite FROM runs ORDER BY suite")]

    def count(self, suite: str | None = None) -> int:
        if suite is None:
            return int(self._con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        return int(self._con.execute("SELECT COUNT(*) FROM runs WHERE suite = ?",
                                     (suite,)).fetchone()[0])

    def runs(self, suite: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Runs as dicts (``config`` and ``result`` parsed), in a deterministic order."""
        if suite is not None:
            filters["suite"] = suite
        bad = set(filters) - set(RUN_COLUMNS)
        if bad:
            raise StoreError(f"unknown run column(s): {', '.join(sorted(bad))}")
        where = " AND ".join(f"{k} = ?" for k in filters)
        sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
        if where:
            sql += f" WHERE {where}"
        sql += " ORDER BY suite, kind, task, subject, precision, run_id"
        out = []
        for row in self._con.execute(sql, tuple(filters.values())):
            d = dict(zip(RUN_COLUMNS, row, strict=True))
            d["config"] = json.loads(d.pop("config_json"))
            d["result"] = json.loads(d.pop("result_json"))
            out.append(d)
        return out

    def series(self, run_id: str, name: str | None = None) -> dict[str, list[tuple[int, Any]]]:
        """Traces of a run: name -> [(step, value), ...] in step order."""
        sql = "SELECT name, step, value FROM series WHERE run_id = ?"
        args: tuple[Any, ...] = (run_id,)
        if name is not None:
            sql += " AND name = ?"
            args += (name,)
        out: dict[str, list[tuple[int, Any]]] = {}
        for n, step, value in self._con.execute(sql + " ORDER BY name, step", args):
            out.setdefault(n, []).append((step, value))
        return out

    # --- export -------------------------------------------------------------------
    def export_csv(self, file: IO[str], suite: str | None = None) -> None:
        """Runs table as CSV (header + one row per run; config/result as JSON text)."""
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(RUN_COLUMNS)
        for r in self.runs(suite=suite):
            row = [r[c] for c in RUN_COLUMNS if c not in ("config_json", "result_json")]
            writer.writerow([*row, canonical_json(r["config"]), canonical_json(r["result"])])

    def export_json(self, file: IO[str], suite: str | None = None) -> None:
        """Runs with their series as one JSON list (deterministic)."""
        rows = []
        for r in self.runs(suite=suite):
            r["series"] = {k: [[s, v] for s, v in pts] for k, pts in
                           self.series(r["run_id"]).items()}
            rows.append(_json_safe(r))
        json.dump(rows, file, sort_keys=True, indent=1, allow_nan=False)
        file.write("\n")
