"""Op census: which core ATen ops a module's exported graph uses, and whether mpN runs them.

``census(module, example)`` exports the module exactly as the mp evaluation does
(``torch.export`` + ``run_decompositions()``) and lists every op with its number of uses,
whether the arbitrary-precision interpreter implements it, and the module paths using it.
Nothing is trained or evaluated, so all unsupported ops are known at once, before any
training starts (``experiments.census`` applies it to a user factory and to a trained suite).
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
class Census:
    """Every op an exported module uses, in order of first use."""

    ops: list[OpUse]

    @property
    def missing(self) -> list[OpUse]:
        return [u for u in self.ops if not u.supported]

    @property
    def ok(self) -> bool:
        return not self.missing

    def table(self) -> str:
        """A plain-text table: op, uses, mpN support, module paths."""
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
        return "\n".join(lines)

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
            program = MPProgram(module, inputs)
    except Exception as exc:  # noqa: BLE001 - any export failure is reported in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise CensusError(f"torch.export failed on {type(module).__name__}: "
                          f"{type(exc).__name__}: {first}") from None
    uses: dict[str, OpUse] = {}
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        use = uses.setdefault(name, OpUse(name, 0, supports(node.target)))
        use.count += 1
        where = module_path(node)
        if where not in use.modules:
            use.modules.append(where)
    return Census(list(uses.values()))
