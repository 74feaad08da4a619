"""PyTorch backend: bfloat16, float16, float32, float64 on the CPU.

Arithmetic is whatever PyTorch's CPU kernels do in that dtype (for bfloat16/float16 many
kernels compute in float32 and round each result; matmul accumulates in float32). That is the
arithmetic a user's model sees, so it is what we measure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision import deterministic as det
from precision.backends.base import Backend
from precision.backends.mp_backend import exact_array
from precision.precisions import Precision


def _round_float64_to_bfloat16_grid(a: np.ndarray) -> np.ndarray:
    """float64 values rounded (to nearest, ties to even) to bfloat16's 8-bit significand.

    bfloat16 keeps float64's sign, an 8-bit exponent and 7 stored significand bits, i.e. the
    top 19 bits of a float64 (whose exponent range covers bfloat16's): add half an ulp at bit
    45 (minus one when the kept part is even, so ties go to even) and clear the low 45 bits.
    A carry rolls into the exponent, as rounding should. The result is a float64 that
    bfloat16 holds exactly (bfloat16 subnormals, below 1.2e-38, keep float32's finer grid).
    """
    bits = np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)
    finite = np.isfinite(a)
    keep_odd = (bits >> np.uint64(45)) & np.uint64(1)
    rounded = (bits + np.uint64((1 << 44) - 1) + keep_odd) & ~np.uint64((1 << 45) - 1)
    return np.where(finite, rounded, bits).view(np.float64)


def round_to_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` rounded once, correctly (to nearest, ties to even), into ``dtype``.

    ``Tensor.to`` from float64 to bfloat16 / float16 goes through float32 on the CPU, which
    rounds twice (1 + 2**-8 + 2**-30 becomes 1.0 in bfloat16 instead of 1 + 2**-7). Here
    float64 data go to float16 by numpy's direct conversion and to bfloat16 by rounding the
    significand in float64 first; every other cast is already a single rounding.
    """
    if t.dtype != torch.float64 or dtype not in (torch.bfloat16, torch.float16):
        return t.to(dtype)
    arr = t.detach().cpu().numpy()
    if dtype == torch.float16:
        with np.errstate(over="ignore"):  # beyond float16's range is inf, as in a cast
            return torch.from_numpy(arr.astype(np.float16)).clone().to(t.device)
    exact = _round_float64_to_bfloat16_grid(arr)
    return torch.from_numpy(exact).to(torch.bfloat16).to(t.device)  # exact: no rounding left


def cast_module(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``module`` with its floating parameters and buffers rounded once into ``dtype``."""
    with torch.no_grad():
        for t in [*module.parameters(), *module.buffers()]:
            if t.is_floating_point():
                t.data = round_to_dtype(t.data, dtype)
    return module


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
        # torch's aligned memory, not numpy's (deterministic.tensor: BLAS results can depend
        # on where an operand starts)
        return round_to_dtype(det.tensor(np.asarray(data, dtype=np.float64)), self.dtype)

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
