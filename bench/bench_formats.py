"""Format-simulated forward pass of the 001 primitive model against its plain float32 forward.

Model (as ``bench/bench_mp_forward.py``): Transformer, 2 layers, width 64, 1 head, MLP x4
ReLU, LayerNorm, causal; input (batch 16, N 40, D 20); one thread. In the same run, the
median of ``--repeats`` forwards, alternating, of (a) the model cast to float32, and (b) for
each format, the model
with its parameters rounded (quantised) into the format under the per-op rounding mode
(:func:`precision.formats.simulate.simulation`): every ATen op computed in the float32 carrier
and its result rounded. Parameter preparation is timed apart (once per evaluation). Prints
each format's time and its ratio to (a); the target is a ratio within 5x.

Each forward is timed by the CPU time of this process (one thread) and by the wall clock.
The ratio is of CPU times: on a shared machine the wall clock also counts the time the
process waits for a core, and a long forward is preempted more often than a short one, so
wall-clock ratios grow with the machine's load (both are printed).

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


def _paired_times(first: Callable[[], object], second: Callable[[], object],
                  repeats: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median (CPU, wall) times of ``first`` and ``second`` run alternately (a shared,
    loaded machine slows both alike), after one warm-up each."""
    first(), second()
    times: tuple[list[tuple[float, float]], ...] = ([], [])
    for _ in range(repeats):
        for run, out in ((first, times[0]), (second, times[1])):
            c0, w0 = time.process_time(), time.perf_counter()
            run()
            out.append((time.process_time() - c0, time.perf_counter() - w0))
    return tuple(  # type: ignore[return-value]
        (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
        for ts in times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model("transformer", d_in=D, d_out=D, depth=DEPTH, width=WIDTH).double().eval()
    x = torch.randn(BATCH, N, D, dtype=torch.float64)
    plain = copy.deepcopy(model).float()
    x32 = x.float()

    def forward_plain() -> object:
        with torch.no_grad():
            return plain(x32)

    print(f"001 model forward (batch {BATCH} x N {N} x D {D}, width {WIDTH}, depth {DEPTH}), "
          f"median of {args.repeats}, each format paired with the plain float32 forward; "
          "CPU time of this process")
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

        (base, base_wall), (t, t_wall) = _paired_times(forward_plain, forward_format,
                                                        args.repeats)
        print(f"  {spec:<26} {t * 1e3:8.2f} ms vs float32 {base * 1e3:6.2f} ms: "
              f"{t / base:5.2f}x   (wall clock {t_wall / base_wall:5.2f}x; parameters "
              f"{prep * 1e3:.1f} ms once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
