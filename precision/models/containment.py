"""Which model contains which: a deeper residual model holds a shallower one exactly.

A layer whose residual writes are all zero is the identity, exactly, in every precision
(``h + 0 = h``): each layer class of a residual family says which of its parameters those
are (``identity_parameters()``; None when it has no exact identity, e.g. BaseConv with an
inner residual). So a model of depth ``d`` contains every model of depth ``d' < d`` with the
same options and width: :func:`embed_shallower` copies the shallower model's tensors (input
and output projections, positions, final norm, its ``d'`` layers) into the deeper one and
zeroes the residual writes of the extra layers (their other parameters keep their fresh
values; they cannot change the output while the writes are zero, and training moves them).

Width is not contained this way: LayerNorm's mean and variance and the attention scale
1/sqrt(d_head) change with the width, so a narrower model padded with zeros computes
something else.

Consequence for measurements (the *containment invariant*): the best floor of a deeper cell
cannot be honestly above that of a cell it contains, since training could have stayed at the
contained solution; a deeper cell that floors above it is training-limited, never
approximation-limited (``reports/tables.py`` marks it).
"""

from __future__ import annotations

import torch
from torch import nn


class ContainmentError(ValueError):
    """Two models of which the first is not contained in the second (one line)."""


def layer_stack(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """The model's sequence of layers: its one ``nn.ModuleList`` whose layers declare
    ``identity_parameters``."""
    stacks = [(name, m) for name, m in model.named_children()
              if isinstance(m, nn.ModuleList) and len(m) > 0
              and all(hasattr(layer, "identity_parameters") for layer in m)]
    if len(stacks) != 1:
        raise ContainmentError(f"{type(model).__name__} has no stack of layers with an exact "
                               "identity (a residual family: transformer, baseconv)")
    return stacks[0]


def nests_by_depth(model: nn.Module) -> bool:
    """Whether ``model`` (any depth) contains every shallower model of its family, width and
    options: every layer of its stack has an exact identity."""
    try:
        return all(layer.identity_parameters() is not None for layer in layer_stack(model)[1])
    except ContainmentError:
        return False


def embed_shallower(small: nn.Module, big: nn.Module) -> nn.Module:
    """Put ``small`` into ``big`` (in place; returned): ``big`` then computes exactly what
    ``small`` computes (the same float64 outputs, bit for bit). Both are of one family with
    the same options and width, ``big`` at least as deep. ContainmentError otherwise."""
    name, small_layers = layer_stack(small)
    big_name, big_layers = layer_stack(big)
    if type(small) is not type(big) or name != big_name:
        raise ContainmentError(f"a {type(small).__name__} is not contained in a "
                               f"{type(big).__name__}")
    if len(small_layers) > len(big_layers):
        raise ContainmentError(f"depth {len(small_layers)} is not contained in depth "
                               f"{len(big_layers)}")
    mine, theirs = small.state_dict(), big.state_dict()
    extra = [f"{name}.{i}." for i in range(len(small_layers), len(big_layers))]
    for key, value in theirs.items():
        if any(key.startswith(prefix) for prefix in extra):
            continue
        if key not in mine or mine[key].shape != value.shape:
            raise ContainmentError(f"tensor {key!r} differs in shape or is missing: the "
                                   "models differ in width or options")
    zeroed = []
    for i in range(len(small_layers), len(big_layers)):
        names = big_layers[i].identity_parameters()
        if names is None:
            raise ContainmentError(f"layer {i} of {type(big).__name__} has no exact "
                                   "identity (its residual is not outer)")
        zeroed += [f"{name}.{i}.{n}" for n in names]
    with torch.no_grad():
        for key, value in theirs.items():
            if key in zeroed:
                value.zero_()
            elif key in mine:
                value.copy_(mine[key])
    return big

