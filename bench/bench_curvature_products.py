"""Bench: the routes to one Gauss-Newton curvature product J^T J v, per cell, in the same run,
with GFLOP/s against the matrix-product peaks and against the model's own matrix shapes.

The engine (`probes/training/levenberg_marquardt.py`, Krylov path) computes J v by the
double-backward trick (u -> J^T u is linear in u, so d/du <J^T u, v> = J v, through the graph
of J^T u built once per iteration) and J^T w by one backward pass through the kept graph of
r. The routes timed for the J v half, each followed by the same J^T w pass:

* ``double-backward``: the engine's;
* ``jvp``: forward-mode ``torch.func.jvp`` of the residual function (a forward pass with
  tangents, recomputing the primal each time);
* ``linearize``: ``torch.func.linearize`` traces the tangent map once per iteration (its setup,
  amortised over the iteration's ``--products``) and then runs only the tangent pass;
* ``block of 8``: J v for 8 vectors at once (batched double backward, ``is_grads_batched``),
  time per vector: what a block Krylov method would pay.

FLOPs are torch's count of one product (2 per multiply-add of every matrix product). The
ceiling: a forward pass's GFLOP/s, and one (M, W) x (W, W) product's, M the batch's tokens.

Cells: FAMILY:LN:TASK:DEPTH:WIDTH of the `primitives` suite (D = 20, N = 40), each at its
engine batch (one residual per parameter).

Usage: python bench/bench_curvature_products.py [--cells C1,C2] [--products 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

import torch
from bench_time_to_floor import floor_setting  # this folder's: the floor profile's setting
from torch.func import jvp, linearize
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from probes.training import levenberg_marquardt as engine
from probes.training.job import Job

DEFAULT_CELLS = ("transformer:1:affine:1:32", "transformer:1:affine:2:32",
                 "transformer:1:affine:3:32")


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Seconds of the fastest of ``repeat`` calls of ``fn`` (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype) -> float:
    """GFLOP/s of the best of 5 (m, k) x (k, n) products in ``dtype``."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    return 2.0 * m * k * n / best_of(lambda: a @ b, 5) / 1e9


def flops_of(fn: Callable[[], object]) -> float:
    """torch's FLOP count of one call of ``fn``."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


def routes(cell: str, dtype: torch.dtype, products: int) -> dict[str, float]:
    """Seconds per product of each route (and of a forward pass, ``forward``), the FLOPs of
    one product (``flops``) and of a forward (``forward_flops``), P and the batch's tokens."""
    family, ln, task, depth, width = cell.split(":")
    cfg = replace(floor_setting(), steps=0).resolved()
    job = Job(family=family, task=task, depth=int(depth), width=int(width), train=cfg,
              task_options={"dim": 20, "n": 40}, model_options={"layernorm": ln == "1"})
    t, model = job.build()
    model.double()
    torch.manual_seed(0)
    eng = engine._Engine(model, t.sample, lambda m, x: t.select(m(x)), cfg,
                         torch.Generator().manual_seed(0))
    x, y = eng.next_batch(engine.LMState(curvature=1.0, low=True))
    xs, ys = x.to(dtype), y.to(dtype)
    theta = eng.res.flat.get()

    def res(th: torch.Tensor) -> torch.Tensor:
        return eng.res.low(th, xs, ys) if dtype != torch.float64 else eng.res(th, x, y)

    th = theta.clone().requires_grad_(True)
    r = res(th)
    u = torch.zeros_like(r, requires_grad=True)
    jtu = torch.autograd.grad(r, th, u, create_graph=True)[0]
    v = torch.randn(theta.numel(), dtype=torch.float64)
    block = torch.randn(8, theta.numel(), dtype=torch.float64)

    def back(jv: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad(r, th, jv, retain_graph=True)[0]

    def double_backward() -> torch.Tensor:
        return back(torch.autograd.grad(jtu, u, v.to(jtu.dtype), retain_graph=True)[0])

    def forward_mode() -> torch.Tensor:
        return back(jvp(res, (theta,), (v,))[1])

    def blocked() -> torch.Tensor:
        jv = torch.autograd.grad(jtu, u, block.to(jtu.dtype), retain_graph=True,
                                 is_grads_batched=True)[0]
        return torch.autograd.grad(r, th, jv, retain_graph=True, is_grads_batched=True)[0]

    t0 = time.perf_counter()
    _, tangent = linearize(res, theta)
    tangent(v)
    setup = time.perf_counter() - t0
    with torch.no_grad():
        fwd = best_of(lambda: res(theta))
    reference = double_backward()
    agree = float((forward_mode() - reference).norm() / reference.norm())
    return {
        "P": theta.numel(), "tokens": x.shape[0] * x.shape[1], "agree": agree,
        "flops": flops_of(double_backward), "forward_flops": flops_of(lambda: res(theta)),
        "forward": fwd,
        "double-backward": best_of(double_backward),
        "jvp": best_of(forward_mode),
        "linearize": best_of(lambda: back(tangent(v))) + setup / products,
        "block of 8": best_of(blocked, 2) / 8,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS))
    ap.add_argument("--products", type=int, default=40, help="per iteration (linearize's setup)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    peak32 = matmul_rate(1024, 1024, 1024, torch.float32)
    peak64 = matmul_rate(1024, 1024, 1024, torch.float64)
    print(f"{args.threads} thread(s); matmul peak (1024^3, best of 5): float32 {peak32:.1f} "
          f"GFLOP/s, float64 {peak64:.1f} GFLOP/s")
    names = ("double-backward", "jvp", "linearize", "block of 8")
    with sdpa_kernel(SDPBackend.MATH):
        for cell in args.cells.split(","):
            for dtype in (torch.float32, torch.float64):
                out = routes(cell, dtype, args.products)
                width = int(cell.split(":")[-1])
                shape = matmul_rate(out["tokens"], width, width, dtype)
                peak = peak32 if dtype == torch.float32 else peak64
                print(f"{cell} {str(dtype)[6:]}: P {out['P']}, {out['tokens']} tokens; "
                      f"forward {out['forward'] * 1e3:.0f} ms "
                      f"({out['forward_flops'] / out['forward'] / 1e9:.1f} GFLOP/s); "
                      f"one ({out['tokens']}, {width}) x ({width}, {width}) product "
                      f"{shape:.1f} GFLOP/s ({100 * shape / peak:.0f}% of peak); "
                      f"jvp agrees to {out['agree']:.0e}")
                for name in names:
                    rate = out["flops"] / out[name] / 1e9
                    print(f"    {name:16s} {out[name] * 1e3:7.0f} ms  {rate:6.1f} GFLOP/s  "
                          f"{100 * rate / peak32:4.0f}% f32 peak  {100 * rate / peak64:4.0f}% "
                          f"f64 peak  ({out['double-backward'] / out[name]:.2f}x the engine's)")


if __name__ == "__main__":
    main()
