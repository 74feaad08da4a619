"""Bench: one second-order engine iteration per cell, today's engine against an earlier
revision's, in the same run, with the achieved GFLOP/s against a matrix-product peak
measured in the same run.

The FLOPs of an iteration are the engine's own count (:mod:`probes.training.work`: every
matrix product, by shape). The earlier revision (``--baseline``, a git revision; its
``probes/training/levenberg_marquardt.py`` is loaded from the repository's history) runs the
same Lanczos algorithm on the same batches, so the same count is its work. Each cell starts
from its seeded initialisation (the engine's per-iteration cost does not depend on where the
weights stand), the floor profile's train setting, and the timings exclude each engine's
first iteration (the count's first measurement and the allocator's warm-up).

Cells: FAMILY:LN:TASK:DEPTH:WIDTH of the `primitives` suite (D = 20, N = 40), e.g.
``transformer:1:read:1:32`` (LN 1 = with LayerNorm).

Usage: python bench/bench_engine_iteration.py [--cells C1,C2] [--iterations 3]
       [--baseline REV] [--threads 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import torch
from bench_time_to_floor import floor_setting  # this folder's: the floor profile's setting
from torch.nn.attention import SDPBackend, sdpa_kernel

from probes.training import levenberg_marquardt as today
from probes.training.job import Job

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CELLS = ("transformer:1:read:1:32", "transformer:1:affine:2:64")


def engine_at(rev: str) -> ModuleType:
    """The engine module as it stood at git revision ``rev``."""
    source = subprocess.run(["git", "show", f"{rev}:probes/training/levenberg_marquardt.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "engine_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("engine_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["engine_baseline"] = module
    spec.loader.exec_module(module)
    return module


def matmul_peak(dtype: torch.dtype, n: int = 1024, repeat: int = 5) -> float:
    """GFLOP/s of the best of ``repeat`` n x n matrix products in ``dtype``."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeat))
    return 2.0 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def iterations(cell: str, engine: ModuleType, n: int) -> tuple[int, int, list[float],
                                                                list[float]]:
    """(P, batch, seconds of each iteration, FLOPs of each iteration: None where the engine
    does not count) of ``n`` iterations of ``engine`` on ``cell``."""
    family, ln, task, depth, width = cell.split(":")
    cfg = replace(floor_setting(), steps=0).resolved()
    job = Job(family=family, task=task, depth=int(depth), width=int(width), train=cfg,
              task_options={"dim": 20, "n": 40}, model_options={"layernorm": ln == "1"})
    t, model = job.build()
    model.double()
    torch.manual_seed(0)
    with sdpa_kernel(SDPBackend.MATH):
        eng = engine._Engine(model, t.sample, lambda m, x: t.select(m(x)), cfg,
                             torch.Generator().manual_seed(0))
        st = engine.LMState(curvature=cfg.lm_curvature, low=True)
        theta = eng.res.flat.get()
        secs, flops = [], []
        for _ in range(n):
            before = getattr(st, "flops", None)
            t0 = time.perf_counter()
            theta, _ = eng.iterate(st, theta, 0, None)
            secs.append(time.perf_counter() - t0)
            flops.append(None if before is None else st.flops - before)
    return eng.n_params, eng.batch, secs, flops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS))
    ap.add_argument("--iterations", type=int, default=3, help="per engine and cell (>= 2)")
    ap.add_argument("--baseline", default="f8243f9", help="git revision of the old engine")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    old = engine_at(args.baseline)
    peak32, peak64 = matmul_peak(torch.float32), matmul_peak(torch.float64)
    print(f"{args.threads} thread(s); matmul peak (1024^3, best of 5): float32 "
          f"{peak32:.1f} GFLOP/s, float64 {peak64:.1f} GFLOP/s")
    print(f"{'cell':28s} {'P':>7s} {'batch':>6s} {'engine':>9s} {'s/iter':>7s} "
          f"{'GFLOP/iter':>10s} {'GFLOP/s':>8s} {'% f32 peak':>10s}")
    for cell in args.cells.split(","):
        P, batch, new_s, flops = iterations(cell, today, args.iterations)
        _, _, old_s, _ = iterations(cell, old, args.iterations)
        work = sum(flops[1:]) / (len(flops) - 1)
        rows = [(args.baseline, sum(old_s[1:]) / (len(old_s) - 1)),
                ("today", sum(new_s[1:]) / (len(new_s) - 1))]
        for name, sec in rows:
            rate = work / sec / 1e9
            print(f"{cell:28s} {P:7d} {batch:6d} {name:>9s} {sec:7.2f} {work / 1e9:10.2f} "
                  f"{rate:8.1f} {100 * rate / peak32:9.0f}%")
        print(f"{cell}: an iteration takes {rows[0][1] / rows[1][1]:.2f}x less time today")


if __name__ == "__main__":
    main()
