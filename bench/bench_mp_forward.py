"""Arbitrary-precision forward pass of the 001 primitive model: ours vs two references.

Model: Transformer, 2 layers, width 64, 1 head, MLP x4 ReLU, LayerNorm, causal; input
(batch 16, N 40, D 20), 50 digits. Times
  (a) ours: the exported graph through ``precision.backends.graph_interpreter``;
  (b) baseline: a straightforward evaluation of the same forward pass with numpy object
      arrays of mpmath ``mpf`` (gmpy2 backend) — what one would write without this toolkit;
  (c) limit: only the arb_mat products of the same shapes, with full-precision entries
      pre-converted (no elementwise work, no conversions) — the practical floor for any
      arb-based evaluator.
Checks (a) against (b) to 1e-45 and prints the ratios b/a and a/c.

Run: ``python bench/bench_mp_forward.py`` (the mpmath baseline takes a minute or two).
"""

from __future__ import annotations

import math
import time

import flint
import mpmath
import numpy as np
import torch

from precision.backends import mp_backend
from precision.evaluate import mp_program
from precision.models import build_model

DIGITS = 50
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


def main() -> None:
    torch.manual_seed(0)
    mpmath.mp.dps = DIGITS
    model = build_model("transformer", d_in=D, d_out=D, depth=DEPTH, width=WIDTH).double()
    x = torch.randn(BATCH, N, D, dtype=torch.float64)
    program = mp_program(model, x)

    # Record the matrix products our evaluation performs (batched ones slice by slice).
    shapes: list[tuple[int, int, int]] = []
    original = mp_backend.matmul

    def recording(x, y):  # type: ignore[no-untyped-def]
        a = x.shape if x.ndim > 1 else (1,) + x.shape
        b = y.shape if y.ndim > 1 else y.shape + (1,)
        batch = int(np.prod(np.broadcast_shapes(a[:-2], b[:-2])))
        shapes.extend([(a[-2], a[-1], b[-1])] * batch)
        return original(x, y)

    mp_backend.matmul = recording
    program(x, precision=f"mp{DIGITS}")
    mp_backend.matmul = original

    t_ours = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        out = program(x, precision=f"mp{DIGITS}")
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
    main()
