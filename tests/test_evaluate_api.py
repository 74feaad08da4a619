"""The Python API returns what PyTorch users expect: ``evaluate`` gives a tensor in a float
precision (its dtype, on the CPU) and an :class:`MPOutput` in mpN (exact values, ``.to_float``
rounding once, ``.to_mpmath``, ``.digits`` certified by mp2N); ``evaluate_exact`` gives arb
values in every precision, and the two agree exactly."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
import torch
from torch import nn

from precision.backends.mp_backend import workprec
from precision.evaluate import error_decomposition, evaluate, evaluate_exact
from precision.mp_output import MPOutput
from precision.precisions import Precision


@pytest.fixture(scope="module")
def model_and_x() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.LayerNorm(4)), torch.randn(2, 3, 4)


@pytest.mark.parametrize("spelling,dtype", [
    ("float32", torch.float32), ("float64", torch.float64), ("bfloat16", torch.bfloat16),
    ("float16", torch.float16), ("float8_e4m3", torch.float32),
    ("float64+mod[0]=bfloat16", torch.float64)])
def test_float_precisions_return_tensors(model_and_x, spelling, dtype) -> None:
    model, x = model_and_x
    out = evaluate(model, x, spelling)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.device.type == "cpu"
    assert out.shape == (2, 3, 4) and not out.requires_grad
    exact = evaluate_exact(model, x, spelling)
    assert all(flint.arb(float(v)) == e for v, e in
               zip(out.double().reshape(-1).tolist(), exact.reshape(-1).tolist(), strict=True))


def test_mp_returns_exact_values_with_certified_digits(model_and_x) -> None:
    model, x = model_and_x
    out = evaluate(model, x, "mp40")
    assert isinstance(out, MPOutput) and out.shape == (2, 3, 4) and len(out) == 2
    assert out.precision.name == "mp40"
    exact = evaluate_exact(model, x, "mp40")
    assert all(a == b for a, b in zip(np.asarray(out).reshape(-1), exact.reshape(-1), strict=True))
    assert 35 <= out.digits <= 40                       # mp80 confirms (nearly) all 40
    f64 = out.to_float()
    assert f64.dtype == torch.float64 and torch.allclose(f64, evaluate(model, x, "float64"),
                                                          rtol=1e-12, atol=1e-12)
    mp = out.to_mpmath()
    assert mp.shape == (2, 3, 4) and isinstance(mp[0, 0, 0], mpmath.mpf)
    man, exp = exact[0, 0, 0].mid().man_exp()
    assert mp[0, 0, 0] == mpmath.mpf((int(man), int(exp)))   # exact, not through a float
    assert isinstance(out[0], MPOutput) and out[0].shape == (3, 4)
    with pytest.raises(ValueError, match="whole output"):
        _ = out[0].digits
    with pytest.raises(TypeError, match="exact"):
        np.asarray(out, dtype=np.float64)
    assert "mp40" in repr(out)


def test_to_float_rounds_once() -> None:
    """1 + 2**-24 + 2**-80 is nearer 1 + 2**-23 in float32; through float64 it would become
    the tie 1 + 2**-24 and round to even, 1.0. Likewise below, and negative."""
    with workprec(200):  # exact sums
        half = flint.arb(2) ** -24
        tiny = flint.arb(2) ** -80
        values = np.array([1 + half + tiny, 1 + half - tiny, -(1 + half + tiny), 1 + half],
                          dtype=object)
        above = 1 + flint.arb(2) ** -8 + tiny
    out = MPOutput(values, Precision("mp40")).to_float(torch.float32)
    up = 1 + 2.0 ** -23
    assert out.tolist() == [up, 1.0, -up, 1.0]          # the last: an exact tie, to even
    bf = MPOutput(np.array([above], dtype=object),
                  Precision("mp40")).to_float(torch.bfloat16)
    assert bf.item() == 1 + 2.0 ** -7
    with pytest.raises(TypeError, match="float dtype"):
        MPOutput(values, Precision("mp40")).to_float(torch.int32)


def test_error_decomposition_takes_what_evaluate_returns(model_and_x) -> None:
    model, x = model_and_x
    truth = evaluate(model, x, "mp60")
    for p in ("bfloat16", "float32"):
        from_api = error_decomposition(model, x, truth, p, check_reference=False)
        from_exact = error_decomposition(model, x, evaluate_exact(model, x, "mp60"), p,
                                         check_reference=False)
        assert from_api["total"] == from_exact["total"]
    # an mp output fed back as an input
    again = evaluate(nn.Identity(), truth, "mp60")
    assert all(a == b for a, b in zip(np.asarray(again).reshape(-1),
                                      np.asarray(truth).reshape(-1), strict=True))
