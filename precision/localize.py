"""Which modules limit the error: per-module attribution of rounding error, and the fewest
modules to keep in a higher precision to meet a target.

Units (the granularity). One forward pass in float64 records, for every op, the innermost
module running it (:class:`~precision.formats.module_assignment.ModuleStack`). A module *owns*
its own ops (those run by its ``forward`` and by no submodule's) and its own parameters and
buffers. The default units are the modules that own something: every module holding
parameters directly, every leaf that computes (a ``ReLU``), and every container whose
``forward`` computes itself (a block's residual additions, under the block's path); the model
itself is the unit ``(root)``, which also owns the rounding of the input. With ``ops=True``
the ops a unit that contains other units runs itself (its ``(own ops)``: a block's residual
additions, the decay, mask and ``exp`` of a custom ``forward``) become one unit per ATen op,
``PATH::OP`` (:mod:`~precision.formats.module_assignment`'s op glob), and the module's unit
keeps its own weights; the ops are named as the path that evaluates the configurations meets
them (torch's dispatch on the float path, the exported graph's core ATen ops for mpN, where
``softplus`` is its decomposition). With ``depth=D``
every module deeper than D is merged into its ancestor at depth D (``blocks.0`` owns all of
block 0 at depth 2). The units partition every op and every weight, so "all units in p" is the
whole model in p. Each unit's ``block`` is its path up to its first numeric component
(``blocks.0``, ``model.layers.1``): the block a table groups it under.

Configurations. For a set S of units computed in ``low`` with the others in ``reference``,
the model runs the per-module assignment that names every unit's path as an exact glob
(:mod:`precision.formats.module_assignment`: the innermost unit of an op decides), the base
being ``(root)``'s precision. The error of a configuration is the relative error
||f_S - f*||_2 / ||f*||_2 of its output against the truth f* (the model in ``truth``, mp100
with every cast promoted by default: what ``precision evaluate`` and the suites measure
against).

Measured: (a) ``alone_low[u]``: only u in ``low``, the rest in ``reference``; (b)
``alone_reference[u]``: only u in ``reference``, the rest in ``low``; and with a ``target``, a
greedy search: starting from every unit in ``low``, repeatedly move to ``reference`` the
unit whose move lowers the error most, until the error is at most the target; then drop,
last added first, every kept unit the target is still met without. The set found meets the
target and no unit of it can be dropped alone; it is not proven the smallest of all sets (that
search is exponential).
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

import numpy as np
import torch

from precision.evaluate import evaluate_assigned, evaluate_exact
from precision.formats.module_assignment import (
    OP_SEP,
    AssignmentError,
    ModuleStack,
    carrier_for,
    check_globs,
    op_name,
    returns_view,
)
from precision.formats.op_rounding import RoundResults
from precision.metrics import error_summary
from precision.precisions import Precision, with_casts
from precision.text_numbers import is_whole

#: The truth configurations are measured against (as ``precision evaluate``'s reference).
TRUTH = Precision("mp100", 100, casts="promote")
#: How the model itself is named in tables and records.
ROOT = "(root)"


class LocalizeError(ValueError):
    """Bad input to :func:`localize` (an unknown module, a target never met): one line."""


@dataclass(frozen=True)
class Unit:
    """One unit of attribution: a module path (``""`` for the model), the block it belongs
    to, and how many ops and floating weight entries it owns."""

    path: str
    block: str
    ops: int
    weights: int

    @property
    def name(self) -> str:
        """The path as tables show it (``(root)`` for the model, ``(root)::OP`` for one of
        its own ops)."""
        return (self.path or ROOT) if not self.path.startswith(OP_SEP) else ROOT + self.path


@dataclass
class Localization:
    """What :func:`localize` measured (module docstring); errors are relative errors."""

    low: str
    reference: str
    truth: str
    units: list[Unit]
    all_low: float
    all_reference: float
    alone_low: dict[str, float] = field(default_factory=dict)
    alone_reference: dict[str, float] = field(default_factory=dict)
    target: float | None = None
    kept: list[str] | None = None
    kept_error: float | None = None
    evaluations: int = 0

    def ranked(self) -> list[Unit]:
        """The units, the largest error alone in ``low`` (a) first."""
        return sorted(self.units, key=lambda u: -self.alone_low.get(u.path, -math.inf))

    def lines(self) -> list[str]:
        """The table: one line per unit sorted by (a), then the search's result."""
        kept = set(self.kept or [])
        names = unit_labels([u.path for u in self.units])
        width = max([len("module"), *(len(name) for name in names.values())])
        head = (f"{'module':<{width}}  {'block':<14} {'ops':>5} {'(a) alone ' + self.low:>20}"
                f"  {'(b) alone ' + self.reference:>20}" + ("  kept" if self.kept is not None
                                                            else ""))
        out = [head]
        for u in self.ranked():
            line = (f"{names[u.path]:<{width}}  {u.block or '-':<14} {u.ops:>5} "
                    f"{self.alone_low[u.path]:>20.2e}  {self.alone_reference[u.path]:>20.2e}")
            if self.kept is not None:
                line += f"  {'yes' if u.path in kept else ''}"
            out.append(line)
        out.append(f"all in {self.low}: {self.all_low:.2e}; all in {self.reference}: "
                   f"{self.all_reference:.2e} (relative error against {self.truth})")
        if self.kept is not None and self.target is not None:
            names = ", ".join(u.name for u in self.units if u.path in kept) or "none"
            out.append(f"target {self.target:.1e}: keep {len(kept)} of {len(self.units)} "
                       f"unit{'s' if len(self.units) != 1 else ''} in {self.reference} "
                       f"({names}): {self.kept_error:.2e}")
        return out


def unit_labels(paths: Sequence[str]) -> dict[str, str]:
    """Path -> how tables show the unit: ``(root)`` for the model, ``PATH (own ops)`` for a
    unit that contains other units (its label then says it owns only what its children do
    not), ``PATH (own weights)`` for one whose own ops are units ``PATH::OP`` of their own,
    ``(root)::OP`` for an op of the model's own, else the path."""
    out = {}
    for path in paths:
        if path.startswith(OP_SEP):
            out[path] = ROOT + path
            continue
        split = path and any(other.startswith(path + OP_SEP) for other in paths)
        inner = any(other != path and (not path or other.startswith(path + "."))
                    for other in paths)
        out[path] = ROOT if not path else f"{path} (own weights)" if split else \
            f"{path} (own ops)" if inner else path
    return out


def block_of(path: str) -> str:
    """The path up to its first numeric component (``blocks.0.mlp`` -> ``blocks.0``), or
    ``""`` when it has none."""
    path = path.partition(OP_SEP)[0]
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        if is_whole(part):
            return ".".join(parts[:i + 1])
    return ""


def _owned_ops(model: torch.nn.Module, x: torch.Tensor) -> dict[str, Counter[str]]:
    """Module path -> the ops it runs itself, by ATen op name (views under ``None``), from
    one float64 forward of a copy (torch's dispatch: the float path's ops)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        clone = copy.deepcopy(model).double().eval()
    counts: dict[str, Counter[str]] = {}
    with ModuleStack(clone) as stack:
        def count() -> None:
            path = stack.paths[-1] if stack.paths else ""
            op = None if returns_view(mode.current) else op_name(mode.current)
            counts.setdefault(path, Counter())[op] += 1

        mode = RoundResults(lambda: count())
        x = x.to(torch.float64) if x.is_floating_point() else x
        with torch.no_grad(), mode:
            clone(x)
    return counts


def _graph_ops(model: torch.nn.Module, x: torch.Tensor) -> dict[str, Counter[str]]:
    """:func:`_owned_ops` as the exported graph computes them (the mpN path's ops: core ATen,
    a composite op such as ``softplus`` as its decomposition)."""
    from precision.backends.interpreter.assigned import node_stack
    from precision.evaluate import mp_program

    example = x.to(torch.float64) if x.is_floating_point() else x
    counts: dict[str, Counter[str]] = {}
    for node in mp_program(model, example).graph.nodes:
        if node.op == "call_function":
            op = None if returns_view(node.target) else op_name(node.target)
            counts.setdefault(node_stack(node)[-1], Counter())[op] += 1
    return counts


def units_of(model: torch.nn.Module, x: torch.Tensor, depth: int | None = None, *,
             ops: bool = False, graph: bool = False) -> list[Unit]:
    """The units of ``model`` run on ``x`` (module docstring), the model's own first, then
    in ``named_modules()`` order; with ``ops``, a containing unit's own ops as units
    ``PATH::OP`` after it (counted in the exported graph with ``graph``: the mpN path)."""
    if depth is not None and depth < 1:
        raise LocalizeError(f"depth must be at least 1, not {depth}")
    if ops and depth is not None:
        raise LocalizeError("units by op (--ops) split the modules' own ops; --unit-depth "
                            "merges modules: give one of them")
    by_op = _graph_ops(model, x) if ops and graph else _owned_ops(model, x)
    owned = {path: sum(c.values()) for path, c in by_op.items()}
    weights = {path: sum(t.numel() for t in [*m.parameters(recurse=False),
                                             *m.buffers(recurse=False)] if t.is_floating_point())
               for path, m in model.named_modules()}
    ops_of: dict[str, int] = {"": 0}
    weights_of: dict[str, int] = {"": 0}
    for path, _ in model.named_modules():
        if not (owned.get(path) or weights.get(path)):
            continue
        unit = path
        if depth is not None and path and path.count(".") + 1 > depth:
            unit = ".".join(path.split(".")[:depth])
        ops_of[unit] = ops_of.get(unit, 0) + owned.get(path, 0)
        weights_of[unit] = weights_of.get(unit, 0) + weights.get(path, 0)
    units = []
    for path in ops_of:
        inner = any(o != path and (not path or o.startswith(path + ".")) for o in ops_of)
        split = {op: n for op, n in by_op.get(path, Counter()).items() if op} \
            if ops and inner else {}
        left = ops_of[path] - sum(split.values())
        if not split or path == "" or weights_of[path] or left:
            units.append(Unit(path, block_of(path), left, weights_of[path]))
        units += [Unit(f"{path}{OP_SEP}{op}", block_of(path), n, 0)
                  for op, n in sorted(split.items())]
    return units


def _exact_glob(path: str) -> str:
    """A glob matching ``path`` only (fnmatch's special characters bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def assignment(units: Sequence[Unit], in_low: set[str], low: Precision,
               reference: Precision) -> Precision:
    """The per-module assignment with the units ``in_low`` (paths) in ``low`` and the others
    in ``reference``, every unit named (module docstring); ``low``'s cast policy."""
    low_, reference_ = with_casts(low, "keep"), with_casts(reference, "keep")
    base = low_ if "" in in_low else reference_
    modules = tuple((_exact_glob(u.path), low_ if u.path in in_low else reference_)
                    for u in units if u.path)
    return replace(base, casts=low.casts, modules=modules)


def localize(model: torch.nn.Module, x: torch.Tensor, low: Precision, reference: Precision, *,
             target: float | None = None, depth: int | None = None, ops: bool = False,
             modules: Sequence[str] | None = None, truth: Precision = TRUTH,
             progress: Callable[[str], None] | None = None) -> Localization:
    """Attribute ``model``'s rounding error on ``x`` in ``low`` to its units (module
    docstring), ``reference`` (float64 or an mpN) being the precision kept units compute in.

    ``depth``, ``ops``: the units' granularity (:func:`units_of`).
    ``modules``: globs over module paths; only the units they match are attributed and
    searched, the others stay in ``low`` throughout. ``target``: the relative error the
    search must reach. Raises :class:`LocalizeError` (one line) for a glob that matches no
    unit and a target that even every unit in ``reference`` does not meet.

    Shapes: ``x`` as the model takes it; the error is over every output entry.
    """
    if low.modules or reference.modules:
        raise LocalizeError("--precision and --reference take one format each, not an "
                            "assignment")
    if target is not None and not (math.isfinite(target) and target > 0):
        raise LocalizeError(f"target must be a positive relative error, not {target:g}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch's pytree note on copy
        model = copy.deepcopy(model).eval()   # in eval mode; the caller's model as it was
    work = reference if reference.is_mp else (low if low.is_mp else None)
    everyone = units_of(model, x, depth, ops=ops, graph=work is not None)
    units = everyone
    if modules:
        for glob in modules:
            try:
                check_globs([u.path for u in everyone], Precision("float64", modules=(
                    (glob, Precision("float64")),)), "the model's units")
            except AssignmentError as exc:
                raise LocalizeError(str(exc).replace("+mod[", "module glob [")) from None
        units = [u for u in everyone if any(fnmatchcase(u.path, g) for g in modules)]
    chosen = {u.path for u in units}
    rest = {u.path for u in everyone} - chosen
    carrier = None if work is not None else carrier_for([low, reference])
    truth_out = evaluate_exact(model, x, truth)
    cache: dict[frozenset[str], float] = {}
    result = Localization(low.name, reference.name, truth.name, units, math.nan, math.nan,
                          target=target)

    def error(in_low: set[str]) -> float:
        key = frozenset(in_low | rest)
        if key not in cache:
            p = assignment(everyone, set(key), low, reference)
            out = evaluate_assigned(model, x, p, work=work, carrier=carrier)
            cache[key] = _relative(out, truth_out)
            result.evaluations += 1
        return cache[key]

    say = progress or (lambda text: None)
    result.all_reference = error(set())
    result.all_low = error(chosen)
    if target is not None and result.all_reference > target:
        raise LocalizeError(
            f"target {target:.1e} is never met: with every unit in {reference.name} the "
            f"relative error is {result.all_reference:.2e} (its own floor against "
            f"{truth.name}); give a larger --target or a higher --reference")
    say(f"{len(units)} units; all in {low.name}: {result.all_low:.2e}, all in "
        f"{reference.name}: {result.all_reference:.2e}")
    for u in units:
        result.alone_low[u.path] = error({u.path})
        result.alone_reference[u.path] = error(chosen - {u.path})
    if target is not None:
        result.kept, result.kept_error = _search(units, chosen, target, error, say)
    return result


def _relative(out: np.ndarray, truth: np.ndarray) -> float:
    rel = error_summary(out, truth).relative
    return rel if math.isfinite(rel) else math.inf


def _search(units: Sequence[Unit], chosen: set[str], target: float,
            error: Callable[[set[str]], float], say: Callable[[str], None]
            ) -> tuple[list[str], float]:
    """Greedy forward selection of units to keep in the reference, then backward
    elimination (module docstring): (kept paths in the order added, their error)."""
    kept: list[str] = []
    current = error(chosen)
    while current > target:
        best = min((u.path for u in units if u.path not in kept),
                   key=lambda path: error(chosen - {*kept, path}))
        kept.append(best)
        current = error(chosen - set(kept))
        say(f"keep {best or ROOT}: {current:.2e}")
    for path in reversed(list(kept)):
        without = [k for k in kept if k != path]
        if error(chosen - set(without)) <= target:
            kept = without
    return kept, error(chosen - set(kept))
