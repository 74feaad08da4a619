"""Running a module in a simulated format: its parameters and input rounded to the format
first, then every op under :class:`~precision.formats.op_rounding.RoundResults`.

The carrier dtype is :attr:`Precision.carrier_dtype` (float32 when the format fits in it,
else float64). Parameters and inputs are rounded once from the dtype they are stored in
(no detour through the carrier), then held in the carrier exactly. Integer-weight formats
first hold each weight (a floating parameter of two or more dimensions) in the carrier, as a
stored checkpoint would be, then quantise it (:mod:`precision.formats.integer_weights`);
their other parameters, like every parameter of the other formats, are rounded to the value
format. MX weights stay as they are here: the MX operands of every product are quantised per
block when the product runs. Stored values (parameters, inputs, a solver's data) are rounded
by the precision's rounding mode, except that stochastic rounding stores them rounded to
nearest: a stored number is one value, and independent draws for two copies of it (A_ij and
A_ji of a symmetric matrix, a weight read twice) would make them differ; stochastic bits are
the arithmetic's. Ops draw from stream domain 1 of the seed (a fresh stream per run), a
solver's arrays from domain 3.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from precision.formats.integer_weights import quantize_weight
from precision.formats.op_rounding import RoundResults, round_values
from precision.precisions import Precision

#: Stream domains of the seed: the ops of a forward, a Backend's ops.
OPS_DOMAIN, BACKEND_DOMAIN = 1, 3


def stored(p: Precision) -> Precision:
    """The precision stored values are rounded in: ``p``, or ``p`` rounding to nearest when it
    rounds stochastically (module docstring)."""
    return replace(p, rounding="rne", seed=None) if p.needs_stream else p


def round_tensor(t: torch.Tensor, p: Precision) -> torch.Tensor:
    """A stored floating tensor rounded to ``p``'s value format from its own dtype (see
    :func:`stored`), in the carrier dtype (any shape)."""
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float64)  # float16 / bfloat16 values are float64 values exactly
    return round_values(t, stored(p)).to(p.carrier_dtype)


def prepare_module(module: torch.nn.Module, p: Precision) -> torch.nn.Module:
    """``module`` (modified in place) with every floating parameter and buffer in ``p``'s
    carrier dtype, rounded (or, integer formats, quantised) as the module docstring says."""
    with torch.no_grad():
        for t in [*module.parameters(), *module.buffers()]:
            if not t.is_floating_point():
                continue
            if p.int_weights is not None and t.dim() >= 2:
                bits, group = p.int_weights
                t.data = quantize_weight(t.data.to(p.carrier_dtype), bits, group,
                                         stored(p).rounding)
            else:
                t.data = round_tensor(t.data, p)
    return module


def simulation(p: Precision) -> RoundResults:
    """The dispatch mode a forward in ``p`` runs under (a fresh stochastic stream)."""
    return RoundResults(lambda: p, domain=OPS_DOMAIN)
