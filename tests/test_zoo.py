"""The zoo of modern sequence mixers (examples/zoo) runs in float32, float64 and mpN.

Each module is built by its factory (as ``precision probe`` would), evaluated through
``precision.evaluate`` in float32, float64, mp50 and mp100, and must agree: mp50 with
float64 to 1e-12 relative (float64's own rounding is ~1e-16 times the conditioning of a
small random network), mp50 with mp100 to 1e-45. The census checks that each module really
exercises the ops its style is about (FFT, GroupNorm, topk, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

import flint
import numpy as np
import pytest
import torch

from precision.evaluate import error_decomposition, evaluate_exact
from precision.op_census import census
from probes.factory import load_factory

ZOO = {
    "llama": ["aten._softmax.default", "aten.rsqrt.default", "aten.sigmoid.default"],
    "mamba": ["aten.log1p.default", "aten.exp.default", "aten.select.int"],
    "hyena": ["aten._fft_r2c.default", "aten._fft_c2r.default", "aten.convolution.default"],
    "retnet": ["aten.native_group_norm.default"],
    "linear_attention": ["aten.elu.default", "aten.cumsum.default"],
    "deltanet": ["aten.linalg_vector_norm.default", "aten.select.int"],
    "moe": ["aten.topk.default", "aten.scatter.src", "aten.gelu.default"],
}


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b|| computed exactly enough (1200 bits)."""
    old = flint.ctx.prec
    flint.ctx.prec = 1200
    try:
        num = sum(((x - y) ** 2 for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)),
                  flint.arb(0))
        den = sum((y**2 for y in b.reshape(-1)), flint.arb(0))
        return float((num / den).sqrt().mid())
    finally:
        flint.ctx.prec = old


def build(style: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    factory = load_factory(f"examples/zoo/{style}.py:{style}")
    return factory(d_in=3, d_out=2, depth=2, width=8, max_len=8).double()


@pytest.mark.parametrize("style", list(ZOO))
def test_zoo_module_in_every_precision(style):
    model = build(style)
    x = torch.randn(2, 8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out = {p: evaluate_exact(model, x, p) for p in ("float32", "float64", "mp50", "mp100")}
    assert out["mp50"].shape == (2, 8, 2)
    r64, r_mp, r32 = (rel(out["float64"], out["mp50"]), rel(out["mp50"], out["mp100"]),
                      rel(out["float32"], out["mp100"]))
    print(f"{style}: float64 vs mp50 {r64:.2e}, mp50 vs mp100 {r_mp:.2e}, "
          f"float32 vs mp100 {r32:.2e}")
    assert r64 < 1e-12
    assert r_mp < 1e-45
    assert 0 < r32 < 1e-4  # float32 really rounds, within a modest multiple of its 6e-8


@pytest.mark.parametrize("style", list(ZOO))
def test_zoo_module_uses_its_ops_and_all_are_supported(style):
    model = build(style)
    c = census(model, torch.zeros(2, 8, 3, dtype=torch.float64))
    names = {u.op for u in c.ops}
    assert set(ZOO[style]) <= names, set(ZOO[style]) - names
    assert c.ok, c.summary()


def test_zoo_error_decomposition_adds_up():
    model = build("hyena", seed=3)
    x = torch.randn(2, 8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    truth = np.zeros((2, 8, 2))
    parts = error_decomposition(model, x, truth, "mp50")
    assert 0 < parts["rounding"].mse < 1e-88  # outputs O(1), mp50 rounding ~1e-50
    assert parts["total"].mse == pytest.approx(parts["approximation"].mse, rel=1e-30)


def test_zoo_file_spec_loads_from_any_directory(tmp_path, monkeypatch):
    """A ``file.py:factory`` spec executes the file alone; it finds its backbone by its path."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != root])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    model = load_factory(f"{root}/examples/zoo/retnet.py:retnet")(3, 2, 2, 8, max_len=8)
    assert type(model).__name__ == "PreNormStack" and len(model.layers) == 2
    assert model(torch.zeros(1, 8, 3)).shape == (1, 8, 2)


def test_backbone_draws_weights_block_by_block():
    """in, out, then mixer_1, mlp_1, mixer_2, mlp_2: a seed gives a hand-built stack's weights."""
    from examples.zoo.backbone import PreNormStack

    torch.manual_seed(5)
    stack = PreNormStack(3, 2, 2, 4, lambda w: torch.nn.Linear(w, w),
                         mlp=lambda w: torch.nn.Linear(w, w))
    torch.manual_seed(5)
    by_hand = [torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)]
    by_hand += [torch.nn.Linear(4, 4) for _ in range(4)]
    built = [stack.inp, stack.out, stack.layers[0], stack.mlps[0], stack.layers[1], stack.mlps[1]]
    for a, b in zip(built, by_hand, strict=True):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    x = torch.randn(2, 5, 3)
    h = stack.inp(x)
    for i in range(2):
        h = h + stack.layers[i](stack.norms[i](h))
        h = h + stack.mlps[i](stack.mlp_norms[i](h))
    assert torch.equal(stack(x), stack.out(h))
