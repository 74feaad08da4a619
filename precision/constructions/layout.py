"""Channel layouts of hand-set constructions: named consecutive blocks of a token's width."""

from __future__ import annotations


def blocks(sizes: list[tuple[str, int]]) -> dict[str, slice]:
    """{name: slice} for consecutive blocks of the given sizes, in order, starting at 0."""
    out, start = {}, 0
    for name, size in sizes:
        out[name] = slice(start, start + size)
        start += size
    return out
