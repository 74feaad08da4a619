"""The array backend of simulated formats: solver code written once (``A @ x - b``) runs in
FP8, MX, integer-weight or any-rounding precisions.

:class:`FormatBackend` is the torch backend over the precision's carrier dtype whose arrays are
:class:`FormatTensor` s: each op on them runs under the precision's
:class:`~precision.formats.op_rounding.RoundResults`, so every result is rounded to the format
as in :func:`precision.evaluate.evaluate`. Arrays made by ``asarray`` are rounded from the
values given (float64) once. Stochastic rounding starts its stream afresh at :meth:`restart`
(the solver and construction entry points call it), so a run reproduces from its seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision.backends.mp_backend import exact_array
from precision.backends.torch_backend import TorchBackend
from precision.formats.op_rounding import RoundResults
from precision.formats.simulate import BACKEND_DOMAIN, round_tensor
from precision.precisions import Precision


class FormatTensor(torch.Tensor):
    """A carrier tensor whose every op runs under one precision's :class:`RoundResults`
    (``mode``, set on a subclass per :class:`FormatBackend`): solver code written with
    ``A @ x - b`` then rounds each op's result to the format."""

    mode: Any = None

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        with cls.mode:
            return super().__torch_function__(func, types, args, kwargs or {})


class FormatBackend(TorchBackend):
    """Array namespace over a simulated format (FP8, MX, integer weights, any rounding):
    the torch backend over the carrier dtype, each op under the precision's per-op rounding
    (:mod:`precision.formats.op_rounding`); arrays are :class:`FormatTensor`."""

    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.dtype = precision.carrier_dtype
        self.mode = RoundResults(lambda: precision, domain=BACKEND_DOMAIN)
        self.tensor_type = type(f"FormatTensor_{precision.name}", (FormatTensor,),
                                {"mode": self.mode})
        self.restart()

    def restart(self) -> None:
        self.mode.streams.clear()
        self.mode.mx_cache.clear()

    def _wrap(self, t: torch.Tensor) -> torch.Tensor:
        return t.as_subclass(self.tensor_type)

    @staticmethod
    def _plain(a: Any) -> Any:
        return a.as_subclass(torch.Tensor) if isinstance(a, FormatTensor) else a

    def asarray(self, data: Any) -> torch.Tensor:
        if isinstance(data, torch.Tensor):
            data = self._plain(data).detach()
        elif hasattr(data, "to_exact_numpy"):
            data = torch.from_numpy(data.to_float64())
        else:
            data = torch.from_numpy(np.asarray(data, dtype=np.float64).copy())
        return self._wrap(round_tensor(data.clone(), self.precision))

    def zeros(self, shape: tuple[int, ...] | int) -> torch.Tensor:
        return self._wrap(torch.zeros(shape, dtype=self.dtype))

    def eye(self, n: int) -> torch.Tensor:
        return self._wrap(torch.eye(n, dtype=self.dtype))

    def to_float(self, a: torch.Tensor) -> float:
        return float(self._plain(a))

    def to_numpy(self, a: torch.Tensor) -> np.ndarray:
        return self._plain(a).detach().to(torch.float64).numpy().copy()

    def to_exact(self, a: torch.Tensor) -> np.ndarray:
        return exact_array(self._plain(a).detach().to(torch.float64).numpy())

    def isfinite(self, a: torch.Tensor) -> bool:
        return bool(torch.isfinite(self._plain(a)).all())
