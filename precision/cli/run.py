"""``precision run SUITE``: compute every run of a suite missing from the store, then print
its floor tables and refresh its report.

Everything is checked -- the options, the suite, a user factory's module (in a child
process), the report folder, the store (intact and writable) -- before anything is computed,
so no work is lost to an error that could have been reported first. The options, the checks
and the sweep after them are shared with ``precision probe`` (:mod:`precision.cli.probe`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precision.cli.common import (
    JOBS_CEILING,
    JOBS_PER_CPU,
    Progress,
    UsageError,
    add_db_option,
    csv_names,
    max_jobs,
    real,
    whole,
    writable_folder,
)
from precision.precisions import ALIASES_TEXT, CAST_POLICIES
from precision.text_numbers import is_whole, shown
from probes.store.atomic import expand_user
from probes.store.db import Store

if TYPE_CHECKING:   # the modules that import torch load with the command, not with --help
    from probes.run import RunOptions
    from probes.runner import SweepSummary
    from probes.suite import Suite
    from reports.build import Report

#: Exit code of a ``run`` whose slice ended with trainings paused (EX_TEMPFAIL: run it again).
EXIT_PAUSED = 75


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``run`` subcommand on ``sub`` (the main parser's subparsers)."""
    run = sub.add_parser("run", help="run a probe suite and store its results",
                         description="Compute every run of SUITE missing from the store, "
                         "then print its floor tables.")
    run.add_argument("suite", help="a shipped suite name (see 'precision list') or a .toml path")
    add_run_options(run, solvers=True)
    return run


def add_run_options(run: argparse.ArgumentParser, *, solvers: bool) -> None:
    """The options of ``run``, in its order; ``probe`` takes them all but ``--solvers``."""
    add_db_option(run)
    run.add_argument("--profile", default=None, help="budget profile defined in the suite")
    run.add_argument("--precisions", default=None,
                     help="comma-separated precisions replacing the suite's (e.g. float32,mp100; "
                     f"{ALIASES_TEXT})")
    if solvers:
        run.add_argument("--solvers", default=None,
                         help="comma-separated subset of the suite's solvers")
    _add_compute_options(run)
    _add_training_options(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--report-dir", default="report",
                     help="the suite's report is refreshed in REPORT_DIR/SUITE (default report)")
    run.add_argument("--no-report", action="store_true", help="do not write the report")


def _add_compute_options(run: argparse.ArgumentParser) -> None:
    """Where the runs compute: ``--jobs``, ``--executor``, ``--address``."""
    run.add_argument("--jobs", type=whole, default=1,
                     help="worker processes (default 1: compute in this process; at most "
                     f"{JOBS_PER_CPU} per CPU, {max_jobs()} here, and never above {JOBS_CEILING})")
    run.add_argument("--executor", choices=["local", "dask"], default="local",
                     help="local: this process or a pool of --jobs processes (default); "
                     "dask: a Dask LocalCluster of --jobs workers, or --address")
    run.add_argument("--address", default=None,
                     help="with --executor dask: a running scheduler (tcp://host:8786)")


def _add_training_options(run: argparse.ArgumentParser) -> None:
    """How trained models train and are evaluated: weights, checkpoints, device, limits."""
    run.add_argument("--save-weights", default=None, metavar="DIR",
                     help="keep trained weights in DIR/<job id>.safetensors instead of "
                     "beside the store (STORE.weights/): a job whose weights are there is "
                     "measured from them, not trained again")
    run.add_argument("--checkpoints", default=None, metavar="DIR",
                     help="keep each trained job's training state in DIR instead of beside "
                     "the store (STORE.checkpoints/; every minute, at the end of its Adam "
                     "phase and when done): a killed, interrupted or paused run goes on from "
                     "it when the same command runs again")
    run.add_argument("--no-checkpoints", action="store_true",
                     help="keep no training state (a killed training starts again)")
    run.add_argument("--slice", type=real, default=None, metavar="SECONDS",
                     help="pause every training still going SECONDS after "
                     "the command started (nothing is stored for it; exit code 75: run the "
                     "same command again to go on)")
    run.add_argument("--device", default=None,
                     help="where trained models train and evaluate their float precisions: "
                     "cpu or cuda[:N] (replaces the suite's 'device'; mpN runs on the CPU)")
    run.add_argument("--time-limit", type=real, default=None, metavar="SECONDS",
                     help="stop a run after SECONDS and store it as 'timeout' (replaces the "
                     "suite's time_limit; default: none for built-in runs, 3600 s for a "
                     "user factory's)")
    run.add_argument("--lengths", default=None, metavar="L1,L2,...",
                     help="also evaluate every trained job's weights at these sequence lengths "
                     "(e.g. 16,64,256,1024), each precision against mp100: records of kind "
                     "'length' and a plot of error against length in the report")
    run.add_argument("--casts", choices=CAST_POLICIES, default=None,
                     help="cast policy of every evaluation precision: keep (the default: a "
                     "model's own float32 casts round to float32 in every precision) or "
                     "promote (every cast computes in the evaluation precision)")


def main(args: argparse.Namespace) -> int:
    """``precision run``: every option and the suite checked, then the sweep."""
    from probes.suite import load_suite, suite_with_lengths

    check_run_args(args)
    lengths = parse_lengths(args.lengths)
    suite = load_suite(
        args.suite,
        profile=args.profile,
        precisions=csv_names(args.precisions, "--precisions"),
        casts=args.casts,
        solvers=csv_names(args.solvers, "--solvers"),
        device=args.device,
        expand=lengths is None,
    )
    suite = suite_with_lengths(suite, lengths)
    check_factories(suite, args, census=False)
    print_lookalike_notes(suite)
    return run_loaded(suite, args)


def print_lookalike_notes(suite: Any) -> None:
    """One line on stderr, before anything is computed, for each custom ``eXmY`` precision
    of the suite that has a named format's field widths but another range (``e4m3`` is not
    ``float8_e4m3``): a typo that would otherwise run (and store) another format."""
    from precision.precisions import lookalike_note

    names = dict.fromkeys(p for run in suite.runs for p in run.precisions)
    for p in names:
        note = lookalike_note(p)
        if note:
            print(f"precision: note: {note}", file=sys.stderr)


def check_run_args(args: argparse.Namespace) -> None:
    """The options of ``run`` / ``probe`` that need no suite: checked before it is loaded."""
    top = max_jobs()
    if not 1 <= args.jobs <= top:
        raise UsageError(f"--jobs must be at least 1 and at most {top} ({JOBS_PER_CPU} per CPU "
                         f"of this machine, at most {JOBS_CEILING}), got {args.jobs}")
    if args.address and args.executor != "dask":
        raise UsageError("--address needs --executor dask")
    if args.executor == "dask":
        try:  # now, not after the suite is expanded and the store created
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError("--executor dask needs the 'distributed' package, which is not "
                             "installed: install the [dask] extra (pip install -e '.[dask]')"
                             ) from None


def parse_lengths(text: str | None) -> list[int] | None:
    """The sequence lengths of ``--lengths 16,64,256`` (None when not given; their range
    is checked with the suite)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(is_whole(t) for t in items):
        raise UsageError(f"--lengths: give comma-separated positive integers (e.g. "
                         f"16,64,256) in ASCII digits, not {shown(text)}")
    return [int(t) for t in items]


def check_time_limit(args: argparse.Namespace) -> None:
    """``--time-limit`` is a positive number of seconds (or not given)."""
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and
                                            args.time_limit > 0):
        raise UsageError(f"--time-limit must be a positive number of seconds, "
                         f"not {args.time_limit:g}")


def check_factories(suite: Suite, args: argparse.Namespace, census: bool,
                    sample: bool = False) -> None:
    """A suite's user factories are imported, called and (``census``) exported in a child
    process before anything is computed: one that cannot build its module -- it raises,
    exits, crashes or hangs past the time limit -- is a one-line error (exit 2), nothing
    stored; with ``sample``, one that cannot evaluate one sample in each of its precisions
    too (the op, graph node and module named), and where its casts round below a precision
    is printed. What fails later, during a run, is that run's ``failed`` / ``timeout``
    records."""
    from probes.census import check_factories as check_in_child
    from probes.factory import is_factory_spec

    check_time_limit(args)
    if not any(is_factory_spec(e.family) for e in suite.models):
        return   # no user code
    notes: list[str] = []
    problem = check_in_child(list(suite.runs), census=census, sample=sample,
                             time_limit=args.time_limit, notes=notes)
    if problem:
        raise UsageError(problem)
    if notes:
        print("\n".join(["casts (one sample, before training):", *notes]), flush=True)


def run_loaded(suite: Suite, args: argparse.Namespace) -> int:
    """Check the report folder, the run options and the store, compute the runs of ``suite``
    missing from the store, print its tables and a summary; the exit code."""
    from probes.runner import pending_runs
    from reports.console import floor_tables
    from reports.data_version import left_out_note, newest_data_rows

    report_folder = _report_folder(suite, args)
    options = _run_options(args)
    with Store(args.db) as store:
        store.check_writable()  # a damaged or read-only store fails here, before the work
        todo, skipped = pending_runs(suite, store)
        print(f"suite {suite.name}: {len(todo) + skipped} runs, {skipped} already in "
              f"{args.db}, {len(todo)} to compute", file=sys.stderr)
        progress = Progress(len(todo), shown=not args.no_progress)
        summary = _sweep(suite, store, args, options, progress)
        rows, older = newest_data_rows(store.runs(suite=suite.name))
        if older:
            print(f"precision: note: {left_out_note(older)}", file=sys.stderr)
        report = _build_report(store, suite, report_folder, args.db)
    _remove_if_empty(options.checkpoint_dir if args.checkpoints is None else None)
    print(floor_tables(rows))
    _print_summary(summary, report, progress.weights_errors, args)
    return _exit_code(summary)


def _remove_if_empty(folder: str | None) -> None:
    """The default checkpoint folder, removed when the sweep left nothing in it (each job's
    checkpoint is deleted once its records are stored)."""
    if folder is None:
        return
    try:
        os.rmdir(folder)
    except OSError:
        pass   # absent, or it holds a paused or killed training's state


def _report_folder(suite: Suite, args: argparse.Namespace) -> Path | None:
    """REPORT_DIR/SUITE, created now (None with ``--no-report``)."""
    if args.no_report:
        return None
    try:
        folder = expand_user(args.report_dir) / suite.name
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {Path(args.report_dir) / suite.name}: "
                         f"{exc.strerror or exc} (use --report-dir or --no-report)") from None
    return folder


def _run_options(args: argparse.Namespace) -> RunOptions:
    """How the runs compute: the executor, the time limit, the weights and checkpoint folders
    (created and checked writable now) and the wall-clock time at which trainings pause
    (``--slice``)."""
    from probes.run import RunOptions, checkpoints_folder, weights_folder

    check_time_limit(args)
    weights_dir = writable_folder("--save-weights", args.save_weights)
    if args.no_checkpoints and args.checkpoints is not None:
        raise UsageError("give --checkpoints DIR or --no-checkpoints, not both")
    checkpoint_dir = writable_folder("--checkpoints", args.checkpoints)
    if checkpoint_dir is None and not args.no_checkpoints:   # beside the store, made on use
        checkpoint_dir = os.path.abspath(expand_user(checkpoints_folder(args.db)))
        if os.path.lexists(checkpoint_dir) and not os.path.isdir(checkpoint_dir):
            raise UsageError(f"{checkpoint_dir} (where trainings keep their state) is not a "
                             "folder: move it, or give --checkpoints DIR or --no-checkpoints")
    args.checkpoint_dir = checkpoint_dir
    pause_at = None
    if args.slice is not None:
        import time

        if checkpoint_dir is None:
            raise UsageError("--slice needs checkpoints (where paused trainings wait); drop "
                             "--no-checkpoints")
        if not (math.isfinite(args.slice) and args.slice >= 0):
            raise UsageError(f"--slice must be a number of seconds >= 0, not {args.slice:g}")
        pause_at = time.time() + args.slice
    if weights_dir is None:   # trained weights are kept beside the store: trained once
        weights_dir = weights_folder(args.db)
    return RunOptions(executor=args.executor, jobs=args.jobs, address=args.address,
                      time_limit=args.time_limit, weights_dir=weights_dir,
                      checkpoint_dir=checkpoint_dir, pause_at=pause_at)


def _sweep(suite: Suite, store: Store, args: argparse.Namespace, options: RunOptions,
           progress: Progress) -> SweepSummary:
    """The one call of ``run_suite``: the missing runs computed and stored."""
    from probes.runner import SweepInterrupted, run_suite

    try:
        return run_suite(suite, store, progress=progress, options=options)
    except SweepInterrupted as exc:
        exc.db = args.db  # type: ignore[attr-defined]
        raise
    finally:
        progress.close()


def _build_report(store: Store, suite: Suite, folder: Path | None, db: str) -> Report | None:
    """The suite's report written into ``folder`` (None when there is none)."""
    if folder is None:
        return None
    from reports.build import ReportError, build_report

    try:
        return build_report(store, [suite.name], folder)
    except ReportError as exc:
        raise UsageError(f"{exc} (the runs are stored in {db})") from None


def _print_summary(summary: SweepSummary, report: Report | None, weights_errors: list[str],
                   args: argparse.Namespace) -> None:
    """What was computed and reused, what paused, where the report and the store are."""
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "none new"
    n_records = sum(summary.statuses.values())
    if n_records != summary.computed:  # a trained job stores a record per precision
        statuses = f"{n_records} records: {statuses}"
    print(f"\n{summary.computed} computed ({statuses}), {summary.skipped} reused; store: {args.db}")
    if summary.paused:
        print(f"{summary.paused} paused at the end of the slice (their training state is in "
              f"{args.checkpoint_dir}); run the same command again to go on")
    if report is not None:
        print(f"report: {report.markdown} (also {report.html.name}, {report.latex.name}, "
              "figures/, tables/, data/)")
    if weights_errors:
        print(f"precision: warning: the weights of {len(weights_errors)} runs were not saved "
              f"({weights_errors[0]})", file=sys.stderr)


def _exit_code(summary: SweepSummary) -> int:
    """1 when every computed run failed (the reasons of the failed ones printed first), 75
    when trainings paused, else 0."""
    failed = sum(summary.statuses.get(s, 0) for s in ("failed", "timeout"))
    if failed or summary.statuses.get("invalid"):
        for reason in summary.reasons:
            print(f"  {reason}", file=sys.stderr)
    if summary.all_failed:
        print(f"precision: error: every computed run failed or timed out ({failed} records; "
              "reasons above; 'precision delete --status failed' or '--status timeout' drops "
              "them to recompute)", file=sys.stderr)
        return 1
    return EXIT_PAUSED if summary.paused else 0

