"""MPProgram frees each value after its last use (keep_intermediates keeps them), with
bit-identical outputs either way, and names the op, node and module of a failing op."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from precision.backends.interpreter import OPS, MPProgram, UnsupportedOpError
from precision.models import build_model
from precision.precisions import parse_precision

aten = torch.ops.aten


class Diamond(nn.Module):
    """cos(sin(exp x) + exp x): exp is read twice, by sin and by the add."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x.exp()
        return (a.sin() + a).cos()


class Chain(nn.Module):
    """``steps`` sines in a row: each value is read once, by the next node."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = x.sin()
        return x


def exact(v: object) -> list[tuple[int, int]]:
    """Every entry of an MPArray as (mantissa, exponent) of its midpoint."""
    return [e.mid().man_exp() for e in v.a.flat]  # type: ignore[attr-defined]


def test_last_use_table_and_live_count_of_a_small_graph():
    x = torch.randn(3, dtype=torch.float64)
    program = MPProgram(Diamond(), (x,))
    assert program.last_uses == {"x": [], "exp": ["x"], "sin": [], "add": ["exp", "sin"],
                                 "cos": ["add"], "output": ["cos"]}
    free = program(x, precision=parse_precision("mp40"))
    assert program.peak_live == 3 and program.values == {}     # exp, sin, add at the add
    program.keep_intermediates = True
    kept = program(x, precision=parse_precision("mp40"))
    assert program.peak_live == 5 and set(program.values) == {"x", "exp", "sin", "add", "cos"}
    assert exact(free) == exact(kept)


def test_values_are_released_during_the_run(monkeypatch):
    """A wrapped sin checks, at each call, which earlier results are still alive."""
    sin = OPS[aten.sin.default]
    made: list[weakref.ref] = []
    alive_at_call: list[int] = []

    def watched(ctx, x):
        alive_at_call.append(sum(r() is not None for r in made))
        out = sin(ctx, x)
        made.append(weakref.ref(out.a))
        return out

    monkeypatch.setitem(OPS, aten.sin.default, watched)
    x = torch.randn(4, dtype=torch.float64)
    program = MPProgram(Chain(12), (x,))
    free = program(x, precision=parse_precision("mp30"))
    # only the previous sine (this call's input) is alive when the next one runs
    assert alive_at_call == [0] + [1] * 11 and program.peak_live == 2
    made.clear()
    alive_at_call.clear()
    program.keep_intermediates = True
    kept = program(x, precision=parse_precision("mp30"))
    assert alive_at_call == list(range(12)) and program.peak_live == 13
    assert exact(free) == exact(kept)


def test_transformer_outputs_bit_identical_with_values_kept_or_freed():
    torch.manual_seed(0)
    model = build_model("transformer", d_in=6, d_out=3, depth=2, width=16, max_len=5).eval()
    x = torch.randn(2, 5, 6)
    free_program = MPProgram(model, (x,))
    keep_program = MPProgram(model, (x,), keep_intermediates=True)
    free = free_program(x, precision=parse_precision("mp60"))
    kept = keep_program(x, precision=parse_precision("mp60"))
    assert exact(free) == exact(kept)
    n_values = sum(n.op != "output" for n in keep_program.graph.nodes)
    assert keep_program.peak_live == n_values == len(keep_program.values)
    assert free_program.peak_live < n_values // 3


class Wrapper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Diamond()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


@pytest.mark.parametrize("kind", [ValueError, UnsupportedOpError])
def test_op_failure_names_op_node_and_module_and_keeps_its_type(monkeypatch, kind):
    def failing(ctx, x):
        raise kind("bad operand")

    monkeypatch.setitem(OPS, aten.sin.default, failing)
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(kind) as info:
        MPProgram(Wrapper(), (x,))(x, precision=parse_precision("mp30"))
    msg = str(info.value)
    assert "\n" not in msg and msg.endswith("): bad operand")
    assert msg.startswith("op aten.sin.default (node sin in module inner (Diamond))")


def test_wrong_number_of_inputs_is_one_line():
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="^MPProgram takes 1 inputs, got 2$"):
        MPProgram(Diamond(), (x,))(x, x, precision=parse_precision("mp30"))
