"""Numbers that arrive as text: one parser for the precision grammar, the command line's
options and the suite loader.

Python's own readers are generous in ways a results store must not be: ``int()`` takes any
script's decimal digits (``int("٥") == 5``), so ``e٥m2`` would become a second name of
``e5m2``; ``str.isdigit()`` accepts characters ``int()`` refuses (``"²"``), which turned a
check into a traceback; a regex's ``\\d`` matches every script's digits; and ``int()`` refuses
more than 4300 digits with its own ``ValueError``. Here a whole number is ASCII digits
``0-9`` only, at most :data:`MAX_DIGITS` of them (a real: the usual decimal or scientific
spelling, ASCII only, at most :data:`MAX_CHARS` characters), and every refusal is a
:class:`NumberError` whose message has one shape: ``WHAT must be ..., not 'TEXT'``.
"""

from __future__ import annotations

import math
import re

#: The most digits a whole number may have (any count, seed, size or N of mpN fits).
MAX_DIGITS = 20
#: The longest text a real number may be.
MAX_CHARS = 40

_WHOLE = re.compile(r"[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class NumberError(ValueError):
    """A number given as text that is not one, or out of its range (one line)."""


def shown(text: object, limit: int = 24) -> str:
    """``text`` as the message quotes it: repr-escaped (so an invisible or right-to-left
    character shows as its code) and cut to ``limit`` characters with the full length."""
    s = str(text)
    if len(s) <= limit:
        return ascii(s)
    return f"{ascii(s[:limit])[:-1]}...' ({len(s)} characters)"


def is_whole(text: str) -> bool:
    """Whether ``text`` is a whole number this module accepts (ASCII digits, not too many)."""
    return isinstance(text, str) and 0 < len(text) <= MAX_DIGITS and \
        _WHOLE.fullmatch(text) is not None


def parse_whole(text: str, what: str, *, lo: int = 0, hi: int | None = None) -> int:
    """The whole number ``text`` (ASCII digits, at most :data:`MAX_DIGITS`), checked to lie
    in ``[lo, hi]``; :class:`NumberError` naming ``what`` otherwise."""
    span = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
    if not is_whole(text):
        raise NumberError(f"{what} must be a whole number {span} in ASCII digits, "
                          f"not {shown(text)}")
    value = int(text)
    if value < lo or (hi is not None and value > hi):
        raise NumberError(f"{what} must be a whole number {span}, not {shown(text)}")
    return value


def parse_real(text: str, what: str, *, positive: bool = False) -> float:
    """The finite real number ``text`` (``12``, ``0.5``, ``1e-6``; ASCII, at most
    :data:`MAX_CHARS` characters), positive when asked; :class:`NumberError` otherwise."""
    kind = "a positive number" if positive else "a finite number"
    if not isinstance(text, str) or len(text) > MAX_CHARS or _REAL.fullmatch(text) is None:
        raise NumberError(f"{what} must be {kind} in ASCII digits, not {shown(text)}")
    value = float(text)
    if not math.isfinite(value) or (positive and value <= 0):
        raise NumberError(f"{what} must be {kind}, not {shown(text)}")
    return value
