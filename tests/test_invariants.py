"""The invariants every run must pass (precision/invariants.py): each rule on its own, then
through the whole path: a run that breaks one is stored as ``invalid`` (its numbers kept), a
set where a finer precision floors above a coarser one is flagged ``!`` in the tables and
listed in the report, and the claims skip both. The end-to-end test re-introduces the defect
of commit 1685864 (matrix products that keep their operands' radii) and shows the
invariant catching what no test caught then."""

from __future__ import annotations

import math
import sqlite3

import pytest

from precision.backends.mat_batch import MatBatch
from precision.cli.main import main
from precision.invariants import (
    FINER_ABOVE_DECADES,
    INVALID,
    RISE_DECADES,
    check_record,
    check_trace,
    checked,
    digits_shortfall,
    finer,
    inverted_runs,
)
from precision.precisions import parse_precision
from probes.store.db import RunRecord, Store
from reports.checks import checks_pivot
from reports.papers.claims import check_claims
from reports.solver_table import solver_tables

P = parse_precision


# --- rule 1: no rise after the floor ---------------------------------------------------------

def test_a_trace_that_climbs_back_from_its_lowest_value_breaks_rule_1():
    fall = [-1.0 - 2 * k for k in range(27)]                     # down to 1e-53
    rise = [-53.0 + 2 * k for k in range(27)] + [-1.0] * 20       # back to 1e-1, flat there
    found = check_trace(fall + rise, -1.0, P("mp30"))
    assert found is not None and found.rule == "trace_rise"
    assert "52.0 decades above it" in found.message
    assert check_trace(fall + [-53.0] * 20, -53.0, P("mp30")) is None


def test_rounding_jitter_and_exact_hits_do_not_break_rule_1():
    jitter = [-14.0 + (1.0 if k % 2 else -1.0) for k in range(60)]   # +-1 decade
    assert check_trace(jitter, -14.0, P("float32")) is None
    # an exact zero (-inf) counts as float32's u^2 (1e-14.4), not as a level reached
    assert check_trace([-2.0, -8.0, -math.inf, -13.5, -13.0, -13.2], -13.2,
                       P("float32")) is None
    # the threshold itself: RISE_DECADES above the lowest value passes, more does not
    assert check_trace([-10.0, -20.0, -20.0 + RISE_DECADES], -20.0 + RISE_DECADES,
                       P("mp30")) is None
    assert check_trace([-10.0, -20.0, -16.9], -16.9, P("mp30")) is not None
    # an exact hit then a floor 12 decades above mp30's u^2: the message names u^2, not -inf
    found = check_trace([-10.0, -math.inf, -50.0], -50.0, P("mp30"))
    assert found is not None and "reached 1e-62 " in found.message


# --- rule 2: an mpN reference holds its digits -----------------------------------------------

def test_an_mp_reference_certain_to_fewer_than_half_its_digits_breaks_rule_2():
    assert digits_shortfall(95.0, "mp100") is None
    found = digits_shortfall(14.0, "mp100")
    assert found is not None and found.rule == "digits"
    assert str(found) == ("invariant digits: the mp100 reference is certain to 14.0 digits, "
                          "fewer than 50 of its 100")
    assert digits_shortfall(3.0, "float64") is None              # only mpN promises digits
    record = RunRecord(run_id="r", suite="s", kind="trained", subject="m", task="read",
                       precision="float32", status="ok", result={"truth_digits": 14.0})
    (stored,) = checked([record])
    assert stored.status == INVALID and stored.error.startswith("invariant digits:")
    assert check_record(RunRecord(**{**record.__dict__, "result": {"truth_digits": 100.0}})) \
        is None


def test_an_mp_result_far_from_its_reference_breaks_rule_2():
    """A model evaluated in mp50 must agree with its mp100 reference to 25 digits when both
    compute under one cast policy: a trained record's rounding part (log10 MSE of f_mp50 -
    f_mp100) of -34 is 17 digits; -101 is 50.5. A length record (mp100 reference, casts kept
    in both) states its digits; mp100 and mp200 against mp100 measure the reference, not
    themselves, and are not checked."""
    def trained(precision: str, rounding: float) -> RunRecord:
        return RunRecord(run_id="r", suite="s", kind="trained", subject="m", task="read",
                         precision=precision, status="ok", result={
                             "decomposition": {"approximation": -6.0, "rounding": rounding},
                             "truth_digits": 100.0})
    found = check_record(trained("mp50+casts=promote", -34.0))
    assert str(found) == ("invariant digits: the mp50+casts=promote result agrees with the "
                          "mp100+casts=promote reference to 17.0 digits, fewer than 25 of its "
                          "50")
    assert check_record(trained("mp50+casts=promote", -101.0)) is None
    # under casts=keep, the model's own float32 islands round the result (a Bloom's softmax)
    assert check_record(trained("mp50", -34.0)) is None
    assert check_record(trained("mp50+casts=promote", -math.inf)) is None   # the reference's
    assert check_record(trained("float64", -32.0)) is None         # only mpN promises digits
    assert check_record(trained("mp200", -34.0)) is None
    length = RunRecord(run_id="l", suite="s", kind="length", subject="m", task="read",
                       precision="mp30", status="ok",
                       result={"reference": "mp100", "relative": 1e-9, "digits": 9.0,
                               "truth_digits": 99.0})
    assert check_record(length).rule == "digits"


# --- rule 3: finer is not worse ----------------------------------------------------------------

def test_finer_means_more_bits_and_at_least_the_range():
    assert finer(P("float64"), P("float32")) and finer(P("mp30"), P("float64"))
    assert finer(P("float32"), P("bfloat16")) and finer(P("float16"), P("float8_e4m3"))
    assert not finer(P("float32"), P("float64")) and not finer(P("float32"), P("float32"))
    # float16 has more bits than bfloat16 but a narrower range: neither is finer
    assert not finer(P("float16"), P("bfloat16")) and not finer(P("bfloat16"), P("float16"))
    # MX scales and other rounding modes have no order of fineness with these
    assert not finer(P("float32"), P("mxfp8_e4m3"))
    assert not finer(P("float64"), P("float32:sr+seed=1"))


def _row(rid: str, precision: str, floor: float, seed: int = 0, status: str = "ok",
         subject: str = "heavy_ball") -> dict:
    return {"run_id": rid, "kind": "solver", "subject": subject, "task": "ls_gauss",
            "precision": precision, "status": status, "floor_log10": floor,
            "config": {"solver": subject, "precision": precision,
                       "problem": {"kind": "gaussian", "seed": seed}}}


def test_a_finer_precision_flooring_above_a_coarser_one_flags_its_set():
    rows = [_row("a", "mp30", -1.0), _row("b", "float64", -32.0), _row("c", "float32", -14.0),
            _row("d", "mp30", -61.0, seed=1), _row("e", "float64", -32.0, seed=1)]
    flagged = inverted_runs(rows)
    assert set(flagged) == {"a", "b", "c"}                       # seed 1's set passes
    assert str(flagged["a"]).startswith("mp30 floors at 1e-1.0, ")
    # within FINER_ABOVE_DECADES: two precisions at one approximation floor pass
    near = [_row("x", "float64", -6.0 + FINER_ABOVE_DECADES), _row("y", "float32", -6.0)]
    assert inverted_runs(near) == {}
    # a failed or invalid run takes no part
    assert inverted_runs([_row("a", "mp30", -1.0, status=INVALID), rows[1]]) == {}


def test_a_coarser_precision_that_rounds_away_an_approximation_term_is_no_inversion():
    """The LayerNorm READ head's error is t^2 / (4 K^2) relative, at float64's rounding:
    float64 floors 1.4 decades below the exact arithmetic (mp50 = mp100), a real effect that
    rule 3 leaves alone; the float32 run of the set floors far above both."""
    from precision.constructions.measure import run_construction

    problem = {"kind": "read", "dim": 20, "seq_len": 40, "seed": 0}
    rows = []
    for name in ("float32", "float64", "mp50", "mp100"):
        res = run_construction("transformer_read_ln", name, problem, {})
        assert res.status == "ok"
        rows.append(_row(name, name, res.floor.log10_level, subject="transformer_read_ln"))
    level = {r["precision"]: r["floor_log10"] for r in rows}
    assert level["mp50"] == level["mp100"]                      # the exact arithmetic's
    assert 0.5 < level["mp50"] - level["float64"] < FINER_ABOVE_DECADES
    assert inverted_runs(rows) == {}


def _store(path, rows):
    with Store(path) as store:
        for r in rows:
            store.write_run(RunRecord(
                run_id=r["run_id"], suite="solvers", kind="solver", subject=r["subject"],
                task=r["task"], precision=r["precision"], status=r["status"],
                floor_log10=r["floor_log10"], log10_mse=r["floor_log10"], steps=1,
                config=r["config"], result={}))


def test_tables_report_and_claims_show_a_flagged_set(tmp_path):
    db = tmp_path / "s.db"
    _store(db, [_row("a", "mp30", -1.0), _row("b", "float64", -32.0),
                _row("g1", "mp30", -61.0, subject="gd"), _row("g2", "float64", -32.0,
                                                               subject="gd")])
    with Store(db) as store:
        rows = store.runs()
    text = solver_tables(rows)
    line = next(x for x in text.splitlines() if x.startswith("heavy_ball"))
    assert line.split() == ["heavy_ball", "1.0e-32", "!", "1.0e-01", "!"]
    assert next(x for x in text.splitlines() if x.startswith("gd ")).count("!") == 0
    assert "'!' = on the same problem and seed, a finer precision floors" in text
    pivot = checks_pivot(rows)
    assert pivot is not None and list(pivot.frame.index) == ["heavy_ball", "heavy_ball"]
    assert set(pivot.frame["rule"]) == {"finer_above"}
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Broken invariants" in md and "finer_above" in md
    # without the flag, the gd rows alone still give a clean table: no legend line
    assert "'!'" not in solver_tables([r for r in rows if r["subject"] == "gd"])
    for claim in check_claims(rows):    # no claim reads a flagged run as a measurement
        assert "heavy_ball" not in claim.measured or "invariant" in claim.measured


_SUITE = """
name = "rise"
precisions = ["mp30", "float64"]
seeds = [0]

[problems.ls_gauss]
task = "least_squares"
kind = "gaussian"
dim = 5
n_samples = 20

[solvers.heavy_ball]
problems = ["ls_gauss"]
params = { iters = 400 }
"""


def test_the_radius_defect_of_1685864_is_stored_invalid_not_ok(tmp_path, monkeypatch, capsys):
    """Products that keep their operands' radii (1685864's premise: the classical product
    depends on midpoints only) make heavy ball's mp30 trace fall to ~1e-54 and climb back:
    the run is stored as ``invalid``, named in the sweep's reasons and shown in the table;
    the float64 run of the same problem stays ``ok``."""
    def radii_kept(self):                         # the defect, on every product shape
        return self.mats
    monkeypatch.setattr(MatBatch, "product_mats", radii_kept)
    suite = tmp_path / "rise.toml"
    suite.write_text(_SUITE)
    db = tmp_path / "r.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    captured = capsys.readouterr()
    con = sqlite3.connect(db)
    status = dict(con.execute("SELECT precision, status FROM runs"))
    error = con.execute("SELECT error FROM runs WHERE precision = 'mp30'").fetchone()[0]
    con.close()
    assert status == {"mp30": INVALID, "float64": "ok"}
    assert error.startswith("invariant trace_rise: the trace reached 1e-")
    assert "heavy_ball ls_gauss: invariant trace_rise" in captured.err
    line = next(x for x in captured.out.splitlines() if x.startswith("heavy_ball"))
    assert "invalid" in line
    assert "'invalid' = the run broke an invariant" in captured.out
    assert "  heavy_ball ls_gauss mp30 seed 0: trace_rise: the trace reached 1e-" in captured.out


@pytest.mark.parametrize("status", ["failed", "diverged"])
def test_runs_without_a_measurement_are_left_as_they_are(status):
    record = RunRecord(run_id="r", suite="s", kind="solver", subject="gd", task="t",
                       precision="mp30", status=status, floor_log10=-1.0,
                       series={"log10_mse": [(0, -1.0), (1, -50.0), (2, -1.0)]})
    assert checked([record]) == [record]


def test_the_python_api_says_invalid_too(monkeypatch):
    """``run_solver`` outside a sweep checks its trace as well: the defect's heavy ball in mp30
    is ``invalid`` with its numbers kept, and the fixed code's is ``ok`` near mp30's u^2."""
    from precision.solvers.measure import run_solver

    problem = {"kind": "gaussian", "dim": 5, "n_samples": 20, "seed": 0}
    good = run_solver("heavy_ball", "mp30", problem, {"iters": 400})
    assert good.status == "ok" and good.floor.log10_level < -58
    monkeypatch.setattr(MatBatch, "product_mats", lambda self: self.mats)
    bad = run_solver("heavy_ball", "mp30", problem, {"iters": 400})
    assert bad.status == INVALID and bad.error.startswith("invariant trace_rise:")
    assert bad.floor is not None and bad.floor.log10_level > -5 and len(bad.steps) == 401


def test_the_report_names_the_seed_of_any_kind_of_run():
    """A trained job's seed sits at the top of its config, a solver's in its problem: the
    checks table reads each through the record schema."""
    rows = [{"run_id": "t", "kind": "trained", "subject": "m", "task": "read",
             "precision": "mp50+casts=promote", "status": INVALID,
             "error": "invariant digits: the mp50 result ...", "config": {"seed": 3}},
            {"run_id": "s", "kind": "solver", "subject": "gd", "task": "ls_gauss",
             "precision": "mp30", "status": INVALID, "error": "invariant trace_rise: ...",
             "config": {"problem": {"seed": 2}}}]
    pivot = checks_pivot(rows)
    assert list(pivot.frame["seed"]) == ["2", "3"] and list(pivot.frame["rule"]) == [
        "trace_rise", "digits"]
