"""Arbitrary-precision evaluation of any exportable PyTorch module (one definition of a model
runs in every precision).

:class:`MPProgram` (module ``program``) exports a module with ``torch.export``, decomposes it
to core ATen ops and walks the graph (:class:`GraphProgram`: the same walk over a traced
function's graph, e.g. a loss and its gradient) with
:class:`~precision.backends.mp_backend.MPArray` values, freeing each value after its last
use. :data:`OPS` maps each supported ATen overload (and ``operator.getitem``) to a function
``op(ctx, *args, **kwargs)``, one module per kind of op: elementwise, comparisons,
activations, reductions, indexing, sorting, normalization, convolution, pooling, fft,
complex, products, creation; ``core`` holds the values, the context :class:`Ctx` and shared
helpers; ``constants`` says which float literals of the graph stand for exact values (the
attention scale 1/sqrt(E)) and are computed in the working precision, and lists the rest.
An op missing from :data:`OPS` is an :class:`UnsupportedOpError` naming every missing op
and the graph node and module path of its use.
"""

from __future__ import annotations

from precision.backends.interpreter.core import Ctx, UnsupportedOpError
from precision.backends.interpreter.program import (
    OPS,
    GraphProgram,
    MPProgram,
    missing_message,
    module_path,
    op_name,
    supports,
)

__all__ = ["OPS", "Ctx", "GraphProgram", "MPProgram", "UnsupportedOpError", "missing_message",
           "module_path", "op_name", "supports"]
