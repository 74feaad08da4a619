"""The in-context least-squares tasks of 001 App. D.2.1, D.2.2, D.2.4, D.2.5, one class each.

Every sequence has its own x_i, w ~ N(0, I_D), y_i = w^T x_i (noiseless, N >= D, so OLS on
the context is w*). Targets are OLS (or eq. 13's gradient) on the context as the model
received it.
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np
import torch

from precision import deterministic as det
from precision.backends.mp_backend import workprec
from precision.tasks.base import Task, TaskError, exact_dot
from precision.truth import least_squares_truth


def _lstsq(X: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """OLS weights (batch, D) of X (batch, N, D), y (batch, N) in float64, the same bits on
    every machine and call (:func:`precision.deterministic.lstsq`)."""
    return det.lstsq(X.numpy(), y.numpy())


class LeastSquaresTask(Task):
    """Shared: the options (001 D.1: D = 5, N = 20; N >= D) and the context draw."""

    defaults = {"dim": 5, "n": 20}
    target_version = 2   # OLS and products: precision.deterministic (lstsq, dot)

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        if self.n < self.dim:
            raise TaskError(f"task '{self.name}' needs n >= dim (fully determined), "
                            f"got n={self.n}, dim={self.dim}")

    def context(self, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """X (batch, N, D) and y = X w (batch, N), x_i, w ~ N(0, I_D) per sequence."""
        X = rng.standard_normal((batch, self.n, self.dim))
        w = rng.standard_normal((batch, self.dim))
        return X, det.dot(X, w[:, None, :])


class LsParallel(LeastSquaresTask):
    """001 D.2.1: tokens x_1, y_1 e_1, ..., x_N, y_N e_1, x_q (2N + 1, D); the model predicts
    y at every x token: y_1 .. y_N, and y_q = w*^T x_q (batch, N + 1)."""

    name = "ls_parallel"

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        self.n_tokens, self.d_out = 2 * self.n + 1, 1

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        n = self.n
        X, y = self.context(batch, rng)
        xq = rng.standard_normal((batch, self.dim))
        tok = np.zeros((batch, 2 * n + 1, self.dim))
        tok[:, 0:2 * n:2] = X
        tok[:, 1:2 * n:2, 0] = y
        tok[:, -1] = xq
        return tok

    def target(self, x: torch.Tensor) -> torch.Tensor:
        n = self.n
        X, y = x[:, 0:2 * n:2], x[:, 1:2 * n:2, 0]
        yq = det.dot(x[:, -1].numpy(), _lstsq(X, y))
        return torch.cat([y, torch.from_numpy(yq)[:, None]], dim=1)

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        n, out = self.n, []
        for seq in x:
            X, y = seq[0:2 * n:2], seq[1:2 * n:2, 0]
            w = least_squares_truth(X, y, bits)
            with workprec(bits):
                out.append([*y, exact_dot(seq[-1], w)])
        return np.array(out, dtype=object)

    def select(self, out: torch.Tensor) -> torch.Tensor:
        return out[:, 0::2, 0]

    def evaluated(self, a: Any) -> Any:
        """Only the predictions with >= D previous examples and the query: the first D have
        fewer than D examples (no estimator can know y there; 001 Fig. 1 plots them
        separately)."""
        return a[:, self.dim:]


class LsFixedN(LeastSquaresTask):
    """001 D.2.2: tokens [x_i, y_i] (N rows), then [x_q, 0]: (N + 1, D + 1); the target is
    y_q = w*^T x_q (batch, 1), answered at the last token."""

    name = "ls_fixed_n"

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        self.n_tokens, self.d_in, self.d_out = self.n + 1, self.dim + 1, 1

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        d, n = self.dim, self.n
        X, y = self.context(batch, rng)
        xq = rng.standard_normal((batch, d))
        tok = np.zeros((batch, n + 1, d + 1))
        tok[:, :n, :d], tok[:, :n, d] = X, y
        tok[:, n, :d] = xq
        return tok

    def target(self, x: torch.Tensor) -> torch.Tensor:
        d, n = self.dim, self.n
        w = _lstsq(x[:, :n, :d], x[:, :n, d])
        return torch.from_numpy(det.dot(x[:, n, :d].numpy(), w))[:, None]

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        d, n, out = self.dim, self.n, []
        for seq in x:
            w = least_squares_truth(seq[:n, :d], seq[:n, d], bits)
            with workprec(bits):
                out.append([exact_dot(seq[n, :d], w)])
        return np.array(out, dtype=object)

    def select(self, out: torch.Tensor) -> torch.Tensor:
        return out[:, -1, :1]


def feature_rows(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """001 App. D.2.4 rows [x_i, y_i, f_i] of width D^2 + 2D + 1 for X (batch, N, D), y (batch, N).

    k = 0: f_i = 0; k = 1: f_i = [y_i x_i, flt(x_i x_i^T)] (the output of layer 1 of the causal
    GD construction, C.2.2); k = 2: the causal prefix sums of those (layer 2's output: token t
    holds sum_{i <= t}, so the last token holds the full sums the paper writes). Elementwise
    products and sequential prefix sums only: the same on every machine.
    """
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    b, n, d = X.shape
    if k == 0:
        feats = np.zeros((b, n, d + d * d))
    else:       # [y x, x_1 x_1, x_1 x_2, ..., x_D x_D]: flt(x x^T) row by row
        outer = np.repeat(X, d, axis=-1) * np.tile(X, d)
        feats = np.concatenate([y[..., None] * X, outer], axis=-1)
    if k == 2:
        feats = det.prefix_sum(feats, axis=1)
    return np.concatenate([X, y[..., None], feats], axis=-1)


class LsFeature(LeastSquaresTask):
    """001 D.2.4: rows [x_i, y_i, features_k] (N, D^2 + 2D + 1, :func:`feature_rows`, option
    ``k`` in 0, 1, 2); the target w* (batch, D) is answered at the last token."""

    name = "ls_feature"
    defaults = {"dim": 5, "n": 20, "k": 0}

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        if self.options["k"] not in (0, 1, 2):
            raise TaskError(f"task '{self.name}': k must be 0, 1 or 2, got {self.options['k']}")
        d = self.dim
        self.d_in, self.d_out = d * d + 2 * d + 1, d

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        return feature_rows(*self.context(batch, rng), self.options["k"])

    def target(self, x: torch.Tensor) -> torch.Tensor:
        d, n = self.dim, self.n
        return torch.from_numpy(_lstsq(x[:, :n, :d], x[:, :n, d]))

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        d, n = self.dim, self.n
        return np.array([list(least_squares_truth(seq[:n, :d], seq[:n, d], bits))
                         for seq in x], dtype=object)

    def select(self, out: torch.Tensor) -> torch.Tensor:
        return out[:, -1, :self.dim]


class ExplicitGradient(LsFeature):
    """001 D.2.5: the :class:`LsFeature` rows, then [w_0, 0, ..., 0] (w_0 ~ N(0, I_D)):
    (N + 1, D^2 + 2D + 1); the target is eq. 13's grad L(w_0) = (1/N) sum_i (w_0^T x_i - y_i)
    x_i (batch, D), answered at the last token."""

    name = "explicit_gradient"

    def __init__(self, rng: np.random.Generator, **options: Any) -> None:
        super().__init__(rng, **options)
        self.n_tokens = self.n + 1

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        rows = super().inputs_numpy(batch, rng)
        w0 = rng.standard_normal((batch, self.dim))
        last = np.zeros((batch, 1, rows.shape[-1]))
        last[:, 0, :self.dim] = w0
        return np.concatenate([rows, last], axis=1)

    def target(self, x: torch.Tensor) -> torch.Tensor:
        d, n = self.dim, self.n
        X, y, w0 = (t.numpy() for t in (x[:, :n, :d], x[:, :n, d], x[:, n, :d]))
        resid = det.dot(X, w0[:, None, :]) - y
        return torch.from_numpy(det.tree_sum(resid[:, :, None] * X, axis=1) / n)

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        d, n, out = self.dim, self.n, []
        for seq in x:
            X, y, w0 = seq[:n, :d], seq[:n, d], seq[n, :d]
            with workprec(bits):
                resid = [exact_dot(X[i], w0) - y[i] for i in range(n)]
                out.append([sum((resid[i] * X[i, c] for i in range(n)), flint.arb(0)) / n
                            for c in range(d)])
        return np.array(out, dtype=object)


def gradient_query_row(w0: torch.Tensor, width: int) -> torch.Tensor:
    """The last token [w_0, 0, ..., 0] of the explicit-gradient task (001 D.2.5):
    (batch, 1, width)."""
    row = torch.zeros(w0.shape[0], 1, width, dtype=w0.dtype)
    row[:, 0, : w0.shape[1]] = w0
    return row
