"""001 eq. 21, plain linear attention (App. B.3), and its place in the `square` suite."""

from __future__ import annotations

import pytest
import torch

from precision.models import build_model
from precision.tasks import make_task
from probes.suite import load_suite


def test_layer_is_equation_21() -> None:
    """(u W_Q)(u W_K)^T (u W_V + B), written out entry by entry."""
    torch.manual_seed(0)
    model = build_model("linear_attention", 3, 3, 1, 3, max_len=5).double()
    with torch.no_grad():
        model.B.normal_()
    u = torch.randn(2, 4, 3, dtype=torch.float64)
    q, k = u @ model.W_Q[0], u @ model.W_K[0]
    v = u @ model.W_V[0] + model.B[0, :4]
    want = torch.einsum("bid,bjd,bje->bie", q, k, v)
    assert torch.allclose(model(u), want, rtol=1e-13, atol=1e-13)


def test_the_proofs_forced_weights_give_u_u_transpose_not_the_square() -> None:
    """Thm. B.1's constraints (W_Q W_K^T = I, W_V = 0, B = I with N = D) leave u u^T (39)."""
    model = build_model("linear_attention", 4, 4, 1, 0, max_len=4).double()
    with torch.no_grad():
        model.W_Q[0] = torch.eye(4)
        model.W_K[0] = torch.eye(4)
        model.W_V.zero_()
        model.B[0] = torch.eye(4)
    u = torch.randn(3, 4, 4, dtype=torch.float64)
    out = model(u)
    assert torch.allclose(out, u @ u.transpose(-1, -2), rtol=1e-13, atol=1e-13)
    assert not torch.allclose(out, u * u, atol=1e-3)


def test_bad_shapes_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="token width"):
        build_model("linear_attention", 4, 2, 1, 0)
    with pytest.raises(ValueError, match="token width"):
        build_model("linear_attention", 4, 4, 1, 32)
    model = build_model("linear_attention", 2, 2, 1, 0, max_len=3)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 4, 2))


def test_square_suite_trains_the_three_models_on_square() -> None:
    """Thm. B.1's model at depth 1 and 2 and a 1-layer BaseConv at widths 32 and 64, all with
    the engine, on SQUARE at 001's primitive size (D = 20, N = 40)."""
    runs = load_suite("square").runs
    assert sorted((r.spec.label, r.spec.depth, r.spec.width) for r in runs) == [
        ("baseconv", 1, 32), ("baseconv", 1, 64), ("linear_attention", 1, 20),
        ("linear_attention", 2, 20)]
    assert {r.spec.train.recipe for r in runs} == {"engine"}
    task = make_task("square", seed=0, dim=20, n=40)
    x = torch.randn(2, 40, 20)
    assert torch.equal(task.apply(x), x * x)
