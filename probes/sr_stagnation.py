"""Stochastic rounding against round-to-nearest where RN stagnates: GD on least squares in
float8_e4m3, and a long dot product accumulated in the format itself (issue 29, item 5).

The known result (Connolly, Higham and Mary, SIAM J. Sci. Comput. 2021; Croci et al., R. Soc.
Open Sci. 2022): under RN an update smaller than half a spacing of the iterate is lost, so GD
stops at a floor set by the format's spacing near w*, and a recursive sum stops growing once
its terms fall below half a spacing of the partial sum (error O(n u)); SR rounds up with the
probability of the lost fraction, so the iterate keeps descending in expectation and the
sum's error grows like O(sqrt(n) u).

    python -m probes.sr_stagnation [--seeds 10] [--iters 2000] [--n 4096]

GD: X (N = 32, D = 4) with singular values in [1, 2], y = X w_true + 0.01 noise, both rounded
to the format; w* = the float64 least-squares solution of the rounded data; w_0 = 0; step
eta = 0.1 / lambda_max(X^T X / N) (a small step, as in training: the updates shrink below half
a spacing of w long before w*); all arithmetic in the precision (the solvers' FormatBackend:
every op rounded, products accumulated in float32); error ||w_k - w*||^2 / ||w*||^2, next to
GD in float64 and to w* rounded to the format (what storing the answer alone costs).
Dot product: x, y ~ U(0, 1), rounded to the input format, sum_i x_i y_i accumulated in index
order in the accumulation format (every partial sum rounded); relative error against the
exact sum of the rounded values. FP8 inputs are accumulated in bfloat16 over n / 4 terms:
the result is an FP8 value (its largest is 448, and the sum of n U(0,1)^2 is n / 4), and an
FP8 accumulator's sqrt(n) u exceeds 1 for any n worth the name.
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction

import numpy as np

from precision.backends import backend_for
from precision.precisions import Precision, parse_precision
from precision.solvers.gd import gd


def least_squares_problem(seed: int = 0, n: int = 32, d: int = 4
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of the GD study (module docstring), in float64 before any rounding."""
    rng = np.random.default_rng(seed)
    q1, _ = np.linalg.qr(rng.standard_normal((n, d)))
    q2, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = q1 @ np.diag(np.linspace(1.0, 2.0, d) * math.sqrt(n)) @ q2
    w_true = rng.standard_normal(d)
    return X, X @ w_true + 0.01 * rng.standard_normal(n)


STEP_FRACTION = 0.1


def gd_errors(p: Precision, X: np.ndarray, y: np.ndarray, iters: int,
              at: tuple[int, ...], data: Precision | None = None) -> dict[int, float]:
    """||w_k - w*||^2 / ||w*||^2 at the iterations ``at`` of GD run in ``p`` on the data
    rounded to ``data`` (default ``p``), w* the least-squares solution of the rounded data."""
    xd = backend_for(data or p)
    xd.restart()
    X64, y64 = xd.to_numpy(xd.asarray(X)), xd.to_numpy(xd.asarray(y))
    xp = backend_for(p)
    xp.restart()
    Xr, yr = xp.asarray(X64), xp.asarray(y64)
    w_star = np.linalg.lstsq(X64, y64, rcond=None)[0]
    eta = STEP_FRACTION / np.linalg.eigvalsh(X64.T @ X64 / X64.shape[0])[-1]
    trace = gd(xp, Xr, yr, step=float(eta), iters=iters)
    norm = float(w_star @ w_star)
    errors = {k: float(np.sum((xp.to_numpy(trace[k]) - w_star) ** 2) / norm) for k in at}
    errors[-1] = float(np.sum((xp.to_numpy(xp.asarray(w_star)) - w_star) ** 2) / norm)
    return errors


def dot_error(p: Precision, n: int, seed: int = 0) -> float:
    """Relative error of sum_i x_i y_i (n terms, U(0, 1)) computed in ``p``."""
    xp = backend_for(p)
    xp.restart()
    rng = np.random.default_rng(seed)
    x, y = xp.asarray(rng.random(n)), xp.asarray(rng.random(n))
    exact = sum(Fraction(a) * Fraction(b) for a, b in zip(xp.to_numpy(x), xp.to_numpy(y),
                                                          strict=True))
    got = Fraction(xp.to_float(xp.dot(x, y)))
    return float(abs(got - exact) / exact)


def _spread(values: list[float]) -> str:
    v = np.array(values)
    return f"median {np.median(v):.2e} [{v.min():.2e}, {v.max():.2e}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--format", default="float8_e4m3")
    args = parser.parse_args(argv)
    X, y = least_squares_problem()
    at = tuple(k for k in (1, 10, 30, 100, 300, 1000, 2000, 5000) if k <= args.iters)
    fmt = parse_precision(args.format)
    print(f"GD on least squares (N=32, D=4, step {STEP_FRACTION}/lambda_max), {args.format}: "
          "||w_k - w*||^2 / ||w*||^2")
    exact = gd_errors(parse_precision("float64"), X, y, args.iters, at, data=fmt)
    rn = gd_errors(fmt, X, y, args.iters, at)
    runs = [gd_errors(parse_precision(f"{args.format}:sr+seed={s}"), X, y, args.iters, at,
                      data=fmt) for s in range(args.seeds)]
    print(f"  {'k':>6}  {'float64':>9}  {'rne':>9}  sr over {args.seeds} seeds")
    for k in at:
        print(f"  {k:>6}  {exact[k]:9.2e}  {rn[k]:9.2e}  {_spread([r[k] for r in runs])}")
    print(f"  w* rounded to {args.format}: {rn[-1]:.2e}")
    print("dot product of n U(0,1)^2 terms: relative error")
    for inputs, acc, n in (("bfloat16", "bfloat16", args.n), ("float16", "float16", args.n),
                           (args.format, "bfloat16", args.n // 4)):
        rn_err = dot_error(parse_precision(f"{inputs}+acc={acc}"), n)
        sr = [dot_error(parse_precision(f"{inputs}:sr+acc={acc}+seed={s}"), n)
              for s in range(args.seeds)]
        u = parse_precision(acc).unit_roundoff
        print(f"  {inputs:<12} acc {acc:<9} n {n:<5} rne {rn_err:.2e}   sr {_spread(sr)}   "
              f"(n u = {n * u:.2g}, sqrt(n) u = {math.sqrt(n) * u:.2g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
