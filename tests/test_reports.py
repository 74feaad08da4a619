"""The report: deterministic, equal to the store, every claim listed, renders in Chromium."""

import csv
import math
import shutil
import subprocess
import tempfile

import pytest
from conftest import solver_store

from precision_cli.main import main
from reports.build import ReportError, build_report
from reports.claims import check_claims, load_claims
from reports.floor_cells import format_log10  # log10 in, text out
from results.store import RunRecord, Store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return solver_store(tmp_path_factory.mktemp("rep"), "ols_normal,ols_qr,cg,gd")


def test_report_is_deterministic(store_path, tmp_path):
    with Store(store_path) as store:
        a = build_report(store, None, tmp_path / "a")
        b = build_report(store, ["solvers"], tmp_path / "b")
    for name in ["report.md", "tables.tex", "solver_runs.csv", "claims.csv",
                 "solvers-ls_gauss.csv"]:
        assert (a.folder / name).read_bytes() == (b.folder / name).read_bytes(), name
    assert (a.folder / "report.html").stat().st_size > 50_000  # figures embedded


def test_report_numbers_equal_the_store(store_path, tmp_path):
    with Store(store_path) as store:
        rep = build_report(store, None, tmp_path)
        stored = {r["run_id"]: r for r in store.runs()}
    with open(rep.folder / "solver_runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(stored)
    for row in rows:
        ref = stored[row["run_id"]]
        for col in ("floor_log10", "log10_mse", "mse"):
            if ref[col] is None:
                assert row[col] == ""
            else:
                assert float(row[col]) == ref[col]
    # The Markdown pivot shows the stored floors, formatted.
    md = rep.markdown.read_text()
    qr = next(r for r in stored.values() if r["subject"] == "ols_qr"
              and r["task"] == "ls_kappa1e6" and r["precision"] == "float32")
    assert f"| ols_qr | {format_log10(qr['floor_log10'])} |" in md


def test_every_claim_is_listed_and_checked(store_path, tmp_path):
    with Store(store_path) as store:
        rep = build_report(store, None, tmp_path)
    text = (rep.folder / "claims.csv").read_text()
    for claim in load_claims():
        assert claim["id"] in text
    with Store(store_path) as store:
        verdicts = {c.id: c.verdict for c in check_claims(store.runs())}
    assert verdicts["001-ols-floor"] == "holds"
    assert verdicts["001-gd-floor"] == "holds"
    assert verdicts["000-ns-rate"] == "not measured"  # newton_schulz was not run here
    assert verdicts["001-read-affine"] == "not measured"


def test_claim_that_does_not_hold():
    row = {"suite": "solvers", "subject": "gd", "task": "ls_gauss", "precision": "float32",
           "status": "ok", "floor_log10": -9.0}
    verdicts = {c.id: c for c in check_claims([row])}
    assert verdicts["001-gd-floor"].verdict == "does not hold"
    assert verdicts["001-gd-floor"].measured == "MSE 1.0e-09"


def test_model_grid_tables_aggregate_seeds(tmp_path):
    with Store(tmp_path / "g.db") as store:
        for depth in (1, 2):
            for width in (8, 16):
                for seed, val in enumerate((-6.0, -8.0, -7.0)):
                    cfg = {"depth": depth, "width": width, "seed": seed,
                           "train_steps": 1000 * width, "layernorm": True}
                    dec = {"approximation": val - depth - 1, "rounding": -14.0}
                    store.write_run(RunRecord(
                        run_id=f"{depth}-{width}-{seed}", suite="prims", kind="trained",
                        subject="transformer", task="read", precision="float32", status="ok",
                        log10_mse=val - depth, config=cfg, result={"decomposition": dec}))
        rep = build_report(store, None, tmp_path / "out")
    md = rep.markdown.read_text()
    # depth 2: median of (-8, -10, -9) = -9, range [-10, -8]
    assert "| 2 | 1.0e-09 [1.0e-10, 1.0e-08] | 1.0e-09 [1.0e-10, 1.0e-08] |" in md
    assert "read / transformer +LN / float32: approximation error" in md
    assert "| 2 | 1.0e-10 [1.0e-11, 1.0e-09] |" in md  # approximation = total / 10 here
    assert "read / transformer +LN / float32: rounding error" in md
    assert (rep.folder / "grid-read-transformer+LN-float32.png").exists()
    assert (rep.folder / "grid-read-depth.png").exists()
    assert (rep.folder / "grid-read-length.png").exists()


def test_empty_store_and_unknown_suite(tmp_path, store_path, capsys):
    with Store(tmp_path / "empty.db") as store:
        with pytest.raises(ReportError, match="no runs yet"):
            build_report(store, None, tmp_path / "x")
    rc = main(["report", "--db", str(tmp_path / "empty.db"), "--out", str(tmp_path / "x")])
    assert rc == 2 and "no runs yet" in capsys.readouterr().err
    rc = main(["report", "--db", str(store_path), "--suite", "nope", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "no runs of suite nope" in err and "\n" not in err.strip()


def test_format_log10_below_float_range():
    assert format_log10(-400.0) == "1.0e-400"
    assert format_log10(-math.inf) == "0"
    assert format_log10(-14.0) == "1.0e-14"
    assert format_log10(None) == format_log10(math.nan) == "-"


def test_text_table_pads_every_cell_and_orders_precisions():
    from reports.text_table import precision_order, text_table

    precs = sorted(["mp50", "float64", "mp30", "bfloat16", "float32"], key=precision_order)
    assert precs == ["bfloat16", "float32", "float64", "mp30", "mp50"]
    assert text_table("T", ["a", "bb"], [["xyz", 1], ["", None]]) == (
        "T\na    bb  \n---  ----\nxyz  1   \n     None")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_html_renders_in_headless_chromium(store_path, tmp_path):
    with Store(store_path) as store:
        rep = build_report(store, None, tmp_path / "r")
    url = rep.html.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                              "--virtual-time-budget=5000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=120).stdout
    n_figs = rep.html.read_text().count("<img ")
    assert n_figs >= 4
    assert f'data-images-ok="{n_figs}/{n_figs}"' in dom  # every figure decoded and laid out
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,1600",
                        f"--screenshot={shot}", url], capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] == 1600 and pixels.shape[1] == 1200
    assert pixels[..., :3].std() > 0.05  # not a blank page


def test_newest_run_wins_when_a_suite_was_rerun_with_other_parameters(tmp_path):
    with Store(tmp_path / "n.db") as store:
        for run_id, floor in (("old", -10.0), ("new", -20.0)):
            store.write_run(RunRecord(
                run_id=run_id, suite="s", kind="solver", subject="gd", task="p",
                precision="float64", status="ok", floor_log10=floor, log10_mse=floor, steps=5,
                floor_index=3, config={"iters": run_id}))
        rep = build_report(store, None, tmp_path / "out")
    md = rep.markdown.read_text()
    assert "| gd | 1.0e-20 @3 |" in md and "1.0e-10" not in md


def test_trained_claims_use_best_per_task_config_filters_and_budgets():
    from reports.claims import check_claims

    def row(task, depth, steps, log10):
        return {"suite": "primitives", "subject": "transformer", "task": task,
                "precision": "float32", "status": "ok", "log10_mse": log10, "kind": "trained",
                "config": {"depth": depth, "train_steps": steps, "train": {"recipe": "paper"}}}

    def verdict(rows, claim_id):
        return next(c for c in check_claims(rows) if c.id == claim_id)

    long = 1_000_000
    good = [row("read", 2, long, -9.0), row("read", 2, long, -3.0), row("affine", 2, long, -8.5),
            row("affine", 4, long, -3.0)]          # depth 4 is filtered out by the config
    c = verdict(good, "001-read-affine")
    assert c.verdict == "holds" and "read MSE 1.0e-09" in c.measured
    bad = [row("read", 2, long, -9.0), row("affine", 2, long, -6.0)]
    assert verdict(bad, "001-read-affine").verdict == "does not hold"
    short = [row("read", 2, 2000, -2.0), row("affine", 2, 2000, -2.0)]
    c = verdict(short, "001-read-affine")
    assert c.verdict == "not measured" and "trained 2000 steps" in c.command


def test_relative_claim_pairs_full_with_diag_of_the_same_depth_and_seed():
    from reports.claims import check_claims

    def row(subject, variant, layers, seed, loss):
        return {"suite": "noisy_regression_lsa", "subject": subject, "task": f"layers={layers}",
                "precision": "float64", "status": "ok", "kind": "study",
                "config": {"params": {"variant": variant, "layers": layers,
                                      "noise": "uniform:5"}, "seed": seed},
                "result": {"metrics": {"loss": loss}}}

    def verdict(rows):
        return next(c for c in check_claims(rows) if c.id == "002-diag-full")

    diag = [row("uniform", "diag", 2, 0, 0.25), row("uniform", "diag", 4, 0, 0.08),
            row("uniform", "gdpp", 4, 0, 0.37), row("uniform", "diag", 4, 1, 0.5)]
    c = verdict(diag + [row("uniform_full", "full", 2, 0, 0.247),
                        row("uniform_full", "full", 4, 0, 0.075)])
    assert c.verdict == "holds"
    assert c.measured == "ratio layers=2 0.988; layers=4 0.938"
    # Full 0.5 at L = 4 seed 0 is 6x Diag (the GD++ and seed-1 runs are not its partners)
    assert verdict(diag + [row("uniform_full", "full", 4, 0, 0.5)]).verdict == "does not hold"
    # Full better than Diag by 30%: outside the claim's 25%
    assert verdict(diag + [row("uniform_full", "full", 4, 0, 0.056)]).verdict == "does not hold"
    # no Diag of the same depth: nothing to compare
    c = verdict(diag + [row("uniform_full", "full", 1, 0, 0.9)])
    assert c.verdict == "not measured" and "noisy_regression_lsa" in c.command


def test_study_figure_draws_sigma_series_against_sigma_and_tolerates_runs_without(tmp_path):
    """A store holding runs with and without the per-variance profile (an older study version)
    draws one figure: sigma_profile against sigma, no panel for the sigma axis itself."""
    import matplotlib
    matplotlib.use("Agg")
    from reports.study_table import study_series_figure

    runs = [{"run_id": "a", "task": "layers=1", "precision": "float64"},
            {"run_id": "b", "task": "layers=2", "precision": "float64"}]
    traces = {"a": {"sigma": [(0, 0.0), (1, 2.5), (2, 5.0)],
                    "sigma_profile": [(0, 0.9), (1, 0.4), (2, 0.5)],
                    "layer_loss": [(1, 0.9)]},
              "b": {"layer_loss": [(1, 0.9), (2, 0.25)]}}
    captured = {}
    import matplotlib.pyplot as plt
    real = plt.subplots

    def spy(*args, **kwargs):
        fig, axes = real(*args, **kwargs)
        captured["axes"] = axes
        return fig, axes

    plt.subplots = spy
    try:
        path = study_series_figure("uniform", runs, traces, tmp_path / "f.png")
    finally:
        plt.subplots = real
    assert path is not None and path.exists()
    axes = list(captured["axes"].flat)
    assert [ax.get_title() for ax in axes] == ["layer_loss", "sigma_profile"]
    line = axes[1].get_lines()[0]
    assert list(line.get_xdata()) == [0.0, 2.5, 5.0] and axes[1].get_xlabel() == "sigma"


def test_depth_panel_draws_precisions_only_where_they_differ_and_marks_training_limited():
    import pandas as pd

    from reports.plots import depth_panel

    recs = []
    for depth in (1, 2, 4):
        for width in (16, 32):
            for prec in ("float32", "float64", "mp50"):
                v = -3.0 - depth - width / 16
                if prec == "float32" and depth == 4 and width == 32:
                    v = -6.0                      # float32 rounding stops this one
                recs.append({"precision": prec, "depth": depth, "width": width,
                             "log10_mse": v, "converged": depth != 1})
    panel = depth_panel(pd.DataFrame(recs))
    assert panel["reference"] == "mp50"
    assert sorted(panel["lines"]) == [16, 32]
    assert list(panel["lines"][32].values) == [-6.0, -7.0, -9.0]
    assert panel["differing"] == {(32, "float32"): [(4, -6.0)]}
    assert panel["hollow"] == {16: [1], 32: [1]}
