"""Compare two results stores number by number (a refactor must leave every stored number
bit-identical).

    python tools/compare_stores.py before.db after.db [--suite NAME ...]

Every run id must be in both stores; for each run every column, every key of its config and
result, and every point of every series must be equal (floats compared exactly, NaN equal to
NaN). What depends on the moment or the process, not on the computation, is skipped:
``wall_time``, ``worker``, ``created_at``, ``result.provenance`` and the keys of ``result``
that time something (``*wall_time``, ``*_seconds``). Prints the differences (at most 20) and
a summary; exit code 1 if any.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from typing import Any

SKIPPED_COLUMNS = {"wall_time", "worker", "created_at"}


def _clean(value: Any) -> Any:
    """Drop what depends on the moment or the process (see the module docstring)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()
                if k != "provenance" and not k.endswith(("wall_time", "_seconds"))}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _runs(db: str, suites: list[str] | None) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    where = f" WHERE suite IN ({','.join('?' * len(suites))})" if suites else ""
    runs = {}
    for row in con.execute(f"SELECT * FROM runs{where}", suites or []):
        run = {k: row[k] for k in row.keys() if k not in SKIPPED_COLUMNS}
        run["config_json"] = _clean(json.loads(run["config_json"]))
        run["result_json"] = _clean(json.loads(run["result_json"]))
        run["series"] = {}
        runs[row["run_id"]] = run
    for rid, name, step, value in con.execute("SELECT run_id, name, step, value FROM series"):
        if rid in runs:
            runs[rid]["series"].setdefault(name, []).append((step, value))
    for run in runs.values():
        run["series"] = {k: sorted(v) for k, v in run["series"].items()}
    con.close()
    return runs


def compare(before: str, after: str, suites: list[str] | None = None) -> list[str]:
    """The differences between the two stores (empty: equal in every stored number)."""
    a, b = _runs(before, suites), _runs(after, suites)
    diffs = [f"only in {before}: {rid} ({a[rid]['suite']} {a[rid]['subject']})"
             for rid in sorted(a.keys() - b.keys())]
    diffs += [f"only in {after}: {rid} ({b[rid]['suite']} {b[rid]['subject']})"
              for rid in sorted(b.keys() - a.keys())]
    for rid in sorted(a.keys() & b.keys()):
        for key in a[rid]:
            if not _same(a[rid][key], b[rid][key]):
                diffs.append(f"{rid} ({a[rid]['suite']} {a[rid]['subject']} "
                             f"{a[rid]['precision']}): {key} differs")
    return diffs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--suite", action="append", default=None)
    args = parser.parse_args()
    diffs = compare(args.before, args.after, args.suite)
    for line in diffs[:20]:
        print(line)
    n = len(_runs(args.before, args.suite))
    print(f"{n} runs in {args.before}; {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
