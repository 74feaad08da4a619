"""Number formats below the PyTorch dtypes, simulated: every op's result rounded to a format.

:mod:`precision.formats.op_rounding` holds the one mechanism every simulated format uses
(a ``TorchDispatchMode`` that computes each ATen op in the carrier dtype, then rounds its
floating results to the precision in force for that op).
"""
