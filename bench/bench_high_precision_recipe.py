"""Bench: the high-precision recipe vs the paper recipe (001 App. D.1) on MULTIPLY.

MULTIPLY (001 Sec. 3.2, App. D.2.3): D = 20, N = 40, x (batch, N, 20) ~ N(0, 1) per entry,
y = x[..., :10] * x[..., 10:] (batch, N, 10); a 1-layer BaseConv without LayerNorm (001
eq. 2) represents it exactly (001 App. C.1.3), so the floor is set by the optimiser.

1. high-precision: float64 Adam, then Levenberg-Marquardt, with a wall budget (default 300 s);
   prints wall time T, the time at which the training loss of the LM batch first reached the
   target, and the float64 test MSE on 256 fresh sequences.
2. paper: Adam(1e-3) + StepLR(1e4, 0.9), float32 training, for the same wall time T.

Usage: python bench/bench_high_precision_recipe.py [--width 20] [--residual none] [--budget 300]
"""

from __future__ import annotations

import argparse
import time

import torch

from precision.models import build_model
from precision.tasks import make_task
from probes.training.recipes import TrainConfig, train

D, N, TARGET = 20, 40, 1e-14
sample = make_task("multiply", dim=D, n=N).sample   # (batch, gen) -> x (b, N, D), y (b, N, D/2)


def call(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)


def test_mse(model: torch.nn.Module) -> float:
    x, y = sample(256, torch.Generator().manual_seed(2024))
    with torch.no_grad():
        return float((model(x.double()) - y).pow(2).mean())


def build(width: int, residual: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("baseconv", D, D // 2, depth=1, width=width, max_len=N, layernorm=False,
                       residual=residual)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=20)
    ap.add_argument("--residual", default="none", choices=["none", "outer", "inner"],
                    help="BaseConv residual: without one, width D represents MULTIPLY exactly")
    ap.add_argument("--budget", type=float, default=300.0, help="wall seconds for high-precision")
    ap.add_argument("--adam-steps", type=int, default=1500)
    ap.add_argument("--krylov", type=int, default=60)
    ap.add_argument("--memory", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    model = build(args.width, args.residual)
    n_params = sum(p.numel() for p in model.parameters())
    hp_cfg = TrainConfig(recipe="high-precision", steps=args.adam_steps, batch_size=64,
                         second_order_steps=100_000, second_order_batch=64, lm_refresh=10,
                         krylov_dim=args.krylov, lm_memory=args.memory,
                         time_limit=args.budget, curve_points=100_000)
    t0 = time.process_time()
    hp = train(model, sample, call, hp_cfg)
    hp_cpu = time.process_time() - t0
    hp_mse = test_mse(model)
    T = hp.wall_time
    floor_t = next((t for (s, v), t in zip(hp.curve, hp.curve_times, strict=True)
                    if s > args.adam_steps and v <= TARGET), None)
    adam_t = next((t for (s, _), t in zip(hp.curve, hp.curve_times, strict=True)
                   if s == args.adam_steps), float("nan"))
    lm_iters = hp.steps - args.adam_steps
    best_train = min(v for s, v in hp.curve if s > args.adam_steps) if lm_iters else float("nan")

    paper_model = build(args.width, args.residual)
    paper = train(paper_model, sample, call,
                  TrainConfig(recipe="paper", steps=10**9, batch_size=256, dtype="float32",
                              time_limit=T))
    paper_mse = test_mse(paper_model)

    print(f"MULTIPLY D={D} N={N}; 1-layer BaseConv width {args.width} residual {args.residual} "
          f"(no LayerNorm), "
          f"{n_params} parameters; {args.threads} thread(s)")
    print(f"high-precision: Adam {args.adam_steps} steps (float64, batch 64) in {adam_t:.1f} s, "
          f"then {lm_iters} LM iterations (Krylov {args.krylov} + memory {args.memory}, "
          f"batch 64 refreshed every 10); LM-batch train MSE best {best_train:.3e}; "
          f"CPU time {hp_cpu:.1f} s")
    print(f"time to train MSE <= {TARGET:g}: "
          + (f"{floor_t:.1f} s" if floor_t is not None else "not reached"))
    print()
    print(f"{'recipe':<16}{'wall s':>9}{'steps':>10}{'status':>10}{'test MSE':>14}")
    print(f"{'high-precision':<16}{T:>9.1f}{hp.steps:>10}{hp.status:>10}{hp_mse:>14.3e}")
    print(f"{'paper':<16}{paper.wall_time:>9.1f}{paper.steps:>10}{paper.status:>10}"
          f"{paper_mse:>14.3e}")
    print(f"ratio paper / high-precision test MSE: {paper_mse / hp_mse:.3e}")
    print(f"test MSE <= {TARGET:g}: {'yes' if hp_mse <= TARGET else 'NO'}")


if __name__ == "__main__":
    main()
