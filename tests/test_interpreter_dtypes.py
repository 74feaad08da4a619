"""Every op right for every dtype it can receive: integer, boolean and mixed operands, which the
OpInfo samples (tests/test_interpreter_opinfo.py) do not cover; ``aten._trilinear``; and an
interpreter failure names the op, its graph node and its module."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from precision.backends import backend_for
from precision.backends.interpreter import OPS, Ctx
from precision.backends.interpreter.program import to_exact
from precision.backends.mp_backend import MPArray
from precision.evaluate import evaluate_exact
from precision.metrics import error_summary
from precision.precisions import parse_precision

aten = torch.ops.aten
CTX = Ctx(backend_for(parse_precision("mp40")))


def _operands() -> list[tuple[str, object]]:
    gen = torch.Generator().manual_seed(0)
    return [
        ("float64", torch.rand(3, 4, dtype=torch.float64, generator=gen) + 0.5),
        ("float32", torch.rand(3, 4, generator=gen) + 0.5),
        ("int64", torch.randint(1, 4, (3, 4), generator=gen)),
        ("int32", torch.randint(1, 4, (3, 4), generator=gen).to(torch.int32)),
        ("bool", torch.rand(3, 4, generator=gen) > 0.5),
        ("float 0-d", torch.tensor(1.5, dtype=torch.float64)),
        ("int 0-d", torch.tensor(2)),
        ("python int", 2),
        ("python float", 1.5),
    ]


BINARY = [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor,
          aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar, aten.fmod.Tensor,
          aten.fmod.Scalar, aten.remainder.Tensor, aten.remainder.Scalar, aten.atan2.default,
          aten.maximum.default, aten.minimum.default, aten.eq.Tensor, aten.lt.Tensor,
          aten.ge.Scalar, aten.bitwise_and.Tensor, aten.logical_xor.default,
          aten.add.Scalar, aten.mul.Scalar, aten.div.Scalar, aten.rsub.Scalar]
UNARY = [aten.neg.default, aten.abs.default, aten.exp.default, aten.sqrt.default,
         aten.sigmoid.default, aten.reciprocal.default, aten.floor.default, aten.sign.default,
         aten.sum.default, aten.mean.default, aten.cumsum.default, aten.prod.default,
         aten.amax.default, aten.logical_not.default, aten.relu.default]


def _value(v: object) -> object:
    return to_exact(v, CTX) if isinstance(v, torch.Tensor) else v


def _mismatch(want: torch.Tensor, got: object) -> str | None:
    """None when the interpreter's value is PyTorch's (float kind, shape and values)."""
    if want.is_floating_point() != isinstance(got, MPArray):
        return f"{'float' if isinstance(got, MPArray) else 'non-float'} result for {want.dtype}"
    values = got.to_float64() if isinstance(got, MPArray) else np.asarray(got, np.float64)
    if values.shape != tuple(want.shape):
        return f"shape {values.shape}, PyTorch {tuple(want.shape)}"
    if not np.allclose(values, want.double().numpy(), rtol=1e-6, equal_nan=True):
        return "values differ"
    return None


def test_ops_on_integer_boolean_and_mixed_operands_match_pytorch():
    problems = []
    cases = [(op, (a,)) for op in UNARY for _, a in _operands() if isinstance(a, torch.Tensor)]
    cases += [(op, (a, b)) for op in BINARY
              for (_, a), (_, b) in itertools.product(_operands(), repeat=2)]
    for op, args in cases:
        extra = (1,) if op is aten.cumsum.default else ()
        try:
            want = op(*args, *extra)
        except Exception:  # noqa: BLE001 - PyTorch refuses these dtypes: nothing to match
            continue
        try:
            problem = _mismatch(want, OPS[op](CTX, *map(_value, args), *extra))
        except Exception as exc:  # noqa: BLE001 - a crash is the finding
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            kinds = [a.dtype if isinstance(a, torch.Tensor) else type(a).__name__ for a in args]
            problems.append(f"{op} {kinds}: {problem}")
    assert not problems, "\n".join(problems)


class Alibi(nn.Module):
    """ALiBi slopes as Bloom computes them: a float32 base to an int32 exponent tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = torch.tensor(2 ** (-(2 ** -(2 - 3))), dtype=torch.float32)
        slopes = torch.pow(base, torch.arange(1, 5, dtype=torch.int32))
        return self.lin(x) * slopes.to(x.dtype)


class TwoInputBilinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bil = nn.Bilinear(4, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bil(x, x.flip(-1))


@pytest.mark.parametrize("module", [Alibi, TwoInputBilinear])
def test_alibi_pow_and_bilinear_run_in_mp(module):
    torch.manual_seed(0)
    model = module().double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    assert error_summary(evaluate_exact(model, x, "mp40"), evaluate_exact(model, x, "float64")
                         ).relative < 1e-13


class Sampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(self.inner(x), 0.5, training=True)


def test_an_interpreter_failure_names_the_op_its_node_and_module():
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    with pytest.raises(Exception) as info:
        evaluate_exact(Sampler().double(), x, "mp30")
    text = str(info.value)
    assert "op aten.native_dropout.default (node native_dropout" in text
    assert "in module <root> (Sampler)" in text
