"""Build the precision report of a store: read the store, write every format into a folder.

``build_report(store, suites, out)`` is what ``precision report`` and the end of
``precision run`` call. It reads only the store (and the claims shipped in
``reports/claims.toml``), and writes ``report.md`` + PNGs, ``report.html`` (self-contained),
one CSV per table plus ``runs.csv`` (the stored numbers, long format) and ``tables.tex``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from precision.provenance import provenance_line
from reports import plots
from reports.claims import check_claims
from reports.render import (
    Section,
    render_csv,
    render_html,
    render_latex,
    render_markdown,
)
from reports.study_table import latest_runs, study_pivots, study_series_figure
from reports.tables import Pivot, grid_pivots, grid_runs, solver_pivots, solver_runs
from results.store import Store


class ReportError(ValueError):
    """Nothing to report (empty store, unknown suite): one line for the CLI."""


@dataclass(frozen=True)
class Report:
    """Where the report went."""

    folder: Path
    markdown: Path
    html: Path
    latex: Path
    csv: list[Path]  # one per table, plus solver_runs.csv / model_runs.csv


def _claims_pivot(rows: list[dict]) -> Pivot:
    claims = check_claims(rows)
    frame = pd.DataFrame(
        [[c.claim, c.published, c.measured, c.verdict, c.command] for c in claims],
        index=pd.Index([c.id for c in claims], name="claim"),
        columns=["what", "published", "measured", "verdict", "to measure"],
    )
    return Pivot("claims", "Published claims against the store", frame)


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
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return _write_report(store, known, chosen, folder)
    except OSError as exc:
        raise ReportError(f"cannot write the report to {folder}: "
                          f"{exc.strerror or exc}") from None


def _provenance_paragraph(rows: list[dict[str, Any]]) -> str:
    """Where the runs were computed (torch, CPU kernels, BLAS, threads), with run counts:
    float digits differ between these, so a reader sees which machine made which numbers."""
    where = Counter(provenance_line(p) if isinstance(p := (r.get("result") or {}).get(
        "provenance"), dict) else "not recorded (run before provenance was stored)"
        for r in rows)
    return ("Computed with: " + "; ".join(f"{line} ({n} runs)" for line, n in
                                          sorted(where.items())) +
            ". Float32/float64 digits vary with the CPU's kernels (AVX-512, AVX2, default) and "
            "the BLAS; mpN digits do not.")


def _write_report(store: Store, known: list[str], chosen: list[str], folder: Path) -> Report:
    """The report of suites ``chosen`` (``known``: every suite, for the claims check)."""
    rows = [r for s in chosen for r in store.runs(suite=s)]
    statuses = Counter(r["status"] for r in rows)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    claims = _claims_pivot([r for s in known for r in store.runs(suite=s)])
    verdicts = Counter(claims.frame["verdict"])
    sections = [Section(
        "Summary",
        paragraphs=[
            f"Store {store.path.name}; suites {', '.join(chosen)}; {len(rows)} runs "
            f"({summary}).",
            "MSE floors are plateaus detected on per-step error traces against a certified "
            "high-precision truth computed from the inputs each subject received after "
            "rounding into its precision.",
            "Claims: " + ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items())) + ".",
            _provenance_paragraph(rows),
        ],
        tables=[claims],
    )]

    runs = solver_runs(rows)
    for pivot in solver_pivots(runs):
        suite, problem = pivot.meta["suite"], pivot.meta["problem"]
        sub = runs[(runs["suite"] == suite) & (runs["problem"] == problem)]
        sec = Section(f"{suite}: {problem}", tables=[pivot])
        series = {rid: store.series(rid, "log10_mse").get("log10_mse", [])
                  for rid in sub["run_id"]}
        trace = plots.solver_traces(problem, sub, series, folder / f"{pivot.key}-traces.png")
        if trace is not None:
            sec.figures.append((f"{problem}: log10 MSE per iteration, one line per precision",
                                trace))
        floors = plots.solver_floors(problem, sub, folder / f"{pivot.key}-floors.png")
        if floors is not None:
            sec.figures.append((f"{problem}: floor against precision", floors))
        sections.append(sec)

    grid = grid_runs(rows)
    pivots = grid_pivots(grid)
    if pivots:
        sec = Section("Models: MSE against depth and width", tables=pivots)
        for task in sorted(grid["task"].unique()):
            line = plots.grid_lines(task, grid, folder / f"grid-{task}-depth.png")
            if line is not None:
                sec.figures.append((f"{task}: log10 MSE against depth", line))
            length = plots.training_length(task, grid, folder / f"grid-{task}-length.png")
            if length is not None:
                sec.figures.append((f"{task}: log10 MSE against training length", length))
        ok = grid[grid["status"] == "ok"]
        for (task, subject, prec), _ in ok.groupby(["task", "subject", "precision"], sort=True):
            key = f"grid-{task}-{subject}-{prec}".replace(" ", "")
            heat = plots.grid_heatmap(task, subject, prec, grid, folder / f"{key}.png")
            if heat is not None:
                sec.figures.append((f"{task} / {subject} / {prec}: MSE heatmap", heat))
        sections.append(sec)

    study_rows = [r for r in rows if r.get("kind") == "study"]
    for pivot in study_pivots(study_rows):
        sec = Section(pivot.title, tables=[pivot])
        runs_of = [r for r in latest_runs(study_rows) if r["suite"] == pivot.meta["suite"]
                   and r["subject"] == pivot.meta["entry"] and r["status"] == "ok"]
        traces = {r["run_id"]: store.series(r["run_id"]) for r in runs_of}
        fig = study_series_figure(pivot.meta["entry"], runs_of, traces,
                                  folder / f"{pivot.key}.png")
        if fig is not None:
            sec.figures.append((f"{pivot.meta['entry']}: traces", fig))
        sections.append(sec)

    title = "Precision report: " + ", ".join(chosen)
    md = render_markdown(title, sections, folder)
    page = render_html(title, sections, folder)
    tex = render_latex(sections, folder)
    csvs = render_csv(sections, folder)
    for name, frame in (("solver_runs.csv", runs), ("model_runs.csv", grid)):
        if not frame.empty:  # the stored numbers, long format, one row per run
            frame.to_csv(folder / name, index=False, lineterminator="\n")
            csvs.append(folder / name)
    return Report(folder, md, page, tex, csvs)
