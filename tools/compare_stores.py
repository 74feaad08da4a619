"""Compare two results stores number by number (a refactor must leave every stored number
bit-identical).

    python tools/compare_stores.py before.db after.db [--suite NAME ...] [--map-ids]

Every run id must be in both stores; for each run every column, every key of its config and
result, and every point of every series must be equal (floats compared exactly, NaN equal to
NaN). What depends on the moment or the process, not on the computation, is skipped:
``wall_time``, ``worker``, ``created_at``, ``result.provenance`` and the keys of ``result``
and the series that time something (``*wall_time``, ``*_seconds``). Prints the differences
(at most 20) and
a summary; exit code 1 if any.

``--map-ids`` compares a store of trained config version 3 with one of version 4: the id of
a trained record is the hash of its stored config, and version 4 changed the config in four
ways, so every trained id changed. Each version-3 trained record of ``before`` is compared as
the record it now is, its config migrated by :func:`migrate` and its id
``probes.store.canonical.config_hash(migrated config)``:

- the top-level copies ``layernorm`` and ``train_steps`` (of ``model_options.layernorm`` and
  ``train.steps``) are gone;
- the model entry's label is ``entry`` (it was ``solver``);
- ``train`` is the resolved table, every suite-settable ``TrainConfig`` field (it was the keys
  the suite gave);
- ``version`` is 4.

The number of ids mapped is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from probes.store.canonical import config_hash  # noqa: E402
from probes.training.train_config import TrainConfig  # noqa: E402  (the checkout's own packages)

SKIPPED_COLUMNS = {"wall_time", "worker", "created_at"}
#: Keys trained configs no longer hold (see ``--map-ids`` in the module docstring).
REMOVED_TRAINED_KEYS = ("layernorm", "train_steps")


def migrate(config: dict[str, Any]) -> dict[str, Any]:
    """A version-3 trained record's config as version 4 writes it (module docstring)."""
    new = {("entry" if k == "solver" else k): v for k, v in config.items()
           if k not in REMOVED_TRAINED_KEYS}
    return {**new, "version": 4, "train": TrainConfig.from_table(config["train"]).table()}


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


def _runs(db: str, suites: list[str] | None, map_ids: dict[str, str] | None = None
          ) -> dict[str, dict[str, Any]]:
    """The runs of ``db`` by id; with ``map_ids`` (filled here, old id -> new id) trained
    records are mapped as ``--map-ids`` says (see the module docstring)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    where = f" WHERE suite IN ({','.join('?' * len(suites))})" if suites else ""
    runs, ids = {}, {}
    for row in con.execute(f"SELECT * FROM runs{where}", suites or []):
        run = {k: row[k] for k in row.keys() if k not in SKIPPED_COLUMNS}
        config = json.loads(run["config_json"])
        if map_ids is not None and run["kind"] == "trained" and config.get("version") == 3:
            config = migrate(config)
            run["run_id"] = map_ids[row["run_id"]] = config_hash(config)
        run["config_json"] = _clean(config)
        run["result_json"] = _clean(json.loads(run["result_json"]))
        run["series"] = {}
        runs[run["run_id"]] = run
        ids[row["run_id"]] = run["run_id"]
    for rid, name, step, value in con.execute("SELECT run_id, name, step, value FROM series"):
        if rid in ids and not name.endswith("_seconds"):   # a timing, not a number computed
            runs[ids[rid]]["series"].setdefault(name, []).append((step, value))
    for run in runs.values():
        run["series"] = {k: sorted(v) for k, v in run["series"].items()}
    con.close()
    return runs


def compare(before: str, after: str, suites: list[str] | None = None,
            map_ids: dict[str, str] | None = None) -> list[str]:
    """The differences between the two stores (empty: equal in every stored number); with
    ``map_ids`` (a dict, filled with old id -> new id), ``before``'s trained ids mapped."""
    a, b = _runs(before, suites, map_ids), _runs(after, suites)
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
    parser.add_argument("--map-ids", action="store_true",
                        help="compare old trained records under their new ids (see above)")
    args = parser.parse_args()
    mapped: dict[str, str] | None = {} if args.map_ids else None
    diffs = compare(args.before, args.after, args.suite, mapped)
    for line in diffs[:20]:
        print(line)
    n = len(_runs(args.before, args.suite))
    if mapped is not None:
        print(f"{len(mapped)} trained run ids of {args.before} mapped to their new ids")
    print(f"{n} runs in {args.before}; {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
