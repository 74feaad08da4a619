"""What :func:`precision.evaluate.evaluate` returns for an mpN precision.

A float precision's output is a ``torch.Tensor``; an mpN output has no tensor dtype, so it
is an :class:`MPOutput`: the exact values (an object array of ``flint.arb`` midpoints, as
the interpreter computed them at the precision's bits), the precision, and the ways out
that a PyTorch or mpmath user expects (``.to_float()``, ``.to_mpmath()``). ``.digits`` is
what the output certifies: the same weights evaluated in mp2N on the first sequence and
compared (:func:`precision.reference.certain_digits`), computed on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import torch

from precision.backends.torch_backend import round_to_dtype
from precision.precisions import Precision


class MPOutput:
    """An mpN evaluation's output: ``values`` (object array of exact ``arb``, shape of the
    model's output), ``precision`` (the mpN it was computed in).

    ``np.asarray(out)`` gives the exact values, so every metric of :mod:`precision.metrics`
    takes it as it is; ``out.numpy()`` and ``torch.as_tensor(out)`` give them rounded to
    float64; indexing gives an :class:`MPOutput` of the selected entries.
    """

    def __init__(self, values: np.ndarray, precision: Precision,
                 certify: Callable[[], float] | None = None) -> None:
        self.values = values
        self.precision = precision
        self._certify = certify
        self._digits: float | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def digits(self) -> float:
        """Decimal digits of these values that an mp2N evaluation of the first sequence
        confirms (at most N; 0.0 when a value is not finite). Computed once, on first use."""
        if self._digits is None:
            if self._certify is None:
                raise ValueError("these values were selected from an output: read .digits "
                                 "on the whole output")
            self._digits = float(self._certify())
        return self._digits

    def to_float(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The values rounded to nearest (ties to even) into the float ``dtype``, once, as a
        CPU tensor. Through float64 a value could round twice; it goes through float64
        rounded to odd instead, which then rounds correctly (:func:`round_to_dtype`, itself
        a single rounding) into any dtype of at most 51 significand bits."""
        if not dtype.is_floating_point:
            raise TypeError(f"to_float: {dtype} is not a float dtype")
        mids = [v.mid() for v in self.values.reshape(-1).tolist()]
        nearest = np.array([float(m) for m in mids], dtype=np.float64)
        if dtype == torch.float64:
            return torch.from_numpy(nearest).reshape(self.shape)
        odd = nearest.copy()
        for k, m in enumerate(mids):
            f = nearest[k]
            if not np.isfinite(f) or m == f:
                continue
            below = m > f if f > 0 else m < f   # |m| > |f| (arb's abs would round)
            toward_zero = f if below else np.nextafter(f, 0.0)
            odd[k] = (np.array([toward_zero]).view(np.int64) | 1).view(np.float64)[0]
        return round_to_dtype(torch.from_numpy(odd).reshape(self.shape), dtype)

    def numpy(self) -> np.ndarray:
        """The values rounded to nearest into float64 (:meth:`to_float`), as a numpy array:
        what ``tensor.numpy()`` gives a PyTorch user. ``np.asarray(out)`` stays exact."""
        return self.to_float(torch.float64).numpy()

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        """The float64 values of :meth:`numpy` through DLPack: what ``torch.as_tensor(out)``,
        ``torch.tensor(out)`` and ``torch.asarray(out)`` read (torch takes no other
        protocol from a non-tensor), so they give a float64 CPU tensor rounded to nearest."""
        return self.to_float(torch.float64).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return torch.empty(0, dtype=torch.float64).__dlpack_device__()

    def to_mpmath(self) -> np.ndarray:
        """The values as ``mpmath.mpf`` (exact: each is a binary number of at most the
        precision's bits), in an object array of the same shape."""
        out = np.empty(self.values.shape, dtype=object)
        flat = out.reshape(-1)
        for k, v in enumerate(self.values.reshape(-1).tolist()):
            man, exp = v.mid().man_exp()
            flat[k] = mpmath.mpf((int(man), int(exp)))
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != np.dtype(object):
            raise TypeError("an MPOutput is exact: np.asarray gives its arb values (dtype "
                            "object); .to_float() rounds them")
        return self.values.copy() if copy else self.values

    def __getitem__(self, index: Any) -> MPOutput:
        picked = self.values[index]
        return MPOutput(np.asarray(picked, dtype=object).reshape(np.shape(picked)),
                        self.precision)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        head = self.to_float().reshape(-1)[:4].tolist() if self.values.size else []
        more = ", ..." if self.values.size > 4 else ""
        return (f"MPOutput({self.precision.name}, shape={self.shape}, "
                f"[{', '.join(f'{v:.17g}' for v in head)}{more}])")
