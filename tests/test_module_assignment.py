"""Per-module assignment (``+mod[GLOB]=FORMAT``): the float path and the mpN path each equal, bit
for bit, the same model whose assigned ops are rounded by hand; the rule that picks an op's
precision; unassigned modules untouched; a glob that matches nothing is one line."""

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from precision.backends.torch_backend import round_to_dtype
from precision.evaluate import evaluate_exact
from precision.formats.module_assignment import (
    AssignmentError,
    assigned_precision,
    carrier_dtype,
    parents,
    work_precision,
)
from precision.metrics import error_summary
from precision.precisions import Precision, PrecisionError, parse_precision
from probes.suite import load_suite

BF16 = Precision("bfloat16")


class MLP(nn.Module):
    def __init__(self, width: int, hand: Callable[[torch.Tensor], torch.Tensor] | None) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 2 * width)
        self.out = nn.Linear(2 * width, width)
        self.hand = hand  # rounds each op's result by hand (None: no rounding)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        r = self.hand or (lambda t: t)
        return r(self.out(r(torch.relu(r(self.fc(h))))))


class Layer(nn.Module):
    def __init__(self, width: int, hand: Callable | None) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mix = nn.Linear(width, width)
        self.mlp = MLP(width, hand)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + torch.tanh(self.mix(self.norm(h)))
        return h + self.mlp(h)


class TwoLayers(nn.Module):
    def __init__(self, width: int = 8, hand: Callable | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(width, hand) for _ in range(2))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            h = layer(h)
        return h


def _models(hand: Callable) -> tuple[nn.Module, nn.Module]:
    """A model and its copy whose MLP ops round by ``hand`` and whose MLP weights are
    bfloat16 values already."""
    torch.manual_seed(0)
    model = TwoLayers().double().eval()
    by_hand = TwoLayers(hand=hand).double().eval()
    by_hand.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, t in by_hand.named_parameters():
            if ".mlp." in name:
                t.copy_(round_to_dtype(t, torch.bfloat16).double())
    return model, by_hand


def _x() -> torch.Tensor:
    return torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


def test_float_path_equals_the_mlp_ops_rounded_by_hand_and_leaves_the_rest_alone():
    model, by_hand = _models(lambda t: round_to_dtype(t, torch.bfloat16).double())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = _x()
    assigned = evaluate_exact(model, x, "float64+mod[*.mlp]=bfloat16")
    hand = evaluate_exact(by_hand, x, "float64")
    assert np.array_equal(assigned.astype(float), hand.astype(float))  # bit for bit
    plain = evaluate_exact(model, x, "float64")
    assert 1e-6 < error_summary(assigned, plain).relative < 1e-1     # the MLPs did round
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # a copy
    # the same model with the MLPs in float64: exactly the plain float64 run
    same = evaluate_exact(model, x, "float64+mod[*.mlp]=float64")
    assert np.array_equal(same.astype(float), plain.astype(float))


def test_mp_path_equals_the_mlp_ops_rounded_by_hand_in_the_interpreter():
    # by hand: a cast to bfloat16 after each op, which the interpreter rounds into bfloat16
    model, by_hand = _models(lambda t: t.to(torch.bfloat16).to(torch.float64))
    x = _x()
    assigned = evaluate_exact(model, x, "mp30+mod[*.mlp]=bfloat16")
    hand = evaluate_exact(by_hand, x, "mp30")
    assert all(a == b for a, b in zip(assigned.reshape(-1), hand.reshape(-1), strict=True))
    # an mpN in a float base: block 1 exact, the rest bfloat16, against the float path's
    # block 1 in float64: the same to float64's rounding
    mixed = evaluate_exact(model, x, "bfloat16+mod[layers.1]=mp30")
    floaty = evaluate_exact(model, x, "bfloat16+mod[layers.1]=float64")
    assert error_summary(floaty, mixed).relative < 1e-12
    assert error_summary(mixed, evaluate_exact(model, x, "mp30")).relative > 1e-4


def test_the_innermost_matched_module_and_then_the_first_glob_decide():
    p = parse_precision("float64+mod[*.mlp]=bfloat16+mod[layers.0.mlp]=float32"
                        "+mod[*.norm]=float16")
    assert assigned_precision(parents("layers.0.mlp.fc"), p) == BF16       # innermost: mlp
    assert assigned_precision(parents("layers.0.mlp"), p) == BF16          # first glob wins
    assert assigned_precision(parents("layers.0.norm"), p) == Precision("float16")
    assert assigned_precision(parents("layers.0.mix"), p) is None          # the base
    # '*' matches every path, so the innermost module of any op is matched by it
    everything = parse_precision("bfloat16+mod[layers.0]=float64+mod[*]=float16")
    assert assigned_precision(parents("layers.0.mlp.fc"), everything) == Precision("float16")
    assert assigned_precision(["", "layers"], parse_precision("mp30+mod[*.mlp]=bf16")) is None
    assert carrier_dtype(parse_precision("bfloat16+mod[x]=float16")) == torch.float32
    assert carrier_dtype(parse_precision("bfloat16+mod[x]=float64")) == torch.float64
    assert work_precision(parse_precision("bf16+mod[x]=mp40")) == Precision("mp40", 40)


def test_a_glob_that_matches_no_module_is_one_line_naming_it_and_some_paths():
    model, _ = _models(lambda t: t)
    for spelling in ("float64+mod[*.mpl]=bfloat16", "mp30+mod[*.mpl]=bfloat16"):
        with pytest.raises(AssignmentError) as info:
            evaluate_exact(model, _x(), spelling)
        message = str(info.value)
        assert "\n" not in message and "+mod[*.mpl]" in message and "layers.0.mlp" in message


def test_assignments_parse_as_computable_and_mix_one_mp_only():
    assert parse_precision("fp64+mod[*.mlp]=bf16").name == "float64+mod[*.mlp]=bfloat16"
    with pytest.raises(PrecisionError, match="one mpN"):
        parse_precision("mp50+mod[*.mlp]=mp30")


def test_a_suite_and_precisions_on_the_command_line_take_an_assignment():
    suite = load_suite("primitives", profile="quick", expand=False,
                       precisions=["float64+mod[*.mlp]=bfloat16", "float64"])
    names = [p.name for p in suite.settings.precisions]
    assert names == ["float64+mod[*.mlp]=bfloat16", "float64"]


def test_probe_checks_an_assignment_on_one_sample_before_training(tmp_path, capsys):
    from precision.cli.main import main

    factory = str(Path(__file__).resolve().parent.parent / "examples/gated_mixer.py") + \
        ":gated_mixer"
    code = main(["probe", factory, "--suite", "primitives", "--profile", "quick", "--tasks",
                 "multiply", "--precisions", "float64+mod[*.nothing]=bf16", "--db",
                 str(tmp_path / "p.db"), "--no-report", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "+mod[*.nothing] matches no module" in err and "before training" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "p.db").exists()


def test_the_top_seed_seeds_the_modules_stochastic_rounding():
    """A module's ':sr' had no seed of its own (always stream 0): '+seed=N' at the top now
    seeds it, is spelled once, and reads back; without it the module keeps seed 0."""
    p = parse_precision("float32+seed=3+mod[*.mlp]=bfloat16:sr")
    assert p.name == "float32+seed=3+mod[*.mlp]=bfloat16:sr"
    assert dict(p.modules)["*.mlp"].seed == 3 and parse_precision(p.name) == p
    model = TwoLayers().double().eval()
    x = _x()
    runs = {s: evaluate_exact(model, x, f"float32+seed={s}+mod[*.mlp]=bfloat16:sr").astype(float)
            for s in (0, 1)}
    unseeded = evaluate_exact(model, x, "float32+mod[*.mlp]=bfloat16:sr").astype(float)
    assert np.array_equal(unseeded, runs[0])                # no seed: seed 0, as before
    assert not np.array_equal(runs[0], runs[1])             # another seed, other bits
    again = evaluate_exact(model, x, "float32+seed=1+mod[*.mlp]=bfloat16:sr").astype(float)
    assert np.array_equal(again, runs[1])                   # and the same seed, the same
    for bad in ("float32+seed=3+mod[*.mlp]=bfloat16", "float32+seed=3"):
        with pytest.raises(PrecisionError, match="only for stochastic rounding"):
            parse_precision(bad)


def test_an_op_glob_rounds_that_op_of_that_module_only_in_both_paths():
    """``+mod[MODULE::OP]`` claims the ops OP that MODULE runs itself: on the float path and
    in the interpreter the same, bit for bit equal to rounding that op by hand (the tanh of
    each layer's own forward), winning over a module glob, placing no parameter; a glob whose
    op the module never runs is one line naming the ops it does run."""
    torch.manual_seed(0)
    model = TwoLayers().double().eval()
    x = _x()

    class Hand(TwoLayers):   # the same model, each layer's tanh rounded to bfloat16 by hand
        def __init__(self) -> None:
            super().__init__()
            for layer in self.layers:
                layer.forward = (lambda lay: lambda h: (lambda h2: h2 + lay.mlp(h2))(
                    h + round_to_dtype(torch.tanh(lay.mix(lay.norm(h))), torch.bfloat16)))(layer)

    hand = Hand().double().eval()
    hand.load_state_dict(model.state_dict())
    want = evaluate_exact(hand, x, "float64").astype(float)
    for spec in ("float64+mod[layers.*::tanh]=bfloat16",
                 "float64+mod[layers.*::tanh]=bfloat16+mod[layers.*]=float64"):
        got = evaluate_exact(model, x, spec).astype(float)
        assert np.array_equal(got, want), spec          # bit for bit, the op glob wins
    exact = evaluate_exact(model, x, "mp30+mod[layers.*::tanh]=bfloat16")
    assert error_summary(exact, want).relative < 1e-13   # the interpreter: float64's rounding
    assert error_summary(want, evaluate_exact(model, x, "float64")).relative > 1e-6
    # an op glob places no parameter: only the ops of the layers' own forwards changed
    assert assigned_precision(parents("layers.0.mix"), parse_precision(
        "float64+mod[layers.0::tanh]=bfloat16")) is None
    for spec in ("float64+mod[layers.0::exp]=bfloat16", "mp30+mod[layers.0::exp]=bfloat16"):
        with pytest.raises(AssignmentError, match=r"layers.0::exp\] matches no op .* tanh"):
            evaluate_exact(model, x, spec)
    from probes.training.format_training import FormatTraining

    with pytest.raises(AssignmentError, match="a training precision assigns modules, not one op"):
        FormatTraining(TwoLayers(), parse_precision("float32+mod[layers.0::tanh]=bfloat16"), "off")
