"""The op census: every op of a module's graph, and all unsupported ones named at once
(``precision ops``, ``MPProgram``'s error, and the pre-check of ``precision probe``)."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

from precision.backends.interpreter import MPProgram, UnsupportedOpError
from precision.cli.main import main
from precision.op_census import census
from precision.precisions import parse_precision
from probes.census import census_for_factory

THREE_MISSING = textwrap.dedent('''
    import torch
    from torch import nn


    class Special(nn.Module):
        def __init__(self, d_in, d_out, width):
            super().__init__()
            self.inp = nn.Linear(d_in, width)
            self.out = nn.Linear(width, d_out)

        def forward(self, x):
            h = self.inp(x)
            h = torch.special.bessel_j0(h) + torch.special.i0e(h)
            return self.out(torch.special.erfcx(h))


    def special(d_in, d_out, depth, width, max_len=64):
        return Special(d_in, d_out, width)
''')
MISSING = ("aten.special_bessel_j0.default", "aten.special_i0e.default",
           "aten.special_erfcx.default")


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "special_model.py"
    path.write_text(THREE_MISSING)
    return f"{path}:special"


def test_census_counts_ops_and_marks_support(spec):
    c = census_for_factory(spec, d_in=3, d_out=2, depth=1, width=4, tokens=5)
    by_op = {u.op: u for u in c.ops}
    assert {op for op in MISSING} == {u.op for u in c.missing}
    assert by_op["aten.addmm.default"].supported and by_op["aten.addmm.default"].count == 2
    assert by_op["aten.special_i0e.default"].modules == ["<root> (Special)"]
    assert not c.ok and "3 ops" in c.summary()


def test_census_of_supported_module_is_ok():
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2)).double()
    c = census(model, torch.zeros(2, 5, 3, dtype=torch.float64))
    assert c.ok and all(u.supported for u in c.ops)
    assert "all supported in mpN" in c.table()


def test_precision_ops_names_all_three_missing_ops(spec, capsys):
    rc = main(["ops", spec, "--d-in", "3", "--d-out", "2", "--width", "4", "--tokens", "5"])
    out, err = capsys.readouterr()
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("precision: error: 3 ops")
    for op in MISSING:
        assert op in lines[0]
        assert op in out  # and in the census table on stdout
    assert "NO" in out and "aten.addmm.default" in out


def test_precision_ops_exit_zero_on_a_zoo_module(capsys):
    rc = main(["ops", "examples/zoo/moe.py:moe", "--d-in", "3", "--d-out", "2",
               "--depth", "1", "--width", "8", "--tokens", "6"])
    out, _ = capsys.readouterr()
    assert rc == 0
    assert "aten.topk.default" in out and "all supported in mpN" in out


def test_precision_ops_bad_factory_is_one_line(capsys):
    rc = main(["ops", "no_such_module_xyz:factory"])
    _, err = capsys.readouterr()
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_mp_program_error_names_every_missing_op(spec):
    from probes.factory import load_factory

    model = load_factory(spec)(3, 2, 1, 4).double()
    x = torch.zeros(1, 5, 3, dtype=torch.float64)
    with pytest.raises(UnsupportedOpError) as info:
        MPProgram(model, (x,))(x, precision=parse_precision("mp30"))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("3 ops")
    for op in MISSING:
        assert op in msg


def test_probe_stops_before_training_on_unsupported_ops(spec, tmp_path, capsys):
    db = tmp_path / "results.db"
    rc = main(["probe", spec, "--suite", "primitives", "--profile", "quick", "--tasks",
               "multiply", "--db", str(db), "--no-progress", "--no-report"])
    _, err = capsys.readouterr()
    assert rc == 2
    line = err.strip().splitlines()
    assert len(line) == 1 and all(op in line[0] for op in MISSING)
    assert not db.exists()  # nothing trained, nothing stored


BRANCHY = textwrap.dedent('''
    from torch import nn


    class Branchy(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.lin = nn.Linear(d_in, d_out)

        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: torch.export refuses it
                return self.lin(x)
            return -self.lin(x)


    def branchy(d_in, d_out, depth, width, max_len=64):
        return Branchy(d_in, d_out)
''')


def test_precision_ops_unexportable_module_is_one_line(tmp_path, capsys):
    path = tmp_path / "branchy_model.py"
    path.write_text(BRANCHY)
    rc = main(["ops", f"{path}:branchy", "--tokens", "4"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "torch.export failed on Branchy" in lines[0]
