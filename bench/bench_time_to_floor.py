"""Bench: time to a held-out MSE of 1e-6 and 1e-8 per depth x width cell, the second-order
engine against the paper recipe, in the same run.

Cells are those of the `primitives` suite (001 Sec. 3.2: READ / AFFINE / MULTIPLY, D = 20,
N = 40): FAMILY:LN:TASK:DEPTH:WIDTH, e.g. ``transformer:1:read:2:32`` (LN 1 = with
LayerNorm; FAMILY may be a user factory ``path/to/file.py:FACTORY``, LN then unused). The
engine trains with the one train setting of the suite's ``floor`` profile (read from the
suite file: the same for every cell); the paper recipe (001 App. D.1: Adam
1e-3, StepLR, float32) gets the same wall budget at the paper's batch of 1024 (``--paper-batch``
to change it). Both measure the MSE on 128 fixed held-out sequences along the way, with its
wall time.

Prints one row per (cell, recipe): steps done, time to <= 1e-6 and <= 1e-8 ("> budget" when
not reached), the lowest held-out MSE, the convergence check's gain; then per cell the ratio
paper / engine of the time to 1e-6 (a lower bound when the paper recipe did not reach it).

Usage: python bench/bench_time_to_floor.py [--cells C1,C2,...] [--budget 600] [--threads 1]
       [--recipes engine,paper] [--json OUT.json] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from typing import Any

import torch

from probes.factory import is_factory_spec
from probes.suite import load_suite
from probes.training.convergence_check import convergence_check
from probes.training.job import Job
from probes.training.recipes import TrainConfig, TrainResult, train

DEFAULT_CELLS = ("transformer:1:affine:1:32", "transformer:1:read:2:32",
                 "baseconv:0:multiply:1:32")


def floor_setting() -> TrainConfig:
    """The train setting of every cell of the `primitives` floor profile."""
    suite = load_suite("primitives", profile="floor")
    settings = {run.spec.train for run in suite.runs}
    assert len(settings) == 1, "the floor profile has one train setting"
    return settings.pop()


def first_below(res: TrainResult, level: float) -> float | None:
    """Wall seconds at which the held-out MSE first reached ``level`` (None: never)."""
    return next((t for (_, v), t in zip(res.val_curve, res.val_times, strict=True)
                 if v <= level), None)


def build_cell(cell: str, cfg: TrainConfig) -> tuple[Any, torch.nn.Module, Any]:
    """The task, the fresh model and its predict function of ``cell``
    (FAMILY:LN:TASK:DEPTH:WIDTH, the `primitives` tasks at D = 20, N = 40) trained by ``cfg``."""
    family, ln, task, depth, width = cell.rsplit(":", 4)   # a factory spec holds a ':'
    options = {} if is_factory_spec(family) else {"layernorm": ln == "1"}
    job = Job(family=family, task=task, depth=int(depth), width=int(width), train=cfg,
              task_options={"dim": 20, "n": 40}, model_options=options)
    t, model = job.build()

    def predict(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return t.select(m(x))

    return t, model, predict


def run_cell(cell: str, recipe: str, budget: float, paper_batch: int,
             device: str = "cpu") -> dict:
    cfg = replace(floor_setting(), time_limit=budget, until="steps",
                  second_order_steps=1_000_000, device=device)
    if recipe == "paper":
        cfg = TrainConfig(recipe="paper", steps=10_000_000, batch_size=paper_batch,
                          time_limit=budget, validation_points=1000, device=device)
    t, model, predict = build_cell(cell, cfg)
    res = train(model, t.sample, predict, cfg)
    check = convergence_check(model, t.sample, predict, cfg)
    best = min((v for _, v in res.val_curve), default=math.nan)
    return {"cell": cell, "recipe": recipe, "steps": res.steps, "status": res.status,
            "to_1e-6": first_below(res, 1e-6), "to_1e-8": first_below(res, 1e-8),
            "best": best, "gain": check.gain, "wall": res.wall_time,
            "curve": [(s, v, tt) for (s, v), tt in zip(res.val_curve, res.val_times,
                                                        strict=True)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS))
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per cell and recipe")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--recipes", default="engine,paper")
    ap.add_argument("--paper-batch", type=int, default=1024)
    ap.add_argument("--json", default=None, help="also write every row and curve here")
    ap.add_argument("--device", default="cpu", help="cpu or cuda: where both recipes train")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = [run_cell(c, r, args.budget, args.paper_batch, args.device)
            for c in args.cells.split(",") for r in args.recipes.split(",")]

    def secs(v: float | None) -> str:
        return f"{v:7.0f} s" if v is not None else "> budget"

    print(f"budget {args.budget:.0f} s per cell and recipe, {args.threads} thread(s), "
          f"on {args.device}")
    print(f"{'cell':28s} {'recipe':7s} {'steps':>8s} {'to 1e-6':>9s} {'to 1e-8':>9s} "
          f"{'best MSE':>9s} {'gain':>6s}")
    for r in rows:
        print(f"{r['cell']:28s} {r['recipe']:7s} {r['steps']:8d} {secs(r['to_1e-6']):>9s} "
              f"{secs(r['to_1e-8']):>9s} {r['best']:9.1e} {r['gain']:6.2f}")
    by = {(r["cell"], r["recipe"]): r for r in rows}
    for cell in args.cells.split(","):
        eng, pap = by.get((cell, "engine")), by.get((cell, "paper"))
        if eng and pap and eng["to_1e-6"] is not None:
            other = pap["to_1e-6"] if pap["to_1e-6"] is not None else args.budget
            bound = "" if pap["to_1e-6"] is not None else ">= "
            print(f"{cell}: time to 1e-6, paper / engine: {bound}{other / eng['to_1e-6']:.1f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh)


if __name__ == "__main__":
    main()
