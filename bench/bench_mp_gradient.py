"""Bench: an mpN gradient against an mpN forward of the same model, same run.

For each model (the 001 Transformer, depth 2, width 64, 1 head, MLP x4, LayerNorm, on a
(batch, N 40, D 20) input; and zoo models at width 32, depth 2, N 32), the CPU time
(``time.process_time``, best of ``--repeat``) of:

* forward: ``evaluate(model, x, "mp50")``'s program (the exported graph, interpreted);
* gradient: ``precision.gradient.gradient(model, x, target, "mp50")``'s program (the model
  exported, L = MSE differentiated and traced to core ATen once, interpreted), without the
  one-off trace (timed apart);

and their ratio (autograd's usual ratio of a backward to a forward is 2-3x), with the float64
gradient's time by PyTorch's autograd beside it.

Usage: python bench/bench_mp_gradient.py [--batch 4] [--repeat 2] [--only transformer,llama]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from precision.evaluate import mp_program
from precision.gradient import _trainable, gradient, program
from precision.precisions import Precision, parse_precision
from probes.factory import build_family, load_factory

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"


def cpu(fn: Callable[[], object], repeat: int) -> float:
    """Best CPU seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def models(batch: int) -> dict[str, tuple[torch.nn.Module, torch.Tensor]]:
    """name -> (float64 model, seeded input)."""
    gen = torch.Generator().manual_seed(1)
    out = {"transformer d2 w64": (
        build_family("transformer", 20, 20, 2, 64, 40, {"layernorm": True}, seed=0).double(),
        torch.randn(batch, 40, 20, dtype=torch.float64, generator=gen))}
    for name in ("llama", "mamba", "deltanet"):
        torch.manual_seed(0)
        model = load_factory(f"{ZOO / name}.py:{name}")(20, 20, 2, 32, max_len=32).double()
        out[name] = (model, torch.randn(batch, 32, 20, dtype=torch.float64, generator=gen))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated model names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    p = parse_precision("mp50")
    print(f"{'model':20s} {'P':>7s} {'trace s':>8s} {'forward s':>10s} {'gradient s':>11s} "
          f"{'ratio':>6s} {'f64 autograd s':>15s}")
    for name, (model, x) in models(args.batch).items():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        row(name, model.eval(), x, p, args.repeat)


def row(name: str, model: torch.nn.Module, x: torch.Tensor, p: Precision, repeat: int) -> None:
    """One model's line: trace, forward, gradient (CPU seconds), their ratio, float64."""
    with torch.no_grad():
        target = torch.randn_like(model(x))
    forward = mp_program(model, x)
    t0 = time.process_time()
    prog = program(model, x, target)
    trace = time.process_time() - t0
    params = [q.detach() for _, q in _trainable(model)]
    buffers = [dict(model.named_buffers())[n] for n in prog.module.buffer_names]
    fwd = cpu(lambda: forward(x, precision=p), repeat)
    grad = cpu(lambda: prog(*params, *buffers, x, target, precision=p), repeat)
    f64 = cpu(lambda: gradient(model, x, target, "float64"), repeat)
    n = sum(q.numel() for q in params)
    print(f"{name:20s} {n:7d} {trace:8.1f} {fwd:10.2f} {grad:11.2f} {grad / fwd:6.2f} "
          f"{f64:15.3f}")

if __name__ == "__main__":
    main()
