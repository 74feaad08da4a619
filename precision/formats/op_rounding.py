"""Per-op rounding on the float path: compute each op in the carrier dtype, round its result.

A simulated precision runs a model in a wide *carrier* dtype (float32 or float64 tensors) under
:class:`RoundResults`, a ``TorchDispatchMode``: every ATen op is computed by PyTorch in the
carrier dtype (after PyTorch's own decompositions) and each floating tensor it returns is
rounded to the precision in force for that op (:func:`round_values`), the semantics of chop and
CPFloat: the result is formed in a wider format, then rounded once. Ops that return views of
their inputs (``view``, ``transpose``, ...) are not rounded again (their values already are);
an op that writes into an argument (``add_``, ``copy_``, ``out=``) has the written tensor
rounded in place.

Which precision is in force is a callable (``choose``), so that a per-module assignment can
change it as the forward enters and leaves modules; ``choose()`` returning ``None`` leaves a
result as the carrier computed it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from precision.backends.torch_backend import round_to_dtype
from precision.precisions import Precision


def round_values(t: torch.Tensor, p: Precision) -> torch.Tensor:
    """The values of floating tensor ``t`` rounded to ``p``, kept in ``t``'s dtype.

    Shapes: any; the result has ``t``'s shape, dtype and device.
    """
    if p.is_mp or not p.is_plain:
        raise ValueError(f"round_values: no rounding to {p.name} on the float path")
    if t.dtype == p.torch_dtype:
        return t
    return round_to_dtype(t, p.torch_dtype).to(t.dtype)


def run_op(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], p: Precision) -> Any:
    """``func(*args, **kwargs)`` computed in the carrier dtype, its floating results rounded
    to ``p`` (see the module docstring for views and written arguments)."""
    out = func(*args, **kwargs)
    schema = func._schema
    if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
        return out  # a view of an input: its values are rounded already

    def _round(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            rounded = round_values(t, p)
            if any(r.alias_info is not None and r.alias_info.is_write for r in schema.returns):
                with torch.no_grad():
                    t.copy_(rounded)  # an in-place op: round the tensor it wrote
                return t
            return rounded
        return t

    return tree_map(_round, out)


class RoundResults(TorchDispatchMode):
    """Round the floating results of every ATen op to ``choose()`` (see the module docstring).

    Args:
        choose: the precision in force for the next op, or ``None`` for no rounding.
    """

    def __init__(self, choose: Callable[[], Precision | None]) -> None:
        super().__init__()
        self.choose = choose

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        p = self.choose()
        if p is None:
            return func(*args, **kwargs)
        return run_op(func, args, kwargs, p)
