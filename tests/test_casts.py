"""Cast policies: ``keep`` runs a model's own float casts as written in every precision (mpN
rounds its float32 islands too), ``promote`` computes them in the evaluation precision; the
islands are listed and their effects attributed to modules."""

from __future__ import annotations

import copy

import flint
import numpy as np
import pytest
import torch
from torch import nn

from precision.backends.interpreter.casts import round_into
from precision.backends.mp_backend import MPArray, exact_array, workprec
from precision.backends.torch_backend import round_to_dtype
from precision.evaluate import error_decomposition, evaluate_exact
from precision.islands import island_report, islands_below
from precision.metrics import error_summary
from precision.op_census import census
from precision.precisions import parse_precision


class Float32Norm(nn.Module):
    """An RMSNorm that computes its variance in float32, as Llama's does."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        dtype = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(dtype)


class Net(nn.Module):
    def __init__(self, width: int = 6) -> None:
        super().__init__()
        self.inp, self.norm, self.out = nn.Linear(3, width), Float32Norm(width), nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.norm(self.inp(x))))


def _net() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    return Net().double(), torch.randn(2, 5, 3, dtype=torch.float64, generator=gen)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return error_summary(a, b).relative


def test_keep_rounds_the_islands_in_every_precision_and_promote_does_not():
    model, x = _net()
    kept64 = evaluate_exact(model, x, "float64")
    prom64 = evaluate_exact(model, x, "float64", casts="promote")
    kept50 = evaluate_exact(model, x, "mp50")
    prom50 = evaluate_exact(model, x, "mp50+casts=promote")
    assert _rel(prom64, prom50) < 1e-13                    # no casts: float64 rounding only
    assert _rel(kept64, prom64) >= 1e-9                    # float32 islands in float64
    assert _rel(kept50, prom50) >= 1e-9                    # ... and in mp50
    assert _rel(kept50, kept64) < 1e-5                     # both the model as written
    assert _rel(evaluate_exact(model, x, "mp50+casts=keep"), kept50) == 0.0


def test_a_float32_module_is_exported_as_float64_so_only_its_casts_are_islands():
    model32, x = _net()
    model32.float()
    model64 = copy.deepcopy(model32).double()   # the same (float32) weight values
    # under keep, only the norm's islands round: not every node of a float32 module
    assert _rel(evaluate_exact(model32, x, "mp40"), evaluate_exact(model64, x, "mp40")) == 0.0
    islands = islands_below(model32, x, parse_precision("mp40"))
    assert [i.module for i in islands] == ["norm (Float32Norm)"]


def test_islands_are_listed_and_attributed_to_their_module():
    model, x = _net()
    report = island_report(model, x, parse_precision("float64"))
    assert [i.module for i in report.islands] == ["norm (Float32Norm)"]
    assert report.islands[0].dtype == "float32" and report.islands[0].nodes >= 4
    assert report.total.relative >= 1e-9
    assert report.islands[0].effect.relative == pytest.approx(report.total.relative, rel=0.5)
    assert "norm (Float32Norm)" in "\n".join(report.lines())
    # float32 itself: nothing rounds below it
    assert island_report(model, x, parse_precision("float32")).islands == []
    parts = error_decomposition(model, x, np.zeros((2, 5, 2)), "float64")
    assert parts["casts"].relative >= 1e-9
    assert "casts" not in error_decomposition(model, x, np.zeros((2, 5, 2)),
                                              "float64+casts=promote")


def test_census_lists_each_cast_with_its_module():
    model, x = _net()
    c = census(model, x)
    rows = {(u.source, u.target, u.module) for u in c.casts}
    assert ("float64", "float32", "norm (Float32Norm)") in rows
    assert ("float32", "float64", "norm (Float32Norm)") in rows
    assert set(c.islands) == {"norm (Float32Norm)"}
    assert "float64 -> float32" in c.table()
    plain = census(nn.Linear(3, 2).double(), x)
    assert not plain.casts and "no float casts" in plain.table()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rounding_into_a_narrow_dtype_is_one_correct_rounding(dtype):
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(400) * 10.0 ** rng.integers(-30, 30, 400),
                             [0.0, -0.0, 3.5e38, 7e4, 1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-24]])
    got = round_into(MPArray(exact_array(values), 200, clean=True), dtype).to_float64()
    want = round_to_dtype(torch.from_numpy(values), dtype).double().numpy()
    assert np.array_equal(got, want)
    # beyond float64: an exact value just off a tie whose float64 image is the tie
    bits = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}[dtype]
    with workprec(200):
        tie, tiny = flint.arb(1) + flint.arb(2) ** -bits, flint.arb(2) ** -80
        near = MPArray(np.array([tie + tiny, tie - tiny, -(tie + tiny)], dtype=object), 200)
    up = 1 + 2.0 ** (1 - bits)
    assert round_into(near, dtype).to_float64().tolist() == [up, 1.0, -up]
    if dtype == torch.float32:  # subnormals: the grid of 2**-149
        tiny = np.array([3 * 2.0**-150, 2.0**-149 * 0.75, -(2.0**-140) * 1.3])
        got = round_into(MPArray(exact_array(tiny), 200, clean=True), dtype).to_float64()
        assert np.array_equal(got, tiny.astype(np.float32).astype(np.float64))
