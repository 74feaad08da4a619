"""Per-module assignment: parts of a model computed in other precisions than the rest.

A precision ``BASE+mod[GLOB]=FORMAT+mod[GLOB]=FORMAT...`` (e.g. ``float64+mod[*.mlp]=bfloat16``)
computes every op of a module whose path (``named_modules()``: ``blocks.0.mlp``, ``""`` for the
model itself) a glob matches in that glob's format, and every other op in ``BASE``.

Which precision an op runs in. While the forward runs, the modules being run form a stack
(the model, ``blocks``, ``blocks.0``, ``blocks.0.mlp``, ``blocks.0.mlp.fc``). The op runs in
the precision of the *innermost* module of that stack that some glob matches; for that module
the *first* matching glob in the spelling wins. An op no glob claims runs in ``BASE``. So
``float64+mod[*.mlp]=bfloat16`` puts ``blocks.0.mlp.fc`` in bfloat16 (its innermost matched
module is ``blocks.0.mlp``), and ``bfloat16+mod[blocks.0]=float64`` keeps all of block 0 in
float64. Globs are :func:`fnmatch.fnmatchcase` patterns over the dotted path (``*`` also
matches dots). A glob that matches no module of the model is an error (one line naming the
glob and a few of the model's module paths), never a silent no-op. The same rule places a
module's own floating parameters and buffers: each is rounded once, before the run, to the
precision of the innermost matched module among its module and that module's parents (on a
copy; the model is not changed). The input is rounded into ``BASE``.

One op of a module. A glob ``MODULE::OP`` (``+mod[blocks.0::exp]=float64``) claims the ops named
OP (an ATen op's name without overload, ``exp``, ``mul``, ``addmm``; a glob too) that a
module matching MODULE runs *itself* (it is the innermost module of the stack): the decay, mask
and ``exp`` of a block's own ``forward``, apart from the rest of it. Such a glob is more
specific than any module glob and wins over them; it never places a parameter. A ``::`` glob
whose op the run never meets is an error, as for a module glob. Ops that return views are
never rounded, so they are not an op a glob can name.

Float path (no mpN named): the model runs in a *carrier* dtype (float64 when any format named
has more than 24 significand bits, else float32) under
:class:`~precision.formats.op_rounding.RoundResults`, whose ``choose()`` is the rule above over
a stack kept by forward pre/post hooks on every submodule: each ATen op is computed in the
carrier dtype and its floating results rounded once to the op's precision (not at all where
that precision is the carrier itself). Ops that return views are not rounded again.

mpN path (an mpN named, e.g. ``mp50+mod[*.mlp]=bfloat16`` or ``bfloat16+mod[blocks.0]=mp50``):
the exported graph is interpreted in that mpN, and each graph node's result is rounded once
into the format of its module (the same rule over the node's ``nn_module_stack``; a weight
placeholder by its module's path); mpN nodes are not rounded
(:mod:`precision.backends.interpreter.assigned`). One assignment names at most one mpN.

Ops that a module's ``forward`` does not run (a parent reading ``child.weight`` directly) belong
to the module that runs them. A module reached under two paths (a shared module) is known by
the first path ``named_modules()`` gives it.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

import torch

from precision.backends.promote_casts import PromoteCasts
from precision.backends.torch_backend import cast_module
from precision.formats.op_rounding import RoundResults, round_values
from precision.formats.simulate import stored
from precision.precisions import Precision, PrecisionError

#: Module paths an error message names at most.
SHOWN_PATHS = 8
#: Significand bits a float32 carrier holds; a format with more needs float64.
FLOAT32_BITS = 24
#: Separates a glob's module part from its op part: ``blocks.0::exp``.
OP_SEP = "::"


def op_name(target: Any) -> str:
    """The name an op glob matches: an ATen op's name without its overload (``exp`` for
    ``aten.exp.default``)."""
    packet = getattr(target, "overloadpacket", None)
    return getattr(packet, "__name__", None) or str(target).split(".")[-1]


def returns_view(target: Any) -> bool:
    """True for an op whose result aliases an input (a view: never rounded)."""
    schema = getattr(target, "_schema", None)
    return schema is not None and any(
        r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def has_op_globs(p: Precision) -> bool:
    """True when ``p`` names an op of a module (``+mod[MODULE::OP]``)."""
    return any(OP_SEP in glob for glob, _ in p.modules)


class AssignmentError(PrecisionError):
    """A per-module assignment that does not fit the model (one line)."""


def base_of(p: Precision) -> Precision:
    """The precision of the ops no glob claims: ``p`` without its assignment and cast
    policy (the format with its rounding options)."""
    return replace(p, modules=(), casts="keep", seed=p.seed if p.rounding == "sr" else None)


def formats_of(p: Precision) -> list[Precision]:
    """The base and every assigned precision of ``p``, in spelling order."""
    return [base_of(p), *(q for _, q in p.modules)]


def work_precision(p: Precision) -> Precision | None:
    """The mpN an assignment is interpreted in (with ``p``'s cast policy), or None when it
    names no mpN (the float path)."""
    mp = [q for q in formats_of(p) if q.is_mp]
    if not mp:
        return None
    return Precision(mp[0].format, mp[0].digits, casts=p.casts)


def carrier_dtype(p: Precision) -> torch.dtype:
    """The dtype the float path computes in: float64 if any format of ``p`` has more than
    24 significand bits, else float32."""
    return carrier_for(formats_of(p))


def carrier_for(formats: Iterable[Precision]) -> torch.dtype:
    """float64 if any of ``formats`` has more than 24 significand bits, else float32: the
    carrier that holds every one of them."""
    return torch.float64 if max(q.bits for q in formats) > FLOAT32_BITS else torch.float32


def parents(path: str) -> list[str]:
    """``"a.b.c"`` -> ``["", "a", "a.b", "a.b.c"]``: the module paths from the model down to
    ``path`` (outermost first)."""
    if not path:
        return [""]
    parts = path.split(".")
    return ["", *(".".join(parts[:i]) for i in range(1, len(parts) + 1))]


def assigned_precision(stack: Sequence[str], p: Precision,
                       op: str | None = None) -> Precision | None:
    """The precision an op (named ``op``; None: a parameter, or a caller that does not
    name ops) runs in while the modules ``stack`` (outermost first) run: the first op glob
    of ``p.modules`` that matches the innermost module and the op, else the first module
    glob that matches the innermost matched module; None when no glob matches (the op runs
    in the base)."""
    if op is not None and stack:
        for glob, q in p.modules:
            module, sep, ops = glob.partition(OP_SEP)
            if sep and fnmatchcase(stack[-1], module) and fnmatchcase(op, ops):
                return q
    for path in reversed(stack):
        for glob, q in p.modules:
            if OP_SEP not in glob and fnmatchcase(path, glob):
                return q
    return None


def precision_at(stack: Sequence[str], p: Precision, op: str | None = None) -> Precision:
    """:func:`assigned_precision`, or the base of ``p`` where no glob matches."""
    return assigned_precision(stack, p, op) or base_of(p)


def check_op_globs(met: set[tuple[str, str]], p: Precision, what: str = "the model") -> None:
    """AssignmentError naming the first op glob of ``p`` that matches none of the (module
    path, op) pairs ``met`` in a run (the ops each module runs itself), with a few of them."""
    for glob, _ in p.modules:
        module, sep, ops = glob.partition(OP_SEP)
        if sep and not any(fnmatchcase(path, module) and fnmatchcase(op, ops)
                           for path, op in met):
            mine = sorted({op for path, op in met if fnmatchcase(path, module)})
            shown = ", ".join(mine[:SHOWN_PATHS]) + (
                f", ... ({len(mine)} in all)" if len(mine) > SHOWN_PATHS else "")
            raise AssignmentError(f"+mod[{glob}] matches no op that a module {module!r} of "
                                  f"{what} runs itself; its ops: {shown or 'none'}")


def check_globs(paths: Iterable[str], p: Precision, what: str = "the model") -> None:
    """AssignmentError naming the first glob of ``p`` that matches none of ``paths`` (the
    module paths of ``what``) and a few of those paths."""
    paths = list(paths)
    for glob, _ in p.modules:
        module = glob.partition(OP_SEP)[0]
        if not any(fnmatchcase(path, module) for path in paths):
            named = [path for path in paths if path]
            shown = ", ".join(named[:SHOWN_PATHS]) + (
                f", ... ({len(named)} in all)" if len(named) > SHOWN_PATHS else "")
            raise AssignmentError(f"+mod[{glob}] matches no module of {what}; its module "
                                  f"paths: {shown or 'none (it has no submodules)'}")


def module_paths(model: torch.nn.Module) -> list[str]:
    """The module paths of ``model`` as ``named_modules()`` gives them (``""`` first)."""
    return [name for name, _ in model.named_modules()]


def round_parameters(model: torch.nn.Module, p: Precision) -> None:
    """Round every floating parameter and buffer of ``model`` (in place) to the precision of
    its module (module docstring); the base's too."""
    with torch.no_grad():
        for path, module in model.named_modules():
            q = precision_at(parents(path), p)
            for t in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
                if t.is_floating_point():
                    t.data = round_values(t.data, stored(q))


class ModuleStack:
    """The paths of the modules whose forward is running (outermost first), kept by forward
    pre/post hooks on every module of a model; a context manager that removes them."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.paths: list[str] = []
        self._handles: list[Any] = []
        for path, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._enter(path)))
            self._handles.append(module.register_forward_hook(self._leave))

    def _enter(self, path: str) -> Any:
        def hook(module: torch.nn.Module, args: Any) -> None:
            self.paths.append(path)
        return hook

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self.paths.pop()

    def __enter__(self) -> ModuleStack:
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()


def run_float(model: torch.nn.Module, x: torch.Tensor, p: Precision, device: str = "cpu", *,
              carrier: torch.dtype | None = None) -> torch.Tensor:
    """The output of ``model`` on ``x`` with the assignment ``p`` (no mpN named), computed on
    the float path (module docstring) on ``device``; in the carrier dtype, on the CPU.
    ``carrier``: float32 or float64 instead of :func:`carrier_dtype` (several assignments
    compared on one carrier).

    Shapes: ``x`` and the output as the model takes and returns them.
    """
    if work_precision(p) is not None:
        raise ValueError(f"run_float: {p.name} names an mpN (the interpreter computes it)")
    check_globs(module_paths(model), p)
    carrier = carrier_dtype(p) if carrier is None else carrier
    carried = Precision(str(carrier).removeprefix("torch."))
    if carried.format not in ("float32", "float64") or \
            carrier_for([*formats_of(p), carried]) != carrier:
        raise ValueError(f"run_float: the carrier of {p.name} is float32 or float64 holding "
                         f"every format, not {carried.format}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation on copy
        clone = cast_module(copy.deepcopy(model), carrier).to(device)
    round_parameters(clone, p)
    if x.is_floating_point():
        x = round_values(x.to(torch.float64), stored(base_of(p))).to(carrier)
    # contiguous, in torch's aligned memory: a kernel's result can depend on strides and address
    x = x.clone(memory_format=torch.contiguous_format)

    by_op = has_op_globs(p)
    met: set[tuple[str, str]] = set()
    with ModuleStack(clone) as stack:
        def choose() -> Precision | None:
            op = None
            if by_op and not returns_view(mode.current):
                op = op_name(mode.current)
                met.add((stack.paths[-1] if stack.paths else "", op))
            q = precision_at(stack.paths, p, op)
            return None if q == carried else q

        mode = RoundResults(choose)
        promote = PromoteCasts(carrier) if p.casts == "promote" else None
        with torch.no_grad():
            if promote is not None:
                with promote, mode:
                    out = clone(x.to(device))
            else:
                with mode:
                    out = clone(x.to(device))
    if by_op:
        check_op_globs(met, p)
    return out.cpu()
