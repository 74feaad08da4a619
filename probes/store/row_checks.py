"""What is wrong with a row read back from a results store, in one line (or None).

A store may hold rows written by hand, by an older version or damaged on disk; the reader
(:class:`probes.store.db.Store`) skips such a row and names it instead of failing on it. These
checks are the column types of the ``runs`` table and the JSON objects readers rely on.
"""

from __future__ import annotations

import functools
import json
from typing import Any

#: Column types of ``runs`` (its other columns hold JSON text, checked by :func:`json_object`).
REAL_COLUMNS = ("mse", "log10_mse", "floor_log10", "rate", "conv_order", "wall_time")
INT_COLUMNS = ("floor_index", "steps")
TEXT_COLUMNS = ("run_id", "suite", "kind", "subject", "task", "precision", "status",
                 "created_at")
OPTIONAL_TEXT_COLUMNS = ("error", "worker")


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def row_problem(d: dict[str, Any]) -> str | None:
    """What is wrong with a raw ``runs`` row (a NULL or a value of the wrong type where the
    schema expects something else), or None."""
    for c in TEXT_COLUMNS:
        if not isinstance(d[c], str):
            return f"{c} is {'NULL' if d[c] is None else shown(d[c])}, not text"
    for c in OPTIONAL_TEXT_COLUMNS:
        if d[c] is not None and not isinstance(d[c], str):
            return f"{c} is {shown(d[c])}, not text"
    for c in REAL_COLUMNS:
        if d[c] is not None and not is_number(d[c]):
            return f"{c} is {shown(d[c])}, not a number"
    for c in INT_COLUMNS:
        if d[c] is not None and not is_int(d[c]):
            return f"{c} is {shown(d[c])}, not an integer"
    return None


#: Keys of a run's config / result that readers take as tables (a JSON object when present).
NESTED_TABLES = {"config": ("problem", "train"),
                  "result": ("floor", "decomposition", "metrics")}


@functools.lru_cache(maxsize=256)
def is_precision(name: str) -> bool:
    from precision.precisions import PrecisionError, parse_precision

    try:
        parse_precision(name)
    except PrecisionError:
        return False
    return True


def decoded_problem(d: dict[str, Any]) -> str | None:
    """What is wrong with a decoded row's precision or nested JSON (a table that is not an
    object, a study without its study name), or None."""
    if not is_precision(d["precision"]):
        return f"precision is {shown(d['precision'])}, not a precision"
    for column, keys in NESTED_TABLES.items():
        for key in keys:
            value = d[column].get(key)
            if value is not None and not isinstance(value, dict):
                return f"{column}.{key} is {shown(value)}, not a JSON object"
    if d["kind"] == "study" and not isinstance(d["config"].get("study"), str):
        return "a study run whose config.study is not a name"
    return None


def json_object(text: Any, column: str) -> dict[str, Any]:
    """The JSON object stored in ``column``; ValueError (one line) for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"{column} is {'NULL' if text is None else shown(text)}, not JSON text")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"{column} is not JSON ({shown(text)})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{column} is JSON {type(value).__name__}, not an object")
    return value
