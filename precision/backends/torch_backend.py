"""PyTorch backend: bfloat16, float16, float32, float64 on the CPU.

Arithmetic is whatever PyTorch's CPU kernels do in that dtype (for bfloat16/float16 many
kernels compute in float32 and round each result; matmul accumulates in float32). That is the
arithmetic a user's model sees, so it is what we measure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision.backends.base import Backend
from precision.backends.mp_backend import exact_array
from precision.precisions import Precision


class TorchBackend(Backend):
    """Array namespace over ``torch.Tensor`` of one float dtype."""

    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.dtype = precision.torch_dtype

    def asarray(self, data: Any) -> torch.Tensor:
        if isinstance(data, torch.Tensor):
            return data.detach().to(self.dtype).clone()
        if hasattr(data, "to_exact_numpy"):  # an MPArray: round its float64 image
            data = data.to_float64()
        arr = np.asarray(data, dtype=np.float64)
        # float64 -> dtype is one correct rounding (never double rounding via float32).
        return torch.from_numpy(arr.copy()).to(self.dtype)

    def zeros(self, shape: tuple[int, ...] | int) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype)

    def eye(self, n: int) -> torch.Tensor:
        return torch.eye(n, dtype=self.dtype)

    def copy(self, a: torch.Tensor) -> torch.Tensor:
        return a.clone()

    def sqrt(self, a: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(a)

    def exp(self, a: torch.Tensor) -> torch.Tensor:
        return torch.exp(a)

    def log(self, a: torch.Tensor) -> torch.Tensor:
        return torch.log(a)

    def abs(self, a: torch.Tensor) -> torch.Tensor:
        return torch.abs(a)

    def sigmoid(self, a: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(a)

    def sum(self, a: torch.Tensor, axis: int | None = None) -> torch.Tensor:
        return a.sum() if axis is None else a.sum(dim=axis)

    def max(self, a: torch.Tensor) -> torch.Tensor:
        return a.max()

    def outer(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.outer(a, b)

    def diag(self, a: torch.Tensor) -> torch.Tensor:
        return torch.diag(a)

    def to_float(self, a: torch.Tensor) -> float:
        return float(a)

    def to_numpy(self, a: torch.Tensor) -> np.ndarray:
        return a.detach().to(torch.float64).numpy().copy()

    def to_exact(self, a: torch.Tensor) -> np.ndarray:
        # Every bfloat16/float16/float32 value is exactly a float64, and every float64 an arb.
        return exact_array(a.detach().to(torch.float64).numpy())

    def isfinite(self, a: torch.Tensor) -> bool:
        return bool(torch.isfinite(a).all())
