"""Canonical JSON of configs and results, and the run id that hashes it.

One spelling per value (sorted keys, no spaces, ASCII, floats as ``repr``, NaN/inf as
strings) so that equal configs hash to equal ids in every process and on every machine.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def json_safe(value: Any, *, strict: bool) -> Any:
    """Copy of ``value`` with NaN/inf floats as the strings "nan"/"inf"/"-inf".

    Tuples become lists. Dict keys must be ``str`` or ``int`` (ints become their decimal
    text, as in JSON). With ``strict=False`` numpy-like scalars (anything with ``dtype`` and
    ``item()``) are converted to Python numbers; with ``strict=True`` they are left to
    :func:`json.dumps`, which rejects all but ``float64`` with ``TypeError``.
    """
    if not strict and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(k, bool) or not isinstance(k, str | int):
                raise TypeError(f"JSON object keys must be str or int, not {type(k).__name__}")
            key = str(k)
            if key in out:
                raise TypeError(f"duplicate JSON object key {key!r}")
            out[key] = json_safe(v, strict=strict)
        return out
    if isinstance(value, list | tuple):
        return [json_safe(v, strict=strict) for v in value]
    return value


def _dumps(value: Any, *, strict: bool) -> str:
    return json.dumps(json_safe(value, strict=strict), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Deterministic, standard JSON text of ``value``.

    Sorted keys, no spaces, ASCII only, floats as ``repr``, NaN/inf as the strings
    "nan"/"inf"/"-inf", numpy scalars as Python numbers. Raises ``TypeError`` for values
    JSON cannot hold.
    """
    return _dumps(value, strict=False)


def config_hash(config: dict[str, Any]) -> str:
    """Stable id of a resolved run config: sha256 of its canonical JSON, 16 hex chars.

    Key order does not matter; ``1`` and ``1.0`` differ. Raises ``TypeError`` on values that
    are not plain JSON data (sets, objects, numpy scalars other than float64, ...).
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, not {type(config).__name__}")
    return hashlib.sha256(_dumps(config, strict=True).encode("ascii")).hexdigest()[:16]
