"""Op census: which core ATen ops a module's exported graph uses, and whether mpN runs them.

``census(module, example)`` exports the module exactly as the mp evaluation does
(``torch.export`` + ``run_decompositions()``) and lists every op with its number of uses,
whether the arbitrary-precision interpreter implements it, and the module paths using it.
``census_for_factory(spec, ...)`` builds the module from a user factory
(``MODULE:FACTORY`` or ``path/to/file.py:FACTORY``) first. Nothing is trained or evaluated,
so all unsupported ops are known at once, before any training starts.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from precision.backends.graph_interpreter import MPProgram, module_path, supports
from precision.backends.interpreter.program import op_name


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


def census_for_factory(spec: str | Callable[..., nn.Module], d_in: int = 20, d_out: int = 20,
                       depth: int = 2, width: int = 64, tokens: int = 40, batch: int = 2
                       ) -> Census:
    """Build the module from a factory (as ``precision probe`` does, float64) and take its
    census on a (batch, tokens, d_in) input."""
    from probes.factory import build_from_factory

    model = build_from_factory(spec, d_in, d_out, depth, width, tokens)
    model.eval()
    return census(model, torch.zeros(batch, tokens, d_in, dtype=torch.float64))


def suite_mp_problem(suite: Any) -> str | None:
    """For a trained suite: None if every model that is evaluated in an mpN precision uses
    only supported ops, else one line naming all unsupported ops (of all its models).

    Each distinct (family, options, task shape, depth, width) is built and exported once,
    before anything is trained."""
    from probes.job import build_job
    from probes.suite import expand

    missing: dict[str, str] = {}
    seen: set[str] = set()
    for run in expand(suite):
        cfg = run.config
        if cfg.get("kind") != "trained" or not any(
                str(p).startswith("mp") for p in cfg.get("precisions", [])):
            continue
        key = repr((cfg["family"], cfg.get("model_options"), cfg.get("task"),
                    cfg.get("task_options"), cfg["depth"], cfg["width"]))
        if key in seen:
            continue
        seen.add(key)
        task, model = build_job(cfg)
        model.eval()
        try:
            c = census(model, torch.zeros(2, task.n_tokens, task.d_in, dtype=torch.float64))
        except CensusError as exc:
            return f"{cfg['family']}: {exc}"
        for u in c.missing:
            missing.setdefault(u.op, u.modules[0] if u.modules else "<root>")
    if not missing:
        return None
    parts = [f"{op} (in {where})" for op, where in missing.items()]
    return (f"{len(parts)} op{'s' if len(parts) != 1 else ''} without an arbitrary-precision "
            f"implementation (mpN is among the suite's precisions): " + "; ".join(parts))
