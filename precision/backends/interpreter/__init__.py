"""The op table of the arbitrary-precision graph interpreter, one module per kind of op.

:data:`OPS` maps each supported ATen overload (and ``operator.getitem``) to a function
``op(ctx, *args, **kwargs)``. :class:`~precision.backends.interpreter.program.MPProgram`
(re-exported by ``precision.backends.graph_interpreter``) walks an exported graph with it.
"""

from __future__ import annotations

from typing import Any

from precision.backends.interpreter import (
    activations,
    comparisons,
    complex,
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
from precision.backends.interpreter.core import OpTable, UnsupportedOpError

OPS: OpTable = {}
for _table in (elementwise.OPS, comparisons.OPS, activations.OPS, complex.OPS, reductions.OPS,
               indexing.OPS, sorting.OPS, normalization.OPS, convolution.OPS, pooling.OPS,
               fft.OPS, products.OPS, creation.OPS):
    OPS.update(_table)


def supports(target: Any) -> bool:
    """Whether a graph node target has an arbitrary-precision implementation."""
    return target in OPS


__all__ = ["OPS", "UnsupportedOpError", "supports"]
