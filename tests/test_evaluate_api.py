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


def test_a_changed_module_is_exported_again_not_served_from_the_cache() -> None:
    """``model[1] = nn.ReLU()`` after an mp30 evaluation of the same object: the exported
    program was cached per module object, so mp30 returned the Tanh model's output."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = torch.randn(3, 4, dtype=torch.float64)
    evaluate(model, x, "mp30")
    model[1] = nn.ReLU()
    with torch.no_grad():
        want = model(x)
    assert (evaluate(model, x, "mp30").to_float() - want).abs().max() < 1e-15
    model.forward = lambda t: nn.Sequential.forward(model, t) * 2   # an instance's forward
    assert (evaluate(model, x, "mp30").to_float() - 2 * want).abs().max() < 1e-15


def test_digits_certify_the_model_and_input_that_computed_the_values() -> None:
    """``.digits`` read after the caller changed the weights (and the input) in place: it
    certified against the live model (0.16 digits of a clean mp30 output)."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = evaluate(model, x, "mp30")
    with torch.no_grad():
        model[0].weight.add_(1.0)
    x.add_(1.0)
    assert out.digits >= 28


@pytest.mark.parametrize("spelling", ["float16", "float8_e4m3", "float32", "bfloat16",
                                      "float64+mod[blocks.0*]=float16"])
def test_any_input_layout_gives_the_same_bits(spelling) -> None:
    """The same values in a non-contiguous tensor gave other outputs in float16 (up to 2e-3)
    and float8_e4m3 (up to 0.19): kernels round differently on other strides."""
    from precision.models import build_model

    torch.manual_seed(3)
    model = build_model("transformer", 3, 3, 2, 16)
    x = torch.randn(8, 3, 4, dtype=torch.float64).permute(1, 0, 2)[..., :3]
    assert not x.is_contiguous()
    a, b = evaluate(model, x, spelling), evaluate(model, x.contiguous(), spelling)
    assert torch.equal(a, b)


def test_degenerate_inputs_and_outputs_get_a_result_or_one_line() -> None:
    """A 0-size batch in mpN (a reshape ValueError), an integer output in mpN (an internal
    AttributeError), a tuple output, and a device this machine lacks (torch's assertion)."""
    from precision.devices import DeviceError

    model = nn.Sequential(nn.Linear(4, 3)).double()
    empty = evaluate(model, torch.zeros(0, 4, dtype=torch.float64), "mp30")
    assert isinstance(empty, MPOutput) and empty.shape == (0, 3)

    class Sign(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x > 0).long() * 3

    x = torch.tensor([[1.0, -2.0], [0.5, 0.0]], dtype=torch.float64)
    ints = evaluate(Sign(), x, "mp30")
    assert [float(v) for v in np.asarray(ints).reshape(-1)] == [3.0, 0.0, 3.0, 0.0]

    class Pair(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x * 2, x + 1

    with pytest.raises(TypeError, match="returned tuple, not a tensor"):
        evaluate(Pair(), x, "mp30")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="not available here"):
            evaluate(model, x.new_zeros(1, 4), "float32", device="cuda")


@pytest.mark.parametrize("dtype,name", [(torch.bfloat16, "bfloat16"), (torch.float16, "float16"),
                                        (torch.float32, "float32"), (torch.float64, "float64"),
                                        (torch.float8_e4m3fn, "float8_e4m3"),
                                        (torch.float8_e5m2, "float8_e5m2")])
def test_a_torch_dtype_names_its_precision(model_and_x, dtype, name) -> None:
    """``evaluate(model, x, torch.bfloat16)`` was refused (a dtype, not a string); a torch
    float dtype names the precision whose rounding its casts are."""
    model, x = model_and_x
    assert torch.equal(evaluate(model, x, dtype), evaluate(model, x, name))


def test_what_is_not_a_precision_is_one_line_and_mp_outputs_give_numpy(model_and_x) -> None:
    from precision.precisions import PrecisionError

    model, x = model_and_x
    with pytest.raises(PrecisionError, match="torch.int8 is not a precision"):
        evaluate(model, x, torch.int8)
    out = evaluate(model, x, "mp30")
    assert isinstance(out.numpy(), np.ndarray) and out.numpy().dtype == np.float64
    assert np.array_equal(out.numpy(), out.to_float().numpy())
    for convert in (torch.as_tensor, torch.tensor, torch.asarray):   # raised before
        t = convert(out)
        assert t.dtype == torch.float64 and t.shape == out.shape
        assert torch.equal(t, out.to_float())
    assert torch.equal(torch.as_tensor(out[0]), out.to_float()[0])


def test_evaluating_a_model_never_changes_it() -> None:
    """``evaluate`` switched the caller's model to eval mode for good, ``localize`` too, and
    ``evaluate_lengths`` converted the caller's float32 model to float64 in place. Each now
    computes in eval mode (dropout off) and leaves the model as it was."""
    from precision.lengths import evaluate_lengths
    from precision.localize import localize
    from precision.precisions import parse_precision

    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Tanh(), nn.Linear(3, 3))
    model.train()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    with torch.no_grad():
        want = model.eval()(x.float()).double()
    model.train()
    for spelling in ("float32", "float64", "mp30", "bfloat16"):
        out = evaluate(model, x, spelling)
        got = out.to_float() if isinstance(out, MPOutput) else out.double()
        assert (got - want).abs().max() < 1e-2   # dropout off: the eval-mode output
        assert all(m.training for m in model.modules())
    localize(model, x, parse_precision("bfloat16"), parse_precision("float64"))
    assert all(m.training for m in model.modules())
    evaluate_lengths(model, [2, 4], ["float32"], d_in=3, reference="mp30")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(m.training for m in model.modules())


def test_an_assignment_and_its_digits_are_of_the_eval_mode_model() -> None:
    """A model left in training mode with dropout: the per-module assignment's mpN output and
    its ``.digits`` are computed in eval mode too (the certification ran it in training mode
    once evaluate left the caller's mode as it was)."""
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Tanh(), nn.Linear(3, 3)).double()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    with torch.no_grad():
        want = model.eval()(x)
    model.train()
    out = evaluate(model, x, "mp30+mod[0]=bfloat16")
    assert (out.to_float() - want).abs().max() < 0.1 and out.digits >= 25
    assert all(m.training for m in model.modules())
