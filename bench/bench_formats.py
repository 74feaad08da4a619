"""Format-simulated forward pass of the 001 primitive model against its plain float32 forward.

Model (as ``bench/bench_mp_forward.py``): Transformer, 2 layers, width 64, 1 head, MLP x4
ReLU, LayerNorm, causal; input (batch 16, N 40, D 20). In the same run, the median of
``--repeats`` forwards of (a) the model cast to float32, and (b) for each format, the model
with its parameters rounded (quantised) into the format under the per-op rounding mode
(:func:`precision.formats.simulate.simulation`): every ATen op computed in the float32 carrier
and its result rounded. Parameter preparation is timed apart (once per evaluation). Prints
each format's time and its ratio to (a); the target is a ratio within 5x.

Run: ``python bench/bench_formats.py [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch

from precision.formats.simulate import prepare_module, round_tensor, simulation
from precision.models import build_model
from precision.precisions import parse_precision

BATCH, N, D, WIDTH, DEPTH = 16, 40, 20, 64, 2
FORMATS = ("float8_e4m3", "float8_e5m2", "bfloat16:rz", "tf32", "float8_e4m3:sr+seed=1",
           "mxfp8_e4m3", "mxfp4_e2m1", "int4_g32", "float8_e4m3+acc=float64")


def _median_time(run: Callable[[], object], repeats: int) -> float:
    run()                                                   # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model = build_model("transformer", d_in=D, d_out=D, depth=DEPTH, width=WIDTH).double().eval()
    x = torch.randn(BATCH, N, D, dtype=torch.float64)
    plain = copy.deepcopy(model).float()
    x32 = x.float()

    def forward_plain() -> object:
        with torch.no_grad():
            return plain(x32)

    base = _median_time(forward_plain, args.repeats)
    print(f"001 model forward (batch {BATCH} x N {N} x D {D}, width {WIDTH}, depth {DEPTH}), "
          f"median of {args.repeats}")
    print(f"  {'float32 (plain)':<26} {base * 1e3:8.2f} ms   1.00x")
    for spec in FORMATS:
        p = parse_precision(spec)
        t0 = time.perf_counter()
        clone = prepare_module(copy.deepcopy(model), p)
        prep = time.perf_counter() - t0
        xin = round_tensor(x, p)

        def forward_format(clone: torch.nn.Module = clone, xin: torch.Tensor = xin,
                           p: object = p) -> object:
            with torch.no_grad(), simulation(p):  # type: ignore[arg-type]
                return clone(xin)

        t = _median_time(forward_format, args.repeats)
        print(f"  {spec:<26} {t * 1e3:8.2f} ms  {t / base:5.2f}x   (parameters "
              f"{prep * 1e3:.1f} ms once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
