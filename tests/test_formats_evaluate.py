"""Formats everywhere a precision is accepted: evaluate, solvers, constructions, trained runs."""

import numpy as np
import pytest
import torch
from torch import nn

from precision.backends import backend_for
from precision.constructions.measure import run_construction
from precision.evaluate import evaluate_exact
from precision.formats.binary_format import FORMATS, MX_INT8_ELEMENT
from precision.formats.integer_weights import quantize_weight
from precision.formats.mx import quantize_mx
from precision.formats.rounding import round_to_format
from precision.precisions import PrecisionError, parse_precision, seeded_by
from precision.solvers.measure import run_solver

GAUSS = {"kind": "gaussian", "dim": 4, "n_samples": 16}


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).double()


def _f(a: np.ndarray) -> np.ndarray:
    return np.array([float(v) for v in a.reshape(-1)]).reshape(a.shape)


def test_evaluate_in_fp8_is_parameters_and_input_rounded_then_every_op_rounded():
    model, x = _mlp(), torch.randn(5, 6, dtype=torch.float64) * 3
    r8 = lambda t: round_to_format(t, FORMATS["float8_e4m3"]).float()  # noqa: E731
    w1, b1, w2, b2 = (r8(t.detach()) for t in model.parameters())
    h = r8(torch.relu(r8(torch.addmm(b1, r8(x), w1.t()))))
    want = r8(torch.addmm(b2, h, w2.t())).double().numpy()
    assert np.array_equal(_f(evaluate_exact(model, x, "float8_e4m3")), want)


def test_integer_weights_quantise_matrices_and_round_activations():
    model, x = _mlp(), torch.randn(5, 6, dtype=torch.float64)
    w1, b1, w2, b2 = (t.detach().float() for t in model.parameters())
    q1, q2 = quantize_weight(w1, 4, None), quantize_weight(w2, 4, None)
    bf = lambda t: t.to(torch.bfloat16).float()  # noqa: E731
    h = bf(torch.relu(bf(torch.addmm(bf(b1), bf(x.float()), q1.t()))))
    want = bf(torch.addmm(bf(b2), h, q2.t())).double().numpy()
    assert np.array_equal(_f(evaluate_exact(model, x, "int4+act=bfloat16")), want)


def test_evaluate_in_mxint8_quantises_each_products_operands_by_its_scale_rule():
    """``mxint8`` (and ``+scale=log2``): parameters and input rounded to float32 (the
    activation format), each product's operands quantised per block along the reduction
    dim; an input row whose max sits just below 2^3 takes the next exponent under log2."""
    model, x = _mlp(), torch.randn(5, 6, dtype=torch.float64)
    x[:, 0] = 8.0 * (1 - 2.0 ** -24)                  # a float32 value: every row's max
    w1, b1, w2, b2 = (t.detach().float() for t in model.parameters())
    outs = {}
    for spec, rule in (("mxint8", "exact"), ("mxint8+scale=log2", "log2")):
        def q(t, dim, rule=rule):
            return quantize_mx(t, MX_INT8_ELEMENT, dim, scale=rule)
        h = torch.relu(torch.addmm(b1, q(x.float(), -1), q(w1.t(), -2)))
        want = torch.addmm(b2, q(h, -1), q(w2.t(), -2)).double().numpy()
        outs[spec] = _f(evaluate_exact(model, x, spec))
        assert np.array_equal(outs[spec], want), spec
    assert not np.array_equal(outs["mxint8"], outs["mxint8+scale=log2"])


def test_every_kind_of_format_evaluates_and_errs_by_its_width():
    model, x = _mlp(), torch.randn(8, 6, dtype=torch.float64)
    exact = _f(evaluate_exact(model, x, "float64"))
    err = {s: np.abs(_f(evaluate_exact(model, x, s)) - exact).max() for s in (
        "float8_e4m3", "float8_e5m2:rz", "mxfp8_e4m3", "mxfp4_e2m1", "int8_g4", "tf32",
        "bfloat16:sr+seed=2", "e6m20", "float32+acc=float64", "float32:rd", "mxint8",
        "mxint8:sr+seed=1")}
    assert all(np.isfinite(e) for e in err.values())
    scale = np.abs(exact).max()
    assert err["mxfp4_e2m1"] > err["mxfp8_e4m3"] > err["mxint8"] > err["tf32"] > err["e6m20"] > 0
    assert err["mxfp8_e4m3"] > err["mxint8:sr+seed=1"] > err["tf32"]
    assert err["float8_e4m3"] < 0.5 * scale and err["e6m20"] < 1e-4 * scale
    assert err["float32:rd"] < 1e-5 * scale


def test_stochastic_rounding_reproduces_per_seed_and_varies_across_seeds():
    model, x = _mlp(), torch.randn(8, 6, dtype=torch.float64)
    a = _f(evaluate_exact(model, x, "float8_e4m3:sr+seed=1"))
    assert np.array_equal(a, _f(evaluate_exact(model, x, "float8_e4m3:sr+seed=1")))
    assert not np.array_equal(a, _f(evaluate_exact(model, x, "float8_e4m3:sr+seed=2")))


def test_an_unseeded_sr_takes_the_seed_of_the_run_that_computes_it():
    """``float8_e4m3:sr`` (the spelling the format examples lead to) is accepted: a solver
    run computes it with its problem's seed and stores the name spelled; the Python API's
    ``evaluate``, which has no run, asks for '+seed=N' in one line."""
    for seed in (0, 3):
        problem = {**GAUSS, "seed": seed}
        unseeded = run_solver("gd", "float8_e4m3:sr", problem, {"iters": 20})
        seeded = run_solver("gd", f"float8_e4m3:sr+seed={seed}", problem, {"iters": 20})
        assert unseeded.precision == "float8_e4m3:sr"
        assert [s.mse for s in unseeded.steps] == [s.mse for s in seeded.steps]
    assert parse_precision("float8_e4m3:sr").unseeded
    assert seeded_by(parse_precision("float8_e4m3:sr"), 7).name == "float8_e4m3:sr+seed=7"
    assert seeded_by(parse_precision("float8_e4m3:sr+seed=1"), 7).seed == 1
    with pytest.raises(PrecisionError, match=r"no seed here: spell '\+seed=N'"):
        evaluate_exact(_mlp(), torch.randn(2, 6, dtype=torch.float64), "float8_e4m3:sr")


def test_solvers_and_constructions_run_in_formats_reproducibly():
    for spec in ("float8_e4m3", "mxfp8_e4m3", "bfloat16:sr+seed=4", "mxint8:rz+scale=log2",
                 "mxint8:sr+seed=2"):
        res = run_solver("gd", spec, GAUSS, {"iters": 30})
        assert res.status in ("ok", "diverged") and res.precision == parse_precision(spec).name
    a = run_solver("gd", "float8_e4m3:sr+seed=4", GAUSS, {"iters": 20})
    b = run_solver("gd", "float8_e4m3:sr+seed=4", GAUSS, {"iters": 20})
    assert [s.mse for s in a.steps] == [s.mse for s in b.steps]
    lo = run_solver("gd", "float8_e4m3", GAUSS, {"iters": 200}).steps[-1].log10_mse
    hi = run_solver("gd", "tf32", GAUSS, {"iters": 200}).steps[-1].log10_mse
    assert hi < lo - 2                       # 11 bits end far below 4 bits
    xp = backend_for(parse_precision("float8_e4m3"))
    v = xp.asarray([0.3, 1.1]) * xp.asarray([3.0, 1.7])
    assert xp.to_numpy(v).tolist() == [0.9375, 2.0]   # 0.3125 * 3, 1.125 * 1.75 rounded
    con = run_construction("lsa_gd", "float8_e4m3", GAUSS, {"layers": 3})
    assert con.status in ("ok", "diverged") and len(con.steps) == 3



def test_trained_evaluation_rounds_its_inputs_into_the_format():
    from probes.training.measure import _rounded_inputs

    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for spec in ("float8_e4m3", "float8_e4m3:sr+seed=1", "mxfp8_e4m3", "int4+act=bfloat16"):
        p = parse_precision(spec)
        got = _rounded_inputs(x, p)
        assert got.dtype == torch.float64 and got.shape == x.shape
        fmt = p.value_format
        assert torch.equal(round_to_format(got, fmt), got)          # on the format's grid
        # within one spacing of x: relative above the normal range's bottom, absolute (the
        # subnormal spacing) below it
        assert torch.allclose(got, x, rtol=2 * fmt.unit_roundoff,
                              atol=2.0 ** (fmt.emin - fmt.mantissa_bits))


def test_every_construction_runs_in_a_format():
    spd = {"kind": "spd", "dim": 3, "kappa": 10.0}
    runs = [("lsa_gd", GAUSS, {"layers": 2}), ("baseconv_gd", GAUSS, {"iters": 2}),
            ("baseconv_gd_noncausal", GAUSS, {"iters": 1}),
            ("lsa_newton_schulz", spd, {"steps": 2}), ("lsa_newton_schulz_sym", spd,
                                                       {"steps": 2}),
            ("lsa_least_squares", GAUSS, {"steps": 2}), ("lsa_ridge", GAUSS, {"steps": 2})]
    for name, problem, params in runs:
        res = run_construction(name, "bfloat16:sr+seed=1", problem, params)
        assert res.status in ("ok", "diverged"), (name, res.message)
        assert res.steps and all(s.mse == s.mse for s in res.steps), name


def test_integer_and_narrow_dtype_ops_pass_through_the_accumulation_path():
    from precision.formats.op_rounding import RoundResults

    p = parse_precision("float8_e4m3+acc=bfloat16")
    with RoundResults(lambda: p):
        count = torch.ones(5, dtype=torch.int64).sum()
        narrow = torch.ones(4, 3, dtype=torch.bfloat16) @ torch.ones(3, 2, dtype=torch.bfloat16)
        total = torch.full((40,), 0.25).sum()
    assert count.item() == 5 and narrow.dtype == torch.bfloat16
    assert total.item() == 10.0                      # 0.25 * 40, exact in bfloat16 and fp8


def test_a_per_module_assignment_can_name_a_simulated_format():
    model, x = _mlp(), torch.randn(5, 6, dtype=torch.float64)
    r8 = lambda t: round_to_format(t, FORMATS["float8_e4m3"]).float()  # noqa: E731
    w1, b1, w2, b2 = (t.detach() for t in model.parameters())
    h = torch.relu(r8(torch.addmm(r8(b1), x.float(), r8(w1).t())))     # module 0 in FP8
    want = torch.addmm(b2.float(), h, w2.float().t()).double().numpy()  # the rest in float32
    assert np.array_equal(_f(evaluate_exact(model, x, "float32+mod[0]=float8_e4m3")), want)
