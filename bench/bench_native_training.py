"""Bench: simulated bfloat16 training against torch's native bfloat16 kernels on the CPU.

The two runs share everything but the arithmetic: float32 master weights, Adam in float32, the
same seeded batches and model (READ, D = 20, N = 40, GPT-2-style Transformer of depth 1,
width 32, batch 32):

* native     -- ``dtype = "bfloat16", master_dtype = "float32"``: the working copy in torch's
                bfloat16 dtype, every op torch's own bfloat16 CPU kernel (a matrix product
                accumulates in float32 and rounds its output once);
* simulated  -- ``dtype = "bfloat16+acc=float32", master_dtype = "float32"``: the working copy
                in float32, every op computed in float32 and its result rounded to bfloat16,
                products and sums accumulated in float32 (the rule the native matrix product
                follows).

Printed: (1) one gradient from the same master weights and batch: per parameter tensor the
largest difference between the two gradients in units of the bfloat16 spacing at the native
gradient (ulps), and the share of entries that differ; (2) the held-out MSE of both after
``--steps`` steps, and of pure native bfloat16 training (``dtype = "bfloat16"``: weights and
Adam's state in bfloat16 too) beside float32. Where the kernels fuse or reorder (layer norm,
softmax, GELU keep float32 intermediates inside one native kernel), the simulation rounds each
ATen op of the decomposition: the differences are those of fused against unfused arithmetic.

Usage: python bench/bench_native_training.py [--steps 300] [--threads 1]
"""

from __future__ import annotations

import argparse

import torch

from precision.models import build_model
from precision.precisions import parse_precision
from precision.tasks import make_task
from probes.training.format_training import FormatTraining
from probes.training.recipes import batch_gradient, train
from probes.training.train_config import TrainConfig

NATIVE, SIMULATED = "bfloat16", "bfloat16+acc=float32"


def _setup() -> tuple[object, torch.nn.Module]:
    task = make_task("read", dim=20, n=40)
    torch.manual_seed(0)
    return task, build_model("transformer", d_in=task.d_in, d_out=task.d_out, depth=1,
                             width=32)


def _ulps(a: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest |a - ref| in units of bfloat16's spacing at |ref| (2^(e - 7), e = exponent)."""
    mag = ref.abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
    spacing = torch.exp2(torch.floor(torch.log2(mag)) - 7)
    return float(((a - ref).abs() / spacing).max())


def one_gradient() -> None:
    task, model = _setup()
    model = model.float()
    x, y = task.sample(32, torch.Generator().manual_seed(1))
    predict = lambda m, xs: task.select(m(xs))   # noqa: E731
    grads = {}
    for name in (NATIVE, SIMULATED):
        master = [p.detach().clone() for p in model.parameters()]
        fmt = FormatTraining(model, parse_precision(name), "off")
        fmt.gradient(model, predict, x, y, 1, 0, batch_gradient)
        grads[name] = [p.grad.detach().clone() for p in model.parameters()]
        for p, m in zip(model.parameters(), master, strict=True):
            assert torch.equal(p.detach(), m)
            p.grad = None
    print("one gradient from the same float32 master weights and batch "
          f"(native {NATIVE} kernels vs simulated {SIMULATED}):")
    print(f"{'parameter':<40} {'max ulps':>9} {'differ':>8}")
    for (pname, _), a, b in zip(model.named_parameters(), grads[SIMULATED], grads[NATIVE],
                                strict=True):
        differ = float((a != b).float().mean())
        print(f"{pname:<40} {_ulps(a, b):>9.1f} {differ:>8.1%}")


def curves(steps: int) -> None:
    print(f"\nheld-out MSE after {steps} Adam steps (cosine, lr 3e-3, batch 32):")
    for dtype, master in (("float32", "auto"), (NATIVE, "float32"), (SIMULATED, "float32"),
                          (NATIVE, "auto")):
        task, model = _setup()
        cfg = TrainConfig(recipe="cosine", lr=3e-3, steps=steps, batch_size=32, dtype=dtype,
                          master_dtype=master, validation_points=10)
        r = train(model, task.sample, lambda m, xs, t=task: t.select(m(xs)), cfg)
        where = "weights and Adam in bfloat16" if master == "auto" and dtype == NATIVE \
            else "float32 master weights" if master == "float32" else "native"
        print(f"  {dtype:<22} {where:<30} {r.val_curve[-1][1]:.4e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    one_gradient()
    curves(args.steps)


if __name__ == "__main__":
    main()
