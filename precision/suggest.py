"""Did you mean: the nearest names to a misspelt one, for one-line errors.

``did_you_mean("gdd", solvers)`` gives ``" (did you mean 'gd'?)"`` or ``""``: difflib's
closest matches (ratio at least 0.6), plus the names that start with what was typed, or that
it is a known short form of (``fp8`` -> ``float8_e4m3``, ``float8_e5m2``), at most three.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Short forms people type for a named precision (not aliases: each names a choice).
SHORT_FORMS: dict[str, tuple[str, ...]] = {
    "fp8": ("float8_e4m3", "float8_e5m2"), "float8": ("float8_e4m3", "float8_e5m2"),
    "fp6": ("float6_e2m3", "float6_e3m2"), "fp4": ("float4_e2m1",),
    "e4m3fn": ("float8_e4m3",), "fp8_e4m3": ("float8_e4m3",), "fp8_e5m2": ("float8_e5m2",),
    "mxfp8": ("mxfp8_e4m3", "mxfp8_e5m2"), "mxfp6": ("mxfp6_e2m3", "mxfp6_e3m2"),
    "mxfp4": ("mxfp4_e2m1",), "mp": ("mp50",), "float": ("float32", "float64"),
}


def suggestions(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` nearest to ``name`` (see the module docstring)."""
    pool = list(dict.fromkeys(str(c) for c in choices))
    key = str(name).strip().lower()
    found = [c for c in SHORT_FORMS.get(key, ()) if c in pool]
    found += [c for c in pool if key and c.lower().startswith(key)]
    lowered = {c.lower(): c for c in pool}
    found += [lowered[c] for c in difflib.get_close_matches(key, list(lowered), n=n,
                                                            cutoff=0.6)]
    return list(dict.fromkeys(found))[:n]


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """``" (did you mean 'a' or 'b'?)"`` for the nearest ``choices``, or ``""``."""
    near = suggestions(name, choices, n)
    if not near:
        return ""
    return " (did you mean " + " or ".join(f"'{c}'" for c in near) + "?)"
