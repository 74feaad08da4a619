"""MPProgram: an exported module evaluated node by node in arbitrary precision.

The module is exported with ``torch.export`` and decomposed to core ATen
(``run_decompositions()``); every ``call_function`` node is looked up in :data:`OPS` and
evaluated on MPArray / numpy values. Weights and buffers are read from the module at every
call and converted exactly (every float32 / float64 value is an exact arb). The work per
node does not depend on the graph's size, so an unrolled recurrence of N steps costs N
times one step.

Memory: like ``torch.fx.Interpreter``, the program knows (from the graph, once) the last node
that reads each value and drops the value right after that node, so a call holds only the
values still to be read, not every intermediate arb array of the graph. A failing op is
reported with its name, its graph node and the module path it came from.

Casts: the graph is exported from the module in float64 (a float32 module is exported from a
float64 copy, its weights still read from the module itself), so a node whose dtype is
narrower is one the model computes below float64 on purpose: an *island* (:attr:`islands`).
Under the precision's ``casts="keep"`` (the default) each island's result is rounded into its
dtype (:mod:`~precision.backends.interpreter.casts`); under ``"promote"`` it is not.

Literals: a float literal of the graph that stands for an exact value (1/sqrt(E), E^(-1/4) of
an attention scale, as torch computed it in float64) is read as that value in the working
precision; every other one is its float64 value (:mod:`~precision.backends.interpreter.
constants` states the rule; :attr:`MPProgram.literals` lists both kinds).
"""

from __future__ import annotations

import copy
import warnings
import weakref
from collections.abc import Collection
from typing import Any

import numpy as np
import torch

from precision.backends import backend_for
from precision.backends.interpreter import (
    activations,
    assigned,
    casts,
    comparisons,
    complex,
    constants,
    convolution,
    creation,
    elementwise,
    fft,
    indexing,
    normalization,
    pooling,
    products,
    reductions,
    sorting,
)
from precision.backends.interpreter.complex import MPComplex
from precision.backends.interpreter.core import Ctx, OpTable, UnsupportedOpError
from precision.backends.mp_backend import MPArray, exact_array, known_finite
from precision.precisions import Precision

#: Every supported ATen overload (and ``operator.getitem``) -> ``op(ctx, *args, **kwargs)``.
OPS: OpTable = {}
for _table in (elementwise.OPS, comparisons.OPS, activations.OPS, complex.OPS, reductions.OPS,
               indexing.OPS, sorting.OPS, normalization.OPS, convolution.OPS, pooling.OPS,
               fft.OPS, products.OPS, creation.OPS):
    OPS.update(_table)

_DROPPED_KWARGS = ("layout", "device", "pin_memory", "memory_format", "non_blocking")


def supports(target: Any) -> bool:
    """Whether a graph node target has an arbitrary-precision implementation."""
    return target in OPS


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


def node_origin(node: torch.fx.Node) -> str:
    """``node add_3 in module layers.0.attn (SelfAttention)``: where a graph node came from."""
    return f"node {node.name} in module {module_path(node)}"


def missing_message(missing: list[tuple[str, str]]) -> str:
    """One line naming every unsupported (op, origin) once, with the origin of its first use."""
    first: dict[str, str] = {}
    uses: dict[str, int] = {}
    for op, origin in missing:
        first.setdefault(op, origin)
        uses[op] = uses.get(op, 0) + 1
    parts = [f"{op} ({first[op]}" + (f", {uses[op]} uses)" if uses[op] > 1 else ")")
             for op in first]
    return (f"{len(first)} op{'s' if len(first) > 1 else ''} without an arbitrary-precision "
            f"implementation: " + "; ".join(parts))


def last_uses(graph: torch.fx.Graph) -> dict[str, list[str]]:
    """Node name -> names of the values that node reads for the last time (in graph order).

    A value nothing reads is its own last use (dropped as soon as it is made); the output
    node reads the program's outputs, so they live until the end (``torch.fx.Interpreter``'s
    ``user_to_last_uses``)."""
    last_reader: dict[str, str] = {}
    for node in reversed(graph.nodes):
        for read in node.all_input_nodes:
            last_reader.setdefault(read.name, node.name)
    frees: dict[str, list[str]] = {node.name: [] for node in graph.nodes}
    for node in graph.nodes:
        if node.op in ("placeholder", "call_function"):
            frees[last_reader.get(node.name, node.name)].append(node.name)
    return frees


def to_exact(t: torch.Tensor, ctx: Ctx) -> Any:
    """A torch tensor as an interpreter value: floats exactly as arb (rounded into the
    precision below 53 bits), complex as a pair, integers and bools as numpy arrays."""
    if t.dtype.is_complex:
        z = t.detach().to(torch.complex128).cpu()
        return MPComplex(to_exact(z.real.contiguous(), ctx), to_exact(z.imag.contiguous(), ctx))
    if t.dtype.is_floating_point:
        f = t.detach().to(torch.float64).cpu().numpy()
        out = exact_array(f)
        if ctx.prec < 53:
            return ctx.xp.asarray(out)
        return MPArray(out, ctx.prec, clean=True, finite=bool(np.isfinite(f).all()))
    return t.detach().cpu().numpy()


def as_float64(x: Any) -> Any:
    """A module with floating parameters / buffers not all float64: a float64 copy; a
    floating tensor: in float64; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64) if x.is_floating_point() else x
    if isinstance(x, torch.nn.Module) and any(
            t.is_floating_point() and t.dtype != torch.float64
            for t in [*x.parameters(), *x.buffers()]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecation
            return copy.deepcopy(x).to(torch.float64)
    return x


#: An argument of a node, read by :func:`call_op`: (0, constant), (1, name of the node whose
#: value it is), (2, [such pairs]) for a list or tuple (``cat``'s tensors) or (3, an
#: :class:`~precision.backends.interpreter.constants.ExactConstant`): a float literal computed
#: exactly in the working precision.
ArgSpec = tuple[int, Any]
#: Node -> exact_constants -> (its positional and keyword argument specs), built once per
#: node and setting.
_ARG_SPECS: weakref.WeakKeyDictionary[
    torch.fx.Node, dict[bool, tuple[list[ArgSpec], dict[str, ArgSpec]]]
] = weakref.WeakKeyDictionary()


def _has_node(arg: Any) -> bool:
    return isinstance(arg, torch.fx.Node) or (
        isinstance(arg, list | tuple) and any(map(_has_node, arg)))


def _arg_spec(arg: Any) -> ArgSpec:
    if isinstance(arg, torch.fx.Node):
        return 1, arg.name
    if isinstance(arg, list | tuple) and _has_node(arg):
        return 2, (type(arg) if isinstance(arg, tuple) else list, [_arg_spec(a) for a in arg])
    return 0, arg


def _read(spec: ArgSpec, values: dict[str, Any], prec: int = 53) -> Any:
    kind, v = spec
    if kind == 0:
        return v
    if kind == 1:
        return values[v]
    if kind == 3:
        return v.value(prec)
    container, parts = v
    return container(_read(p, values, prec) for p in parts)


def _node_specs(node: torch.fx.Node, exact_constants: bool
                ) -> tuple[list[ArgSpec], dict[str, ArgSpec]]:
    """The argument specs of a node; with ``exact_constants`` its float literals that stand
    for exact values (:func:`~precision.backends.interpreter.constants.exact_args`) are
    read as those values."""
    exact = constants.exact_args(node) if exact_constants else {}
    args = [(3, exact[i]) if i in exact else _arg_spec(a) for i, a in enumerate(node.args)]
    kwargs = {k: (3, exact[k]) if k in exact else _arg_spec(v)
              for k, v in node.kwargs.items() if k not in _DROPPED_KWARGS}
    return args, kwargs


def _mark_finite(out: Any, args: list[Any]) -> None:
    """An op that only moves, selects or copies values (:data:`casts.DATA_MOVEMENT`) of
    operands known finite gives values known finite (:attr:`MPArray.finite`)."""
    parts = out if isinstance(out, list | tuple) else (out,)
    if not any(isinstance(p, MPArray) and not p.finite for p in parts):
        return
    flat = [a for arg in args for a in (arg if isinstance(arg, list | tuple) else (arg,))]
    if all(known_finite(a) or (isinstance(a, np.ndarray) and a.dtype.kind in "iub")
           or a is None for a in flat if not isinstance(a, str | torch.dtype)):
        for p in parts:
            if isinstance(p, MPArray):
                p.finite = True


def call_op(node: torch.fx.Node, values: dict[str, Any], ctx: Ctx, *,
            exact_constants: bool = True) -> Any:
    """Evaluate one ``call_function`` node on the values it reads; an exception keeps its
    type, its message prefixed with the op, the node and its module. Where each argument
    comes from is worked out once per node (:data:`_ARG_SPECS`), not at every call.
    ``exact_constants``: float literals standing for exact values are computed in the
    working precision (:mod:`~precision.backends.interpreter.constants`); False: every
    literal is its float64 value."""
    specs = _ARG_SPECS.get(node, {}).get(exact_constants)
    if specs is None:
        specs = _ARG_SPECS.setdefault(node, {})[exact_constants] = _node_specs(
            node, exact_constants)
    args = [values[v] if kind == 1 else v if kind == 0 else _read((kind, v), values, ctx.prec)
            for kind, v in specs[0]]
    kwargs = {k: _read(spec, values, ctx.prec) for k, spec in specs[1].items()}
    try:
        out = OPS[node.target](ctx, *args, **kwargs)
        if node.target in casts.DATA_MOVEMENT:
            _mark_finite(out, args)
        return out
    except Exception as exc:
        where = f"op {op_name(node.target)} ({node_origin(node)})"
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (f"{where}: {exc.args[0]}", *exc.args[1:])
        else:
            exc.add_note(where)
        raise


class MPProgram:
    """An exported module, ready to evaluate in any ``mpN`` (weights read at each call).

    ``keep_intermediates=False`` (default): each value is dropped after the last node that
    reads it (:attr:`last_uses`, computed once here). True: every value is kept until the
    call returns and left in :attr:`values` (node name -> value) for a caller to read.
    Either way :attr:`peak_live` is the most values the last call held at once.

    ``exact_constants=True`` (default): a float literal that stands for an exact value (the
    attention scale 1/sqrt(E) as torch computed it in float64) is computed in the working
    precision (:mod:`~precision.backends.interpreter.constants` states the rule); False:
    every literal is its float64 value. :attr:`literals` lists the literals computed exactly
    and those taken as given.
    """

    def __init__(self, module: torch.nn.Module, example_inputs: tuple[Any, ...], *,
                 keep_intermediates: bool = False, exact_constants: bool = True) -> None:
        self.module = module
        self.keep_intermediates = keep_intermediates
        self.exact_constants = exact_constants
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's own deprecations
            self.exported = torch.export.export(
                as_float64(module), tuple(as_float64(x) for x in example_inputs)
            ).run_decompositions()
        self.graph = self.exported.graph_module.graph
        #: Node name -> (narrow dtype, module path) of every island (module docstring).
        self.islands: dict[str, tuple[torch.dtype, str]] = {
            node.name: (dtype, module_path(node)) for node in self.graph.nodes
            if node.op == "call_function" and (dtype := casts.narrow_dtype(node)) is not None}
        signature = self.exported.graph_signature
        self.input_specs = {s.arg.name: s for s in signature.input_specs}
        self.n_user_inputs = sum(s.kind.name == "USER_INPUT" for s in signature.input_specs)
        self.user_outputs = [s.kind.name == "USER_OUTPUT" for s in signature.output_specs]
        self.last_uses = last_uses(self.graph)
        self._literals = [
            lit for node in self.graph.nodes if node.op == "call_function"
            for lit in constants.node_literals(node, op_name(node.target), module_path(node))]
        self.values: dict[str, Any] = {}
        self.peak_live = 0
        self._unsupported = self.unsupported_ops()

    @property
    def literals(self) -> list[constants.Literal]:
        """The graph's float literals that matter to the truth, in graph order: those
        computed exactly (under :attr:`exact_constants`) and those taken as given
        (:func:`~precision.backends.interpreter.constants.node_literals`)."""
        if self.exact_constants:
            return list(self._literals)
        return [constants.Literal(lit.value, lit.op, lit.node, lit.module)
                for lit in self._literals]

    def unsupported_ops(self) -> list[tuple[str, str]]:
        """(op, origin) of every graph node the interpreter cannot evaluate."""
        return [(op_name(node.target), node_origin(node)) for node in self.graph.nodes
                if node.op == "call_function" and node.target not in OPS]

    def _weights(self) -> dict[str, torch.Tensor]:
        """Parameters, buffers and lifted constants by name, read from the module now."""
        state = dict(self.module.state_dict(keep_vars=True))
        state.update({k: v for k, v in self.exported.constants.items()
                      if isinstance(v, torch.Tensor)})
        return state

    def __call__(self, *inputs: Any, precision: Precision,
                 kept_modules: Collection[str] | None = None,
                 assignment: Precision | None = None) -> Any:
        """The module's output(s) on ``inputs`` in ``precision`` (an mpN). Under
        ``casts="keep"`` the islands are rounded into their dtypes, only those of
        ``kept_modules`` (module paths as :attr:`islands` spells them) when given.
        ``assignment``: a per-module assignment computed in ``precision``; each node of a
        module assigned a float format (the inputs and weights too) is rounded into it after
        its island rounding (:mod:`~precision.backends.interpreter.assigned`)."""
        if self._unsupported:
            raise UnsupportedOpError(missing_message(self._unsupported))
        p = precision
        if not p.is_mp:
            raise ValueError(f"MPProgram evaluates mpN precisions, not {p.name}")
        if len(inputs) != self.n_user_inputs:
            raise ValueError(f"MPProgram takes {self.n_user_inputs} inputs, got {len(inputs)}")
        ctx = Ctx(backend_for(p))  # type: ignore[arg-type]
        weights = self._weights()
        formats = ({} if assignment is None else
                   assigned.node_formats(self.graph, self.input_specs, assignment))
        values: dict[str, Any] = {}
        self.values, self.peak_live = {}, 0
        user_inputs = iter(inputs)
        for node in self.graph.nodes:
            if node.op == "placeholder":
                spec = self.input_specs[node.name]
                if spec.kind.name == "USER_INPUT":
                    v = next(user_inputs)
                    values[node.name] = to_exact(v, ctx) if isinstance(v, torch.Tensor) else (
                        ctx.xp.asarray(v) if isinstance(v, np.ndarray) else v)
                else:
                    values[node.name] = to_exact(weights[spec.target], ctx)
            elif node.op == "get_attr":   # a traced function's constant (GraphProgram)
                values[node.name] = to_exact(getattr(self.module, node.target), ctx)
            elif node.op == "call_function":
                values[node.name] = call_op(node, values, ctx,
                                            exact_constants=self.exact_constants)
                island = self.islands.get(node.name) if p.casts == "keep" else None
                if island and node.target not in casts.DATA_MOVEMENT and (
                        kept_modules is None or island[1] in kept_modules):
                    values[node.name] = casts.round_into(values[node.name], island[0])
            elif node.op == "output":
                self.values = values if self.keep_intermediates else {}
                res = [values[n.name] if isinstance(n, torch.fx.Node) else n
                       for n, user in zip(node.args[0], self.user_outputs, strict=True) if user]
                return res[0] if len(res) == 1 else tuple(res)
            if node.name in formats:  # an input, weight or node of an assigned module
                values[node.name] = assigned.round_into_format(values[node.name],
                                                               formats[node.name])
            self.peak_live = max(self.peak_live, len(values))
            if not self.keep_intermediates:
                for name in self.last_uses[node.name]:
                    del values[name]
        raise RuntimeError("graph without output")


class _Input:
    """The input spec of a :class:`GraphProgram` placeholder: a user input."""

    class kind:   # noqa: N801 (read as spec.kind.name, as torch.export's specs are)
        name = "USER_INPUT"


class GraphProgram(MPProgram):
    """A traced function's ATen graph (``make_fx``), evaluated like an exported module: every
    placeholder is an input (no weights are read from a module: a function of parameters
    takes them as inputs), every output is returned, constants are the graph module's
    attributes. What :mod:`precision.gradient` runs: a loss and its gradient, traced once.

    ``graph_module``: a ``torch.fx.GraphModule`` in core ATen ops whose output is a tuple.
    """

    def __init__(self, graph_module: torch.fx.GraphModule, *,
                 exact_constants: bool = True) -> None:
        self.module = graph_module
        self.keep_intermediates = False
        self.exact_constants = exact_constants
        self.graph = graph_module.graph
        self.islands = {
            node.name: (dtype, module_path(node)) for node in self.graph.nodes
            if node.op == "call_function" and (dtype := casts.narrow_dtype(node)) is not None}
        placeholders = [n.name for n in self.graph.nodes if n.op == "placeholder"]
        self.input_specs = dict.fromkeys(placeholders, _Input)
        self.n_user_inputs = len(placeholders)
        output = next(n for n in self.graph.nodes if n.op == "output")
        if not isinstance(output.args[0], list | tuple):
            raise TypeError("GraphProgram: the traced function must return a tuple")
        self.user_outputs = [True] * len(output.args[0])
        self.last_uses = last_uses(self.graph)
        self._literals = [
            lit for node in self.graph.nodes if node.op == "call_function"
            for lit in constants.node_literals(node, op_name(node.target), module_path(node))]
        self.values = {}
        self.peak_live = 0
        self._unsupported = self.unsupported_ops()

    def _weights(self) -> dict[str, torch.Tensor]:
        return {}
