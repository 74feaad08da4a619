"""A per-module assignment in the interpreter: each graph node rounded into its module's format.

The rule that says which module's precision a node computes in is
:mod:`precision.formats.module_assignment`'s (innermost matched module of the node's
``nn_module_stack``, first matching glob; a weight by its module's path; the user inputs and
every unclaimed node in the base). The interpreter computes every node in the assignment's one
mpN (the *working* precision); :func:`node_formats` names the nodes whose format is a float
format, and :func:`round_into_format` rounds a node's result into it once:

* float32 / float16 / bfloat16: one correct rounding (:func:`~precision.backends.interpreter.
  casts.round_into`, the ``keep`` cast policy's rounding);
* float64: arb's own conversion of each midpoint to the nearest double (ties to even);
* any other float format: through the float64 image, then
  :func:`~precision.formats.op_rounding.round_values`; two roundings, which differ from one
  only where the exact value lies within 2**-53 (relative) of a tie of the format.

Nodes that return views of their inputs are not rounded again (as on the float path).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision.backends.interpreter import casts
from precision.backends.mp_backend import MPArray, exact_array
from precision.formats.module_assignment import (
    base_of,
    check_op_globs,
    has_op_globs,
    op_name,
    parents,
    precision_at,
    returns_view,
)
from precision.formats.op_rounding import round_values
from precision.precisions import Precision

#: The plain formats :func:`casts.round_into` rounds into exactly (its narrow dtypes).
_EXACT_FORMATS = frozenset(casts.NARROW_DTYPES.values())


def node_stack(node: torch.fx.Node) -> list[str]:
    """The module paths a graph node ran under, the model (``""``) first."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [path for path, _ in stack.values()]
    return ["", *(path for path in paths if path)]


def node_formats(graph: torch.fx.Graph, input_specs: dict[str, Any],
                 p: Precision) -> dict[str, Precision]:
    """Node name -> the float format its result is rounded into under the assignment ``p``
    (module docstring); nodes that compute in the working mpN, and views, are left out.
    ``input_specs``: the exported program's input specs by placeholder name."""
    out: dict[str, Precision] = {}
    met: set[tuple[str, str]] = set()
    for node in graph.nodes:
        if node.op == "placeholder":
            spec = input_specs[node.name]
            if spec.kind.name == "USER_INPUT":
                q = base_of(p)
            elif spec.kind.name in ("PARAMETER", "BUFFER") and isinstance(spec.target, str):
                q = precision_at(parents(spec.target.rpartition(".")[0]), p)
            else:
                continue
        elif node.op == "call_function" and not returns_view(node.target):
            stack = node_stack(node)
            met.add((stack[-1], op_name(node.target)))
            q = precision_at(stack, p, op_name(node.target))
        else:
            continue
        if not q.is_mp:
            out[node.name] = q
    if has_op_globs(p):
        check_op_globs(met, p)
    return out


def round_into_format(value: Any, q: Precision) -> Any:
    """``value`` (an MPArray, an MPComplex, or a tuple / list of values) with every float
    array rounded into the float format ``q`` (module docstring); other values unchanged."""
    if q.is_plain and q.format in _EXACT_FORMATS:
        return casts.round_into(value, q.torch_dtype)
    return casts.map_arrays(value, lambda a: _round_array(a, q))


def _round_array(value: MPArray, q: Precision) -> MPArray:
    """One array rounded into ``q`` through its float64 image (module docstring)."""
    if q.bits >= value.prec:
        return value
    image = np.asarray(value.to_float64(), dtype=np.float64)
    if not (q.is_plain and q.format == "float64"):
        image = round_values(torch.from_numpy(image), q).numpy()
    return MPArray(exact_array(image), value.prec, clean=True)
