"""Bench: time of one Adam training step on the 001 primitives config, eager vs the faster
variants PyTorch offers, in the same run (issue: per-step throughput).

Config (001 App. D.1 at the paper's batch): AFFINE, D = 20, N = 40, batch 1024, GPT-2-style
Transformer of width 64, 2 layers, 2 heads, float32. Every variant draws the same seeded
batches and runs the same model:

* eager       -- what ``probes.training`` does: the model as written, ``torch.optim.Adam``
                 (foreach), one fresh batch per step
* fused-adam  -- the same with ``Adam(fused=True)``
* compiled    -- ``torch.compile(model)`` (inductor) + fused Adam; compile time is printed
                 apart and excluded from the per-step time

Prints the median seconds per step of each and its speed-up over eager.

Usage: python bench/bench_train_step.py [--threads 2] [--steps 10] [--batch 1024] [--no-compile]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from precision.models import build_model
from probes.tasks import make_task


def _model(task, width: int, depth: int, heads: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("transformer", task.d_in, task.d_out, depth, width, heads=heads,
                       max_len=task.n_tokens).float()


def _steps(model, opt, task, batch: int, steps: int) -> list[float]:
    gen = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = task.sample(batch, gen)
        loss = (task.select(model(x.float())) - y.float()).pow(2).mean()
        float(loss.detach())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    task = make_task("affine", dim=20, n=40)
    print(f"AFFINE D=20 N=40 batch {args.batch}, Transformer width 64 x 2 layers x 2 heads, "
          f"float32, {args.threads} thread(s), median of {args.steps} steps "
          f"(torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()})")
    results: dict[str, float] = {}
    for name in ("eager", "fused-adam", "compiled"):
        if name == "compiled" and args.no_compile:
            continue
        model = _model(task, 64, 2, 2)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=name != "eager")
        run = model
        if name == "compiled":
            run = torch.compile(model)
            t0 = time.perf_counter()
            _steps(run, opt, task, args.batch, 2)      # compile forward and backward
            print(f"  compile (2 warm-up steps): {time.perf_counter() - t0:.1f} s")
        else:
            _steps(run, opt, task, args.batch, 1)      # warm-up
        results[name] = statistics.median(_steps(run, opt, task, args.batch, args.steps))
        ratio = results["eager"] / results[name]
        print(f"  {name:<11} {results[name] * 1e3:8.1f} ms/step   {ratio:.2f}x eager")


if __name__ == "__main__":
    main()
