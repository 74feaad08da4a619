"""Every model family runs in every precision from one definition; the mp path is exact."""

from fractions import Fraction

import flint
import numpy as np
import pytest
import torch
from torch import nn

from precision.backends.interpreter import MPProgram, UnsupportedOpError
from precision.evaluate import error_decomposition, evaluate_exact
from precision.models import build_model
from precision.precisions import parse_precision

FAMILIES = [
    ("transformer", dict(d_in=4, d_out=2, depth=2, width=16, heads=2), 6),
    ("transformer", dict(d_in=4, d_out=2, depth=1, width=16, activation="gelu", causal=False,
                         max_len=8, ln_attn=False), 6),
    ("baseconv", dict(d_in=4, d_out=2, depth=2, width=8, max_len=8), 6),
    ("baseconv", dict(d_in=4, d_out=2, depth=1, width=8, short=True, layernorm=True), 6),
    ("lsa", dict(d_in=4, d_out=1, depth=2, width=0, heads=2, param="full"), 6),
    ("lsa", dict(d_in=4, d_out=1, depth=2, width=0, param="diag"), 6),
    ("lsa", dict(d_in=4, d_out=1, depth=2, width=0, param="gdpp"), 6),
    ("lsa_restricted", dict(d_in=4, d_out=1, depth=3, width=0, gdpp=True), 6),
    ("linear_tf", dict(d_in=6, d_out=6, depth=2, width=0, heads=2, mlp_width=8), 5),
    ("memformer", dict(d_in=4, d_out=1, depth=3, width=0, memory="cgd", heads=2), 6),
    ("memformer", dict(d_in=4, d_out=1, depth=3, width=0, memory="lfom", gamma="full",
                       max_len=8), 6),
    ("softmax_icl", dict(d_in=4, d_out=1, depth=1, width=0, K=6, N=4, heads=2), 6),
    ("linear_attention", dict(d_in=4, d_out=4, depth=2, width=4, max_len=8), 6),
]


def rel(a: np.ndarray, b: np.ndarray) -> float:
    old = flint.ctx.prec
    flint.ctx.prec = 1200
    try:
        num = sum(((x - y) ** 2 for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)),
                  flint.arb(0))
        den = sum((y**2 for y in b.reshape(-1)), flint.arb(0))
        return float((num / den).sqrt().mid())
    finally:
        flint.ctx.prec = old


@pytest.mark.parametrize("name,kw,n", FAMILIES, ids=[f[0] + str(i) for i, f in
                                                        enumerate(FAMILIES)])
def test_family_in_every_precision(name, kw, n):
    torch.manual_seed(0)
    model = build_model(name, **kw).double()
    x = torch.randn(2, n, kw["d_in"], dtype=torch.float64)
    out = {p: evaluate_exact(model, x, p) for p in ("bfloat16", "float32", "float64", "mp50",
                                                "mp100")}
    ref = out["mp100"]
    assert out["mp50"].shape == (2, n, kw["d_out"])
    assert rel(out["float64"], ref) < 1e-12
    assert rel(out["mp50"], ref) < 1e-45
    assert 1e-9 < rel(out["float32"], ref) < 1e-5
    assert 1e-4 < rel(out["bfloat16"], ref) < 1e-1


def test_baseconv_without_layernorm_is_exact_rational_polynomial():
    torch.manual_seed(1)
    model = build_model("baseconv", d_in=3, d_out=2, depth=2, width=4, max_len=5).double()
    x = torch.randn(1, 5, 3, dtype=torch.float64)
    got = evaluate_exact(model, x, "mp60")

    F = np.vectorize(Fraction, otypes=[object])
    p = {k: F(v.detach().numpy()) for k, v in model.state_dict().items()}
    h = F(x.numpy())[0] @ p["inp.weight"].T + p["inp.bias"]
    n = h.shape[0]
    for i in range(2):
        q = f"layers.{i}."
        g = h @ p[q + "w_gate.weight"].T + p[q + "b_gate"][:n]
        u = h @ p[q + "w_in.weight"].T + p[q + "b_in"][:n]
        k = p[q + "filter"]
        conv = np.array([[sum((k[c, t - s] * u[s, c] for s in range(t + 1)), Fraction(0))
                          for c in range(u.shape[1])] for t in range(n)], dtype=object)
        conv = conv + p[q + "b_conv"][:n]
        h = h + (g * conv) @ p[q + "w_out.weight"].T + p[q + "b_out"][:n]
    exact = h @ p["out.weight"].T + p["out.bias"]

    digits = 60
    old = flint.ctx.prec
    flint.ctx.prec = 2000
    try:
        worst = flint.arb(0)
        for g_val, e_val in zip(got.reshape(-1), exact.reshape(-1), strict=True):
            ref = flint.arb(e_val.numerator) / e_val.denominator
            worst = max(worst, (abs(g_val - ref) / abs(ref)).mid())
        # Agreement to the working precision: ~60 significant digits (a few ulps of mp60),
        # far beyond float64, so nothing went through a float on the way.
        assert worst < flint.arb(10) ** (-(digits - 3))
    finally:
        flint.ctx.prec = old


class GatedTanhMixer(nn.Module):
    """A module the toolkit has never seen: token mixing MLP with a tanh gate."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.mix = nn.Linear(n, n)
        self.gate = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.mix(x.transpose(1, 2)).transpose(1, 2)
        return self.norm(x + torch.tanh(self.gate(x)) * torch.sigmoid(mixed))


def test_unregistered_module_runs_in_mp():
    torch.manual_seed(2)
    model = GatedTanhMixer(5, 3).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mp = evaluate_exact(model, x, "mp40")
    ref = model(x).detach().numpy()
    assert np.allclose(np.vectorize(float)(mp), ref, rtol=1e-13, atol=1e-13)
    assert rel(mp, evaluate_exact(model, x, "mp80")) < 1e-37


class UsesBessel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(self.inner(x))


def test_unsupported_op_names_op_and_module():
    model = nn.Sequential(UsesBessel()).double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    program = MPProgram(model, (x,))
    assert any("bessel_j0" in op for op, _ in program.unsupported_ops())
    with pytest.raises(UnsupportedOpError) as info:
        program(x, precision=parse_precision("mp30"))
    msg = str(info.value)
    assert "bessel_j0" in msg and "UsesBessel" in msg and "\n" not in msg


def test_error_decomposition_splits_float32_error():
    torch.manual_seed(3)
    model = build_model("lsa", d_in=4, d_out=1, depth=2, width=0, param="full").double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    truth = np.zeros((2, 6, 1))  # any target works; the split must add up
    parts = error_decomposition(model, x, truth, "float32")
    approx = parts["approximation"].mse
    assert parts["total"].mse == pytest.approx(approx, rel=1e-3)
    assert 0 < parts["rounding"].mse < 1e-12 * max(approx, 1e-30) * 1e6
    exact_parts = error_decomposition(model, x, truth, "mp50")
    assert exact_parts["rounding"].log10_mse < -95


def test_weights_are_read_at_call_time():
    torch.manual_seed(4)
    model = build_model("lsa", d_in=3, d_out=1, depth=1, width=0, param="gdpp").double()
    x = torch.randn(1, 5, 3, dtype=torch.float64)
    before = evaluate_exact(model, x, "mp30")
    with torch.no_grad():
        model.w.add_(0.5)
    after = evaluate_exact(model, x, "mp30")
    ref = model(x).detach().numpy()
    assert rel(before, after) > 1e-3
    assert np.allclose(np.vectorize(float)(after), ref, rtol=1e-13)


class ManyOps(nn.Module):
    """Exercises padding, concatenation, slicing, reductions, GELU (tanh), erf, sqrt, where."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.conv = nn.Conv1d(3, 6, 2, stride=1, groups=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        p = nn.functional.pad(h, (1, 2))                       # constant_pad_nd
        c = torch.cat([h, p[..., 1:4] * 0.5], dim=-1)          # cat + slice
        m = c.mean(dim=-1, keepdim=True) + c.var(dim=1, keepdim=True).sum(-1, keepdim=True)
        g = nn.functional.gelu(c, approximate="tanh") + torch.erf(c) - torch.sqrt(c * c + 1)
        s = torch.where(c > 0, g, m.expand_as(c)).amax(dim=1, keepdim=True)
        conv = self.conv(h.transpose(1, 2)).transpose(1, 2).sum(dim=-1, keepdim=True)
        return torch.log_softmax(g - s, dim=-1)[:, :-1] + conv


def test_op_coverage_module_matches_float64():
    torch.manual_seed(5)
    model = ManyOps().double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mp = evaluate_exact(model, x, "mp40")
    ref = model(x).detach().numpy()
    assert mp.shape == ref.shape
    assert np.allclose(np.vectorize(float)(mp), ref, rtol=1e-12, atol=1e-12)
