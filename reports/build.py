"""Build the precision report of a store: read the store, write every format into a folder.

``build_report(store, suites, out)`` is what ``precision report`` and the end of
``precision run`` call. It reads only the store (and the claims shipped in
``reports/papers/claims.toml``) and writes, into ``out``::

    report.md        the report (figures linked from figures/)
    report.html      the same, one self-contained file (figures embedded)
    tables.tex       every table in booktabs
    figures/         each figure as NAME.png and NAME.svg
    tables/          one CSV per table (claims.csv, solvers-ls-gauss.csv, ...)
    data/            the stored numbers, one row per run (solver-runs.csv, model-runs.csv)

File names are sanitised labels (:mod:`reports.files`); every file is written atomically,
and the files of an earlier build in figures/, tables/ and data/ that this one did not write
are removed (a report of another store shows none of this one's figures).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from precision.provenance import provenance_line
from probes.store.atomic import expand_user
from probes.store.db import Store
from probes.store.records import result_of
from reports import plots
from reports.checks import CHECKS_TEXT, checks_pivot
from reports.data_version import left_out_note, newest_data_rows
from reports.files import (
    DATA,
    FIGURES,
    TABLES,
    FileNames,
    built_before,
    owned_subfolders,
    recording,
    remove_unwritten,
    write_text,
)
from reports.gradient_plot import gradient_figure
from reports.gradient_table import gradient_jobs, gradient_pivots, job_title
from reports.length_plot import length_figure, length_pivots, length_runs
from reports.localize_plot import localize_figure, localize_pivots, localize_runs
from reports.papers.claims import check_claims
from reports.papers.figures import side_by_side_section
from reports.render import (
    Section,
    render_csv,
    render_html,
    render_latex,
    render_markdown,
)
from reports.study_table import latest_runs, study_pivots, study_series_figure
from reports.tables import Pivot, grid_pivots, grid_runs, solver_pivots, solver_runs
from reports.text_table import precision_order
from reports.time_to_floor import time_to_floor_figure, time_to_floor_pivots


class ReportError(ValueError):
    """Nothing to report (empty store, unknown suite): one line for the CLI."""


@dataclass(frozen=True)
class Report:
    """Where the report went."""

    folder: Path
    markdown: Path
    html: Path
    latex: Path
    csv: list[Path]  # tables/*.csv, one per table, and data/*.csv, one row per run


def _claims_pivots(rows: list[dict], suites: list[str]) -> tuple[Pivot, Pivot]:
    """The claims about ``suites`` that the store measures (holds / does not hold, in either
    verdict) and those it does not, with the command that would measure them. Claims about
    trained runs carry two verdicts side by side: the paper's recipe and the engine."""
    claims = check_claims(rows, suites)
    frame = pd.DataFrame(
        [[c.claim, c.published, c.measured, c.verdict, c.engine_measured, c.engine_verdict,
          c.command] for c in claims],
        index=pd.Index([c.id for c in claims], name="claim"),
        columns=["what", "published", "measured (paper recipe)", "verdict (paper recipe)",
                 "measured (engine)", "verdict (engine)", "to measure"],
    )
    missing = ((frame["verdict (paper recipe)"] == "not measured")
               & frame["verdict (engine)"].isin(["not measured", "-"]))
    return (Pivot("claims", "Published claims this store measures (trained claims: the "
                  "paper's recipe at its budget and the second-order engine, side by side; "
                  "a verdict only from runs whose convergence check passed)",
                  frame[~missing].drop(columns="to measure")),
            Pivot("claims-not-measured", "Published claims about these suites that the store "
                  "does not measure yet: what its runs show so far (why no verdict) and the "
                  "command that measures each", frame[missing][
                      ["what", "published", "measured (paper recipe)", "measured (engine)",
                       "to measure"]]))


def build_report(store: Store, suites: list[str] | None, out: str | Path) -> Report:
    """Write the report of ``suites`` (all when None) of ``store`` into folder ``out``."""
    known = store.suites()
    if not known:
        raise ReportError(f"the store {store.path} has no runs yet; run "
                          "'precision run solvers' first")
    if suites:
        unknown = [s for s in suites if s not in known]
        if unknown:
            raise ReportError(f"no runs of suite {', '.join(unknown)} in {store.path} "
                              f"(suites there: {', '.join(known)})")
    chosen = sorted(suites or known)
    if str(out).strip() == "":
        raise ReportError("the report folder is empty text; name a folder (--out DIR)")
    folder = Path(out)
    try:
        folder = expand_user(out)
        folder.mkdir(parents=True, exist_ok=True)
        owned_subfolders(folder)   # real folders inside it, or nothing is written
        earlier = built_before(folder)
        with recording() as written:
            report = _write_report(store, known, chosen, folder)
        remove_unwritten(folder, earlier, written)   # an earlier build's figures of other runs
        return report
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise ReportError(f"cannot write the report to {folder}: "
                          f"{exc.strerror or exc}{where}") from None


def _provenance_paragraph(rows: list[dict[str, Any]]) -> str:
    """Where the runs were computed (torch, CPU kernels, BLAS, threads), with run counts:
    float digits differ between these, so a reader sees which machine made which numbers."""
    where = Counter(provenance_line(p) if isinstance(p := result_of(r).provenance, dict)
                    else "not recorded (run before provenance was stored)" for r in rows)
    return ("Computed with: " + "; ".join(f"{line} ({n} runs)" for line, n in
                                          sorted(where.items())) +
            ". Float32/float64 digits vary with the CPU's kernels (AVX-512, AVX2, default) and "
            "the BLAS; which digits are the same on every machine is stated in the toolkit's "
            "docs/reproducibility.md.")


def _write_report(store: Store, known: list[str], chosen: list[str], folder: Path) -> Report:
    """The report of suites ``chosen`` (``known``: every suite, for the claims check)."""
    rows, older = newest_data_rows([r for s in chosen for r in store.runs(suite=s)])
    statuses = Counter(r["status"] for r in rows)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    claims, unmeasured = _claims_pivots(
        newest_data_rows([r for s in known for r in store.runs(suite=s)])[0], chosen)
    verdicts = Counter(v for column in ("verdict (paper recipe)", "verdict (engine)")
                       for v in claims.frame[column] if v in ("holds", "does not hold"))
    n_claims = len(claims.frame) + len(unmeasured.frame)
    counted = (" (verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
               + ")") if verdicts else ""
    sections = [Section(
        "Summary",
        paragraphs=[
            f"Store {store.path.name}; suites {', '.join(chosen)}; {len(rows)} runs "
            f"({summary})." + (f" {left_out_note(older)}." if older else ""),
            "MSE floors are plateaus detected on per-step error traces against a certified "
            "high-precision truth computed from the inputs each subject received after "
            "rounding into its precision.",
            (f"Published claims about these suites: {n_claims}; {len(claims.frame)} measured"
             f"{counted}, {len(unmeasured.frame)} not measured yet; both tables at the end."
             if n_claims else "No published claim concerns these suites."),
            _provenance_paragraph(rows),
        ],
    )]

    broken = checks_pivot(rows)
    if broken is not None:   # first after the summary: nothing below is read before it
        sections.append(Section("Broken invariants", tables=[broken], paragraphs=[CHECKS_TEXT]))

    names = FileNames()
    figures = folder / FIGURES

    def series_of(rid: str, name: str) -> list[tuple[int, Any]]:
        """One stored trace of a run (empty when it has none)."""
        return store.series(rid, name).get(name, [])

    runs = solver_runs(rows)
    for pivot in solver_pivots(runs):
        suite, problem = pivot.meta["suite"], pivot.meta["problem"]
        sub = runs[(runs["suite"] == suite) & (runs["problem"] == problem)]
        sec = Section(f"{suite}: {problem}", tables=[pivot])
        series = {rid: store.series(rid, "log10_mse").get("log10_mse", [])
                  for rid in sub["run_id"]}
        stem = names.stem(suite, problem)
        trace = plots.solver_traces(problem, sub, series, figures / f"{stem}-traces.png")
        if trace is not None:
            sec.figures.append((f"{problem}: log10 MSE per iteration, one panel per iterative "
                                "solver, one line per seed, colour = precision", trace))
        floors = plots.solver_floors(problem, sub, figures / f"{stem}-floors.png")
        if floors is not None:
            sec.figures.append((f"{problem}: floor against precision, one line per solver "
                                "(median over seeds; bars: the seeds' range)", floors))
        sections.append(sec)

    grid = grid_runs(rows)
    pivots = grid_pivots(grid)
    ok = grid[grid["status"] == "ok"] if not grid.empty else grid
    for task in sorted({p.meta["task"] for p in pivots}):
        sec = Section(f"Models on {task}: test MSE against depth and width", figures_first=True,
                      tables=[p for p in pivots if p.meta["task"] == task])
        stem = names.stem("grid", task)
        line = plots.grid_lines(task, grid, figures / f"{stem}-depth.png")
        if line is not None:
            sec.figures.append((f"{task}: log10 test MSE against depth, a panel per model on "
                                "one shared axis, a line per width (hollow: training-limited); "
                                "grey: the float32 / float64 rounding levels", line))
        timed = time_to_floor_pivots(rows, task, series_of)
        sec.tables.extend(timed)
        clock = time_to_floor_figure(rows, task, series_of, figures / f"{stem}-time.png") \
            if timed else None
        if clock is not None:
            sec.figures.append((f"{task}: held-out log10 MSE against wall seconds of "
                                "training, a panel per model on one shared axis, a line per "
                                "depth and width (dotted: other seeds)", clock))
        trained = plots.training_precision(task, grid, figures / f"{stem}-training.png")
        if trained is not None:
            sec.figures.append((f"{task}: log10 test MSE against the precision the models "
                                "trained in, a line per model x depth x width x where its "
                                "weights were kept (dashed: in the format itself; hollow: "
                                "training-limited)", trained))
        length = plots.training_length(task, grid, figures / f"{stem}-length.png")
        if length is not None:
            sec.figures.append((f"{task}: log10 test MSE against training length", length))
        task_runs = ok[ok["task"] == task]
        for subject, g in task_runs.groupby("subject", sort=True):   # highest precision only:
            prec = max(g["precision"].unique(), key=precision_order)  # the tables have all
            stem = names.stem("heatmap", task, subject, prec)
            heat = plots.grid_heatmap(task, subject, prec, grid, figures / f"{stem}.png")
            if heat is not None:
                sec.figures.append((f"{task} / {subject} / {prec}: median log10 test MSE and "
                                    "its label by depth x width (one colour scale for the "
                                    "task)", heat))
        sections.append(sec)

    lengths = length_runs(rows)
    length_tables = length_pivots(lengths)
    if length_tables:
        sec = Section("Error against sequence length", figures_first=True, tables=length_tables,
                      paragraphs=["Each trained model's weights evaluated, without further "
                                  "training, on seeded inputs of every length, in every "
                                  "precision, against the same weights in mp100; the last "
                                  "column is how many digits of that reference are certain "
                                  "(its agreement with mp200 on one sequence)."])
        fig = length_figure(lengths, figures / f"{names.stem('lengths')}.png")
        if fig is not None:
            sec.figures.append(("log10 relative error against sequence length, a panel per "
                                "model, a line per precision (dotted: its unit roundoff)", fig))
        sections.append(sec)

    localized = localize_runs(rows)
    localize_tables = localize_pivots(localized)
    if localize_tables:
        sec = Section("Which modules limit the error", figures_first=True,
                      tables=localize_tables,
                      paragraphs=["`precision localize`: an untrained, seeded model on one "
                                  "seeded input, its units (modules that hold weights or "
                                  "compute themselves) each alone in the low precision with "
                                  "the rest in the reference (a), and each alone in the "
                                  "reference with the rest low (b); relative error against "
                                  "the mp100 truth. With a target, the units a greedy search "
                                  "keeps in the reference to reach it."])
        fig = localize_figure(localized, figures / f"{names.stem('localize')}.png")
        if fig is not None:
            sec.figures.append(("relative error per unit: red (a) only this unit low, blue "
                                "(b) only this unit in the reference; lines: all low, all in "
                                "the reference, the target; bold: kept by the search", fig))
        sections.append(sec)

    gradient_tables = gradient_pivots(rows)
    if gradient_tables:
        sec = Section(
            "How far each training precision bends each module's gradient",
            tables=gradient_tables,
            paragraphs=["For runs whose model entry sets `gradient_error = true`: the gradient "
                        "of the training loss (MSE of the prediction on a seeded batch) "
                        "computed in the training precision, every op of the forward and the "
                        "backward in it, against the same gradient in mp50, each module's "
                        "relative error (its own parameters' entries), at the seeded initial "
                        "weights and at the trained weights."])
        for key, columns in gradient_jobs(rows).items():
            fig = gradient_figure({c: m["final"] for c, m in columns.items()},
                                  job_title(key) + ", trained weights",
                                  figures / f"{names.stem('gradient', *map(str, key))}.png")
            if fig is not None:
                sec.figures.append((f"{job_title(key)}: each module's gradient error at the "
                                    "trained weights, a marker per training precision", fig))
        sections.append(sec)

    study_rows = [r for r in rows if r.get("kind") == "study"]
    for pivot in study_pivots(study_rows):
        sec = Section(pivot.title, tables=[pivot])
        runs_of = [r for r in latest_runs(study_rows) if r["suite"] == pivot.meta["suite"]
                   and r["subject"] == pivot.meta["entry"] and r["status"] == "ok"]
        traces = {r["run_id"]: store.series(r["run_id"]) for r in runs_of}
        stem = names.stem("study", pivot.meta["suite"], pivot.meta["entry"])
        fig = study_series_figure(pivot.meta["entry"], runs_of, traces, figures / f"{stem}.png")
        if fig is not None:
            sec.figures.append((f"{pivot.meta['entry']}: the traces the study stored, a panel "
                                "per trace, a line per grid point and precision", fig))
        sections.append(sec)

    side = side_by_side_section(rows, series_of,
                                figures, names)
    if side is not None:   # 001's figures redrawn, after the results, before the claims
        sections.append(side)
    if not claims.frame.empty:
        sections.append(Section("Published claims", tables=[claims]))
    if not unmeasured.frame.empty:
        sections.append(Section("Claims not measured yet", tables=[unmeasured]))
    title = "Precision report: " + ", ".join(chosen)
    csvs = render_csv(sections, folder / TABLES)
    for name, frame in (("solver-runs.csv", runs), ("model-runs.csv", grid),
                        ("length-runs.csv", lengths), ("localize-runs.csv", localized)):
        if not frame.empty:  # the stored numbers, long format, one row per run
            csvs.append(write_text(folder / DATA / name,
                                   frame.to_csv(index=False, lineterminator="\n")))
    tex = render_latex(sections, folder)
    page = render_html(title, sections, folder)
    md = render_markdown(title, sections, folder)   # last: its presence means "complete"
    return Report(folder, md, page, tex, csvs)
