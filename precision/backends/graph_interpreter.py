"""Arbitrary-precision evaluation of any exportable PyTorch module (one definition of a model
runs in every precision).

The module is exported with ``torch.export`` and decomposed to core ATen ops; the package
:mod:`precision.backends.interpreter` interprets that graph with
:class:`~precision.backends.mp_backend.MPArray` values (one module per kind of op:
elementwise, comparisons, activations, reductions, indexing, sorting, normalization,
convolution, pooling, fft, complex, products, creation). An op missing from :data:`OPS` is an
:class:`UnsupportedOpError` naming every missing op and the module path of its use.
"""

from __future__ import annotations

from precision.backends.interpreter import OPS, supports
from precision.backends.interpreter.core import Ctx, UnsupportedOpError
from precision.backends.interpreter.program import MPProgram, missing_message, module_path

__all__ = ["OPS", "Ctx", "MPProgram", "UnsupportedOpError", "missing_message", "module_path",
           "supports"]
