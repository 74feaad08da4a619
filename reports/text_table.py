"""What every table shares: the order of precision columns and the plain-text renderer."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from precision.precisions import parse_precision


def precision_order(name: str) -> tuple[int, int, str]:
    """Sort key of precision names (columns, legends): float formats by bits, then mpN by
    digits, formats of as many bits by name (float8_e4m3 before mxfp8_e4m3: a set of names
    has no order of its own, and the columns moved from one run to the next)."""
    p = parse_precision(name)
    return (1 if p.is_mp else 0, p.bits, p.name)


#: The width a table's title (its legend) is wrapped at.
TITLE_WIDTH = 100


def text_table(title: str, head: Sequence[Any], body: Sequence[Sequence[Any]]) -> str:
    """``title`` (wrapped at :data:`TITLE_WIDTH` characters: a legend of several sentences
    was one line of ~700), the header, a rule of dashes, then the rows: every cell (the last
    too) is left-aligned and padded to its column's widest cell, columns two spaces apart."""
    rows = [[str(x) for x in row] for row in (head, *body)]
    widths = [max(len(x) for x in col) for col in zip(*rows, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) for row in rows]
    wrapped = [part for line in title.splitlines() or [""]
               for part in textwrap.wrap(line, TITLE_WIDTH, break_on_hyphens=False) or [""]]
    return "\n".join([*wrapped, lines[0], "  ".join("-" * w for w in widths), *lines[1:]])
