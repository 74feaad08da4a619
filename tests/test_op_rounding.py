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


def test_selecting_ops_on_rounded_tensors_skip_the_identity_rounding(monkeypatch):
    from precision.formats import op_rounding

    p = parse_precision("float8_e4m3")
    torch.manual_seed(1)
    x, w = torch.randn(6, 8), torch.randn(8, 5)
    calls = []
    real = op_rounding.round_values
    monkeypatch.setattr(op_rounding, "round_values",
                        lambda t, q, **kw: calls.append(t.shape) or real(t, q, **kw))
    mode = RoundResults(lambda: p)
    with mode:
        y = x @ w                                  # rounded once
        before = len(calls)
        r = torch.relu(y.t()).clone()              # a view, then two selecting ops: no rounding
        m = torch.cat([r, -r]).amax(dim=0)
    assert len(calls) == before and _on_grid(m, torch.float8_e4m3fn)
    assert torch.equal(m, torch.cat([r, -r]).amax(dim=0))
    y.mul_(1.0 + 2.0 ** -10)                       # changed outside the mode: off the grid
    with mode:
        again = torch.relu(y)                      # its mark is stale: rounded
        fresh = torch.relu(torch.randn(4, 4))      # never rounded: rounded
    assert len(calls) == before + 2
    assert _on_grid(again, torch.float8_e4m3fn) and _on_grid(fresh, torch.float8_e4m3fn)


def test_masked_fill_skips_only_a_fill_value_on_the_grid():
    scores = torch.randn(4, 4)
    mask = torch.ones(4, 4, dtype=torch.bool).triu(1)
    for spec, fill in (("float8_e4m3", -448.0), ("float8_e5m2", float("-inf"))):
        p = parse_precision(spec)
        with RoundResults(lambda p=p: p):
            filled = (scores * 1.0).masked_fill(mask, float("-inf"))
        assert (filled[mask] == fill).all()       # e4m3 saturates -inf, e5m2 keeps it
