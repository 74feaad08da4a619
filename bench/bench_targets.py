"""Bench: the training targets computed by :mod:`precision.deterministic` (the same bits on
every call) against the BLAS / LAPACK way they were computed before (whose bits changed with
the input's address), same run, same batches.

Per task and batch size: the median milliseconds of :meth:`Task.target` (tree sums; OLS by
``deterministic.lstsq``) and of the baseline (AFFINE: ``x @ H``; the least-squares tasks:
``torch.linalg.lstsq`` and ``sum``), interleaved over ``--rounds`` rounds, and their ratio.
A training step of the ``train_precision`` cell (batch 32) costs ~8.5 ms on this CPU
(bench_format_training.py), for scale.

Usage: python bench/bench_targets.py [--threads 1] [--rounds 5] [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from precision.tasks import make_task


def _lapack_ols(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.lstsq(X, y[..., None]).solution[..., 0]


def baseline(name: str, task: object) -> Callable[[torch.Tensor], torch.Tensor]:
    """The target as the BLAS / LAPACK way computed it (target version 1)."""
    n, d = task.n, task.dim   # type: ignore[attr-defined]
    if name == "affine":
        H = torch.as_tensor(task.H)   # type: ignore[attr-defined]
        return lambda x: x @ H
    if name == "ls_parallel":
        return lambda x: torch.cat([x[:, 1:2 * n:2, 0], (x[:, -1] * _lapack_ols(
            x[:, 0:2 * n:2], x[:, 1:2 * n:2, 0])).sum(-1, keepdim=True)], dim=1)
    if name == "ls_fixed_n":
        return lambda x: (x[:, n, :d] * _lapack_ols(x[:, :n, :d], x[:, :n, d])).sum(
            -1, keepdim=True)
    return lambda x: _lapack_ols(x[:, :n, :d], x[:, :n, d])   # ls_feature


def _ms(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t0) / calls * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"training targets, {args.rounds} rounds x {args.calls} calls, "
          f"{args.threads} thread(s)")
    print(f"{'task':<12}{'batch':>6}{'deterministic ms':>18}{'BLAS/LAPACK ms':>16}{'ratio':>7}")
    for name in ("affine", "ls_parallel", "ls_fixed_n", "ls_feature"):
        task = make_task(name, seed=0)
        base = baseline(name, task)
        for batch in (32, 1024):
            x = task.inputs(batch, torch.Generator().manual_seed(1))
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(_ms(task.target, x, args.calls))
                theirs.append(_ms(base, x, args.calls))
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"{name:<12}{batch:>6}{a:>18.3f}{b:>16.3f}{a / b:>7.1f}")


if __name__ == "__main__":
    main()
