"""The ``promote`` cast policy on the float path: every float the model makes is the evaluation
dtype.

:class:`PromoteCasts` is a ``TorchDispatchMode``: while a forward runs under it, every ATen op
(after PyTorch's own decompositions, so ``x.float()``, ``x.to(torch.float32)`` and
``x.type_as(y)`` arrive as ``aten._to_copy``) gets its ``dtype=`` argument replaced by the
evaluation dtype when it names a float (complex: the complex dtype of the evaluation dtype),
and every floating input tensor of another dtype cast to the evaluation dtype (a tensor the op
writes into is left as it is). A float32 island of a float64 model is then computed in
float64: the model without its casts, which is what the mp interpreter computes under
``promote``. It runs the model eagerly (no export), on any device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

_COMPLEX = {torch.float64: torch.complex128, torch.float32: torch.complex64}


class PromoteCasts(TorchDispatchMode):
    """Run every float op in ``dtype`` (see the module docstring)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self.complex_dtype = _COMPLEX.get(dtype)

    def _dtype(self, d: Any) -> Any:
        if isinstance(d, torch.dtype) and d.is_floating_point:
            return self.dtype
        if isinstance(d, torch.dtype) and d.is_complex and self.complex_dtype is not None:
            return self.complex_dtype
        return d

    def _tensor(self, t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype != self._dtype(t.dtype):
            return t.to(self._dtype(t.dtype))
        return t

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        schema = func._schema.arguments
        written = {a.name for a in schema if a.alias_info is not None and a.alias_info.is_write}
        args = tuple(a if i < len(schema) and schema[i].name in written else tree_map(
            self._tensor, a) for i, a in enumerate(args))
        kwargs = {k: v if k in written else tree_map(self._tensor, v) for k, v in kwargs.items()}
        if "dtype" in kwargs:
            kwargs["dtype"] = self._dtype(kwargs["dtype"])
        return func(*args, **kwargs)
