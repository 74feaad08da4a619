"""Exact constants: a float literal of an exported graph that stands for +-k^(1/2) or
+-k^(1/4) (an attention scale 1/sqrt(E) as torch computed it in float64) is computed in the
working precision, so an mpN truth is the model's mathematics; the other float literals are
listed as taken as given (``precision ops`` / ``precision evaluate``)."""

from __future__ import annotations

import math
import warnings

import flint
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from precision.backends.interpreter import MPProgram
from precision.backends.interpreter.constants import (
    TOLERANCE,
    exact_as_written,
    literal_lines,
    recognise,
)
from precision.backends.mp_backend import workprec
from precision.cli.main import main
from precision.metrics import error_summary
from precision.op_census import census
from precision.precisions import parse_precision

D, HEADS, FF = 12, 2, 16   # head dim E = 6: 1/sqrt(6) and 6^(-1/4) are not dyadic
E = D // HEADS
PREC = 400                 # bits of the independent evaluation


def _float64_chains(k: int) -> list[float]:
    """The float64 values code and torch compute for k^(+-1/2) and k^(+-1/4)."""
    return [1 / math.sqrt(k), k ** -0.5, math.sqrt(k), k ** 0.5, -1 / math.sqrt(k),
            math.sqrt(1 / math.sqrt(k)),  # torch's sdpa split: sqrt(1/sqrt(E)) on q and k
            math.sqrt(k ** -0.5), k ** -0.25, k ** 0.25, math.sqrt(math.sqrt(k))]


@pytest.mark.parametrize("k", [2, 3, 6, 8, 12, 24, 48, 80, 96, 120, 4095, 65535])
def test_every_float64_chain_of_a_head_dim_scale_is_recognised(k):
    for v in _float64_chains(k):
        c = recognise(v)
        assert c is not None, (k, v)
        with workprec(200):
            exact = c.value(200)
            assert abs(flint.arb(v) - exact) <= abs(exact) * TOLERANCE  # v stands for it
        with workprec(2000):  # and it is k^p: (value)^(2 root) = k^(+-2)
            power = c.value(2000) ** (2 * c.root)
            target = flint.arb(1) / c.k**2 if c.inverse else flint.arb(c.k**2)
            assert abs(power - target) < target * flint.arb(2) ** -1900


def test_dyadic_and_arbitrary_literals_are_not_recognised():
    near = 1 / math.sqrt(8)
    for _ in range(3):
        near = math.nextafter(near, 1.0)  # three ulps off 1/sqrt(8): beyond two roundings
    for v in (0.125, 0.5, 2.0, 0.25, 1.0, 0.1, 1e-5, 1e-6, 0.044715, math.sqrt(2 / math.pi),
              math.log(16), math.inf, -math.inf, math.nan, 0.0, near, 8.79414152745,
              math.sqrt(0.3), -1.7976931348623157e308, 1e-300, 5e-324):
        assert recognise(v) is None, v
    # written as it is: the truth loses nothing by using it; 0.1 and 1e-05 are not their decimal
    assert all(map(exact_as_written, (0.5, 2.0, 2.0**-60, -math.inf, -1.7976931348623157e308)))
    assert not any(map(exact_as_written, (0.1, 1e-5, 0.044715, 1 / math.sqrt(8))))


def _arb(t: torch.Tensor) -> np.ndarray:
    return np.vectorize(lambda v: flint.arb(float(v)), otypes=[object])(t.detach().numpy())


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.vectorize(flint.arb.exp, otypes=[object])(s)
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(h: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    out = np.empty_like(h)
    for idx in np.ndindex(h.shape[:-1]):
        row = h[idx]
        mean = row.sum() / len(row)
        var = ((row - mean) ** 2).sum() / len(row)
        out[idx] = (row - mean) / (var + flint.arb(eps)).sqrt() * w + b
    return out


def _encoder_layer_exact(m: nn.TransformerEncoderLayer, x: torch.Tensor) -> np.ndarray:
    """The layer's mathematics (post-norm, ReLU) in PREC-bit arb: attention scale 1/sqrt(E)
    exact; the layer norms' eps is its float64 value (a literal taken as given)."""
    with workprec(PREC):
        out = []
        for xb in _arb(x):
            qkv = xb.dot(_arb(m.self_attn.in_proj_weight).T) + _arb(m.self_attn.in_proj_bias)
            heads = []
            for h in range(HEADS):
                q, k, v = (qkv[:, j * D + h * E: j * D + (h + 1) * E] for j in range(3))
                heads.append(_softmax_rows(q.dot(k.T) / flint.arb(E).sqrt()).dot(v))
            a = (np.concatenate(heads, axis=1).dot(_arb(m.self_attn.out_proj.weight).T)
                 + _arb(m.self_attn.out_proj.bias))
            h1 = _layer_norm(xb + a, _arb(m.norm1.weight), _arb(m.norm1.bias), m.norm1.eps)
            f = h1.dot(_arb(m.linear1.weight).T) + _arb(m.linear1.bias)
            f = np.vectorize(lambda t: t if t > 0 else flint.arb(0), otypes=[object])(f)
            f = f.dot(_arb(m.linear2.weight).T) + _arb(m.linear2.bias)
            out.append(_layer_norm(h1 + f, _arb(m.norm2.weight), _arb(m.norm2.bias),
                                   m.norm2.eps))
        return np.stack(out)


@pytest.fixture(scope="module")
def encoder_layer() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    m = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True).double().eval()
    return m, torch.randn(2, 3, D, dtype=torch.float64)


def _relative(a: object, b: np.ndarray) -> float:
    return error_summary(getattr(a, "a", a), b).relative


def test_transformer_encoder_layer_mp_truth_is_the_layers_mathematics(encoder_layer):
    m, x = encoder_layer
    exact = _encoder_layer_exact(m, x)
    mp50, mp100 = parse_precision("mp50"), parse_precision("mp100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = MPProgram(m, (x,))
    out50, out100 = program(x, precision=mp50), program(x, precision=mp100)
    assert _relative(out50, out100.a) < 1e-45   # mp50 and mp100 agree to ~50 digits
    assert _relative(out50, exact) < 1e-45      # and mp50 is the layer's mathematics
    assert _relative(out100, exact) < 1e-95
    recognised = {str(lit.exact) for lit in program.literals if lit.exact is not None}
    assert recognised == {f"{E}^(-1/4)"}  # sdpa's default scale, split on q and k

    # each literal at its float64 value (before): a truth 1e-17 off the mathematics, which
    # mp50 against mp100 cannot see
    program.exact_constants = False
    before50, before100 = program(x, precision=mp50), program(x, precision=mp100)
    assert _relative(before50, before100.a) < 1e-45
    assert 1e-18 < _relative(before50, exact) < 1e-15
    assert all(lit.exact is None for lit in program.literals)  # now listed as given


class _Sdpa(nn.Module):
    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, scale=self.scale)


def test_sdpa_default_scale_is_exact_and_an_explicit_one_is_listed():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 3, E, dtype=torch.float64, generator=gen) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default, explicit = MPProgram(_Sdpa(), (q, k, v)), MPProgram(_Sdpa(0.3), (q, k, v))
    out = default(q, k, v, precision=parse_precision("mp60"))
    with workprec(PREC):
        qa, ka, va = _arb(q)[0], _arb(k)[0], _arb(v)[0]
        exact = np.stack([_softmax_rows(qa[h].dot(ka[h].T) / flint.arb(E).sqrt()).dot(va[h])
                          for h in range(2)])[None]
    assert _relative(out, exact) < 1e-55
    # scale=0.3: torch multiplies q and k by sqrt(0.3), a float64 the truth takes as given
    given = [lit for lit in explicit.literals if lit.exact is None]
    assert {lit.value for lit in given} == {math.sqrt(0.3)} and len(given) == 2
    assert "0.5477225575051661" in "\n".join(literal_lines(explicit.literals))


def test_multihead_attention_scale_and_layer_norm_eps_in_the_census(encoder_layer):
    class Mha(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn(x, x, x)[0]  # need_weights: q scaled by 1/sqrt(E) (mul.Tensor)

    torch.manual_seed(1)
    x = torch.randn(1, 3, D, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mha = census(Mha().double().eval(), x)
    assert [(str(lit.exact), lit.op) for lit in mha.literals] == [
        (f"1/sqrt({E})", "aten.mul.Tensor")]
    assert "none taken as given" in mha.table()

    m, x = encoder_layer
    table = census(m, x).table()
    exact = table[table.index("float literals computed exactly"):]
    assert f"{E}^(-1/4) for {math.sqrt(1 / math.sqrt(E))!r}  aten.mul.Scalar  (2 uses" in exact
    given = table[table.index("float literals taken as given"):]
    assert "1e-05  aten.native_layer_norm.default  (2 uses, first node native_layer_norm" in given


def test_precision_ops_lists_the_literals_of_a_model(capsys):
    # zoo llama, width 12, 2 heads: head dim 6, RMSNorm eps 1e-6
    assert main(["ops", "examples/zoo/llama.py:llama", "--d-in", "3", "--d-out", "2",
                 "--depth", "1", "--width", "12", "--tokens", "4"]) == 0
    out = capsys.readouterr().out
    exact = out[out.index("float literals computed exactly"):]
    assert exact.splitlines()[1].lstrip().startswith(f"{E}^(-1/4) for 0.6389431042462725")
    given = out[out.index("float literals taken as given"):]
    assert "1e-06  aten.add.Scalar  (3 uses" in given


class _Offsets(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # an integer tensor times it (a float32 result: casts=promote computes it in mpN)
        ramp = torch.arange(x.shape[-1]) * (1 / math.sqrt(3))
        return x / math.sqrt(2) + ramp + torch.full_like(x, math.sqrt(5))


def test_a_constant_with_an_integer_tensor_a_divisor_and_a_fill_value():
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = MPProgram(_Offsets(), (x,))
    assert {str(lit.exact) for lit in program.literals} == {"1/sqrt(3)", "sqrt(2)", "sqrt(5)"}
    out = program(x, precision=parse_precision("mp60+casts=promote"))
    with workprec(PREC):
        exact = np.array([[flint.arb(float(v)) / flint.arb(2).sqrt() + i / flint.arb(3).sqrt()
                           + flint.arb(5).sqrt() for i, v in enumerate(x[0])]], dtype=object)
    assert _relative(out, exact) < 1e-55
