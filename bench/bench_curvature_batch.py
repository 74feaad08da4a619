"""Bench: the engine's curvature batch at equal work. Each cell trains with the `primitives`
floor profile's one train setting, its second-order phase stopped by a budget in engine
FLOPs (``engine_flops``, counted, the same on any machine), once per curvature fraction: the
Krylov path's curvature products (and K-FAC factors, probes) on that fraction of each batch,
the gradient on all of it; an iteration with no acceptable step doubles the fraction, up to
the whole batch (Hessian-free's curvature minibatch, Martens 2010). The engine's own setting
is the whole batch (``ENGINE_CURVATURE`` in probes/training/recipe_book.py); the batch holds
about one residual per parameter, so a fraction f is a curvature batch of about f P residuals.

Every run of a cell starts from the same Adam weights (same seed, same device): the rows differ
only in the engine's iterations. Prints per (cell, fraction): iterations, FLOPs done, the
held-out MSE at a quarter, half and all of the budget, the best, and the FLOPs to 1e-4 / 1e-6.

Cells: FAMILY:LN:TASK:DEPTH:WIDTH as in bench_time_to_floor.py.

Usage: python bench/bench_curvature_batch.py [--cells C1,C2] [--fractions 1,0.25,0.0625]
       [--tflops 20] [--device cpu] [--threads 1] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace

import torch
from bench_time_to_floor import (  # this folder's: the floor profile's setting
    build_cell,
    floor_setting,
)

from probes.training.recipes import TrainConfig, train


def engine_with_curvature(fraction: float, tflops: float, device: str,
                          time_limit: float | None = None) -> TrainConfig:
    """The floor setting with the engine recipe's settings spelled out (recipe
    ``high-precision`` fixes none, so ``lm_curvature`` is not overwritten), the curvature
    fraction ``fraction`` and a budget of ``tflops`` 1e12 engine FLOPs (``time_limit``: a
    wall-clock safety stop, its rows say "time limit")."""
    cfg = floor_setting().resolved()
    return replace(cfg, recipe="high-precision", lm_curvature=fraction,
                   engine_flops=tflops * 1e12, second_order_steps=1_000_000, until="steps",
                   device=device, time_limit=time_limit)


def mse_at(curve: list[tuple[float, float]], flops: float) -> float:
    """The held-out MSE of the last measurement at or before ``flops`` engine FLOPs."""
    return min((v for f, v in curve if f <= flops), default=math.nan)


def run(cell: str, fraction: float, tflops: float, device: str,
        time_limit: float | None = None) -> dict:
    cfg = engine_with_curvature(fraction, tflops, device, time_limit)
    t, model, predict = build_cell(cell, cfg)
    res = train(model, t.sample, predict, cfg)
    adam_end = max((i for i, f in enumerate(res.val_flops) if f == 0), default=-1)
    curve = [(f, v) for f, (_, v) in zip(res.val_flops, res.val_curve, strict=True)][adam_end:]
    budget = tflops * 1e12

    def flops_to(level: float) -> float | None:
        return next((f for f, v in curve if v <= level), None)

    return {"cell": cell, "fraction": fraction, "device": device,
            "iterations": res.steps - cfg.steps, "flops": res.engine_flops,
            "stop": res.stop_reason, "wall": res.wall_time,
            "q1": mse_at(curve, budget / 4), "q2": mse_at(curve, budget / 2),
            "q4": mse_at(curve, budget), "best": min(v for _, v in curve),
            "to_1e-4": flops_to(1e-4), "to_1e-6": flops_to(1e-6), "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="transformer:1:read:1:32,transformer:0:affine:1:32")
    ap.add_argument("--fractions", default="1,0.25,0.0625")
    ap.add_argument("--tflops", type=float, default=20.0, help="engine budget, 1e12 FLOPs")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds: a safety stop per run (its row's stop says so)")
    ap.add_argument("--json", default=None, help="also write every row and curve here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = [run(c, float(f), args.tflops, args.device, args.time_limit)
            for c in args.cells.split(",") for f in args.fractions.split(",")]

    def tf(v: float | None) -> str:
        return f"{v / 1e12:8.1f}" if v is not None else "   > bud"

    print(f"engine budget {args.tflops:g} TFLOP per run, on {args.device}; MSE held-out "
          f"(128 sequences) at 1/4, 1/2, all of the budget; TFLOP to a level")
    print(f"{'cell':28s} {'frac':>6s} {'iters':>5s} {'TFLOP':>6s} {'MSE@1/4':>8s} "
          f"{'MSE@1/2':>8s} {'MSE@1':>8s} {'best':>8s} {'to 1e-4':>8s} {'to 1e-6':>8s} "
          f"{'wall':>6s} stop")
    for r in rows:
        print(f"{r['cell']:28s} {r['fraction']:6.4g} {r['iterations']:5d} "
              f"{r['flops'] / 1e12:6.1f} {r['q1']:8.1e} {r['q2']:8.1e} {r['q4']:8.1e} "
              f"{r['best']:8.1e} {tf(r['to_1e-4'])} {tf(r['to_1e-6'])} {r['wall']:6.0f} "
              f"{r['stop']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh)


if __name__ == "__main__":
    main()
