"""``precision.gradient``: the gradient of the MSE of a module's output in every precision.

The mpN gradient is certified three ways: against mp2N (tests/test_conformance_models.py, every
zoo and hf model), against PyTorch's own float64 autograd (bit for bit: the float path *is*
autograd), and against central differences of the loss computed in mp100 with a step of
1e-25, an independent check that uses no derivative (truncation h^2 |L'''| ~ 1e-50, rounding
1e-100 / h ~ 1e-75: the two agree to ~1e-48, measured, and must to 1e-40). A simulated
format's gradient is on the format's grid (every op of the backward rounded); values are read
at each call (a weight changed in place is never a stale gradient); bad input is one line.
"""

from __future__ import annotations

import flint
import numpy as np
import pytest
import torch

from precision.cli.main import main
from precision.formats.op_rounding import round_values
from precision.gradient import gradient, loss_program
from precision.metrics import error_summary
from precision.mp_output import MPOutput
from precision.precisions import PrecisionError, parse_precision
from probes.factory import build_family

D_IN, D_OUT, TOKENS = 3, 2, 6


def _setup(family: str = "transformer", depth: int = 1, width: int = 8):
    model = build_family(family, D_IN, D_OUT, depth, width, TOKENS, {}, seed=0).double()
    x = torch.randn(2, TOKENS, D_IN, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1))
    target = torch.randn(2, TOKENS, D_OUT, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(2))
    return model, x, target


def test_the_float64_gradient_is_torchs_autograd_and_the_model_is_left_as_it_was():
    model, x, target = _setup(depth=2)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    got = gradient(model, x, target, "float64")
    model.eval()
    loss = ((model(x) - target) ** 2).mean()
    want = torch.autograd.grad(loss, list(model.parameters()))
    assert list(got) == [n for n, _ in model.named_parameters()]
    assert all(torch.equal(got[n], w) for n, w in zip(got, want, strict=True))
    model.train()
    gradient(model, x, target, "mp30")
    assert model.training and all(torch.equal(before[k], v)
                                  for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("family", ["transformer", "baseconv"])
def test_the_mp_gradient_equals_central_differences_in_mp100(family):
    """d/dh L(theta + h v) at 0 by central differences in mp100 (h = 1e-25, exact inputs
    theta +- h v fed to the traced loss) equals <dL/dtheta, v> of the mp100 gradient."""
    model, x, target = _setup(family)
    p = parse_precision("mp100")
    grads = gradient(model, x, target, p)
    loss = loss_program(model, x, target)
    params = dict(model.named_parameters())
    gen = torch.Generator().manual_seed(3)
    saved = flint.ctx.prec
    try:
        flint.ctx.prec = 400
        h = flint.arb(10) ** -25
        for _ in range(2):
            v = {n: torch.randn(params[n].shape, dtype=torch.float64, generator=gen)
                 for n in grads}

            def at(sign: int, v: dict[str, torch.Tensor] = v) -> flint.arb:
                inputs = [np.array([flint.arb(float(a)) + sign * h * flint.arb(float(b))
                                    for a, b in zip(params[n].detach().reshape(-1).tolist(),
                                                    v[n].reshape(-1).tolist(), strict=True)],
                                   dtype=object).reshape(params[n].shape) for n in grads]
                out = loss(*inputs, x, target, precision=p)
                return np.asarray(out.to_exact_numpy()).reshape(-1)[0]

            fd = (at(1) - at(-1)) / (2 * h)
            dot = sum(sum(g * flint.arb(float(b)) for g, b in zip(
                np.asarray(grads[n]).reshape(-1).tolist(), v[n].reshape(-1).tolist(),
                strict=True)) for n in grads)
            assert float(abs((fd - dot) / dot).mid()) < 1e-40
    finally:
        flint.ctx.prec = saved


def test_mp_gradients_are_mp_outputs_with_certified_digits_and_never_stale():
    model, x, target = _setup()
    g = gradient(model, x, target, "mp30")
    first = next(iter(g))
    assert isinstance(g[first], MPOutput) and g[first].shape == tuple(model.get_parameter(
        first).shape)
    assert g[first].digits >= 25
    f64 = gradient(model, x, target, "float64")
    assert error_summary(f64[first].numpy(), np.asarray(g[first])).relative < 1e-12
    with torch.no_grad():   # weights changed in place: the traced program reads them anew
        for q in model.parameters():
            q.mul_(1.5)
    again = gradient(model, x, target, "mp30")
    now = gradient(model, x, target, "float64")
    assert error_summary(now[first].numpy(), np.asarray(again[first])).relative < 1e-12
    assert error_summary(now[first].numpy(), f64[first].numpy()).relative > 1e-3


def test_a_formats_gradient_is_on_its_grid_and_floats_are_their_dtype():
    model, x, target = _setup()
    truth = gradient(model, x, target, "mp30")
    for name, dtype, bound in (("float32", torch.float32, 1e-5),
                               ("bfloat16", torch.bfloat16, 1e-1)):
        g = gradient(model, x, target, name)
        assert all(v.dtype == dtype for v in g.values())
        rel = error_summary(torch.cat([v.double().reshape(-1) for v in g.values()]).numpy(),
                            np.concatenate([np.asarray(t).reshape(-1) for t in truth.values()]))
        assert 1e-12 < rel.relative < bound, (name, rel.relative)
    p = parse_precision("float8_e4m3")
    g = gradient(model, x, target, p)
    for v in g.values():   # every op of the backward rounded: its results too
        assert torch.equal(round_values(v.to(torch.float64), p), v.to(torch.float64))


def test_bad_input_is_one_line():
    model, x, target = _setup()
    with pytest.raises(PrecisionError, match="not a per-module assignment"):
        gradient(model, x, target, "float64+mod[blocks.0]=bfloat16")
    frozen, _, _ = _setup()
    for q in frozen.parameters():
        q.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameter"):
        gradient(frozen, x, target, "float64")
    with pytest.raises(ValueError, match=r"target has shape \(2, 6, 3\), the model's output "
                                         r"\(2, 6, 2\)"):   # was a silent broadcast
        gradient(model, x, torch.zeros(2, 6, 3, dtype=torch.float64), "mp30")


def test_integer_inputs_differentiate_through_an_embedding():
    class Tokens(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.out = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.out(torch.tanh(self.embed(ids)))

    torch.manual_seed(0)
    model, ids = Tokens().double(), torch.randint(0, 10, (2, 5))
    target = torch.randn(2, 5, 2, dtype=torch.float64)
    exact, f64 = gradient(model, ids, target, "mp30"), gradient(model, ids, target, "float64")
    for name in ("embed.weight", "out.weight"):
        assert error_summary(f64[name].numpy(), np.asarray(exact[name])).relative < 1e-12


def test_the_command_prints_each_modules_gradient_error(capsys, tmp_path):
    argv = ["gradient", "transformer", "--d-in", "3", "--d-out", "2", "--depth", "1",
            "--width", "8", "--tokens", "6", "--batch", "2", "--reference", "mp30"]
    assert main([*argv, "--precisions", "float32,float64"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:-1]}
    assert {"inp", "blocks.0.mlp.fc", "(all)"} <= set(rows)
    f32, f64 = (float(v) for v in rows["(all)"][1:3])
    assert 1e-9 < f32 < 1e-5 and 1e-20 < f64 < 1e-12
    assert main([*argv, "--precisions", "bfloat16", "--plot", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").is_file() and (tmp_path / "g.svg").is_file()
    assert main([*argv, "--plot", str(tmp_path / "g.pdf")]) == 2
    assert main([*argv, "--reference", "float64"]) == 2
    assert main([*argv, "--precisions", "fp8"]) == 2
    assert "did you mean" in capsys.readouterr().err


SUITE = """name = "tp"
precisions = ["float64"]
seeds = [0]
[tasks.read]
task = "read"
dim = 4
n = 8
[models.transformer]
family = "transformer"
tasks = ["read"]
depth = 1
width = 8
layernorm = true
gradient_error = {flag}
test_size = 8
""" + ('train = {{ recipe = "cosine", lr = 3e-3, steps = 20, batch_size = 8, '
       'master_dtype = "none", dtype = ["float32", "bfloat16"] }}\n')


def test_a_suite_entry_measures_each_training_precisions_gradient_error_by_module(tmp_path):
    """``gradient_error = true`` (the train_precision suite): each job's records carry its
    training precision's gradient error by module at the initial and final weights, and the
    report shows the tables; unset, a job's id is what it was; a non-boolean is one line."""
    from probes.kinds.trained import job_config
    from probes.store.db import Store
    from probes.suite import SuiteError, load_suite
    from reports.build import build_report

    path = tmp_path / "tp.toml"
    path.write_text(SUITE.format(flag="true"))
    assert all(job_config(r.spec)["gradient_error"] for r in load_suite(str(path)).runs)
    db = tmp_path / "tp.db"
    assert main(["run", str(path), "--db", str(db), "--no-progress", "--no-report"]) == 0
    with Store(db, create=False) as store:
        rows = store.runs()
        measured = {r["config"]["train"]["dtype"]: {
            w: dict(r["result"]["gradient_error"][w]) for w in ("initial", "final")}
            for r in rows}
        order = [m for m, _ in rows[0]["result"]["gradient_error"]["final"]]
        assert order[0] == "(root)" and order[1] == "inp" and order[-1] == "(all)"
        assert set(measured) == {"float32", "bfloat16"}
        for when in ("initial", "final"):
            f32, bf16 = measured["float32"][when], measured["bfloat16"][when]
            assert {"inp", "blocks.0.mlp.fc", "out", "(all)"} <= set(f32)
            assert 1e-9 < f32["(all)"] < 1e-5 < 1e-3 < bf16["(all)"] < 1.0
        report = build_report(store, ["tp"], tmp_path / "rep")
    text = report.markdown.read_text()
    assert "bends each module's gradient" in text and "at the final weights" in text
    assert list((tmp_path / "rep" / "figures").glob("gradient-*.png"))
    path.write_text(SUITE.format(flag="false"))
    assert not any("gradient_error" in job_config(r.spec) for r in load_suite(str(path)).runs)
    path.write_text(SUITE.format(flag='"yes"'))
    with pytest.raises(SuiteError, match="'gradient_error' must be true or false"):
        load_suite(str(path))
