"""Arbitrary-precision forward pass of the 001 primitive model: ours vs two references.

Model: Transformer, 2 layers, width 64, 1 head, MLP x4 ReLU, LayerNorm, causal; input
(batch 16, N 40, D 20), 50 digits. Times
  (a) ours: the exported graph through ``precision.backends.interpreter``;
  (b) baseline: a straightforward evaluation of the same forward pass with numpy object
      arrays of mpmath ``mpf`` (gmpy2 backend) — what one would write without this toolkit;
  (c) limit: only the arb_mat products of the same shapes, with full-precision entries
      pre-converted (no elementwise work, no conversions) — the practical floor for any
      arb-based evaluator.
Checks (a) against (b) to 1e-45 and prints the ratios b/a and a/c.

Then the zoo (examples/zoo, and the real architectures of the tests: Hugging Face
``transformers`` models built from tiny configs, ``hf:`` specs; batch 4 x N 32 x D 20, width
32, depth 2): each module's mp50 time (casts as the model is written, ``keep``) against its
float64 (PyTorch, one thread) time and against the arb_mat limit of its own matrix products,
all in CPU time of the process (``time.process_time``: other work on a shared machine
distorts it far less than wall time; ours and the limit interleaved, best of 3); and the
per-node cost of an unrolled recurrence (Mamba-style scan, one layer) at N and 2N tokens, which
must stay constant (twice the tokens, twice the nodes, twice the time).

Run: ``python bench/bench_mp_forward.py`` (the mpmath baseline takes a minute or two);
``--zoo`` runs only the zoo part; ``--only llama,hf:MambaModel`` only those zoo entries
(``--only`` implies ``--zoo``). The hf models need the ``[hf]`` extra.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import flint
import mpmath
import numpy as np
import torch

from precision.backends import mp_backend
from precision.evaluate import mp_program
from precision.models import build_model
from precision.precisions import parse_precision

DIGITS = 50
MP = parse_precision(f"mp{DIGITS}")
#: Timings of the zoo part: the best of this many runs, ours and the limit interleaved, in
#: CPU time of this process (one torch thread), which other work on a shared machine
#: distorts far less than wall time.
REPEATS = 3
CLOCK = time.process_time
BATCH, N, D, WIDTH, DEPTH = 16, 40, 20, 64, 2


def mpmath_forward(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    """The Transformer forward pass with numpy object arrays of mpmath mpf."""
    to_mpf = np.frompyfunc(mpmath.mpf, 1, 1)
    P = {k: to_mpf(v.detach().numpy()) for k, v in model.state_dict().items()}
    exp = np.frompyfunc(mpmath.exp, 1, 1)
    sqrt = np.frompyfunc(mpmath.sqrt, 1, 1)

    def linear(h, name):
        return h @ P[f"{name}.weight"].T + P[f"{name}.bias"]

    def layernorm(h, name):
        mu = h.sum(axis=-1, keepdims=True) / h.shape[-1]
        c = h - mu
        var = (c * c).sum(axis=-1, keepdims=True) / h.shape[-1]
        return c / sqrt(var + mpmath.mpf(1e-5)) * P[f"{name}.weight"] + P[f"{name}.bias"]

    h = linear(to_mpf(x), "inp")
    n = h.shape[1]
    mask = np.tril(np.ones((n, n), dtype=bool))
    for i in range(DEPTH):
        b = f"blocks.{i}"
        z = layernorm(h, f"{b}.ln1")
        qkv = linear(z, f"{b}.attn.qkv")
        q, k, v = qkv[..., :WIDTH], qkv[..., WIDTH:2 * WIDTH], qkv[..., 2 * WIDTH:]
        s = q @ np.swapaxes(k, -1, -2) / mpmath.sqrt(WIDTH)
        s = np.where(mask, s, mpmath.mpf("-inf"))
        m = np.max(np.where(mask, s, mpmath.mpf(-1e300)), axis=-1, keepdims=True)
        e = np.where(mask, exp(s - m), mpmath.mpf(0))
        a = e / e.sum(axis=-1, keepdims=True)
        h = h + linear(a @ v, f"{b}.attn.proj")
        z = layernorm(h, f"{b}.ln2")
        u = linear(z, f"{b}.mlp.fc")
        u = np.where(u > 0, u, mpmath.mpf(0))
        h = h + linear(u, f"{b}.mlp.out")
    return linear(layernorm(h, "ln_f"), "out")


def record_products(run: Callable[[], object]) -> list[tuple[int, int, int]]:
    """The (m, k, n) of every 2-d arb_mat product ``run`` performs (batched ones slice by
    slice); every product of the interpreter goes through ``mp_backend.matmul``."""
    shapes: list[tuple[int, int, int]] = []
    original = mp_backend.matmul

    def recording(x, y):  # type: ignore[no-untyped-def]
        a = x.shape if x.ndim > 1 else (1,) + x.shape
        b = y.shape if y.ndim > 1 else y.shape + (1,)
        batch = int(np.prod(np.broadcast_shapes(a[:-2], b[:-2])))
        shapes.extend([(a[-2], a[-1], b[-1])] * batch)
        return original(x, y)

    mp_backend.matmul = recording
    try:
        run()
    finally:
        mp_backend.matmul = original
    return shapes


def arb_products(shapes: list[tuple[int, int, int]], digits: int) -> Callable[[], None]:
    """A run of the bare arb_mat products of ``shapes`` with full-precision entries."""
    old = flint.ctx.prec
    flint.ctx.dps = digits
    bits = flint.ctx.prec
    rng = np.random.default_rng(0)
    try:
        mats = [((flint.arb_mat(m, k, rng.standard_normal(m * k).tolist()) / 7).mid(),
                 (flint.arb_mat(k, n, rng.standard_normal(k * n).tolist()) / 7).mid())
                for m, k, n in shapes]
    finally:
        flint.ctx.prec = old

    def run() -> None:
        saved = flint.ctx.prec
        flint.ctx.prec = bits
        try:
            for a, b in mats:
                a * b
        finally:
            flint.ctx.prec = saved

    return run


def arb_limit(shapes: list[tuple[int, int, int]], digits: int, repeats: int = 3) -> float:
    """Best time of the bare arb_mat products of ``shapes`` with full-precision entries."""
    return best_time(arb_products(shapes, digits), repeats)


def best_time(run: Callable[[], object], repeats: int = 3,
              clock: Callable[[], float] = time.perf_counter) -> float:
    t = math.inf
    for _ in range(repeats):
        t0 = clock()
        run()
        t = min(t, clock() - t0)
    return t


ZOO = ["llama", "mamba", "hyena", "retnet", "linear_attention", "deltanet", "moe"]
#: The real architectures of tests/test_real_models.py: (spec, options).
HF = [("hf:LlamaModel", {}), ("hf:LlamaModel", {"attn_implementation": "sdpa"}),
      ("hf:MistralModel", {}), ("hf:Qwen2Model", {}), ("hf:GemmaModel", {}),
      ("hf:Phi3Model", {}), ("hf:GPT2Model", {}), ("hf:GPT2Model", {"inputs": "ids"}),
      ("hf:GPTNeoXModel", {}), ("hf:OPTModel", {}), ("hf:BloomModel", {}),
      ("hf:FalconModel", {"alibi": True}), ("hf:T5EncoderModel", {}), ("hf:MambaModel", {})]


def zoo_entries(only: set[str] | None) -> list[tuple[str, Callable[..., torch.nn.Module],
                                                       dict]]:
    """(label, factory(d_in, d_out, depth, width, max_len), options) of every zoo entry."""
    import warnings

    from probes.factory import load_factory
    from probes.hf_models import build_hf

    def hf(spec: str, options: dict) -> Callable[..., torch.nn.Module]:
        def build(*args: int, max_len: int) -> torch.nn.Module:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return build_hf(spec, *args, max_len=max_len, **options)
        return build

    entries = [(s, load_factory(f"examples/zoo/{s}.py:{s}"), {}) for s in ZOO]
    entries += [(spec[3:] + "".join(f"-{v}" for v in o.values()), hf(spec, o), o)
                for spec, o in HF]
    return [e for e in entries if only is None or e[0] in only
            or f"hf:{e[0]}" in only]


def zoo(only: set[str] | None = None) -> None:
    """mp50 vs float64 vs the arb_mat limit for each zoo module; recurrence scaling."""
    from probes.factory import load_factory

    torch.set_num_threads(1)
    zb, zn, zd, zw, zdepth = 4, 32, 20, 32, 2
    print(f"\nzoo (CPU seconds, one thread): batch {zb} x N {zn} x D {zd}, width {zw}, "
          f"depth {zdepth}, {DIGITS} digits")
    print(f"{'module':<24}{'mp50 s':>9}{'float64 s':>11}{'mp50/f64':>10}{'limit s':>9}"
          f"{'mp50/limit':>11}{'nodes':>7}")
    for style, factory, options in zoo_entries(only):
        torch.manual_seed(0)
        model = factory(zd, zd, zdepth, zw, max_len=zn).double().eval()
        if options.get("inputs") == "ids":
            x = torch.randint(0, 64, (zb, zn))
        else:
            x = torch.randn(zb, zn, zd, dtype=torch.float64)
        program = mp_program(model, x)
        shapes = record_products(lambda p=program, x=x: p(x, precision=MP))
        limit = arb_products(shapes, DIGITS)
        t_mp = t_lim = math.inf
        for _ in range(REPEATS):  # interleaved: both timed under the same machine load
            t_mp = min(t_mp, best_time(lambda p=program, x=x: p(x, precision=MP), 1, CLOCK))
            t_lim = min(t_lim, best_time(limit, 1, CLOCK))
        with torch.no_grad():
            t_64 = best_time(lambda m=model, x=x: m(x), 20, CLOCK)
        nodes = sum(1 for n in program.graph.nodes if n.op == "call_function")
        print(f"{style:<24}{t_mp:9.3f}{t_64:11.5f}{t_mp / t_64:10.0f}{t_lim:9.3f}"
              f"{t_mp / t_lim:11.2f}{nodes:7d}")

    if only is not None:
        return
    print("\nunrolled recurrence (mamba, 1 layer, width 16, batch 2): per-node cost")
    per_node = []
    for n_tok in (zn, 2 * zn):
        torch.manual_seed(0)
        model = load_factory("examples/zoo/mamba.py:mamba")(zd, zd, 1, 16).double().eval()
        x = torch.randn(2, n_tok, zd, dtype=torch.float64)
        program = mp_program(model, x)
        t = best_time(lambda p=program, x=x: p(x, precision=MP), 3)
        nodes = sum(1 for n in program.graph.nodes if n.op == "call_function")
        per_node.append(t / nodes)
        print(f"  N = {n_tok:3d}: {nodes:5d} nodes, {t:.3f} s, {1e6 * t / nodes:.0f} us/node")
    print(f"  per-node cost ratio 2N / N: {per_node[1] / per_node[0]:.2f} (1 = linear in "
          f"graph size)")


def main() -> None:
    torch.manual_seed(0)
    mpmath.mp.dps = DIGITS
    model = build_model("transformer", d_in=D, d_out=D, depth=DEPTH, width=WIDTH).double()
    x = torch.randn(BATCH, N, D, dtype=torch.float64)
    program = mp_program(model, x)

    # Record the matrix products our evaluation performs (batched ones slice by slice).
    shapes = record_products(lambda: program(x, precision=MP))

    t_ours = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        out = program(x, precision=MP)
        t_ours = min(t_ours, time.perf_counter() - t0)

    flint.ctx.dps = DIGITS
    rng = np.random.default_rng(0)
    # Entries with full 50-digit mantissas (x / 7 at the working precision), like the
    # activations of a real forward pass; 53-bit entries would multiply faster.
    def full(rows: int, cols: int) -> flint.arb_mat:
        return (flint.arb_mat(rows, cols, rng.standard_normal(rows * cols).tolist()) / 7).mid()

    mats = [(full(m, k), full(k, n)) for m, k, n in shapes]
    short = [(flint.arb_mat(m, k, rng.standard_normal(m * k).tolist()),
              flint.arb_mat(k, n, rng.standard_normal(k * n).tolist())) for m, k, n in shapes]

    def best(pairs: list[tuple[flint.arb_mat, flint.arb_mat]]) -> float:
        t = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            for a, b in pairs:
                a * b
            t = min(t, time.perf_counter() - t0)
        return t

    t_limit, t_limit53 = best(mats), best(short)
    flint.ctx.prec = 53

    t0 = time.perf_counter()
    ref = mpmath_forward(model, x.numpy())
    t_base = time.perf_counter() - t0

    ours = out.a.reshape(-1)
    worst = max(abs(mpmath.mpf(o.mid().str(60, radius=False)) - r)
                for o, r in zip(ours[:200], ref.reshape(-1)[:200], strict=True))
    assert worst < mpmath.mpf(10) ** -45, worst

    macs = sum(m * k * n for m, k, n in shapes)
    print(f"model: transformer depth {DEPTH} width {WIDTH}, input {BATCH}x{N}x{D}, "
          f"{DIGITS} digits")
    print(f"arb_mat products: {len(shapes)}, {macs / 1e6:.1f} M multiply-adds")
    print(f"ours (graph interpreter)   {t_ours:8.3f} s")
    print(f"mpmath object arrays       {t_base:8.3f} s   -> ours is {t_base / t_ours:.1f}x faster")
    print(f"arb_mat products only      {t_limit:8.3f} s   -> ours is "
          f"{t_ours / t_limit:.2f}x the limit (full-precision entries, as in the model)")
    print(f"  same, 53-bit entries     {t_limit53:8.3f} s   -> ours is "
          f"{t_ours / t_limit53:.2f}x (a floor no real forward pass reaches)")
    print(f"agreement ours vs mpmath: max |diff| = {mpmath.nstr(worst, 3)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    picked = set(args[args.index("--only") + 1].split(",")) if "--only" in args else None
    if "--zoo" not in args and picked is None:
        main()
    zoo(picked)
