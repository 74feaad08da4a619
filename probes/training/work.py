"""The work the second-order engine does, counted in floating-point operations: the unit of
its budget (``TrainConfig.engine_flops``), so that a budget ends a run at the same iteration
on any machine and under any load (wall time is only a safety stop).

A count, not a clock: each kind of call (a forward pass on a batch of B sequences, a
gradient, one curvature product, a scaling of one vector...) is run once under torch's
:class:`~torch.utils.flop_counter.FlopCounterMode`, which counts the multiply-adds of every
matrix product, convolution and attention the call dispatches (2 per multiply-add, by shape
alone: the count does not depend on the dtype, the device or the values). The result is kept
for the call's key (its kind and shapes) and added, without counting again, each time the
same call is made: counting on every call would cost ~8x the call (measured on a depth-1,
width-32 Transformer: an engine iteration of 0.6 s took 5.1 s under the counter). Dense
factorisations the counter does not see (Cholesky, symmetric eigendecompositions) and the
engine's own vector bookkeeping are added by formula (:func:`cholesky_flops`,
:func:`eigh_flops`, :meth:`WorkLedger.add`).

Elementwise operations (activations, softmax, LayerNorm) are not counted, as in the usual
``6 P tokens`` estimate of a training step: the count is the work a matrix unit does, which is
what a GFLOP/s figure against a matmul peak compares (``bench/bench_engine_iteration.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from torch.utils.flop_counter import FlopCounterMode

T = TypeVar("T")


def cholesky_flops(n: int) -> float:
    """Floating-point operations of a Cholesky factorisation of an n x n matrix (n^3 / 3
    multiply-adds)."""
    return 2.0 * n ** 3 / 3.0


def eigh_flops(n: int) -> float:
    """Floating-point operations of a symmetric eigendecomposition with eigenvectors of an
    n x n matrix (Golub & Van Loan's ~9 n^3 for tridiagonalisation and the QR sweeps)."""
    return 9.0 * n ** 3


class WorkLedger:
    """The FLOPs done so far (:attr:`flops`): :meth:`run` a call by its key (counted once,
    then looked up), :meth:`add` what the counter cannot see."""

    def __init__(self, flops: float = 0.0) -> None:
        self.flops = float(flops)
        self._costs: dict[Hashable, float] = {}

    def run(self, key: Hashable, fn: Callable[..., T], *args: Any, units: int = 1,
            **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, its FLOPs added: counted the first time ``key`` is seen
        (the key must name everything the count depends on: the call's kind and shapes).
        ``units``: the call does this many of the key's units of work (a block of vectors,
        each costing the same: a batched product does the FLOPs of one product per row)."""
        cost = self._costs.get(key)
        if cost is None:
            with FlopCounterMode(display=False) as counter:
                out = fn(*args, **kwargs)
            cost = self._costs[key] = float(counter.get_total_flops()) / units
        else:
            out = fn(*args, **kwargs)
        self.flops += cost * units
        return out

    def add(self, flops: float) -> None:
        """Add ``flops`` done outside :meth:`run` (a factorisation, the basis's bookkeeping)."""
        self.flops += float(flops)
