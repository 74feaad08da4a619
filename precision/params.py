"""Declared type and range of a solver's or construction's parameter (:class:`Param`).

Every parameter a suite can set is declared next to its default (``SolverSpec.params``,
``ConstructionSpec.params``), so a suite's ``params = { iters = -5 }`` or ``step = "fast"``
is a one-line error before anything is computed or stored, not a cached ``failed`` run or a
``TypeError`` deep inside a solver. Values are checked, never converted: a valid value
reaches the solver exactly as written (so stored numbers do not depend on validation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Largest iteration / layer / step count a suite may ask for (each is a Python loop).
MAX_COUNT = 1_000_000


class ParamError(ValueError):
    """A parameter value of the wrong type or out of range (one line)."""


@dataclass(frozen=True)
class Param:
    """One parameter: its default, type (``int`` or ``float``) and range.

    ``lo`` / ``hi`` are inclusive bounds, ``gt`` / ``lt`` exclusive ones; ``words`` are
    strings accepted instead of a number (``"optimal"``); ``optional`` accepts None (only
    reachable as a default: TOML has no null). A bool is never a number; an ``int`` is a
    valid ``float``; a float is never an ``int`` (``1e9`` is rejected with the integer to
    write instead).
    """

    default: Any
    kind: str = "float"  # "int" | "float"
    lo: float | None = None
    hi: float | None = None
    gt: float | None = None
    lt: float | None = None
    words: tuple[str, ...] = ()
    optional: bool = False

    def describe(self) -> str:
        """What the parameter accepts, in words (for error messages and ``precision list``)."""
        num = (lambda v: str(int(v))) if self.kind == "int" else (lambda v: f"{v:g}")
        noun = "integer" if self.kind == "int" else "number"
        lo = self.lo
        if self.kind == "int" and self.gt is not None:
            lo, gt = int(self.gt) + 1, None
        else:
            gt = self.gt
        if lo == 0 and gt is None and self.kind == "int":
            text, bounds = f"a non-negative {noun}", []
        elif (lo == 1 and self.kind == "int") or (gt == 0 and lo is None):
            text, bounds = f"a positive {noun}", []
        else:
            text = f"a {noun}"
            bounds = [f"> {num(gt)}"] if gt is not None else []
            bounds += [f">= {num(lo)}"] if lo is not None else []
        bounds += [f"<= {num(self.hi)}"] if self.hi is not None else []
        bounds += [f"< {num(self.lt)}"] if self.lt is not None else []
        if bounds:
            text += " " + " and ".join(bounds)
        if self.words:
            text += " or one of " + ", ".join(repr(w) for w in self.words)
        return text

    def check(self, name: str, value: Any) -> None:
        """Raise :class:`ParamError` naming ``name`` unless ``value`` is acceptable."""
        if value is None and self.optional:
            return
        if isinstance(value, str) and value in self.words:
            return
        problem = self._problem(value)
        if problem is not None:
            raise ParamError(f"{name} must be {self.describe()}, got {_show(value)}{problem}")

    def _problem(self, value: Any) -> str | None:
        """None if ``value`` is a number of the right type and range, else a hint (may be
        empty) to append to the message."""
        if isinstance(value, bool):
            return ""
        if self.kind == "int":
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                return f" (write {int(value)}, an integer)" if self._in_range(int(value)) \
                    else ""
            return None if isinstance(value, int) and self._in_range(value) else ""
        if isinstance(value, float) and not math.isfinite(value):
            return ""
        return None if isinstance(value, int | float) and self._in_range(value) else ""

    def _in_range(self, value: float) -> bool:
        return ((self.gt is None or value > self.gt) and (self.lo is None or value >= self.lo)
                and (self.hi is None or value <= self.hi)
                and (self.lt is None or value < self.lt))


def count(default: int | None, lo: int = 1, hi: int = MAX_COUNT, *,
          optional: bool = False) -> Param:
    """An integer count (iterations, layers, steps) in ``[lo, hi]``."""
    return Param(default, "int", lo=lo, hi=hi, optional=optional)


def positive(default: float | str | None, *words: str, optional: bool = False) -> Param:
    """A finite number > 0, or one of ``words``."""
    return Param(default, "float", gt=0.0, words=words, optional=optional)


def check_params(owner: str, declared: dict[str, Param], given: dict[str, Any]
                 ) -> dict[str, Any]:
    """Defaults of ``declared`` overlaid with ``given``, every value checked.

    ``owner`` names the subject in messages (``solver 'gd'``). Unknown names and bad values
    raise :class:`ParamError`.
    """
    if not isinstance(given, dict):
        raise ParamError(f"{owner}: params must be a table of parameter = value, "
                         f"got {_show(given)}")
    extra = set(given) - set(declared)
    if extra:
        raise ParamError(f"{owner} has no parameter {', '.join(sorted(extra))}; "
                         f"its parameters: {', '.join(sorted(declared)) or 'none'}")
    for name, value in given.items():
        try:
            declared[name].check(name, value)
        except ParamError as exc:
            raise ParamError(f"{owner}: parameter {exc}") from None
    return {**{k: p.default for k, p in declared.items()}, **given}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
