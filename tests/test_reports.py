"""The report: deterministic, equal to the store, every claim listed, renders in Chromium."""

import csv
import math
import re
import shutil
import subprocess
import tempfile

import pytest
from conftest import solver_store

from precision.cli.main import main
from probes.store.db import RunRecord, Store
from reports.build import ReportError, build_report
from reports.floor_cells import format_log10  # log10 in, text out
from reports.papers.claims import check_claims, load_claims


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return solver_store(tmp_path_factory.mktemp("rep"), "ols_normal,ols_qr,cg,gd")


@pytest.fixture(scope="module")
def report(store_path, tmp_path_factory):
    """The store's report (every suite) in a folder of its own, built once (~4 s) for the
    tests that only read it; none writes into it."""
    with Store(store_path) as store:
        return build_report(store, None, tmp_path_factory.mktemp("report"))


def test_report_is_deterministic(store_path, report, tmp_path):
    a = report
    with Store(store_path) as store:
        b = build_report(store, ["solvers"], tmp_path / "b")
    for name in ["report.md", "report.html", "tables.tex", "data/solver-runs.csv",
                 "tables/claims.csv", "tables/solvers-ls-gauss.csv",
                 "figures/solvers-ls-gauss-traces.png", "figures/solvers-ls-gauss-traces.svg"]:
        assert (a.folder / name).read_bytes() == (b.folder / name).read_bytes(), name
    assert (a.folder / "report.html").stat().st_size > 50_000  # figures embedded


def test_report_layout_figures_tables_data_in_their_folders(report):
    rep = report
    top = sorted(p.name for p in rep.folder.iterdir())
    assert top == [".report-files", "data", "figures", "report.html", "report.md", "tables",
                   "tables.tex"]
    figures = sorted(p.name for p in (rep.folder / "figures").iterdir())
    pngs = [f for f in figures if f.endswith(".png")]
    assert pngs and figures == sorted(pngs + [f[:-4] + ".svg" for f in pngs])  # PNG + SVG
    for name in figures + [p.name for p in (rep.folder / "tables").iterdir()]:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*\.(png|svg|csv)", name), name
    assert rep.csv == sorted(rep.csv, key=lambda p: p.parent.name != "tables")
    assert {p.parent.name for p in rep.csv} == {"tables", "data"}
    md = rep.markdown.read_text()
    assert "](figures/solvers-ls-gauss-traces.png)" in md
    assert "[SVG](figures/solvers-ls-gauss-traces.svg)" in md
    assert (rep.folder / "figures" / "solvers-ls-gauss-traces.svg").read_text().startswith(
        "<?xml")
    assert '<div class="table-wrap">' in rep.html.read_text()


def test_a_report_into_a_used_folder_keeps_none_of_the_earlier_figures(store_path, tmp_path):
    """A second report into the same folder (another store, other runs) leaves none of the
    files the earlier build wrote in figures/, tables/ or data/ (it showed a first store's
    figures inside a report about the second); a file the user put there, of any kind, stays.
    A report folder from before the manifest counts its figures/, tables/ and data/ files."""
    with Store(store_path) as store:
        build_report(store, None, tmp_path)
    stale = [tmp_path / "figures" / "grid-multiply-old.png", tmp_path / "tables" / "old.csv",
             tmp_path / "data" / "model-runs.csv"]
    for path in stale:   # as an earlier build of another store wrote them
        path.write_bytes(b"from another store")
    manifest = tmp_path / ".report-files"
    manifest.write_text(manifest.read_text() + "".join(
        f"{p.relative_to(tmp_path).as_posix()}\n" for p in stale))
    mine = [tmp_path / "figures" / "notes.txt", tmp_path / "figures" / "my-plot.png"]
    for path in mine:
        path.write_text("the user's")
    with Store(store_path) as store:
        rep = build_report(store, None, tmp_path)
    assert not any(path.exists() for path in stale)
    assert all(path.read_text() == "the user's" for path in mine)
    for link in re.findall(r"\]\((figures/[^)]+)\)", rep.markdown.read_text()):
        assert (tmp_path / link).is_file(), link   # what the report shows is all there
    manifest.unlink()   # a report folder from before the manifest
    stale[0].write_bytes(b"older")
    with Store(store_path) as store:
        build_report(store, None, tmp_path)
    assert not stale[0].exists() and manifest.is_file()
    other = tmp_path / "not-a-report"   # no report.md, no manifest: nothing is removed
    (other / "figures").mkdir(parents=True)
    (other / "figures" / "plot.png").write_text("the user's")
    with Store(store_path) as store:
        build_report(store, None, other)
    assert (other / "figures" / "plot.png").read_text() == "the user's"


@pytest.mark.parametrize("sub", ["data", "figures", "tables"])
def test_a_report_never_writes_or_removes_through_a_symlinked_subfolder(store_path, tmp_path,
                                                                        sub):
    """A report folder whose data/ (figures/, tables/) is a symlink to the user's own folder:
    the clean-up of files an earlier build wrote followed the link and deleted the user's
    files there, and the build wrote its CSVs through it. Now the build refuses in one line,
    before it writes or removes anything, and the linked folder is untouched."""
    out = tmp_path / "rep"
    with Store(store_path) as store:
        build_report(store, None, out)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    names = ["precious.csv", "holiday.png", "solver-runs.csv", "paper-fig1.svg"]
    for name in names:
        (theirs / name).write_text("the user's")
    manifest = out / ".report-files"   # an earlier build that listed files of those names
    manifest.write_text(manifest.read_text() + "".join(f"{sub}/{n}\n" for n in names))
    shutil.rmtree(out / sub)
    (out / sub).symlink_to(theirs, target_is_directory=True)
    before = manifest.read_text()
    with Store(store_path) as store, pytest.raises(ReportError) as err:
        build_report(store, None, out)
    assert "symlink" in str(err.value) and "\n" not in str(err.value)
    assert sorted(p.name for p in theirs.iterdir()) == sorted(names)
    assert all((theirs / n).read_text() == "the user's" for n in names)
    assert manifest.read_text() == before
    # a manifest line naming a file through an outside path is never followed either
    (out / sub).unlink()
    (out / sub).mkdir()
    manifest.write_text(f"{sub}/../../theirs/precious.csv\n/{theirs}/holiday.png\n")
    with Store(store_path) as store:
        build_report(store, None, out)
    assert all((theirs / n).read_text() == "the user's" for n in names)


def test_report_numbers_equal_the_store(store_path, report):
    rep = report
    with Store(store_path) as store:
        stored = {r["run_id"]: r for r in store.runs()}
    with open(rep.folder / "data" / "solver-runs.csv") as fh:
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


def test_every_claim_is_listed_and_checked(store_path, report):
    rep = report
    with Store(store_path) as store:
        suites = set(store.suites())
    text = (rep.folder / "tables" / "claims.csv").read_text()
    text += (rep.folder / "tables" / "claims-not-measured.csv").read_text()
    ours = [c for c in load_claims() if "check" in c
            and set(c["check"]["suite"] if isinstance(c["check"]["suite"], list)
                    else [c["check"]["suite"]]) & suites]
    assert ours and len(ours) < len(load_claims())
    for claim in load_claims():   # the claims about the store's suites, and no others
        assert (claim["id"] in text) == (claim in ours), claim["id"]
    md = rep.markdown.read_text()   # the claims come after the results, counted up front
    assert f"Published claims about these suites: {len(ours)}" in md
    assert md.index("## Published claims") > md.index("ols_qr")
    with Store(store_path) as store:
        verdicts = {c.id: c.verdict for c in check_claims(store.runs())}
    assert verdicts["001-ols-floor"] == "holds"
    assert verdicts["001-gd-floor"] == "holds"
    assert verdicts["000-ns-rate"] == "not measured"  # newton_schulz was not run here
    assert verdicts["001-read-affine"] == "not measured"


def test_trained_claims_have_a_paper_recipe_and_an_engine_verdict():
    """Side by side: the paper's Adam held to its budget, and the engine at any budget; a
    run whose convergence check failed gives no verdict."""

    def run(recipe, steps, log10, converged=True):
        return {"suite": "primitives", "kind": "trained", "subject": "transformer",
                "task": "read", "precision": "float32", "status": "ok", "log10_mse": log10,
                "config": {"depth": 2, "train": {"recipe": recipe, "steps": steps}},
                "result": {"train_converged": converged}}

    def claim(rows):
        return next(c for c in check_claims(rows, ["primitives"])
                    if c.id == "001-read-affine")

    c = claim([run("engine", 200, -9.0)])
    assert (c.verdict, c.engine_verdict) == ("not measured", "holds")
    assert "paper budget" in c.measured and "MSE" in c.engine_measured
    c = claim([run("engine", 200, -6.0), run("paper", 200_000, -9.5)])
    assert (c.verdict, c.engine_verdict) == ("holds", "does not hold")
    c = claim([run("engine", 200, -9.0, converged=False)])
    assert c.engine_verdict == "not measured" and "convergence check" in c.engine_measured
    c = claim([run("paper", 200_000, -9.5)])     # the engine column names what it needs
    assert c.engine_measured == "no engine run of transformer on read / affine, depth 2, float32"
    assert all(c.engine_verdict == "-" for c in check_claims([], ["solvers"]))
    assert {c.id for c in check_claims([], ["solvers"])} == {
        c["id"] for c in load_claims() if c.get("check", {}).get("suite") == "solvers"}


def test_a_training_limited_run_at_its_precisions_rounding_floor_gives_a_verdict():
    """A T run whose float32 error is float32's rounding (the weights' own error is 5
    decades lower) cannot gain from more training in float32: BaseConv MULTIPLY at 4.6e-14
    refutes "~1e-9, not machine precision". The same run with the rounding part below the
    approximation part (or without a decomposition) leaves the verdict open."""

    def run(approximation, rounding, log10):
        return {"suite": "primitives", "kind": "trained", "subject": "baseconv",
                "task": "multiply", "precision": "float32", "status": "ok",
                "log10_mse": log10, "config": {"depth": 1, "train": {"recipe": "engine"}},
                "result": {"train_converged": False, "decomposition": {
                    "approximation": approximation, "rounding": rounding}}}

    def engine(rows):
        c = next(c for c in check_claims(rows, ["primitives"]) if c.id == "001-bc-multiply")
        return c.engine_verdict, c.engine_measured

    verdict, measured = engine([run(-18.57, -13.33, -13.33)])
    assert verdict == "does not hold" and "rounding floor (counted)" in measured
    assert "4.7e-14" in measured or "4.6e-14" in measured
    assert engine([run(-13.0, -13.33, -13.0)])[0] == "not measured"   # 0.33 decades apart
    assert engine([run(-9.0, -13.0, -9.0)])[0] == "not measured"      # weights dominate
    assert engine([run(None, None, -13.0)])[0] == "not measured"


def test_a_best_above_the_window_refutes_only_when_no_run_of_its_task_is_still_training():
    """``aggregate = "best"``: an A run above the window refutes "BaseConv < 1e-9 on READ"
    only when no other READ run is training-limited (it may still reach the window); a best
    below the window refutes whatever the training-limited runs would reach."""

    def run(log10, converged=True, task="read"):
        return {"suite": "primitives", "kind": "trained", "subject": "baseconv",
                "task": task, "precision": "float32", "status": "ok", "log10_mse": log10,
                "config": {"depth": 2, "train": {"recipe": "engine"}},
                "result": {"train_converged": converged}}

    def engine(rows):
        return next(c for c in check_claims(rows, ["primitives"])
                    if c.id == "001-primitives-bc").engine_verdict

    assert engine([run(-5.5)]) == "does not hold"
    assert engine([run(-5.5), run(-7.9, converged=False)]) == "not measured"
    assert engine([run(-5.5), run(-7.9, converged=False, task="affine")]) == "does not hold"
    assert engine([run(-16.0), run(-7.9, converged=False)]) == "does not hold"
    assert engine([run(-10.0), run(-7.9, converged=False)]) == "not measured"


def test_a_claim_that_does_not_hold_names_the_runs_outside_its_range():
    """Every selected run must lie in the range: the measured text shows the median and the
    range, and names the runs the verdict turned on (001 Fig. 5: the causal construction's
    float32 floor above ~1e-14 while the non-causal one is inside)."""

    def row(subject, log10):
        return {"suite": "constructions", "kind": "construction", "subject": subject,
                "task": "ls_gauss5", "precision": "float32", "status": "ok",
                "floor_log10": log10}

    c = next(c for c in check_claims([row("baseconv_gd", -12.0),
                                      row("baseconv_gd_noncausal", -13.2)])
             if c.id == "001-bc-construction")
    assert c.verdict == "does not hold"
    assert c.measured.endswith("; outside the published range: baseconv_gd ls_gauss5 float32")
    c = next(c for c in check_claims([row("baseconv_gd", -13.0),
                                      row("baseconv_gd_noncausal", -13.2)])
             if c.id == "001-bc-construction")
    assert c.verdict == "holds" and "outside" not in c.measured


def test_claim_that_does_not_hold():
    row = {"suite": "solvers", "kind": "solver", "subject": "gd", "task": "ls_gauss",
           "precision": "float32", "status": "ok", "floor_log10": -9.0}
    verdicts = {c.id: c for c in check_claims([row])}
    assert verdicts["001-gd-floor"].verdict == "does not hold"
    assert verdicts["001-gd-floor"].measured == "MSE 1.0e-09"


def test_model_grid_tables_aggregate_seeds(tmp_path):
    with Store(tmp_path / "g.db") as store:
        for depth in (1, 2):
            for width in (8, 16):
                for seed, val in enumerate((-6.0, -8.0, -7.0)):
                    cfg = {"depth": depth, "width": width, "seed": seed,
                           "train": {"steps": 1000 * width}, "model_options": {"layernorm": True}}
                    dec = {"approximation": val - depth - 1, "rounding": -14.0}
                    store.write_run(RunRecord(
                        run_id=f"{depth}-{width}-{seed}", suite="prims", kind="trained",
                        subject="transformer", task="read", precision="float32", status="ok",
                        log10_mse=val - depth, config=cfg, result={"decomposition": dec}))
        rep = build_report(store, None, tmp_path / "out")
    md = rep.markdown.read_text()
    # depth 2: median of (-8, -10, -9) = -9, range [-10, -8]; approximation-limited (A)
    # one table for the task: MSE, approximation (= total / 10 here) and rounding parts
    assert ("| transformer, LN | 2 | 16 | 1.0e-09 [1.0e-10, 1.0e-08] A | "
            "1.0e-10 [1.0e-11, 1.0e-09] | 1.0e-14 [1.0e-14, 1.0e-14] |") in md
    assert md.count("| model | depth | width | float32 | approximation | rounding float32 |") == 1
    figures = rep.folder / "figures"
    assert (figures / "heatmap-read-transformer-ln-float32.png").exists()
    assert (figures / "grid-read-depth.png").exists()
    assert (figures / "grid-read-length.png").exists()
    tables = rep.folder / "tables"
    assert sorted(p.name for p in tables.glob("grid-*.csv")) == ["grid-read.csv"]


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
def test_html_renders_in_headless_chromium(report, tmp_path):
    rep = report
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
    from reports.papers.claims import check_claims

    def row(task, depth, steps, log10):
        return {"suite": "primitives", "subject": "transformer", "task": task,
                "precision": "float32", "status": "ok", "log10_mse": log10, "kind": "trained",
                "config": {"depth": depth, "train": {"recipe": "paper", "steps": steps}}}

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
    from reports.papers.claims import check_claims

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


def test_learned_baseconv_claim_compares_orders_of_magnitude_with_the_same_cell():
    """001 Fig. 10: each BaseConv run against the Transformer of the same depth, width and
    recipe, as a log10 difference (orders of magnitude), not a ratio of logarithms."""
    from reports.papers.claims import check_claims

    def row(subject, depth, log10, recipe="paper", steps=1_000_000):
        return {"suite": "least_squares", "subject": subject, "task": "ls_fixed_n",
                "precision": "float32", "status": "ok", "log10_mse": log10, "kind": "trained",
                "config": {"depth": depth, "width": 64,
                           "train": {"recipe": recipe, "steps": steps}},
                "result": {"train_converged": True}}

    def claim(rows):
        return next(c for c in check_claims(rows) if c.id == "001-learned-bc-ls")

    tf = [row("transformer", 4, -7.0), row("transformer", 12, -7.5),
          row("transformer", 12, -3.0, recipe="engine", steps=1000)]
    c = claim(tf + [row("baseconv", 4, -5.0), row("baseconv", 12, -5.2)])
    assert c.verdict == "holds"
    assert c.measured == "difference depth=4 2; depth=12 2.3"
    # BaseConv better than the Transformer of its cell: the claim does not hold
    assert claim(tf + [row("baseconv", 12, -8.0)]).verdict == "does not hold"
    # the engine's BaseConv pairs with the engine's Transformer only (-1 vs -3: 2 orders)
    c = claim(tf + [row("baseconv", 12, -1.0, recipe="engine", steps=1000)])
    assert (c.verdict, c.engine_verdict, c.engine_measured) == (
        "not measured", "holds", "difference depth=12 2")


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
    assert list(line.get_xdata()) == [0.0, 2.5, 5.0]
    assert axes[1].get_xlabel() == "noise level sigma"
    assert axes[0].get_xlabel() == "layer" and axes[0].get_ylabel() == "layer loss"


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


HOSTILE = ["a/b", "A/B", "a-b", "nul\x00 new\nline", "ü" * 200 + "/$\\frac{1}{0}$ % & # {} .."]


def _hostile_store(path):
    """Runs stored under names a report must survive (written through SQL, as an older
    version without name validation would have left them)."""
    import sqlite3

    with Store(path) as store:
        for i, _ in enumerate(HOSTILE):
            store.write_run(RunRecord(
                run_id=f"s{i}", suite="s", kind="solver", subject=f"solver{i}", task=f"p{i}",
                precision="float64", status="ok", floor_log10=-30.0 - i, log10_mse=-30.0,
                steps=3, floor_index=2, config={"problem": {"seed": 0}},
                series={"log10_mse": [0.0, -20.0, -30.0 - i]}))
            store.write_run(RunRecord(
                run_id=f"m{i}", suite="s", kind="trained", subject=f"model{i}", task="read",
                precision="float32", status="ok", log10_mse=-5.0 - i,
                config={"depth": 1, "width": 8, "seed": 0, "model_options": {"layernorm": True}}))
            store.write_run(RunRecord(
                run_id=f"t{i}", suite="s", kind="study", subject=f"entry{i}", task="k=1",
                precision="float64", status="ok",
                config={"study": "x.y", "seed": 0},
                result={"primary": "err", "metrics": {"err": 0.5}},
                series={"gap": [1.0, 1e-10]}))
    con = sqlite3.connect(path)
    for i, name in enumerate(HOSTILE):
        con.execute("UPDATE runs SET task = ? WHERE run_id = ?", (name, f"s{i}"))
        con.execute("UPDATE runs SET subject = ? WHERE run_id IN (?, ?)", (name, f"m{i}", f"t{i}"))
    con.execute("DELETE FROM runs WHERE run_id IN ('t0', 't1', 't2', 't3', 'm0', 'm1', 'm2', "
                "'m3')")   # fewer figures, a faster test
    con.commit()
    con.close()


def test_a_report_never_fails_on_a_name_in_the_store(tmp_path):
    db = tmp_path / "hostile.db"
    _hostile_store(db)
    before = db.read_bytes()
    with Store(db) as store:
        assert {r["task"] for r in store.runs() if r["kind"] == "solver"} == set(HOSTILE)
        rep = build_report(store, None, tmp_path / "out")
    assert db.read_bytes() == before                  # the report only read the store
    names = [p for sub in ("figures", "tables", "data") for p in (rep.folder / sub).iterdir()]
    stems = [p.name for p in names]
    assert len(stems) == len(set(stems))
    for p in names:        # every file readable-named, ASCII, at most 100 bytes
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*\.(png|svg|csv)", p.name), p.name
        assert len(p.name) <= 100
    # a/b, A/B and a-b read the same after sanitising: three files, not one overwritten
    traces = [s for s in stems if s.startswith("s-a-b-") and s.endswith("-traces.png")]
    assert len(traces) == 3, stems
    md = rep.markdown.read_text()
    assert "\x00" not in md and "## s: nul  new line" in md
    assert "| solver0 | 1.0e-30 @2 |" in md   # the table under the hostile problem name
    assert '<div class="table-wrap">' in rep.html.read_text()


def test_report_into_an_unwritable_folder_is_one_line_and_leaves_the_store(tmp_path, capsys):
    db = tmp_path / "s.db"
    _hostile_store(db)
    before = db.read_bytes()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")   # a folder that cannot be made, even by root
    rc = main(["report", "--db", str(db), "--out", str(blocker / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write the report to" in err and err.count("\n") == 1, err
    assert "Not a directory" in err and "Traceback" not in err
    assert db.read_bytes() == before and blocker.read_text() == "not a folder"


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    from reports.files import atomic_write, write_text

    target = write_text(tmp_path / "report.md", "old")

    def fail(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_file_names_are_short_readable_and_unique():
    from reports.files import FileNames, slug

    assert slug("solvers", "ls_gauss") == "solvers-ls-gauss"
    assert slug("grid", "read", "transformer, LN, gauss-newton, trained in float64") == (
        "grid-read-transformer-ln-gauss-newton-trained-in-float64")
    assert slug("Über/Straße") == "uber-strae"
    long = slug("x" * 400)
    assert len(long) <= 80 and re.fullmatch(r"x+-[0-9a-f]{8}", long)
    assert re.fullmatch(r"x-[0-9a-f]{8}", slug("\x00/"))
    names = FileNames()
    first, second = names.stem("a/b"), names.stem("A-B")
    assert first == "a-b" and second.startswith("a-b-") and second != first
    assert names.stem("a/b") == first          # the same key, the same name


def test_latex_text_tables_give_every_column_a_width() -> None:
    """The LaTeX column spec of a wrapped text table has one entry per column (the index
    too): a short spec breaks the table in LaTeX."""
    import re

    from reports.build import _claims_pivots
    from reports.render import TEXT_TABLES, latex_table

    claims, _ = _claims_pivots([{"suite": "solvers", "kind": "solver", "subject": "gd",
                                 "task": "ls_gauss", "precision": "float32", "status": "ok",
                                 "floor_log10": -9.0}], ["solvers"])
    tex = latex_table(claims)
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}", tex).group(1)
    assert len(re.findall(r"p\{", spec)) == len(claims.frame.columns) + 1
    assert len(re.findall(r"p\{", TEXT_TABLES["claims"])) == len(claims.frame.columns) + 1


def test_precisions_of_as_many_bits_sort_by_name_whatever_the_set_order():
    """float8_e4m3 and mxfp8_e4m3 both have 4 bits: their columns came in a set's order,
    which Python's string hashing changes from one process to the next."""
    from reports.text_table import precision_order

    names = ["mxfp8_e4m3", "mp50", "float8_e4m3", "float32"]
    want = ["float8_e4m3", "mxfp8_e4m3", "float32", "mp50"]
    assert sorted(names, key=precision_order) == want
    assert sorted(reversed(names), key=precision_order) == want


def _overlapping_tick_labels(fig) -> list[str]:
    """The x tick labels of ``fig``'s axes (those inside the axis range) that overlap their
    neighbour, as drawn."""
    renderer = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        lo, hi = sorted(ax.get_xlim())
        shown = [(t.get_window_extent(renderer), t.get_text()) for t in ax.get_xticklabels()
                 if t.get_visible() and t.get_text() and lo <= t.get_position()[0] <= hi]
        shown.sort(key=lambda pair: pair[0].x0)
        bad += [f"{a}|{b}" for (box_a, a), (box_b, b) in zip(shown, shown[1:], strict=False)
                if box_a.x1 > box_b.x0]
    return bad


def test_iteration_tick_labels_never_run_together(tmp_path, monkeypatch):
    """A solver trace panel of 7200 iterations (GD's quick profile) labels its axis with
    ticks that do not overlap (they read '0 800 1600240032004000...')."""
    import pandas as pd

    from reports import plots

    seen = []
    real_save = plots._save

    def checked_save(fig, path):
        fig.canvas.draw()
        seen.append(_overlapping_tick_labels(fig))
        return real_save(fig, path)

    monkeypatch.setattr(plots, "_save", checked_save)
    runs = pd.DataFrame([{"problem": "ls", "solver": s, "precision": p, "run_id": f"{s}{p}",
                          "steps": 7200}
                         for s in ("gd", "pgd", "heavy_ball") for p in ("float32", "mp30")])
    series = {r: [(i, -i / 100.0) for i in range(0, 7201, 40)] for r in runs["run_id"]}
    assert plots.solver_traces("ls", runs, series, tmp_path / "t.png") is not None
    assert seen == [[]], seen


def test_every_precision_has_its_own_look_in_every_figure():
    """Colour, marker and dash keyed by the precision's name: the shipped suites' precisions
    all differ in look (float8_e4m3 and mxfp8_e4m3 shared marker, dash and colour in the
    depth plot), and a name looks the same whatever else a figure holds."""
    from reports import precision_style as style

    looks = {name: (style.colour(name), style.marker(name), style.dash(name))
             for name in style.FIXED}
    assert len(set(looks.values())) == len(looks)
    assert len({style.marker(n) for n in ("float8_e4m3", "mxfp8_e4m3")}) == 2
    assert style.colour("float8_e4m3:sr+seed=1") == style.colour("float8_e4m3:sr+seed=1")
    # every shipped precision its own colour (the solver traces draw them all solid: float64
    # and mp50 shared tab:blue there), and any two names differ in colour or trace line
    assert len({style.colour(n) for n in style.FIXED}) == len(style.FIXED)
    names = [*style.FIXED, "e4m3", "float8_e4m3:sr", "bfloat16:sr", "mp200", "e5m10",
             "mxfp6_e3m2", "float32+mod[*.mlp]=bfloat16", "int4_g128"]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert (style.colour(a), style.trace_line(a)) != (style.colour(b),
                                                              style.trace_line(b)), (a, b)


def test_table_csvs_hold_numbers_not_printed_strings():
    """A table's CSV splits each printed cell into its numbers: value, ±spread, @step and
    the note (label) in columns of their own ('2.1e-02 ±0.3 @3', '4.8e-07 T' were strings)."""
    import pandas as pd

    from reports.render import numeric_frame

    frame = pd.DataFrame({"solver": ["cg", "gd", "nesterov"],
                          "float32": ["2.1e-02 ±0.3 @3", "4.8e-07 T", "failed 1/3"],
                          "mp30": ["1.2e-60", "-", "0"]})
    out = numeric_frame(frame)
    assert list(out.columns) == ["solver", "float32", "float32 ±", "float32 @",
                                 "float32 note", "mp30", "mp30 note"]
    assert out["float32"].tolist()[:2] == [0.021, 4.8e-07] and out["float32"][2] is None
    assert out["float32 ±"][0] == 0.3 and out["float32 @"][0] == 3
    assert out["float32 note"].tolist() == ["", "T", "failed 1/3"]
    assert out["mp30"].tolist() == [1.2e-60, None, 0.0] and out["solver"].tolist()[0] == "cg"


def test_text_columns_wrap_left_aligned_numbers_stay_right():
    """A column of sentences ('Claims not measured yet') is left-aligned and wraps in HTML
    (it was right-aligned on one line, cut off at the page's edge); numbers stay right."""
    import pandas as pd

    from reports.render import html_table
    from reports.tables import Pivot

    frame = pd.DataFrame({"claim": ["001-read-affine"],
                          "what": ["2-layer Transformer on READ and AFFINE (D=20, N=40)"],
                          "float32": ["2.1e-02 ±0.3 @3"]}).set_index("claim")
    page = html_table(Pivot(frame=frame, title="t", key="claims-not-measured"))
    assert '<td class="t">2-layer Transformer' in page and '<th class="t">what</th>' in page
    assert "<td>2.1e-02 ±0.3 @3</td>" in page


def test_a_verdict_from_cells_smaller_than_the_papers_says_so():
    """001 trained at width 64 (App. D: n_embd 64): a verdict whose runs include width-32
    cells says so in its row; a claim file with a malformed paper_size is refused."""
    from pathlib import Path

    from reports.papers.claims import check_problem

    shipped = Path(__file__).resolve().parents[1] / "reports" / "stores" / "primitives_floor.db"
    with Store(shipped, create=False, read_only=True) as store:
        rows = store.runs()
    (bc,) = [c for c in check_claims(rows) if c.id == "001-bc-multiply"]
    assert bc.engine_verdict == "does not hold"
    assert bc.engine_measured.endswith("its runs include width 32, below the paper's 64")
    wide = [r for r in rows if r["config"]["width"] == 64]
    (bc64,) = [c for c in check_claims(wide) if c.id == "001-bc-multiply"]
    assert bc64.engine_verdict == "does not hold" and "below the paper" not in bc64.engine_measured
    check = dict(next(c for c in load_claims() if c["id"] == "001-bc-multiply")["check"])
    assert check_problem({**check, "paper_size": {"heads": 2}}) is not None
    assert check_problem({**check, "paper_size": {"width": 0}}) is not None
    assert check_problem(check) is None
