"""The SQLite results store.

One file, WAL journal, ``synchronous=FULL``: a run is its row in ``runs`` plus its traces in
``series``, written in one ``BEGIN IMMEDIATE`` transaction, so a SIGKILL either leaves the
whole run or none of it, and a committed run survives even a power cut. Runs are keyed by
the hash of their resolved config (:func:`probes.store.canonical.config_hash`); writing an id
that exists is a no-op, so re-runs and racing processes never duplicate a row. Several
processes may share a store: writers wait for each other (``busy_timeout``) instead of failing.

Opening never modifies a file that is not already a store: a text file or another
program's SQLite database is refused with a one-line :class:`StoreError`, and so is a store
that lacks a table or column of this schema or fails SQLite's ``PRAGMA quick_check`` (before
any work is done on it). A store opened with ``read_only=True`` refuses every write and needs
no write access: it opens with ``mode=ro``, and in a folder it cannot write (where SQLite
cannot create the WAL's shared-memory file) as ``immutable``.

Reading survives a malformed row: a run whose row holds a NULL, a non-JSON text or a value of
the wrong type where this schema expects something else is skipped and named on stderr (run
id and what is wrong, once per open store); the other runs are served.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import operator
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from precision.text_numbers import is_whole
from probes.store.atomic import atomic_write, expand_user
from probes.store.canonical import canonical_json, json_safe
from probes.store.row_checks import (
    INT_COLUMNS,
    REAL_COLUMNS,
    decoded_problem,
    is_int,
    is_number,
    json_object,
    row_problem,
)

#: Version of the table layout written by this module (``meta.schema_version``).
SCHEMA_VERSION = 1

#: How long a writer waits for another process's transaction before failing.
BUSY_TIMEOUT_S = 60.0

#: Columns of ``runs`` in schema order (also the CSV export's column order).
RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "suite", "kind", "subject", "task", "precision", "status", "error", "mse",
    "log10_mse", "floor_log10", "floor_index", "rate", "conv_order", "steps", "wall_time",
    "worker", "created_at", "config_json", "result_json",
)
#: Columns every store must have, per table (checked when a store is opened).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "runs": RUN_COLUMNS,
    "series": ("run_id", "name", "step", "value"),
}
_ORDER = "suite, kind, task, subject, precision, run_id"

_SCHEMA: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, suite TEXT NOT NULL, kind TEXT NOT NULL,
        subject TEXT NOT NULL, task TEXT NOT NULL, precision TEXT NOT NULL,
        status TEXT NOT NULL, error TEXT, mse REAL, log10_mse REAL, floor_log10 REAL,
        floor_index INTEGER, rate REAL, conv_order REAL, steps INTEGER, wall_time REAL,
        worker TEXT, created_at TEXT NOT NULL, config_json TEXT NOT NULL,
        result_json TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS runs_suite ON runs (suite)",
    """CREATE TABLE IF NOT EXISTS series (
        run_id TEXT NOT NULL REFERENCES runs (run_id), name TEXT NOT NULL,
        step INTEGER NOT NULL, value REAL, PRIMARY KEY (run_id, name, step)
    )""",
)


class StoreError(Exception):
    """A store that cannot be opened, read, written or queried (one line, for the CLI)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """Turn an SQLite error of a store method (a damaged page, a read-only file, a full
    disk) into a one-line :class:`StoreError` naming the store."""

    @functools.wraps(method)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(_describe(self.path, exc)) from None

    return wrapper  # type: ignore[return-value]


def _describe(path: Path, exc: sqlite3.Error) -> str:
    name = getattr(exc, "sqlite_errorname", "")
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return f"results store {path} is damaged ({_one_line(exc)}); nothing was written"
    if name.startswith("SQLITE_READONLY") or name.startswith("SQLITE_CANTOPEN") or \
            name.startswith("SQLITE_PERM"):
        return f"results store {path} is not writable ({_one_line(exc)})"
    return f"results store {path}: {_one_line(exc)}"


# --- records ----------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One finished run, as written by :meth:`Store.write_run`.

    ``series`` maps a trace name to values (step = position) or to ``(step, value)`` pairs
    (for subsampled traces). ``created_at`` is filled in by the store.
    """

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


def _real(x: Any) -> float | None:
    """A REAL column value: NaN becomes NULL, +-inf is kept."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _int(x: Any) -> int | None:
    return None if x is None else operator.index(x)


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _series_rows(record: RunRecord) -> list[tuple[str, str, int, float | None]]:
    rows = []
    for name, values in record.series.items():
        steps: set[int] = set()
        for pos, item in enumerate(values):
            step, value = item if isinstance(item, tuple | list) else (pos, item)
            step = operator.index(step)
            if step in steps:
                raise ValueError(f"run {record.run_id}: series {name!r} repeats step {step}")
            steps.add(step)
            rows.append((record.run_id, str(name), step, _real(value)))
    return rows


# --- the store --------------------------------------------------------------------------


class Store:
    """Results store in one SQLite file.

    ``Store(path)`` opens the store, creating the file and its tables if needed;
    ``Store(path, create=False)`` only opens an existing store (it never creates or
    initialises a file); ``Store(path, read_only=True)`` also refuses every write (reading
    leaves the file as it was). Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 read_only: bool = False) -> None:
        self.path = expand_user(path)
        self._reported: set[tuple[str, str]] = set()
        create = create and not read_only
        try:
            exists, is_dir = self.path.exists(), self.path.is_dir()
        except OSError as exc:  # e.g. a folder on the way that this user may not enter
            raise StoreError(f"cannot open results store {self.path}: "
                             f"{exc.strerror or exc}") from None
        if not create and not exists:
            raise StoreError(f"no results store at {self.path}")
        if is_dir:
            raise StoreError(f"{self.path} is a folder, not a results store")
        try:
            if read_only:
                con = self._connect_read_only()
            elif create:
                con = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S,
                                      isolation_level=None)
            else:  # mode=rw: fails instead of creating a file that vanished meanwhile
                con = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=rw", uri=True,
                                      timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(self._open_error(exc)) from None
        self._con = con
        try:
            self._open(create)
        except sqlite3.Error as exc:
            con.close()
            raise StoreError(self._open_error(exc)) from None
        except BaseException:
            con.close()
            raise

    def _open_error(self, exc: sqlite3.Error) -> str:
        """The one-line message of an SQLite error while opening the store."""
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_CORRUPT":
            return _describe(self.path, exc)
        name = getattr(exc, "sqlite_errorname", "")
        if name == "SQLITE_NOTADB":
            return f"{self.path} is not a precision results store ({_one_line(exc)})"
        if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")) and self.path.exists():
            folder = self.path.absolute().parent
            where = ("its file" if not os.access(self.path, os.W_OK) else "its folder"
                     if not os.access(folder, os.W_OK) else "")
            if where:
                return (f"results store {self.path} is not writable ({where} is read-only); "
                        "nothing was written")
        return f"cannot open results store {self.path}: {_one_line(exc)}"

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that never writes the store. Where the file and its folder can be
        written: ``mode=rw`` with ``PRAGMA query_only`` (the last reader removes the WAL's
        ``-wal`` / ``-shm`` files as it closes). Otherwise (a read-only file or folder, where
        SQLite could not create or remove those files, or would leave files its owner cannot
        write): ``immutable=1``, which reads the database file alone and creates nothing --
        refused if a ``-wal`` file holds writes that are not yet in it (they would be
        missed)."""
        uri = self.path.absolute().as_uri()
        writable = os.access(self.path, os.W_OK) and os.access(self.path.parent.absolute(),
                                                                os.W_OK)
        for mode in ("rw",) if writable else ():
            con = sqlite3.connect(f"{uri}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_S,
                                  isolation_level=None)
            try:
                con.execute("PRAGMA query_only = ON")
                con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return con
            except sqlite3.Error as exc:
                con.close()
                name = getattr(exc, "sqlite_errorname", "")
                if not (name.startswith("SQLITE_READONLY") or name.startswith("SQLITE_CANTOPEN")
                        or name.startswith("SQLITE_PERM")):
                    raise
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"cannot read results store {self.path}: it is read-only here "
                             f"and {wal.name} holds writes not yet in the store (open it "
                             "once where it can be written)")
        con = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S,
                              isolation_level=None)
        con.execute("PRAGMA query_only = ON")
        return con

    def _open(self, create: bool) -> None:
        con = self._con
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # Inspect before any write: a foreign file must be left exactly as it is.
        version = self._schema_version()
        if version is None:
            if not create:
                raise StoreError(f"{self.path} is not a precision results store (empty)")
            self._initialise()
            version = self._schema_version()
        if version is None:
            raise StoreError(f"{self.path} is not a precision results store (no tables)")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this toolkit's "
                f"{SCHEMA_VERSION}; upgrade precision"
            )
        self._check_schema()
        self._quick_check()
        if con.execute("PRAGMA query_only").fetchone()[0]:
            return  # read-only: the journal mode is the file's (WAL, set when created)
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = FULL")
        con.execute("PRAGMA foreign_keys = ON")

    def _schema_version(self) -> int | None:
        """``meta.schema_version``; None for an empty database; StoreError if foreign."""
        tables = {r[0] for r in self._con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None
        if "meta" not in tables or not {"runs", "series"} <= tables:
            raise StoreError(f"{self.path} is not a precision results store "
                             "(an SQLite database of other tables)")
        row = self._con.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        value = None if row is None else row[0]
        if isinstance(value, str) and is_whole(value):   # ASCII digits (text_numbers)
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            shown = "none" if row is None else repr(row[0])[:40]
            raise StoreError(f"{self.path} is not a precision results store (its "
                             f"schema_version is {shown}; every store has a version >= 1)")
        return value

    def _check_schema(self) -> None:
        """StoreError naming the first table column this schema needs and the store lacks."""
        for table, columns in REQUIRED_COLUMNS.items():
            have = {r[1] for r in self._con.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in have]
            if missing:
                raise StoreError(f"results store {self.path} lacks column "
                                 f"{', '.join(f'{table}.{c}' for c in missing)} (damaged or "
                                 "not written by precision); nothing was read or written")

    def _quick_check(self) -> None:
        """StoreError unless SQLite's ``PRAGMA quick_check`` passes (a damaged page, a
        truncated file, a broken index)."""
        problems = [str(r[0]) for r in self._con.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            first = " ".join((problems[0] if problems else "quick_check failed").split())
            raise StoreError(f"results store {self.path} is damaged (quick_check: {first}); "
                             "nothing was read or written")

    def _initialise(self) -> None:
        """Create the tables and the version row in one transaction (safe if racing)."""
        self._con.execute("PRAGMA journal_mode = WAL")  # outside any transaction
        with self._transaction() as con:
            if con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                return  # another process initialised it meanwhile; re-checked by the caller
            for statement in _SCHEMA:
                con.execute(statement)
            con.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),))

    # --- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        """BEGIN <mode> ... COMMIT, rolled back on any error (also KeyboardInterrupt)."""
        con = self._con
        con.execute(f"BEGIN {mode}")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
                con.execute("ROLLBACK")
            raise

    # --- writing ------------------------------------------------------------------------
    def write_run(self, record: RunRecord) -> bool:
        """Insert the run and its series in one transaction.

        Returns True when written, False (writing nothing) if the run id already exists,
        also when another process wrote it first. Bad values (non-JSON config/result,
        non-integer steps, a repeated step) raise before anything is written.
        """
        return self.write_runs([record]) == 1

    @_guarded
    def write_runs(self, records: list[RunRecord]) -> int:
        """Insert several runs (e.g. one trained job's records, one per evaluation
        precision) in ONE transaction: all of them or none survive a kill. Ids already
        present are skipped. Returns how many were written."""
        prepared = []
        for record in records:
            values: dict[str, Any] = {c: getattr(record, c) for c in RUN_COLUMNS
                                      if c not in ("created_at", "config_json", "result_json")}
            for c in REAL_COLUMNS:
                values[c] = _real(values[c])
            for c in INT_COLUMNS:
                values[c] = _int(values[c])
            values["config_json"] = canonical_json(record.config)
            values["result_json"] = canonical_json(record.result)
            prepared.append((values, _series_rows(record)))
        written = 0
        with self._transaction() as con:
            for values, rows in prepared:
                values["created_at"] = _utc_now()
                cur = con.execute(
                    f"INSERT OR IGNORE INTO runs ({', '.join(RUN_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    tuple(values[c] for c in RUN_COLUMNS),
                )
                if cur.rowcount == 1:
                    written += 1
                    if rows:
                        con.executemany(
                            "INSERT INTO series (run_id, name, step, value) VALUES (?, ?, ?, ?)",
                            rows)
        return written

    @_guarded
    def merge_from(self, other: Store, refuse: Callable[[dict[str, Any]], str | None] | None
                   = None) -> tuple[int, int, int, list[str]]:
        """Copy every run of ``other`` whose id this store lacks, with its traces and its
        original ``created_at``, in ONE transaction (all of them or none survive a kill);
        a run already here is never replaced. A malformed run of ``other`` is skipped (and
        named on stderr, as when reading it), and so is a run ``refuse`` (given the run's
        columns) says why not to let in -- the command passes the rule for names entering a
        store, :func:`probes.names.stored_names_problem`. Returns (copied, already here,
        already here with other numbers: the same run computed elsewhere, e.g. on another
        device, and one line per refused run)."""
        if other.path.resolve() == self.path.resolve():
            raise StoreError(f"cannot merge results store {self.path} into itself")
        rows = other._con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs "
                                  f"ORDER BY {_ORDER}").fetchall()
        copied = present = differing = 0
        refused: list[str] = []
        with self._transaction() as con:
            for row in rows:
                if other._decoded(row) is None:
                    continue
                run_id = row[0]
                problem = None if refuse is None else \
                    refuse(dict(zip(RUN_COLUMNS, row, strict=True)))
                if problem is not None:
                    refused.append(f"run {str(run_id)[:16]}: {problem}")
                    continue
                mine = con.execute("SELECT mse, status FROM runs WHERE run_id = ?",
                                   (run_id,)).fetchone()
                if mine is not None:
                    present += 1
                    theirs = (row[RUN_COLUMNS.index("mse")], row[RUN_COLUMNS.index("status")])
                    differing += tuple(mine) != theirs
                    continue
                con.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})", tuple(row))
                con.executemany(
                    "INSERT INTO series (run_id, name, step, value) VALUES (?, ?, ?, ?)",
                    other._con.execute("SELECT run_id, name, step, value FROM series "
                                       "WHERE run_id = ?", (run_id,)).fetchall())
                copied += 1
        return copied, present, differing, refused

    @_guarded
    def delete_suite(self, suite: str) -> int:
        """Remove every run of ``suite`` and its series in one transaction; returns how many
        runs were removed."""
        with self._transaction() as con:
            con.execute(
                "DELETE FROM series WHERE run_id IN (SELECT run_id FROM runs WHERE suite = ?)",
                (suite,),
            )
            n = con.execute("DELETE FROM runs WHERE suite = ?", (suite,)).rowcount
        return n

    @_guarded
    def delete_runs(self, *, dry_run: bool = False, **filters: Any) -> int:
        """Remove the runs matching equality ``filters`` on ``runs`` columns (``suite``,
        ``subject``, ``status``, ``precision``, ``run_id``, ...) and their series, in one
        transaction; returns how many runs matched. ``dry_run``: count only, change nothing.
        At least one filter is required (:class:`StoreError` otherwise), as is a known column.
        """
        if not filters:
            raise StoreError("delete_runs needs at least one filter")
        bad = sorted(set(filters) - set(RUN_COLUMNS))
        if bad:
            raise StoreError(f"unknown run column(s): {', '.join(bad)}")
        where = " AND ".join(f"{k} IS ?" for k in filters)
        args = tuple(filters.values())
        if dry_run:  # a read: no write lock, so it works on a read-only store too
            return int(self._con.execute(f"SELECT COUNT(*) FROM runs WHERE {where}",
                                         args).fetchone()[0])
        with self._transaction() as con:
            n = int(con.execute(f"SELECT COUNT(*) FROM runs WHERE {where}", args).fetchone()[0])
            if not dry_run and n:
                con.execute("DELETE FROM series WHERE run_id IN "
                            f"(SELECT run_id FROM runs WHERE {where})", args)
                con.execute(f"DELETE FROM runs WHERE {where}", args)
        return n

    def check_writable(self) -> None:
        """Raise :class:`StoreError` unless the store is intact and can be written: a
        ``PRAGMA quick_check`` and a write of the ``meta`` table that is rolled back. Call it
        before computing anything that will be stored, so a damaged or read-only store is
        reported before the work, not after it."""
        try:
            self._quick_check()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                con.execute("INSERT OR REPLACE INTO meta (key, value) "
                            "VALUES ('write_probe', 'rolled back')")
            finally:
                if con.in_transaction:
                    con.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise StoreError(_describe(self.path, exc)) from None

    # --- reading ------------------------------------------------------------------------
    @_guarded
    def has_run(self, run_id: str) -> bool:
        """Whether a run with this id is stored."""
        row = self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row is not None

    @_guarded
    def done_ids(self, suite: str | None = None) -> set[str]:
        """Ids of the stored runs (of ``suite``, or all)."""
        if suite is None:
            return {r[0] for r in self._con.execute("SELECT run_id FROM runs")
                    if isinstance(r[0], str)}
        return {r[0] for r in self._con.execute(
            "SELECT run_id FROM runs WHERE suite = ?", (suite,)) if isinstance(r[0], str)}

    @_guarded
    def suites(self) -> list[str]:
        """Names of the suites with stored runs, sorted."""
        return [r[0] for r in self._con.execute("SELECT DISTINCT suite FROM runs ORDER BY suite")
                if isinstance(r[0], str)]

    @_guarded
    def count(self, suite: str | None = None) -> int:
        """Number of stored runs (of ``suite``, or all)."""
        if suite is None:
            return int(self._con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        return int(self._con.execute(
            "SELECT COUNT(*) FROM runs WHERE suite = ?", (suite,)).fetchone()[0])

    def _select(self, suite: str | None, filters: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Raw ``runs`` rows (schema column order) matching equality filters, ordered."""
        sql, args = self._query(suite, filters)
        return self._con.execute(f"{sql} ORDER BY {_ORDER}", args).fetchall()

    @_guarded
    def matching(self, suite: str | None = None, **filters: Any) -> int:
        """How many stored runs match the filters of :meth:`runs` (malformed ones included)."""
        sql, args = self._query(suite, filters, "COUNT(*)")
        return int(self._con.execute(sql, args).fetchone()[0])

    def _query(self, suite: str | None, filters: dict[str, Any], what: str = ""
               ) -> tuple[str, list[Any]]:
        """``SELECT <what, default the run columns> FROM runs WHERE <filters>`` and its
        arguments; StoreError for an unknown column."""
        if suite is not None:
            filters = {**filters, "suite": suite}
        bad = sorted(set(filters) - set(RUN_COLUMNS))
        if bad:
            raise StoreError(f"unknown run column(s): {', '.join(bad)} "
                             f"(columns: {', '.join(RUN_COLUMNS)})")
        clauses, args = [], []
        for k, v in filters.items():
            if isinstance(v, list | tuple | set | frozenset):  # any of these values
                clauses.append(f"{k} IN ({', '.join('?' * len(v))})")
                args += list(v)
            else:  # IS: equality that also matches None against NULL
                clauses.append(f"{k} IS ?")
                args.append(v)
        sql = f"SELECT {what or ', '.join(RUN_COLUMNS)} FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return sql, args

    @_guarded
    def runs(self, suite: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Stored runs as dicts, ordered by suite, kind, task, subject, precision, run_id.

        ``filters`` are equalities on ``runs`` columns (``status="ok"``, ``error=None``; a
        list, tuple or set matches any of its values); an unknown column raises
        :class:`StoreError`. ``config_json`` / ``result_json`` are
        returned parsed, as ``config`` / ``result``.
        """
        out = []
        for row in self._select(suite, filters):
            d = self._decoded(row)
            if d is not None:
                out.append(d)
        return out

    def _decoded(self, row: tuple[Any, ...]) -> dict[str, Any] | None:
        """A ``runs`` row as :meth:`runs` returns it, or None (reported on stderr) for a
        malformed one."""
        d = dict(zip(RUN_COLUMNS, row, strict=True))
        problem = row_problem(d)
        if problem is None:
            try:
                d["config"] = json_object(d.pop("config_json"), "config_json")
                d["result"] = json_object(d.pop("result_json"), "result_json")
                problem = decoded_problem(d)
            except ValueError as exc:
                problem = str(exc)
        if problem is not None:
            self._skip(d.get("run_id"), problem)
            return None
        return d

    def _skip(self, run_id: Any, problem: str) -> None:
        """Name a malformed run on stderr (once per open store) instead of serving it."""
        key = (repr(run_id), problem)
        if key in self._reported:
            return
        self._reported.add(key)
        who = f"run {run_id}" if isinstance(run_id, str) else f"a run with run_id {run_id!r}"
        hint = f" (precision delete --run-id {run_id})" if isinstance(run_id, str) else ""
        print(f"precision: warning: results store {self.path}: skipping {who}: {problem}"
              f"{hint}", file=sys.stderr)

    @_guarded
    def series(self, run_id: str, name: str | None = None) -> dict[str, list[tuple[int, Any]]]:
        """Traces of a run: name -> [(step, value), ...] in step order (NaN reads as None)."""
        sql = "SELECT name, step, value FROM series WHERE run_id = ?"
        args: tuple[Any, ...] = (run_id,)
        if name is not None:
            sql += " AND name = ?"
            args += (name,)
        out: dict[str, list[tuple[int, Any]]] = {}
        bad = 0
        for n, step, value in self._con.execute(sql + " ORDER BY name, step", args):
            if not isinstance(n, str) or not is_int(step) or not (value is None
                                                                    or is_number(value)):
                bad += 1
                continue
            out.setdefault(n, []).append((step, value))
        if bad:
            self._skip(run_id, f"{bad} malformed trace point(s) (a NULL or non-numeric name, "
                               "step or value) left out of its series")
        return out

    # --- export -------------------------------------------------------------------------
    @_guarded
    def export_csv(self, file: IO[str] | str | os.PathLike[str],
                   suite: str | None = None, **filters: Any) -> None:
        """Write the runs as CSV: a header, then one row per run in :meth:`runs` order.

        The run columns in schema order (``config_json`` / ``result_json`` aside), then one
        column per field of the config and of the result, named by its dotted path
        (``config.depth``, ``result.decomposition.approximation``; the union over the rows,
        sorted; a list as its JSON text): every number in a column of its own, none nested
        in a JSON string. Floats as ``repr`` (exact), NULL / absent as empty, infinities as
        ``inf`` / ``-inf``. ``file`` is an open text file (opened with ``newline=""``) or a
        path (written atomically: complete or not at all). ``filters`` as in :meth:`runs`.
        """
        with _text_out(file, newline="") as out, self._transaction("DEFERRED"):
            flat = []
            for row in self._select(suite, filters):
                d = self._decoded(row)
                if d is not None:
                    flat.append({**{k: v for k, v in d.items() if k in RUN_COLUMNS},
                                 **_flattened("config", d["config"]),
                                 **_flattened("result", d["result"])})
            header = [c for c in RUN_COLUMNS if c not in ("config_json", "result_json")]
            header += sorted({k for f in flat for k in f} - set(header))
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(header)
            writer.writerows([_csv_cell(f.get(c)) for c in header] for f in flat)

    @_guarded
    def export_json(self, file: IO[str] | str | os.PathLike[str],
                    suite: str | None = None, **filters: Any) -> None:
        """Write the runs (as :meth:`runs` returns them) with their ``series`` as a JSON list.

        Series are ``{name: [[step, value], ...]}``; NaN/inf appear as "nan"/"inf"/"-inf"
        so the output is standard JSON. ``file`` is an open text file or a path (written
        atomically). ``filters`` as in :meth:`runs`.
        """
        with _text_out(file) as out, self._transaction("DEFERRED"):
            rows = []
            for r in self.runs(suite=suite, **filters):
                r["series"] = {k: [[s, v] for s, v in pts]
                               for k, pts in self.series(r["run_id"]).items()}
                rows.append(json_safe(r, strict=False))
            json.dump(rows, out, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False)
            out.write("\n")


def _flattened(prefix: str, value: Any) -> dict[str, Any]:
    """``value`` (a decoded JSON object) as ``{dotted path: leaf}``: nested objects become
    ``prefix.key.subkey`` columns; lists stay leaves."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flattened(f"{prefix}.{key}", item))
    return out


def _csv_cell(value: Any) -> Any:
    """One CSV cell: None empty, a list as its JSON text, anything else as it is (floats
    as their exact repr by the csv writer)."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return json.dumps(json_safe(list(value), strict=False), sort_keys=True)
    return value


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@contextmanager
def _text_out(file: IO[str] | str | os.PathLike[str], newline: str | None = None,
              ) -> Iterator[IO[str]]:
    """``file`` itself if it is an open file, else that path written atomically (UTF-8)."""
    if isinstance(file, str | os.PathLike):
        with atomic_write(file, "w", encoding="utf-8", newline=newline) as f:
            yield f
    else:
        yield file
