"""The linear-algebra primitives of 001 Sec. 3.2 / App. C.1 / D.2.3 on u (N x D), one class each.

READ / AFFINE / MULTIPLY are defined here once, for the trained probes (a stream of batches
of u) and for the BaseConv constructions (one seeded u, :func:`precision.problems.
primitive_problem`). Their parameters are not in the input, so they are fixed per instance
(given, or drawn from the instance's ``rng``), not redrawn per batch: a model can only learn
one fixed map.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

import numpy as np
import torch

from precision import deterministic as det
from precision.backends.mp_backend import exact_array, workprec
from precision.tasks.base import Task, TaskError, exact_dot


class Elementwise(Task):
    """A primitive whose float64 target and exact truth are one map :meth:`apply` (torch
    tensors and object arrays of arb slice and multiply alike)."""

    @abstractmethod
    def apply(self, x: Any) -> Any:
        """The primitive of x (batch, N, D)."""

    def target(self, x: torch.Tensor) -> torch.Tensor:
        return self.apply(x)

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        with workprec(bits):
            return self.apply(x)


def _copy(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else np.copy(x)


class Identity(Elementwise):
    """IDENTITY (001 D.2.3): y = u, (batch, N, D)."""

    name = "identity"

    def apply(self, x: Any) -> Any:
        return _copy(x)


class Read(Elementwise):
    """READ(i, j, a, b) (001 eq. 5): y = u with y[j, a:b] := u[i, a:b], (batch, N, D).

    Options: ``causal`` (default true: a causal model needs i < j), ``i``, ``j`` (unset ones
    are drawn from ``rng``: a sorted pair of distinct positions, swapped with probability 1/2
    when not causal), columns ``a``, ``b`` (default 0, D: the whole row).
    """

    name = "read"
    defaults = {"dim": 20, "n": 40, "causal": True}
    optional = ("i", "j", "a", "b")

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        n, causal = self.n, self.options["causal"]
        if n < 2:
            raise TaskError("task 'read' needs n >= 2 tokens (i != j)")
        i, j = self._int_option("i"), self._int_option("j")
        self.a, self.b = self._int_option("a", 0), self._int_option("b", self.dim)
        if i is None or j is None:
            pair = sorted(int(v) for v in rng.choice(n, size=2, replace=False))
            if not causal and rng.random() < 0.5:
                pair.reverse()
            i, j = pair[0] if i is None else i, pair[1] if j is None else j
        if i == j or not (0 <= i < n and 0 <= j < n):
            raise TaskError(f"task 'read' needs i != j in [0, {n}), got i={i}, j={j}")
        if causal and i > j:
            raise TaskError(f"task 'read' with a causal model needs i < j (got i={i}, j={j}): "
                            "position j cannot see a later token")
        if not 0 <= self.a < self.b <= self.dim:
            raise TaskError(f"task 'read' needs columns 0 <= a < b <= dim = {self.dim}, "
                            f"got a={self.a}, b={self.b}")
        self.i, self.j = i, j

    def apply(self, x: Any) -> Any:
        y = _copy(x)
        y[:, self.j, self.a:self.b] = x[:, self.i, self.a:self.b]
        return y

    def _shown(self) -> dict[str, Any]:
        return {"i": self.i, "j": self.j}


class Affine(Task):
    """AFFINE (001 eq. 6): y = u H, (batch, N, d_out), H (D, d_out) fixed per instance.

    Options: ``d_out`` (default 1: u h), ``h_var``: the variance of H's entries, H ~
    N(0, h_var) (default 3, 001 D.3's h ~ N(0, 3 I) of the probes; the constructions' problems
    take 1, H ~ N(0, 1)).
    """

    name = "affine"
    optional = ("d_out", "h_var")
    target_version = 2   # u H in tree sums (version 1, BLAS: its bits changed with alignment)

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        self.d_out, h_var = self._int_option("d_out", 1), self.options.get("h_var", 3.0)
        if self.d_out < 1:
            raise TaskError(f"task 'affine' needs d_out >= 1, got {self.d_out}")
        if isinstance(h_var, bool) or not isinstance(h_var, int | float) or \
                not (math.isfinite(h_var) and h_var > 0):
            raise TaskError(f"task 'affine': h_var must be a finite number > 0, got {h_var!r}")
        self.H = np.sqrt(float(h_var)) * rng.standard_normal((self.dim, self.d_out))

    def target(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(det.matmul(x.numpy(), self.H))

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        with workprec(bits):
            H = exact_array(self.H)
            return np.array([[[exact_dot(row, H[:, c]) for c in range(self.d_out)]
                              for row in seq] for seq in x], dtype=object)


class Multiply(Elementwise):
    """MULTIPLY(a, b, d_out) (001 eq. 7): y = u[:, a:a+d_out] ⊙ u[:, b:b+d_out],
    (batch, N, d_out); by default the two halves of an even D (a = 0, b = d_out = D/2)."""

    name = "multiply"
    optional = ("a", "b", "d_out")

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        d, half = self.dim, self.dim // 2
        if d % 2 and "b" not in options and "d_out" not in options:
            raise TaskError(f"task 'multiply' needs an even dim (first half ⊙ second half), "
                            f"got {d}")
        a, b = self._int_option("a", 0), self._int_option("b", half)
        k = self._int_option("d_out", half)
        if not (k >= 1 and 0 <= a and a + k <= d and 0 <= b and b + k <= d):
            raise TaskError(f"task 'multiply' needs d_out >= 1, a + d_out <= dim, "
                            f"b + d_out <= dim (got a={a}, b={b}, d_out={k}, dim={d})")
        self.a, self.b, self.d_out = a, b, k

    def apply(self, x: Any) -> Any:
        return x[..., self.a:self.a + self.d_out] * x[..., self.b:self.b + self.d_out]


class Square(Elementwise):
    """SQUARE (001 eq. 8): y = u ⊙ u, (batch, N, D)."""

    name = "square"

    def apply(self, x: Any) -> Any:
        return x * x
