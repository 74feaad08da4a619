"""Probe tasks for trained models: seeded samplers with the shapes of 001 App. D.2-D.3.

Every task is a sequence-to-sequence map on tokens (rows): the model sees ``x`` of shape
(batch, n_tokens, d_in) and outputs (batch, n_tokens, d_out); :meth:`Task.select` cuts the
supervised entries out of that output, shaped like the target ``y``.

| name              | 001   | input (tokens x channels)            | target                  |
|-------------------|-------|--------------------------------------|-------------------------|
| identity          | D.2.3 | u: N x D                             | u                       |
| read              | eq 5  | u: N x D                             | u with row j := row i   |
| affine            | eq 6  | u: N x D                             | u h (N x 1), h~N(0, 3I) |
| multiply          | eq 7  | u: N x D (D even)                    | u[:, :D/2] ⊙ u[:, D/2:] |
| square            | eq 8  | u: N x D                             | u ⊙ u                   |
| ls_parallel       | D.2.1 | x_1, y_1 e_1, ..., x_N, y_N e_1, x_q | y_1 .. y_N, y_q         |
| ls_fixed_n        | D.2.2 | [x_i, y_i] (N rows), [x_q, 0]        | y_q                     |
| ls_feature (k)    | D.2.4 | [x_i, y_i, features_k] (N rows)      | w* (last token)         |
| explicit_gradient | D.2.5 | ls_feature rows, then [w_0, 0, 0]    | grad L(w_0), eq. 13     |

Inputs are drawn from N(0, 1) per entry (D.3), by numpy's PCG64 generator seeded from the
caller's torch generator, and built with :mod:`precision.deterministic` (the same values on
every machine, kernel and thread count; :data:`precision.deterministic.DATA_VERSION`).
The parameters of READ (i, j) and AFFINE (h) are *not* in the input, so they are fixed per
task instance (drawn from the task seed), not redrawn per batch: a model can only learn one
fixed map. A causal model needs i < j for READ.

:meth:`Task.truth` computes the target exactly (arb at ``bits``) from the inputs *as the model
received them*, i.e. after rounding into the evaluation precision.
Least-squares targets are OLS on the rounded context (noiseless, N >= D, so it is w*).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np
import torch

from precision import deterministic as det
from precision.backends.mp_backend import exact_array, workprec
from precision.truth import least_squares_truth


class TaskError(ValueError):
    """An unknown task or impossible task parameters (one line, for the CLI)."""


@dataclass
class Task:
    """A seeded task instance. ``params`` holds the hidden parameters (i, j, h, ...)."""

    name: str
    d_in: int
    d_out: int
    n_tokens: int
    options: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)

    # --- sampling ---------------------------------------------------------------------

    def sample(self, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) in float64: x (batch, n_tokens, d_in), y shaped like :meth:`select`'s output."""
        x = self.inputs(batch, gen)
        return x, self.target(x)

    def inputs(self, batch: int, gen: torch.Generator) -> torch.Tensor:
        """``batch`` input sequences (float64), the same on every machine: ``gen`` seeds the
        numpy ``Generator`` that draws them (:func:`~precision.deterministic.rng_from`), and
        every product in them is :mod:`precision.deterministic`'s (never torch's sampling or
        BLAS kernels, which depend on the CPU and the thread count)."""
        return torch.from_numpy(self.inputs_numpy(batch, det.rng_from(gen)))

    def inputs_numpy(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        """:meth:`inputs` as a numpy array, drawn from ``rng``."""
        o = self.options
        if self.name in _PRIMITIVES:
            return rng.standard_normal((batch, o["n"], o["dim"]))
        d, n = o["dim"], o["n"]
        X = rng.standard_normal((batch, n, d))
        w = rng.standard_normal((batch, d))
        y = det.dot(X, w[:, None, :])                       # y_i = w^T x_i, (batch, n)
        if self.name == "ls_parallel":
            xq = rng.standard_normal((batch, d))
            tok = np.zeros((batch, 2 * n + 1, d))
            tok[:, 0:2 * n:2] = X
            tok[:, 1:2 * n:2, 0] = y
            tok[:, -1] = xq
            return tok
        if self.name == "ls_fixed_n":
            xq = rng.standard_normal((batch, d))
            tok = np.zeros((batch, n + 1, d + 1))
            tok[:, :n, :d], tok[:, :n, d] = X, y
            tok[:, n, :d] = xq
            return tok
        rows = feature_rows(X, y, o["k"])
        if self.name == "ls_feature":
            return rows
        w0 = rng.standard_normal((batch, d))
        last = np.zeros((batch, 1, rows.shape[-1]))
        last[:, 0, :d] = w0
        return np.concatenate([rows, last], axis=1)

    # --- targets ----------------------------------------------------------------------

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """The float64 target of float64 inputs ``x`` (for training; exact enough there)."""
        o, name = self.options, self.name
        if name == "affine":
            return x @ torch.as_tensor(self.params["h"])[:, None]
        if name in _PRIMITIVES:
            return self._elementwise(x, torch.clone)
        d, n = o["dim"], o["n"]
        if name == "ls_parallel":
            X, y = x[:, 0:2 * n:2], x[:, 1:2 * n:2, 0]
            w = torch.linalg.lstsq(X, y[..., None]).solution[..., 0]
            return torch.cat([y, (x[:, -1] * w).sum(-1, keepdim=True)], dim=1)
        if name == "ls_fixed_n":
            X, y = x[:, :n, :d], x[:, :n, d]
            w = torch.linalg.lstsq(X, y[..., None]).solution[..., 0]
            return (x[:, n, :d] * w).sum(-1, keepdim=True)
        X, y = x[:, :n, :d], x[:, :n, d]
        if name == "ls_feature":
            return torch.linalg.lstsq(X, y[..., None]).solution[..., 0]
        w0 = x[:, n, :d]
        resid = (X @ w0[:, :, None])[..., 0] - y
        return (resid[:, :, None] * X).sum(1) / n         # eq. 13: (1/N) sum (w^T x_i - y_i) x_i

    def _elementwise(self, x: Any, copy: Any) -> Any:
        """IDENTITY / READ / MULTIPLY / SQUARE of x (torch tensor or object array of arb,
        whose slicing and products read the same)."""
        if self.name == "multiply":
            half = self.options["dim"] // 2
            return x[..., :half] * x[..., half:]
        if self.name == "square":
            return x * x
        y = copy(x)
        if self.name == "read":
            y[:, self.params["j"]] = x[:, self.params["i"]]
        return y

    def truth(self, x: np.ndarray, bits: int) -> np.ndarray:
        """Exact target (object array of arb, shaped like ``target``) of exact inputs ``x``
        (object array (batch, n_tokens, d_in) of the values the model received)."""
        o, name = self.options, self.name
        with workprec(bits):
            if name == "affine":
                h = exact_array(self.params["h"])
                return np.array([[[_dot(row, h)] for row in seq] for seq in x], dtype=object)
            if name in _PRIMITIVES:
                return self._elementwise(x, np.copy)
        d, n = o["dim"], o["n"]
        out = []
        for seq in x:
            if name == "ls_parallel":
                X, y = seq[0:2 * n:2], seq[1:2 * n:2, 0]
                w = least_squares_truth(X, y, bits)
                with workprec(bits):
                    out.append(list(y) + [_dot(seq[-1], w)])
                continue
            X, y = seq[:n, :d], seq[:n, d]
            if name == "ls_fixed_n":
                with workprec(bits):
                    out.append([_dot(seq[n, :d], least_squares_truth(X, y, bits))])
            elif name == "ls_feature":
                out.append(list(least_squares_truth(X, y, bits)))
            else:
                w0 = seq[n, :d]
                with workprec(bits):
                    resid = [_dot(X[i], w0) - y[i] for i in range(n)]
                    out.append([sum((resid[i] * X[i, c] for i in range(n)), flint.arb(0)) / n
                                for c in range(d)])
        return np.array(out, dtype=object)

    def select(self, out: torch.Tensor) -> torch.Tensor:
        """The supervised entries of a model output (batch, n_tokens, d_out), shaped like y."""
        if self.name in _PRIMITIVES:
            return out
        if self.name == "ls_parallel":
            return out[:, 0::2, 0]
        if self.name == "ls_fixed_n":
            return out[:, -1, :1]
        return out[:, -1, : self.options["dim"]]

    def evaluated(self, a: Any) -> Any:
        """The entries of a target-shaped array the *test* MSE is taken over: all of them,
        except for ls_parallel, whose first D predictions have fewer than D examples (no
        estimator can know y there; 001 Fig. 1 plots them separately): there, only the
        predictions with >= D previous examples and the query."""
        return a[:, self.options["dim"]:] if self.name == "ls_parallel" else a

    def describe(self) -> str:
        extra = {k: v for k, v in self.params.items() if k != "h"}
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in {**self.options, **extra}.items())})"


def _dot(a: np.ndarray, b: np.ndarray) -> flint.arb:
    return sum((a[i] * b[i] for i in range(len(a))), flint.arb(0))


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


def gradient_query_row(w0: torch.Tensor, width: int) -> torch.Tensor:
    """The last token [w_0, 0, ..., 0] of the explicit-gradient task (001 D.2.5):
    (batch, 1, width)."""
    row = torch.zeros(w0.shape[0], 1, width, dtype=w0.dtype)
    row[:, 0, : w0.shape[1]] = w0
    return row


_PRIMITIVES = ("identity", "read", "affine", "multiply", "square")
_LS = ("ls_parallel", "ls_fixed_n", "ls_feature", "explicit_gradient")
TASKS = _PRIMITIVES + _LS

#: Default options per task (001 App. D.2.3: D = 20, N = 40; D.1: D = 5, N = 20).
_DEFAULTS: dict[str, dict[str, Any]] = {
    **{t: {"dim": 20, "n": 40} for t in _PRIMITIVES},
    "read": {"dim": 20, "n": 40, "causal": True},
    "ls_parallel": {"dim": 5, "n": 20},
    "ls_fixed_n": {"dim": 5, "n": 20},
    "ls_feature": {"dim": 5, "n": 20, "k": 0},
    "explicit_gradient": {"dim": 5, "n": 20, "k": 0},
}


def make_task(name: str, seed: int = 0, **options: Any) -> Task:
    """Task ``name`` with ``options`` (dim, n, k, causal, i, j) and hidden parameters from
    ``seed``. Raises :class:`TaskError` (one line) for unknown names or impossible shapes."""
    if name not in _DEFAULTS:
        raise TaskError(f"unknown task '{name}'; choose from: {', '.join(TASKS)}")
    bad = set(options) - set(_DEFAULTS[name]) - ({"i", "j"} if name == "read" else set())
    if bad:
        raise TaskError(f"task '{name}' has no option {', '.join(sorted(bad))} "
                        f"(options: {', '.join(sorted(_DEFAULTS[name]))})")
    o = {**_DEFAULTS[name], **options}
    d, n = o["dim"], o["n"]
    if not (isinstance(d, int) and isinstance(n, int) and d >= 1 and n >= 1):
        raise TaskError(f"task '{name}': dim and n must be positive integers, got {d}, {n}")
    rng = np.random.default_rng(seed)
    params: dict[str, Any] = {}
    if name == "multiply" and d % 2:
        raise TaskError(f"task 'multiply' needs an even dim (first half ⊙ second half), got {d}")
    if name == "read":
        if n < 2:
            raise TaskError("task 'read' needs n >= 2 tokens (i != j)")
        if "i" in o or "j" in o:
            i, j = int(o.pop("i", 0)), int(o.pop("j", 1))
        else:
            i, j = sorted(int(v) for v in rng.choice(n, size=2, replace=False))
            if not o["causal"] and rng.random() < 0.5:
                i, j = j, i
        if i == j or not (0 <= i < n and 0 <= j < n):
            raise TaskError(f"task 'read' needs i != j in [0, {n}), got i={i}, j={j}")
        if o["causal"] and i > j:
            raise TaskError(f"task 'read' with a causal model needs i < j (got i={i}, j={j}): "
                            "position j cannot see a later token")
        params = {"i": i, "j": j}
    if name == "affine":
        params = {"h": np.sqrt(3.0) * rng.standard_normal(d)}   # h ~ N(0, 3 I) (D.3)
    if name in _LS:
        if n < d:
            raise TaskError(f"task '{name}' needs n >= dim (fully determined), got n={n}, dim={d}")
        if name in ("ls_feature", "explicit_gradient") and o["k"] not in (0, 1, 2):
            raise TaskError(f"task '{name}': k must be 0, 1 or 2, got {o['k']}")
    if name in _PRIMITIVES:
        d_in, n_tok = d, n
        d_out = {"affine": 1, "multiply": d // 2}.get(name, d)
    elif name == "ls_parallel":
        d_in, d_out, n_tok = d, 1, 2 * n + 1
    elif name == "ls_fixed_n":
        d_in, d_out, n_tok = d + 1, 1, n + 1
    else:
        d_in, d_out = d * d + 2 * d + 1, d
        n_tok = n + (name == "explicit_gradient")
    return Task(name, d_in, d_out, n_tok, o, params)
