"""Op census: which core ATen ops a module's exported graph uses, and whether mpN runs them.

``census(module, example)`` exports the module exactly as the mp evaluation does
(``torch.export`` + ``run_decompositions()``) and lists every op with its number of uses,
whether the arbitrary-precision interpreter implements it, and the module paths using it.
Nothing is trained or evaluated, so all unsupported ops are known at once, before any
training starts (``probes.census`` applies it to a user factory and to a trained suite).

It also lists the model's float casts (one row per op, from -> to dtype and module path), the
modules that compute in a dtype narrower than float64 (the *islands* that round below a
float64 or mpN evaluation under ``casts="keep"``; :mod:`precision.islands`), and the graph's
float literals that mpN computes exactly (an attention scale 1/sqrt(E)) or takes as given (a
layer norm's eps 1e-05: the truth uses its float64 value;
:mod:`precision.backends.interpreter.constants`).
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from precision.backends.interpreter import MPProgram, module_path, op_name, supports
from precision.backends.interpreter.casts import NARROW_DTYPES
from precision.backends.interpreter.constants import Literal, literal_lines
from precision.evaluate import mp_program


class CensusError(ValueError):
    """The module cannot be exported (one line: the exporter's message)."""


@dataclass
class OpUse:
    """One op of the graph: how often it occurs and where."""

    op: str
    count: int
    supported: bool
    modules: list[str] = field(default_factory=list)


@dataclass
class CastUse:
    """One float cast of the graph: ``op`` from ``source`` to ``target`` dtype in ``module``,
    ``count`` times."""

    op: str
    source: str
    target: str
    module: str
    count: int


@dataclass
class Census:
    """Every op an exported module uses, in order of first use; its float casts, the
    modules with nodes below float64 (module path -> dtype -> node count) and the float
    literals computed exactly or taken as given (:attr:`MPProgram.literals`)."""

    ops: list[OpUse]
    casts: list[CastUse] = field(default_factory=list)
    islands: dict[str, dict[str, int]] = field(default_factory=dict)
    literals: list[Literal] = field(default_factory=list)

    @property
    def missing(self) -> list[OpUse]:
        return [u for u in self.ops if not u.supported]

    @property
    def ok(self) -> bool:
        return not self.missing

    def table(self) -> str:
        """A plain-text table: op, uses, mpN support, module paths; then the casts and the
        float literals (:meth:`literal_lines`)."""
        width = max([len(u.op) for u in self.ops] + [2])
        lines = [f"{'op':<{width}}  uses  mpN  modules"]
        for u in self.ops:
            where = ", ".join(u.modules[:3]) + (f", ... ({len(u.modules)} modules)"
                                                if len(u.modules) > 3 else "")
            lines.append(f"{u.op:<{width}}  {u.count:>4}  {'yes' if u.supported else 'NO ':<3}"
                         f"  {where}")
        n_missing = len(self.missing)
        lines.append(f"{len(self.ops)} ops, {sum(u.count for u in self.ops)} calls; "
                     + ("all supported in mpN" if not n_missing
                        else f"{n_missing} unsupported in mpN"))
        return "\n".join(lines + self.cast_lines() + [""] + self.literal_lines())

    def literal_lines(self) -> list[str]:
        """The float literals mpN computes exactly and those it takes as given, grouped by
        value and op (:func:`~precision.backends.interpreter.constants.literal_lines`)."""
        return literal_lines(self.literals)

    def cast_lines(self) -> list[str]:
        """The casts table and the islands, or one line saying there are none."""
        if not self.casts and not self.islands:
            return ["no float casts: the model computes in one dtype (casts=keep and "
                    "casts=promote agree)"]
        lines = ["", "float casts (op, from -> to, uses, module):"]
        width = max(len(c.op) for c in self.casts) if self.casts else 2
        for c in self.casts:
            lines.append(f"  {c.op:<{width}}  {c.source + ' -> ' + c.target:<21}  "
                         f"{c.count:>4}  {c.module}")
        if self.islands:
            lines.append(f"rounds below float64 (under casts=keep) in {len(self.islands)} "
                         f"module{'s' if len(self.islands) != 1 else ''}:")
            for module, dtypes in self.islands.items():
                what = ", ".join(f"{n} {d} node{'s' if n != 1 else ''}"
                                 for d, n in dtypes.items())
                lines.append(f"  {module}: {what}")
        return lines

    def summary(self) -> str:
        """One line naming every unsupported op with its first module path."""
        parts = [f"{u.op} (in {u.modules[0] if u.modules else '<root>'})" for u in self.missing]
        return (f"{len(parts)} op{'s' if len(parts) != 1 else ''} without an "
                f"arbitrary-precision implementation: " + "; ".join(parts))


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """torch.export logs failed guards and prints the failing graph to stderr; the census
    reports a failure in one line instead."""
    logger = logging.getLogger("torch")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(old)


def census(module: nn.Module, example: torch.Tensor | tuple[Any, ...]) -> Census:
    """Export ``module`` on ``example`` input(s) and list the ops its graph calls."""
    inputs = example if isinstance(example, tuple) else (example,)
    try:
        with _quiet_torch():
            # one input: the program evaluate() caches, so a later evaluation reuses the export
            program = (mp_program(module, inputs[0]) if len(inputs) == 1
                       else MPProgram(module, inputs))
    except Exception as exc:  # noqa: BLE001 - any export failure is reported in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise CensusError(f"torch.export failed on {type(module).__name__}: "
                          f"{type(exc).__name__}: {first}") from None
    uses: dict[str, OpUse] = {}
    casts: dict[tuple[str, str, str, str], int] = {}
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        use = uses.setdefault(name, OpUse(name, 0, supports(node.target)))
        use.count += 1
        where = module_path(node)
        if where not in use.modules:
            use.modules.append(where)
        cast = _cast(node)
        if cast is not None:
            key = (name, *cast, where)
            casts[key] = casts.get(key, 0) + 1
    islands: dict[str, dict[str, int]] = {}
    for dtype, where in program.islands.values():
        per_module = islands.setdefault(where, {})
        per_module[NARROW_DTYPES[dtype]] = per_module.get(NARROW_DTYPES[dtype], 0) + 1
    return Census(list(uses.values()), [CastUse(*k, n) for k, n in casts.items()], islands,
                  list(program.literals))


def _dtype_name(value: Any) -> str | None:
    dtype = getattr(value, "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else None


def _cast(node: torch.fx.Node) -> tuple[str, str] | None:
    """(from, to) dtype names of a dtype conversion node whose result is a float or complex
    of another dtype than its input; None otherwise."""
    if "dtype" not in node.kwargs or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return None
    out, inp = node.meta.get("val"), node.args[0].meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(inp, torch.Tensor):
        return None
    if not (out.dtype.is_floating_point or out.dtype.is_complex) or out.dtype == inp.dtype:
        return None
    return _dtype_name(inp), _dtype_name(out)
