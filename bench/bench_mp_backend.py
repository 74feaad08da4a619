"""Arbitrary-precision backend vs plain mpmath object arrays, on the same matrix work.

Times, at 50 digits: (1) a 64x64 matrix product, (2) elementwise a*b+c on 64x64 arrays,
(3) 200 steps of gradient descent on a 40x20 least-squares problem. The baseline is numpy
object arrays of mpmath ``mpf`` (mpmath with its gmpy2 backend); ours is
:class:`precision.backends.mp_backend.MPArray`. Both compute in 50-digit arithmetic and the
script checks that their results agree to 1e-45 before printing the speed ratios.

Run: ``python bench/bench_mp_backend.py``
"""

from __future__ import annotations

import time

import mpmath
import numpy as np

from precision.backends import backend_for
from precision.precisions import parse_precision

DIGITS = 50


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    rng = np.random.default_rng(0)
    mpmath.mp.dps = DIGITS
    xp = backend_for(parse_precision(f"mp{DIGITS}"))
    to_mpf = np.frompyfunc(mpmath.mpf, 1, 1)

    a, b, c = (rng.standard_normal((64, 64)) for _ in range(3))
    A_ours, B_ours, C_ours = xp.asarray(a), xp.asarray(b), xp.asarray(c)
    A_mp, B_mp, C_mp = to_mpf(a), to_mpf(b), to_mpf(c)

    X = rng.standard_normal((40, 20))
    y = X @ rng.standard_normal(20)
    eta = 1.0 / np.linalg.eigvalsh(X.T @ X / 40)[-1]
    X_ours, y_ours = xp.asarray(X), xp.asarray(y)
    X_mp, y_mp = to_mpf(X), to_mpf(y)

    def gd_ours():
        w = xp.zeros(20)
        for _ in range(200):
            w = w - (X_ours.T @ (X_ours @ w - y_ours)) * (eta / 40)
        return xp.to_numpy(w)

    def gd_mpmath():
        w = to_mpf(np.zeros(20))
        for _ in range(200):
            w = w - X_mp.T.dot(X_mp.dot(w) - y_mp) * mpmath.mpf(eta / 40)
        return w

    def matmul_ours():
        return A_ours @ B_ours

    cases = [
        ("matmul 64x64 @ 64x64", matmul_ours, lambda: A_mp.dot(B_mp)),
        ("elementwise a*b+c 64x64", lambda: A_ours * B_ours + C_ours, lambda: A_mp * B_mp + C_mp),
        ("GD 200 steps, 40x20", gd_ours, gd_mpmath),
    ]
    print(f"{'work':<28}{'ours (s)':>12}{'mpmath (s)':>12}{'speed-up':>10}")
    for label, ours, base in cases:
        t_ours, r_ours = best_of(ours)
        t_base, r_base = best_of(base)
        got = r_ours if isinstance(r_ours, np.ndarray) else xp.to_numpy(r_ours)
        ref = np.array([float(v) for v in np.asarray(r_base).reshape(-1)]).reshape(got.shape)
        # Agreement check in 50 digits on one entry, beyond float64 display.
        if not isinstance(r_ours, np.ndarray):
            e_ours = xp.to_exact(r_ours).reshape(-1)[0]
            e_base = np.asarray(r_base).reshape(-1)[0]
            diff = abs(mpmath.mpf(e_ours.mid().str(60, radius=False)) - e_base)
            assert diff < mpmath.mpf(10) ** -45 * max(1, abs(e_base)), (label, diff)
        assert np.allclose(got, ref, rtol=1e-13, atol=1e-13), label
        print(f"{label:<28}{t_ours:>12.4f}{t_base:>12.4f}{t_base / t_ours:>9.1f}x")


if __name__ == "__main__":
    main()
