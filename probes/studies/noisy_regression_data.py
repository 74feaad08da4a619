"""Seeded batches of 002's mixed-noise-variance regression tasks (002 Sec. 2.3, eq. 6-7).

Per sequence tau: w ~ N(0, I_d), x_i ~ N(0, I_d) for the n context points and the query,
y_i = <w, x_i> + xi_i with xi_i ~ N(0, sigma_tau^2), sigma_tau ~ p(sigma); the query label
is noiseless (002 App. C evaluates against <w, x_query>). The noise distribution is

* ``"uniform:S"``     sigma_tau ~ U(0, S) (002 Fig. 1; S = 0 is the noiseless problem),
* ``"choice:1,3,5"``  sigma_tau uniform over the listed values (002 Fig. 4),
* ``"fixed:S"``       sigma_tau = S for every sequence (eq. 6).

All arrays are float64 numpy (the exact inputs; a subject rounds them into its precision),
the same on every machine: numpy's PCG64 draws and :mod:`precision.deterministic`'s
products (no BLAS or einsum kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision import deterministic as det


class NoiseSpecError(ValueError):
    """A noise specification that cannot be parsed (one line)."""


@dataclass(frozen=True)
class NoisyRegressionBatch:
    """B sequences. X: (B, n, d), y: (B, n), x_query: (B, d), y_query: (B,) noiseless,
    w: (B, d), sigma: (B,) the noise std each sequence was drawn with."""

    X: np.ndarray
    y: np.ndarray
    x_query: np.ndarray
    y_query: np.ndarray
    w: np.ndarray
    sigma: np.ndarray


def parse_noise(spec: str | float | int | list[float]) -> tuple[str, tuple[float, ...]]:
    """``"uniform:5"`` / ``5`` -> ("uniform", (5.0,)); ``"choice:1,3"`` / ``[1, 3]`` ->
    ("choice", (1.0, 3.0)); ``"fixed:2"`` -> ("fixed", (2.0,))."""
    if isinstance(spec, bool):
        raise NoiseSpecError(f"bad noise specification {spec!r}")
    if isinstance(spec, int | float):
        kind, values = "uniform", (float(spec),)
    elif isinstance(spec, list):
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec):
            raise NoiseSpecError(f"bad noise specification {spec!r} (a list of noise levels)")
        kind, values = "choice", tuple(float(v) for v in spec)
    elif isinstance(spec, str) and ":" in spec:
        kind, _, rest = spec.partition(":")
        try:
            values = tuple(float(v) for v in rest.split(","))
        except ValueError:
            raise NoiseSpecError(f"bad noise specification '{spec}' (numbers after ':')") \
                from None
    else:
        raise NoiseSpecError(f"bad noise specification {spec!r} (use 'uniform:S', "
                             "'choice:a,b,...' or 'fixed:S')")
    if kind not in ("uniform", "choice", "fixed"):
        raise NoiseSpecError(f"unknown noise distribution '{kind}' (uniform, choice, fixed)")
    if not values or any(not np.isfinite(v) or v < 0 for v in values):
        raise NoiseSpecError(f"noise levels must be finite and >= 0, got {values}")
    if kind != "choice" and len(values) != 1:
        raise NoiseSpecError(f"'{kind}' takes one noise level, got {len(values)}")
    return kind, values


def noise_label(spec: str | float | int | list[float]) -> str:
    """Column label as in 002 Table 1: '3' for U(0, 3), '{1,3}' for a choice."""
    kind, values = parse_noise(spec)
    text = ",".join(f"{v:g}" for v in values)
    return "{" + text + "}" if kind == "choice" else (text if kind == "uniform" else f"={text}")


def sample_sigma(spec: str | float | int | list[float], size: int,
                 rng: np.random.Generator) -> np.ndarray:
    """(size,) noise standard deviations drawn from ``spec``."""
    kind, values = parse_noise(spec)
    if kind == "uniform":
        return np.asarray(det.uniform(rng, 0.0, values[0], size=size))
    if kind == "choice":
        return np.asarray(values)[rng.integers(0, len(values), size=size)]
    return np.full(size, values[0])


def sample_batch(batch: int, d: int, n: int, noise: str | float | int | list[float],
                 rng: np.random.Generator) -> NoisyRegressionBatch:
    """``batch`` sequences of the mixed-noise problem (eq. 7), drawn from ``rng``."""
    if batch < 1 or d < 1 or n < 1:
        raise ValueError(f"batch, d, n must be >= 1 (got {batch}, {d}, {n})")
    sigma = sample_sigma(noise, batch, rng)
    w = rng.standard_normal((batch, d))
    X = rng.standard_normal((batch, n, d))
    xq = rng.standard_normal((batch, d))
    y = det.dot(X, w[:, None, :]) + sigma[:, None] * rng.standard_normal((batch, n))
    yq = det.dot(xq, w)
    return NoisyRegressionBatch(X=X, y=y, x_query=xq, y_query=yq, w=w, sigma=sigma)
