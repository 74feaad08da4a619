"""Rows of one data version only: a store may hold runs computed on problem data of an older
generator (their config's ``data_version`` differs; rows without the key are version 1).
Tables and reports aggregate over seeds, so mixing versions would average numbers of
different problems: readers keep each suite's newest version and say how many rows they left
out."""

from __future__ import annotations

from typing import Any

from probes.store.records import config_of


def data_version(row: dict[str, Any]) -> int:
    """The data-generation version a stored row was computed on (rows that do not record it
    are :data:`~probes.store.records.UNRECORDED_VERSION`)."""
    return config_of(row).data_version


def target_version(row: dict[str, Any]) -> int:
    """The version of the training targets a stored row's model learned from
    (:attr:`~probes.store.records.TrainedConfig.target_version`; 1 for other kinds)."""
    version = getattr(config_of(row), "target_version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def newest_data_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``rows`` less those of an older data version than their suite's newest, and less those
    whose training targets are of an older version than the newest of their suite and task
    (a task's targets are its own), and how many were left out (order kept)."""
    newest: dict[str, int] = {}
    for r in rows:
        suite, version = str(r.get("suite")), data_version(r)
        newest[suite] = max(newest.get(suite, version), version)
    current = [r for r in rows if data_version(r) == newest[str(r.get("suite"))]]
    targets: dict[tuple[str, str], int] = {}
    for r in current:
        key, version = (str(r.get("suite")), str(r.get("task"))), target_version(r)
        targets[key] = max(targets.get(key, version), version)
    kept = [r for r in current
            if target_version(r) == targets[(str(r.get("suite")), str(r.get("task")))]]
    return kept, len(rows) - len(kept)


def left_out_note(n: int) -> str:
    """The sentence a table or report prints when it left out ``n`` older-data rows."""
    return (f"{n} stored runs computed on an older version of the problem data or training "
            "targets are left out "
            "('precision delete' can remove them)")
