"""MPProgram: an exported module evaluated node by node in arbitrary precision.

The module is exported with ``torch.export`` and decomposed to core ATen
(``run_decompositions()``); every ``call_function`` node is looked up in :data:`OPS` and
evaluated on MPArray / numpy values. Weights and buffers are read from the module at every
call and converted exactly (every float32 / float64 value is an exact arb). The work per
node does not depend on the graph's size, so an unrolled recurrence of N steps costs N
times one step.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from precision.backends import backend_for
from precision.backends.interpreter import OPS
from precision.backends.interpreter.complex import MPComplex
from precision.backends.interpreter.core import Ctx, UnsupportedOpError
from precision.backends.mp_backend import MPArray, exact_array
from precision.precisions import Precision

_DROPPED_KWARGS = ("layout", "device", "pin_memory", "memory_format", "non_blocking")


def module_path(node: torch.fx.Node) -> str:
    """The dotted path and class of the innermost module a graph node came from."""
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, kind = list(stack.values())[-1]
        name = getattr(kind, "__name__", str(kind)).split(".")[-1]
        return f"{path or '<root>'} ({name})"
    return "<root>"


def op_name(target: Any) -> str:
    """``aten.cumsum.default`` style name of a node target."""
    return str(target) if not callable(target) or hasattr(target, "_schema") else getattr(
        target, "__qualname__", str(target))


def missing_message(missing: list[tuple[str, str]]) -> str:
    """One line naming every unsupported op once, with the module path of its first use."""
    first: dict[str, str] = {}
    uses: dict[str, int] = {}
    for op, where in missing:
        first.setdefault(op, where)
        uses[op] = uses.get(op, 0) + 1
    parts = [f"{op} (in module {first[op]}" + (f", {uses[op]} uses)" if uses[op] > 1 else ")")
             for op in first]
    return (f"{len(first)} op{'s' if len(first) > 1 else ''} without an arbitrary-precision "
            f"implementation: " + "; ".join(parts))


def to_exact(t: torch.Tensor, ctx: Ctx) -> Any:
    """A torch tensor as an interpreter value: floats exactly as arb (rounded into the
    precision below 53 bits), complex as a pair, integers and bools as numpy arrays."""
    if t.dtype.is_complex:
        z = t.detach().to(torch.complex128).cpu()
        return MPComplex(to_exact(z.real.contiguous(), ctx), to_exact(z.imag.contiguous(), ctx))
    if t.dtype.is_floating_point:
        out = exact_array(t.detach().to(torch.float64).cpu().numpy())
        return ctx.xp.asarray(out) if ctx.prec < 53 else MPArray(out, ctx.prec, clean=True)
    return t.detach().cpu().numpy()


class MPProgram:
    """An exported module, ready to evaluate in any ``mpN`` (weights read at each call)."""

    def __init__(self, module: torch.nn.Module, example_inputs: tuple[Any, ...]) -> None:
        self.module = module
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's own deprecations
            ep = torch.export.export(module, example_inputs)
            self.program = ep.run_decompositions()
        self.graph = self.program.graph_module.graph
        self._missing = self.unsupported_ops()

    def unsupported_ops(self) -> list[tuple[str, str]]:
        """(op, module path) of every graph node the interpreter cannot evaluate."""
        return [(op_name(node.target), module_path(node)) for node in self.graph.nodes
                if node.op == "call_function" and node.target not in OPS]

    def _state(self) -> dict[str, torch.Tensor]:
        state = dict(self.module.state_dict(keep_vars=True))
        state.update({k: v for k, v in self.program.constants.items()
                      if isinstance(v, torch.Tensor)})
        return state

    def __call__(self, *inputs: Any, precision: Precision) -> Any:
        if self._missing:
            raise UnsupportedOpError(missing_message(self._missing))
        p = precision
        if not p.is_mp:
            raise ValueError(f"MPProgram evaluates mpN precisions, not {p.name}")
        ctx = Ctx(backend_for(p))  # type: ignore[arg-type]
        state = self._state()
        env: dict[str, Any] = {}
        user = iter(inputs)
        specs = {s.arg.name: s for s in self.program.graph_signature.input_specs}
        for node in self.graph.nodes:
            if node.op == "placeholder":
                spec = specs[node.name]
                if spec.kind.name == "USER_INPUT":
                    v = next(user)
                    env[node.name] = to_exact(v, ctx) if isinstance(v, torch.Tensor) else (
                        ctx.xp.asarray(v) if isinstance(v, np.ndarray) else v)
                else:
                    env[node.name] = to_exact(state[spec.target], ctx)
            elif node.op == "call_function":
                args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
                kwargs = {k: v for k, v in kwargs.items() if k not in _DROPPED_KWARGS}
                try:
                    env[node.name] = OPS[node.target](ctx, *args, **kwargs)
                except UnsupportedOpError as exc:
                    raise UnsupportedOpError(
                        f"op {node.target} (in module {module_path(node)}): {exc}"
                    ) from None
            elif node.op == "output":
                outs = node.args[0]
                kinds = [s.kind.name for s in self.program.graph_signature.output_specs]
                res = [env[n.name] if isinstance(n, torch.fx.Node) else n
                       for n, kind in zip(outs, kinds, strict=True) if kind == "USER_OUTPUT"]
                return res[0] if len(res) == 1 else tuple(res)
        raise RuntimeError("graph without output")
