"""The simulated formats against real kernels on the same inputs: a float8 matrix product
(e4m3 operands, float32 output) and bfloat16 attention.

float8 (``torch._scaled_mm``: on CUDA compute capability 8.9 or more; torch also has a CPU
kernel): A (64, K) and B (K, 64) drawn in float32 and cast to ``float8_e4m3fn``; three
products of the same fp8 values: exact (float64 on the CPU: every fp8 x fp8 product is exact
and K <= 2^16 terms lose nothing visible), float32 accumulation (what the simulation's
``+acc=float32`` computes: torch's float32 matmul of the fp8 values) and ``_scaled_mm`` on
the device (unit scales, float32 output). Printed: the largest |error| / (|A| |B|)_ij over
the output, in units of float32's u = 2^-24, for each K; a kernel that accumulates in fewer
bits than float32 grows faster with K than the float32 column. Then the fraction of outputs
that differ after both are rounded to e4m3 (the simulated ``float8_e4m3+acc=float32`` product
against the kernel's).

bfloat16 attention (any device; CUDA: the fused flash / efficient kernel, CPU: torch's fused
CPU kernel): q, k, v (batch 4, heads 4, N tokens, head dim 64) rounded to bfloat16;
``scaled_dot_product_attention`` on bfloat16 tensors against the per-op simulation of the
same formula (``bfloat16+acc=float32``: every op's result rounded to bfloat16) and against
float64 on the same bfloat16 values. Printed: relative Frobenius errors in units of
bfloat16's u = 2^-8.

Without CUDA both parts run on the CPU's kernels; a part that cannot run says why.
Run: ``python bench/bench_real_kernels.py [--device cuda|cpu]``.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F  # noqa: N812

from precision.formats.simulate import round_tensor, simulation
from precision.precisions import parse_precision

U32, UBF16 = 2.0 ** -24, 2.0 ** -8


def _fp8_reason(device: str) -> str | None:
    """Why the float8 kernel cannot run here, or None."""
    if not hasattr(torch, "_scaled_mm"):
        return "this torch has no _scaled_mm"
    if device == "cuda" and not torch.cuda.is_available():
        return "no CUDA device"
    if device == "cuda" and torch.cuda.get_device_capability() < (8, 9):
        return f"needs compute capability >= 8.9, not {torch.cuda.get_device_capability()}"
    return None


def float8_matmul(device: str, lengths: list[int], seed: int = 0) -> None:
    """The float8 part (module docstring)."""
    reason = _fp8_reason(device)
    if reason is not None:
        print(f"float8 matmul: skipped ({reason})")
        return
    sim = parse_precision("float8_e4m3+acc=float32")
    gen = torch.Generator().manual_seed(seed)
    one = torch.ones((), device=device)
    print("float8_e4m3 matmul (64 x K) @ (K x 64), float32 output: max |err| / (|A||B|), "
          "units of 2^-24; outputs differing after rounding to e4m3")
    print(f"{'K':>7}  {'float32 acc':>12}  {'_scaled_mm':>12}  {'e4m3 outputs differ':>20}")
    for k in lengths:
        a8 = torch.randn(64, k, generator=gen).to(torch.float8_e4m3fn)
        b8 = torch.randn(k, 64, generator=gen).to(torch.float8_e4m3fn)
        a, b = a8.double(), b8.double()
        exact = a @ b
        scale = a.abs() @ b.abs()
        acc32 = (a.float() @ b.float()).double()
        b_cols = b8.T.contiguous().T.to(device)   # _scaled_mm wants B column-major
        kernel = torch._scaled_mm(a8.to(device), b_cols, scale_a=one, scale_b=one,
                                  out_dtype=torch.float32).double().cpu()
        with torch.no_grad(), simulation(sim):
            simulated = a.float() @ b.float()
        differ = float((round_tensor(kernel, sim) != simulated).double().mean())
        err32 = float(((acc32 - exact).abs() / scale).max()) / U32
        errk = float(((kernel - exact).abs() / scale).max()) / U32
        print(f"{k:>7}  {err32:>12.3g}  {errk:>12.3g}  {differ:>20.3%}")


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v, written out op by op (q, k, v: (B, H, N, d))."""
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.softmax(scores, dim=-1) @ v


def bf16_attention(device: str, lengths: list[int], seed: int = 0) -> None:
    """The bfloat16 attention part (module docstring)."""
    sim = parse_precision("bfloat16+acc=float32")
    gen = torch.Generator().manual_seed(seed)
    print(f"bfloat16 attention on {device} (batch 4, heads 4, head dim 64): relative error "
          "against float64 on the same bfloat16 inputs, units of 2^-8")
    print(f"{'N':>6}  {'fused kernel':>13}  {'per-op simulation':>18}  {'kernel vs sim':>14}")
    for n in lengths:
        q, k, v = (torch.randn(4, 4, n, 64, generator=gen, dtype=torch.float64)
                   .to(torch.bfloat16) for _ in range(3))
        exact = _attention(q.double(), k.double(), v.double())
        with torch.no_grad():
            kernel = F.scaled_dot_product_attention(
                q.to(device), k.to(device), v.to(device)).double().cpu()
        with torch.no_grad(), simulation(sim):
            simulated = _attention(q.float(), k.float(), v.float()).double()

        def rel(x: torch.Tensor, ref: torch.Tensor = exact) -> float:
            return float((x - ref).norm() / ref.norm()) / UBF16

        print(f"{n:>6}  {rel(kernel):>13.3g}  {rel(simulated):>18.3g}  "
              f"{rel(kernel, simulated):>14.3g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--k", default="256,1024,4096,16384,65536",
                        help="float8 product lengths K")
    parser.add_argument("--n", default="128,512,2048", help="attention sequence lengths N")
    args = parser.parse_args(argv)
    float8_matmul(args.device, [int(k) for k in args.k.split(",")])
    bf16_attention(args.device, [int(n) for n in args.n.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
