"""One look per precision, the same in every figure: its colour, marker and dash are keyed
by the precision's name, so that two precisions in one panel never share a line style
(``float8_e4m3`` and ``mxfp8_e4m3`` did in the depth plot) and a reader who has learnt one
figure's legend reads the next.

The precisions reports show most have fixed places (:data:`FIXED`); any other name takes a
place from a stable hash of its name (the same in every figure and on every machine).
Every fixed precision has a colour of its own; colours, markers and dashes cycle with
different periods, so two hashed names that share a colour still differ in marker and dash,
and a figure whose lines are all solid (the solver traces) dashes the hashed names' lines
(:func:`trace_line`).
"""

from __future__ import annotations

import zlib
from typing import Any

#: Matplotlib's tab10 colours, in order, then six more: at least one per :data:`FIXED`
#: precision, so the shipped precisions differ in colour alone (a figure that draws them all
#: solid, the solver traces, showed float64 and mp50 in one blue).
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:olive", "tab:cyan", "black", "magenta", "gold", "teal", "navy",
           "yellowgreen", "slategray")
MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*", "<", ">", "h")
#: (no solid line: a figure's main lines are solid, the precisions' drawn beside them are not)
DASHES: tuple[Any, ...] = ("--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1)),
                           (0, (1, 2)), (0, (8, 2)))
#: The precisions the shipped suites evaluate in, each its own place.
FIXED = {name: i for i, name in enumerate((
    "float64", "float32", "float16", "bfloat16", "tf32", "float8_e4m3", "float8_e5m2",
    "mxfp8_e4m3", "mxfp4_e2m1", "mp30", "mp50", "mp100", "int8", "int4_g32"))}


def _place(name: str) -> int:
    """The precision's place in the style cycles (fixed, or a hash of its name)."""
    place = FIXED.get(name)
    return place if place is not None else len(FIXED) + zlib.crc32(name.encode()) % 997


def colour(name: str) -> str:
    """The colour of precision ``name`` in every figure."""
    return COLOURS[_place(name) % len(COLOURS)]


def marker(name: str) -> str:
    """The marker of precision ``name`` in every figure."""
    return MARKERS[_place(name) % len(MARKERS)]


def dash(name: str) -> Any:
    """The line style of precision ``name`` where a figure varies lines by precision."""
    return DASHES[_place(name) % len(DASHES)]


def trace_line(name: str) -> Any:
    """The line style of precision ``name`` in a figure whose lines are the precisions'
    (solid for the :data:`FIXED` ones, each its own colour; its dash for any other name, so
    that a hashed colour shared with another precision still reads apart)."""
    return "-" if name in FIXED else dash(name)
