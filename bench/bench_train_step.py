"""Bench: time of one Adam training step on the 001 primitives config, eager vs the faster
variants PyTorch offers, in the same run (issue: per-step throughput).

Config (001 App. D.1 at the paper's batch): AFFINE, D = 20, N = 40, batch 1024, GPT-2-style
Transformer of width 64, 2 layers, 2 heads, float32. Every variant draws the same seeded
batches and runs the same model:

* eager       -- one forward/backward pass over the batch and ``torch.optim.Adam``
                 (foreach): what ``probes.training.recipes`` does by default (``micro_batch =
                 0``)
* fused-adam  -- the same with ``Adam(fused=True)``
* micro-128   -- ``micro_batch = 128``: the batch's gradient accumulated over 8 passes of 128
                 sequences (``probes.training.recipes.batch_gradient``), so each pass's
                 activations
                 (128 x 40 x 256 floats in the MLP, 5 MB) stay in cache instead of 42 MB ones
                 that are page-faulted into fresh memory at every step
* micro-128+fused -- both
* compiled    -- ``torch.compile(model)`` (inductor) + fused Adam; compile time is printed
                 apart and excluded from the per-step time

Prints the median seconds per step of each (variants interleaved in rounds) and its
speed-up over eager.

Usage: python bench/bench_train_step.py [--threads 2] [--steps 5] [--rounds 4] [--batch 1024]
                                        [--micro 128] [--no-compile]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from precision.models import build_model
from precision.tasks import make_task
from probes.training.recipes import batch_gradient


def _model(task, width: int, depth: int, heads: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("transformer", task.d_in, task.d_out, depth, width, heads=heads,
                       max_len=task.n_tokens).float()


def _steps(model, opt, task, batch: int, steps: int, micro: int) -> list[float]:
    gen = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = task.sample(batch, gen)
        opt.zero_grad(set_to_none=True)
        batch_gradient(model, lambda m, v: task.select(m(v)), x.float(), y.float(), micro)
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="steps per variant and round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--micro", type=int, default=128, help="micro-batch of the micro variants")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    task = make_task("affine", dim=20, n=40)
    print(f"AFFINE D=20 N=40 batch {args.batch}, Transformer width 64 x 2 layers x 2 heads, "
          f"float32, {args.threads} thread(s), median of {args.rounds} x {args.steps} steps "
          f"(torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()})")
    variants = {"eager": (0, False), "fused-adam": (0, True),
                f"micro-{args.micro}": (args.micro, False),
                f"micro-{args.micro}+fused": (args.micro, True), "compiled": (0, True)}
    runs = {}
    for name, (micro, fused) in variants.items():
        if name == "compiled" and args.no_compile:
            continue
        model = _model(task, 64, 2, 2)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
        run = torch.compile(model) if name == "compiled" else model
        t0 = time.perf_counter()
        _steps(run, opt, task, args.batch, 2, micro)      # warm-up (compiles forward, backward)
        if name == "compiled":
            print(f"  compile (2 warm-up steps): {time.perf_counter() - t0:.1f} s")
        runs[name] = (run, opt, micro)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):      # interleaved, so a change in the machine's load hits all
        for name, (run, opt, micro) in runs.items():
            times[name] += _steps(run, opt, task, args.batch, args.steps, micro)
    eager = statistics.median(times["eager"])
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:<16} {t * 1e3:8.1f} ms/step   {eager / t:.2f}x eager")


if __name__ == "__main__":
    main()
