"""The per-op rounding mode: every op's floating result rounded to the precision in force."""

import torch

from precision.formats.op_rounding import RoundResults, round_values
from precision.precisions import parse_precision


def _on_grid(t: torch.Tensor, dtype: torch.dtype) -> bool:
    return bool((t.to(dtype).to(t.dtype) == t).all())


def test_every_result_lies_on_the_format_grid_and_views_and_writes_are_handled():
    p = parse_precision("bfloat16")
    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64)
    w = torch.randn(8, 8, dtype=torch.float64)
    with RoundResults(lambda: p):
        y = torch.tanh(x @ w)
        v = y.t()                 # a view: not a new rounding, still on the grid
        z = y.clone()
        z.mul_(1.0 + 2.0 ** -12)  # written in place: rounded in place
    assert y.dtype == torch.float64
    for t in (y, v, z):
        assert _on_grid(t, torch.bfloat16)
    assert not _on_grid(x @ w, torch.bfloat16)  # outside the mode nothing is rounded


def test_choose_none_leaves_results_alone_and_round_values_is_one_rounding():
    x = torch.tensor([1.0 + 2.0 ** -8 + 2.0 ** -30], dtype=torch.float64)
    # one correct rounding to bfloat16 (not through float32, which would give 1.0)
    assert round_values(x, parse_precision("bfloat16")).item() == 1.0 + 2.0 ** -7
    with RoundResults(lambda: None):
        assert (x * 3).item() == 3 * x.item()
