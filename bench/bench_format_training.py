"""Bench: the cost of one training step in each format relative to native float32, same run.

Config: the ``train_precision`` suite's cell (READ, D = 20, N = 40, GPT-2-style Transformer of
depth 1, width 32, batch 32, Adam). Each variant trains a fresh, identically seeded model for
``--steps`` steps through :func:`probes.training.recipes.train` (no validation curve), after
one untimed warm-up run; the variants are interleaved in ``--rounds`` rounds, and the median
seconds per step of each is printed with its ratio to native float32 (the baseline, measured
in the same rounds). A format's step is :mod:`probes.training.format_training`'s: every ATen
op of the forward and backward rounded under the dispatch mode, the weights rounded into the
working copy, the gradients copied to the master weights.

Usage: python bench/bench_format_training.py [--threads 1] [--steps 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from precision.models import build_model
from precision.tasks import make_task
from probes.training.recipes import train
from probes.training.train_config import TrainConfig

#: (label, dtype, master_dtype) of each variant; the first is the baseline.
VARIANTS = [
    ("float32 (native)", "float32", "auto"),
    ("bfloat16 (native)", "bfloat16", "auto"),
    ("bfloat16, float32 master", "bfloat16", "float32"),
    ("bfloat16:sr, no master", "bfloat16:sr", "none"),
    ("float16, float32 master", "float16", "auto"),
    ("float8_e4m3, float32 master", "float8_e4m3", "auto"),
    ("float8_e4m3:sr, no master", "float8_e4m3:sr", "none"),
    ("mxfp8_e4m3, float32 master", "mxfp8_e4m3", "auto"),
    ("mxint8, float32 master", "mxint8", "auto"),
    ("int8, float32 master", "int8", "auto"),
]


def step_seconds(dtype: str, master: str, steps: int) -> float:
    """Wall seconds per Adam step of one training of ``steps`` steps."""
    task = make_task("read", dim=20, n=40)
    torch.manual_seed(0)
    model = build_model("transformer", d_in=task.d_in, d_out=task.d_out, depth=1, width=32)
    cfg = TrainConfig(recipe="constant", steps=steps, batch_size=32, dtype=dtype,
                      master_dtype=master, validation_size=0)
    start = time.perf_counter()
    train(model, task.sample, lambda m, x: task.select(m(x)), cfg)
    return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for _, dtype, master in VARIANTS:       # warm-up: first-call costs out of the timings
        step_seconds(dtype, master, 2)
    times: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
    for _ in range(args.rounds):
        for name, dtype, master in VARIANTS:
            times[name].append(step_seconds(dtype, master, args.steps))
    base = statistics.median(times[VARIANTS[0][0]])
    print(f"one training step, READ D=20 N=40, transformer depth 1 width 32, batch 32; "
          f"{args.steps} steps x {args.rounds} rounds, {args.threads} thread(s)")
    print(f"{'variant':<30} {'ms/step':>9} {'x float32':>10}")
    for name, _, _ in VARIANTS:
        t = statistics.median(times[name])
        print(f"{name:<30} {1000 * t:>9.1f} {t / base:>10.2f}")


if __name__ == "__main__":
    main()
