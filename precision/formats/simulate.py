"""Running a module in a simulated format: its parameters and input rounded to the format
first, then every op under :class:`~precision.formats.op_rounding.RoundResults`.

The carrier dtype is :attr:`Precision.carrier_dtype` (float32 when the format fits in it,
else float64). Parameters and inputs are rounded once from the dtype they are stored in
(no detour through the carrier), then held in the carrier exactly. Integer-weight formats
first hold each weight (a floating parameter of two or more dimensions) in the carrier, as a
stored checkpoint would be, then quantise it (:mod:`precision.formats.integer_weights`);
their other parameters, like every parameter of the other formats, are rounded to the value
format. MX weights stay as they are here: the MX operands of every product are quantised per
block when the product runs. Stochastic bits: parameters and inputs draw from stream domain 2
of the seed, ops from domain 1 (a fresh count per run).
"""

from __future__ import annotations

import torch

from precision.formats.integer_weights import quantize_weight
from precision.formats.op_rounding import RoundResults, round_values
from precision.formats.rounding import RandomStream
from precision.precisions import Precision

#: Stream domains of the seed: ops of a forward, parameters and inputs, a Backend's ops.
OPS_DOMAIN, VALUES_DOMAIN, BACKEND_DOMAIN = 1, 2, 3


def values_stream(p: Precision) -> RandomStream | None:
    """A fresh stream for rounding parameters and inputs (None unless ``p`` rounds ``sr``)."""
    return RandomStream(p.seed or 0, VALUES_DOMAIN) if p.needs_stream else None


def round_tensor(t: torch.Tensor, p: Precision, stream: RandomStream | None = None
                 ) -> torch.Tensor:
    """A floating tensor rounded to ``p``'s value format from its own dtype, in the carrier
    dtype (any shape)."""
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float64)  # float16 / bfloat16 values are float64 values exactly
    return round_values(t, p, stream=stream).to(p.carrier_dtype)


def prepare_module(module: torch.nn.Module, p: Precision) -> torch.nn.Module:
    """``module`` (modified in place) with every floating parameter and buffer in ``p``'s
    carrier dtype, rounded (or, integer formats, quantised) as the module docstring says."""
    stream = values_stream(p)
    with torch.no_grad():
        for t in [*module.parameters(), *module.buffers()]:
            if not t.is_floating_point():
                continue
            if p.int_weights is not None and t.dim() >= 2:
                bits, group = p.int_weights
                t.data = quantize_weight(t.data.to(p.carrier_dtype), bits, group, p.rounding,
                                         stream)
            else:
                t.data = round_tensor(t.data, p, stream)
    return module


def simulation(p: Precision) -> RoundResults:
    """The dispatch mode a forward in ``p`` runs under (a fresh stochastic count)."""
    return RoundResults(lambda: p, domain=OPS_DOMAIN)
