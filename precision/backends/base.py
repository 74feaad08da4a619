"""The array namespace every reference solver is written against (one definition, every precision).

A solver receives ``xp`` (a :class:`Backend`) and writes ``A @ x - b``, ``xp.sqrt(s)``,
``xp.zeros((n, n))``, slicing and item assignment; the same function body then runs in
PyTorch float formats (:mod:`precision.backends.torch_backend`) and in arbitrary precision
(:mod:`precision.backends.mp_backend`), the way mpmath writes a function once for its
``mp`` / ``fp`` / ``iv`` contexts. Arrays of both backends support ``+ - * / @``, unary ``-``,
``.T``, ``.shape``, ``a[i]``, ``a[i:j, k]``, ``a[...] = b``; a 0-d array converts with
``float()`` and compares with ``<``, ``>`` like a number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from precision.precisions import Precision


class Backend(ABC):
    """Array namespace computing in one :class:`~precision.precisions.Precision`."""

    precision: Precision

    @property
    def name(self) -> str:
        """Name of the engine, e.g. ``"torch"`` or ``"mp"``."""
        return self.precision.backend_name

    def restart(self) -> None:
        """Start a run afresh: a backend with state (the stochastic-rounding count of a
        simulated format) resets it, so a run is reproducible whatever ran before it."""
        return None

    # --- construction -------------------------------------------------------------
    @abstractmethod
    def asarray(self, data: Any) -> Any:
        """Round ``data`` (numpy array, nested list, scalar, or another backend's array)."""

    def scalar(self, value: Any) -> Any:
        """A 0-d array holding ``value`` rounded into this precision."""
        return self.asarray(value)

    @abstractmethod
    def zeros(self, shape: tuple[int, ...] | int) -> Any:
        """Array of zeros."""

    @abstractmethod
    def eye(self, n: int) -> Any:
        """n x n identity."""

    def full(self, shape: tuple[int, ...] | int, value: float) -> Any:
        """Array filled with ``value`` (rounded)."""
        return self.zeros(shape) + self.scalar(value)

    @abstractmethod
    def copy(self, a: Any) -> Any:
        """An independent copy (safe to assign into)."""

    # --- elementwise ----------------------------------------------------------------
    @abstractmethod
    def sqrt(self, a: Any) -> Any: ...

    @abstractmethod
    def exp(self, a: Any) -> Any: ...

    @abstractmethod
    def log(self, a: Any) -> Any: ...

    @abstractmethod
    def abs(self, a: Any) -> Any: ...

    def sigmoid(self, a: Any) -> Any:
        """1 / (1 + exp(-a)), elementwise."""
        return 1.0 / (1.0 + self.exp(-a))

    # --- reductions and products -----------------------------------------------------
    @abstractmethod
    def sum(self, a: Any, axis: int | None = None) -> Any: ...

    @abstractmethod
    def max(self, a: Any) -> Any:
        """Largest entry (0-d)."""

    def dot(self, a: Any, b: Any) -> Any:
        """Inner product of two vectors (0-d)."""
        return a @ b

    def norm(self, a: Any) -> Any:
        """Euclidean / Frobenius norm (0-d)."""
        return self.sqrt(self.sum(a * a))

    @abstractmethod
    def outer(self, a: Any, b: Any) -> Any:
        """Outer product a b^T of two vectors."""

    @abstractmethod
    def diag(self, a: Any) -> Any:
        """Vector -> diagonal matrix; matrix -> its diagonal."""

    # --- leaving the backend ----------------------------------------------------------
    @abstractmethod
    def to_float(self, a: Any) -> float:
        """A 0-d array as a Python float (rounded to float64)."""

    @abstractmethod
    def to_numpy(self, a: Any) -> np.ndarray:
        """Array rounded to float64 numpy."""

    @abstractmethod
    def to_exact(self, a: Any) -> np.ndarray:
        """Array as a numpy object array of exact ``flint.arb`` values (no rounding)."""

    @abstractmethod
    def isfinite(self, a: Any) -> bool:
        """True when every entry is finite."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.precision.name}>"
