"""Peak memory of an mp100 evaluation with each value freed after its last use vs all kept.

Model: the 001 primitives suite's Transformer (``probes/suites/primitives.toml``, paper
profile) on its MULTIPLY task: depth 2, width 64, 1 head, MLP x4 ReLU, LayerNorm, causal,
learned positions; input (test_size 32, N 40, D 20), output D_out 10. Evaluated with
``precision.evaluate.evaluate(model, x, "mp100")``; the keep mode sets ``keep_intermediates``
on the cached :class:`~precision.backends.interpreter.MPProgram` first.

Each mode runs in a fresh subprocess (arb's C allocations are invisible to tracemalloc): the
export (``mp_program``) is made first, the peak RSS is reset to the current RSS, and the peak
RSS (``ru_maxrss``) after the evaluation minus the RSS before it is the evaluation's memory.
Both modes must return bit-identical outputs (their digests are compared).

Run: ``PYTHONPATH=$PWD python bench/bench_interpreter_memory.py [--batch 32]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time


def _rss_mb() -> float:
    """Current resident set size of this process in MB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> None:
    """Reset this process's peak RSS to its current RSS (Linux ``clear_refs`` 5), so that
    ``ru_maxrss`` after the evaluation is the evaluation's peak, not the export's."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure(mode: str, batch: int) -> dict[str, float | str | int]:
    """One evaluation in this process: memory above the pre-evaluation RSS, time, digest."""
    import torch

    from precision.evaluate import evaluate_exact, mp_program
    from precision.models import build_model

    torch.manual_seed(0)
    model = build_model("transformer", d_in=20, d_out=10, depth=2, width=64, heads=1,
                        mlp_factor=4, max_len=40).eval()
    x = torch.randn(batch, 40, 20)
    program = mp_program(model, x)
    program.keep_intermediates = mode == "keep"
    _reset_peak()
    before = _rss_mb()
    t0 = time.perf_counter()
    out = evaluate_exact(model, x, "mp100")
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB -> MB on Linux
    digest = hashlib.sha256("|".join(str(v.mid().man_exp()) for v in out.flat)
                            .encode()).hexdigest()[:16]
    return {"mode": mode, "peak_mb": peak - before, "wall_s": wall,
            "nodes": len(program.graph.nodes), "peak_live": program.peak_live, "digest": digest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--mode", choices=("free", "keep"), help="(child) measure one mode")
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.batch)))
        return
    res = {}
    for mode in ("keep", "free"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--batch",
                              str(args.batch)], capture_output=True, text=True, check=True)
        res[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"Transformer depth 2 width 64, x ({args.batch}, 40, 20), mp100, "
          f"{res['free']['nodes']} graph nodes")
    for mode in ("keep", "free"):
        r = res[mode]
        print(f"  {mode}: peak {r['peak_mb']:8.1f} MB above start, {r['peak_live']:4d} values "
              f"live at most, {r['wall_s']:6.1f} s")
    print(f"  keep / free memory: {res['keep']['peak_mb'] / res['free']['peak_mb']:.2f}x; "
          f"outputs bit-identical: {res['keep']['digest'] == res['free']['digest']}")


if __name__ == "__main__":
    main()
