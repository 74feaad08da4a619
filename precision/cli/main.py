"""The ``precision`` command: ``run``, ``probe``, ``ops``, ``evaluate``, ``localize``,
``results``, ``report``, ``delete``, ``list``.

Every user error (unknown suite / solver / precision, malformed suite file, bad parameter,
impossible shape, unreadable, damaged or read-only store, unwritable output) is one line on
stderr and exit code 2. ``run`` checks all of it -- the suite, the store (intact and
writable) and the report folder -- before computing anything, so no work is lost to an error
it could have reported first. No output path may be one of the command's inputs (``results
--out`` / ``report --out`` onto the store, in any spelling), files are written complete or not
at all, and standard output that cannot be written (``> /dev/full``) is one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from precision.cli.localize import add_parser as add_localize_parser
from precision.cli.stdout import CheckedStdout, StdoutError, drop_stdout
from precision.cli.stopping import StopSignals, interrupted
from precision.precisions import (
    ALIASES_TEXT,
    CAST_POLICIES,
    VALID_FORMS,
    PrecisionError,
    parse_precision,
    with_casts,
)
from precision.solvers.measure import SOLVERS, SolverError
from probes.executors import ExecutorError
from probes.names import check_name
from probes.store.db import Store, StoreError
from probes.suite import (
    Suite,
    SuiteError,
    load_suite,
    shipped_suites,
    suite_with_lengths,
)
from reports.data_version import left_out_note, newest_data_rows

EXIT_USAGE = 2
DEFAULT_DB = "results.db"
#: ``--jobs`` may not exceed this many workers per CPU of this machine, nor JOBS_CEILING.
JOBS_PER_CPU, JOBS_CEILING = 4, 256


def max_jobs() -> int:
    """The largest ``--jobs``: 4 workers per CPU this process may use, at most 256 (each
    worker is a process of ~200 MB; more than that thrashes, it never speeds up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(JOBS_CEILING, JOBS_PER_CPU * cpus))


class UsageError(Exception):
    """A one-line user error (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _csv(text: str | None, option: str) -> list[str] | None:
    """The names of a comma-separated option (each a valid name, :mod:`probes.names`)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError(f"{option}: empty list (give comma-separated names)")
    return [check_name(item, f"{option} name") for item in items]


def _lengths(text: str | None) -> list[int] | None:
    """The sequence lengths of ``--lengths 16,64,256`` (None when not given; their range
    is checked with the suite)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() for t in items):
        raise UsageError(f"--lengths: give comma-separated positive integers (e.g. "
                         f"16,64,256), not '{text}'")
    return [int(t) for t in items]


def _check_run_args(args: argparse.Namespace) -> None:
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


def _cmd_run(args: argparse.Namespace) -> int:
    # Everything is validated here, before the store is opened.
    _check_run_args(args)
    lengths = _lengths(args.lengths)
    suite = load_suite(
        args.suite,
        profile=args.profile,
        precisions=_precisions_with_casts(args),
        solvers=_csv(args.solvers, "--solvers"),
        device=args.device,
        expand=lengths is None,
    )
    suite = suite_with_lengths(suite, lengths)
    _check_factories(suite, args, census=False)
    return _run_loaded(suite, args)


def _precisions_with_casts(args: argparse.Namespace) -> list[str] | None:
    """``--precisions`` as given, each with ``--casts``'s policy when it is given (then the
    suite's own precision list when ``--precisions`` is not)."""
    names = _csv(args.precisions, "--precisions")
    if args.casts is None:
        return names
    if names is None:
        base = load_suite(args.suite, profile=args.profile, expand=False)
        names = [p.name for p in base.settings.precisions]
    return [with_casts(parse_precision(n), args.casts).name for n in names]


def _check_factories(suite: Suite, args: argparse.Namespace, census: bool,
                     sample: bool = False) -> None:
    """A suite's user factories are imported, called and (``census``) exported in a child
    process before anything is computed: one that cannot build its module -- it raises,
    exits, crashes or hangs past the time limit -- is a one-line error (exit 2), nothing
    stored; with ``sample``, one that cannot evaluate one sample in each of its precisions
    too (the op, graph node and module named), and where its casts round below a precision
    is printed. What fails later, during a run, is that run's ``failed`` / ``timeout``
    records."""
    from probes.census import check_factories
    from probes.factory import is_factory_spec
    _check_time_limit(args)
    if not any(is_factory_spec(e.family) for e in suite.models):
        return   # no user code
    notes: list[str] = []
    problem = check_factories(list(suite.runs), census=census, sample=sample,
                              time_limit=args.time_limit, notes=notes)
    if problem:
        raise UsageError(problem)
    if notes:
        print("\n".join(["casts (one sample, before training):", *notes]), flush=True)


def _check_time_limit(args: argparse.Namespace) -> None:
    import math

    if args.time_limit is not None and not (math.isfinite(args.time_limit) and
                                            args.time_limit > 0):
        raise UsageError(f"--time-limit must be a positive number of seconds, "
                         f"not {args.time_limit:g}")


def _cmd_probe(args: argparse.Namespace) -> int:
    from probes.suite import suite_for_factory

    _check_run_args(args)
    lengths = _lengths(args.lengths)
    base = load_suite(args.suite, profile=args.profile, expand=False,
                      precisions=_precisions_with_casts(args), device=args.device)
    suite = suite_for_factory(base, args.factory, tasks=_csv(args.tasks, "--tasks"),
                              label=args.label)
    suite = suite_with_lengths(suite, lengths)
    _check_probe_label(suite, args)
    # the factory's import, build, op census (an op mpN cannot run) and one sample evaluated
    # in every precision, in a child process, before anything trains
    _check_factories(suite, args, census=True, sample=True)
    return _run_loaded(suite, args)


def _check_probe_label(suite: Suite, args: argparse.Namespace) -> None:
    """The probe's label names no stored rows of another model of the suite (rows of two
    models under one name would read as one)."""
    label = suite.models[0].label
    if not Path(args.db).is_file():
        return
    with Store(args.db, create=False) as store:
        rows = store.runs(suite=suite.name, subject=label)
    others = sorted({str(r["config"].get("family", r["kind"])) for r in rows} - {args.factory})
    if others:
        raise UsageError(f"{args.db} already holds rows of model '{label}' in suite "
                         f"{suite.name} from '{others[0]}', not '{args.factory}': their rows "
                         "would read as one model; name the probe with --label")


def _cmd_ops(args: argparse.Namespace) -> int:
    """Census of the ops of FACTORY's exported graph; exit 2 if mpN lacks any."""
    from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated

    try:  # the user's factory is imported and called in a child process
        c = call_isolated(_census_or_error, args.factory, args.d_in, args.d_out, args.depth,
                          args.width, args.tokens, time_limit=DEFAULT_USER_TIME_LIMIT)
    except ChildFailure as exc:
        raise UsageError(f"factory '{args.factory}' cannot be built: {exc.message}") from None
    if isinstance(c, str):
        raise UsageError(c)
    print(c.table())
    if args.casts == "promote" and (c.casts or c.islands):
        print("under --casts promote these casts compute in the evaluation precision: "
              "nothing rounds below it")
    if not c.ok:
        print(f"precision: error: {c.summary()}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """One seeded sample through FACTORY's (untrained) module in each precision, against the
    promoted model in the reference precision; exit 1 if a precision cannot evaluate."""
    from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated

    names = _csv(args.precisions, "--precisions") or ["float32", "float64", "mp50"]
    precisions = [parse_precision(n) for n in names]
    if args.casts is not None:
        precisions = [with_casts(p, args.casts) for p in precisions]
    reference = with_casts(parse_precision(args.reference), "promote")
    if not reference.is_mp:
        raise UsageError(f"--reference must be an mpN precision, not {args.reference}")
    for option in ("d_in", "d_out", "depth", "width", "tokens", "batch"):
        if getattr(args, option) < 1:
            raise UsageError(f"--{option.replace('_', '-')} must be a positive integer")
    try:  # the user's factory is imported, called and evaluated in a child process
        result = call_isolated(_evaluate_sample, args.factory, precisions, reference,
                               args.d_in, args.d_out, args.depth, args.width, args.tokens,
                               args.batch, args.seed, time_limit=DEFAULT_USER_TIME_LIMIT)
    except ChildFailure as exc:
        raise UsageError(f"factory '{args.factory}' cannot be evaluated: {exc.message}") from None
    if isinstance(result, str):
        raise UsageError(result)
    rows, problem, notes = result
    wide = max([24, *(len(name) for name, *_ in rows)])
    print(f"{'precision':<{wide}}  {'relative error':>14}  {'digits':>6}  casts (keep vs promote)")
    for name, relative, digits, casts in rows:
        print(f"{name:<{wide}}  {relative:>14.2e}  {digits:>6.1f}  "
              + (f"{casts:.2e}" if casts is not None else "-"))
    print(f"(against the model in {reference.name}: every cast promoted)")
    if notes:
        print("\n".join(notes))
    if problem:
        print(f"precision: error: {problem}", file=sys.stderr)
        return 1
    return 0


def _evaluate_sample(spec: str, precisions: list, reference: object, d_in: int, d_out: int,
                     depth: int, width: int, tokens: int, batch: int, seed: int) -> object:
    """In the child of ``evaluate``: (rows, problem, island and float literal lines), or a
    one-line error."""
    import torch

    from precision.backends.interpreter.constants import literal_lines
    from precision.evaluate import evaluate, mp_program
    from precision.islands import island_report, islands_below
    from precision.metrics import error_summary
    from probes.factory import FactoryError, build_from_factory
    from probes.isolation import one_line

    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_from_factory(spec, d_in, d_out, depth, width, tokens).eval()
    except FactoryError as exc:
        return str(exc)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, tokens, d_in, dtype=torch.float64, generator=gen)
    rows: list[tuple] = []
    notes: list[str] = []
    for p in [reference, *precisions]:
        try:
            out = evaluate(model, x, p)
            report = island_report(model, x, p) if islands_below(model, x, p) else None
        except Exception as exc:  # noqa: BLE001 - the failing op, node and module, one line
            return rows, f"'{spec}' cannot be evaluated in {p.name}: {one_line(exc)}", notes
        if p is reference:
            truth = out
            continue
        summary = error_summary(out, truth)
        casts = report.total.relative if report is not None and report.total else None
        rows.append((p.name, summary.relative, summary.digits, casts))
        notes += report.lines() if report is not None and p.casts == "keep" else []
    # the reference is an mpN: its program (cached) says which literals its truth took as given
    return rows, None, notes + literal_lines(mp_program(model, x).literals)


def _cmd_localize(args: argparse.Namespace) -> int:
    """``precision localize`` (:mod:`precision.cli.localize`); its bad input exits 2."""
    from precision.cli.localize import LocalizeUsageError, run

    try:
        return run(args)
    except LocalizeUsageError as exc:
        raise UsageError(str(exc)) from None


def _census_or_error(spec: str, *shape: int) -> object:
    """In the child of ``ops``: the census of the factory's module, or its one-line error."""
    from precision.op_census import CensusError
    from probes.census import census_for_factory
    from probes.factory import FactoryError

    try:
        return census_for_factory(spec, *shape)
    except (FactoryError, CensusError) as exc:
        return str(exc)


def _run_loaded(suite: Suite, args: argparse.Namespace) -> int:
    from probes.runner import SweepInterrupted, pending_runs, run_suite
    from reports.length_plot import length_tables
    from reports.model_table import model_tables
    from reports.solver_table import solver_tables
    from reports.study_table import study_tables

    report_folder = None
    if not args.no_report:
        report_folder = Path(args.report_dir) / suite.name
        try:
            report_folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot write the report to {report_folder}: "
                             f"{exc.strerror or exc} (use --report-dir or --no-report)") from None
    _check_time_limit(args)
    weights_dir = _writable_folder("--save-weights", args.save_weights)
    checkpoint_dir = _writable_folder("--checkpoints", args.checkpoints)
    pause_at = None
    if args.slice is not None:
        import math
        import time

        if checkpoint_dir is None:
            raise UsageError("--slice needs --checkpoints DIR (where paused trainings wait)")
        if not (math.isfinite(args.slice) and args.slice >= 0):
            raise UsageError(f"--slice must be a number of seconds >= 0, not {args.slice:g}")
        pause_at = time.time() + args.slice
    with Store(args.db) as store:
        store.check_writable()  # a damaged or read-only store fails here, before the work
        todo, skipped = pending_runs(suite, store)
        print(
            f"suite {suite.name}: {len(todo) + skipped} runs, {skipped} already in {args.db}, "
            f"{len(todo)} to compute",
            file=sys.stderr,
        )
        bar = None
        if todo and not args.no_progress:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), unit="run", file=sys.stderr, dynamic_ncols=True)

        weights_errors: list[str] = []

        def progress(done: int, total: int, record: object) -> None:
            error = record.result.get("weights_error")  # type: ignore[attr-defined]
            if error:
                weights_errors.append(error)
                if len(weights_errors) == 1:   # once: a full disk fails every later save
                    line = f"precision: warning: {error} (the run's results are stored)"
                    (bar.write if bar is not None else print)(line, file=sys.stderr)
            if bar is not None:
                bar.set_postfix_str(
                    f"{record.subject} {record.precision} {record.task}", refresh=False  # type: ignore[attr-defined]
                )
                bar.update(1)

        try:
            summary = run_suite(suite, store, jobs=args.jobs, executor=args.executor,
                                address=args.address, progress=progress,
                                time_limit=args.time_limit, weights_dir=weights_dir,
                                checkpoint_dir=checkpoint_dir, pause_at=pause_at)
        except SweepInterrupted as exc:
            exc.db = args.db  # type: ignore[attr-defined]
            raise
        finally:
            if bar is not None:
                bar.close()
        rows, older = newest_data_rows(store.runs(suite=suite.name))
        if older:
            print(f"precision: note: {left_out_note(older)}", file=sys.stderr)
        report = None
        if report_folder is not None:
            from reports.build import ReportError, build_report

            try:
                report = build_report(store, [suite.name], report_folder)
            except ReportError as exc:
                raise UsageError(f"{exc} (the runs are stored in {args.db})") from None
    print("\n\n".join(t for t in (solver_tables(rows), model_tables(rows), study_tables(rows),
                                  length_tables(rows)) if t))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "none new"
    n_records = sum(summary.statuses.values())
    if n_records != summary.computed:  # a trained job stores a record per precision
        statuses = f"{n_records} records: {statuses}"
    print(f"\n{summary.computed} computed ({statuses}), {summary.skipped} reused; store: {args.db}")
    if summary.paused:
        print(f"{summary.paused} paused at the end of the slice (their training state is in "
              f"{args.checkpoints}); run the same command again to go on")
    if report is not None:
        print(f"report: {report.markdown} (also {report.html.name}, {report.latex.name}, "
              "figures/, tables/, data/)")
    if weights_errors:
        print(f"precision: warning: the weights of {len(weights_errors)} runs were not saved "
              f"({weights_errors[0]})", file=sys.stderr)
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


#: Exit code of a ``run`` whose slice ended with trainings paused (EX_TEMPFAIL: run it again).
EXIT_PAUSED = 75


def _writable_folder(flag: str, value: str | None) -> str | None:
    """``value`` as an absolute folder, created and checked writable now (not after the first
    model has trained); None when not given; a one-line UsageError otherwise."""
    if not value:
        return None
    import tempfile

    folder = Path(value).resolve()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {value} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {value}: cannot create the folder: "
                         f"{exc.strerror or exc}") from None
    try:  # writable: a file can be created in it
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".precision-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {value}: cannot write into the folder: "
                         f"{exc.strerror or exc}") from None
    return str(folder)   # travels with each run, to any worker


def _store_exists(db: str) -> bool:
    """Whether the store file exists; UsageError when its folder cannot be searched."""
    try:
        return Path(db).expanduser().exists()
    except OSError as exc:
        raise UsageError(f"cannot read results store {db}: {exc.strerror or exc}") from None


def _nonempty(option: str, value: str | None) -> str | None:
    """``value``, or UsageError when an option was given as the empty string."""
    if value is not None and not value.strip():
        raise UsageError(f"{option} is empty (give a value, or leave the option out)")
    return value


def _store_files(db: str) -> list[Path]:
    """The store and the SQLite files beside it that belong to it."""
    return [Path(db)] + [Path(f"{db}{suffix}") for suffix in ("-wal", "-shm", "-journal")]


def _refuse_output_over_store(option: str, out: str, db: str, *, folder: bool = False) -> None:
    """UsageError when the output path ``out`` is the store (or one of its SQLite files),
    in any spelling (symlink, relative or absolute, ``~``); with ``folder``, also when the
    store would have to become a folder (``out`` beneath the store file)."""
    from probes.store.atomic import inside, same_file

    for path in _store_files(db):
        if same_file(out, path) or (folder and inside(out, path)):
            raise UsageError(f"{option} {out} is the results store {db} itself; refusing "
                             "to overwrite it (give another path)")


def _cmd_report(args: argparse.Namespace) -> int:
    _nonempty("--out", args.out)
    for suite in args.suite or []:
        _nonempty("--suite", suite)
    if not _store_exists(args.db):
        raise UsageError(f"no results store at {args.db} (run 'precision run solvers' first)")
    _refuse_output_over_store("--out", args.out, args.db, folder=True)
    from reports.build import ReportError, build_report

    with Store(args.db, read_only=True) as store:
        try:
            report = build_report(store, args.suite, args.out)
        except ReportError as exc:
            raise UsageError(str(exc)) from None
    print(f"report: {report.markdown}")
    print(f"        {report.html} (self-contained), {report.latex}, "
          f"{len(report.csv)} CSV files")
    return 0


def _cmd_results(args: argparse.Namespace) -> int:
    from reports.length_plot import length_tables
    from reports.model_table import model_tables
    from reports.solver_table import solver_tables
    from reports.study_table import study_tables

    filters = _results_filters(args)
    if args.out is not None:
        _nonempty("--out", args.out)
    if not _store_exists(args.db):
        raise UsageError(f"no results store at {args.db} (run 'precision run solvers' first)")
    if args.out is not None:
        _refuse_output_over_store("--out", args.out, args.db)
        if Path(args.out).expanduser().is_dir():
            raise UsageError(f"--out {args.out} is a folder (give a file name)")
    with Store(args.db, read_only=True) as store:
        if filters.get("suite") and filters["suite"] not in store.suites():
            known = ", ".join(store.suites()) or "none"
            raise UsageError(f"no results for suite '{filters['suite']}' in {args.db} "
                             f"(suites: {known})")
        if filters and not store.matching(**filters):
            chosen = " ".join(f"--{k} {v}" for k, v in filters.items())
            raise UsageError(f"no runs in {args.db} match {chosen}; nothing was written")

        def write(out: IO[str]) -> None:
            if args.format == "csv":
                store.export_csv(out, **filters)
            elif args.format == "json":
                store.export_json(out, **filters)
            else:
                rows, older = newest_data_rows(store.runs(**filters))
                tables = (solver_tables(rows), model_tables(rows), study_tables(rows),
                          length_tables(rows))
                out.write("\n\n".join(t for t in tables if t) + "\n")
                if older:
                    out.write(f"({left_out_note(older)}; --format csv or json lists them)\n")

        if args.out is None:
            write(sys.stdout)
            return 0
        from probes.store.atomic import atomic_write

        existed = Path(args.out).expanduser().exists()
        try:
            with atomic_write(args.out, "w", encoding="utf-8", newline="") as out:
                write(out)
        except OSError as exc:
            kept = f"{args.out} is unchanged" if existed else "nothing was written"
            raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}; {kept}") from None
    return 0


def _results_filters(args: argparse.Namespace) -> dict[str, str]:
    """The ``runs`` column filters of ``precision results`` (an empty value is an error; a
    precision alias such as fp32 selects its canonical name, as stored)."""
    precision = args.precision
    if precision is not None and precision.strip():
        precision = parse_precision(precision).name
    chosen = {"suite": args.suite, "subject": args.subject, "task": args.task,
              "precision": precision, "status": args.status}
    option = {"subject": "--model"}
    return {column: value for column, value in chosen.items()
            if _nonempty(option.get(column, f"--{column}"), value) is not None}


def _cmd_delete(args: argparse.Namespace) -> int:
    if args.precision is not None:  # stored precisions are canonical: fp32 is float32
        args.precision = parse_precision(args.precision).name
    filters = {column: value for column, value in (
        ("suite", args.suite), ("subject", args.subject), ("status", args.status),
        ("precision", args.precision), ("run_id", args.run_id)) if value is not None}
    if not filters:
        raise UsageError("delete needs at least one of --suite, --subject, --status, "
                         "--precision, --run-id (nothing is deleted without a filter)")
    for column, value in filters.items():
        _nonempty(f"--{column.replace('_', '-')}", value)
    if not _store_exists(args.db):
        raise UsageError(f"no results store at {args.db}")
    with Store(args.db, create=False, read_only=args.dry_run) as store:
        n = store.delete_runs(dry_run=args.dry_run, **filters)
    chosen = ", ".join(f"{k} {v}" for k, v in filters.items())
    runs = "run" if n == 1 else "runs"
    if args.dry_run:
        print(f"would delete {n} {runs} ({chosen}) from {args.db}; nothing deleted (--dry-run)")
    else:
        print(f"deleted {n} {runs} ({chosen}) from {args.db}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    for source in args.sources:
        if not _store_exists(source):
            raise UsageError(f"no results store at {source}")
    with Store(args.db) as target:
        for source in args.sources:
            with Store(source, create=False, read_only=True) as other:
                copied, present, differing = target.merge_from(other)
            kept = (f", {differing} of them with other numbers (kept {args.db}'s)"
                    if differing else "")
            print(f"merged {copied} run{'' if copied == 1 else 's'} from {source} into "
                  f"{args.db}; {present} already there{kept}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if what in ("suites", "all"):
        print("suites:")
        for name, path in sorted(shipped_suites().items()):
            desc = ""
            try:
                desc = load_suite(str(path)).description
            except SuiteError as exc:
                desc = f"(invalid: {exc})"
            print(f"  {name:<12} {desc}")
    if what in ("solvers", "all"):
        from precision.constructions.measure import CONSTRUCTIONS

        print("solvers:")
        for name, spec in sorted(SOLVERS.items()):
            print(f"  {name:<16} [{spec.task}] {spec.description}")
        print("constructions (run by name like solvers, e.g. --solvers lsa_gd):")
        for name, cspec in sorted(CONSTRUCTIONS.items()):
            print(f"  {name:<18} [{cspec.task}] {cspec.description}")
        from probes.studies import load_studies

        print("studies (run from a suite's [studies.<label>] tables):")
        for name, sspec in sorted(load_studies().items()):
            print(f"  {name:<34} {sspec.doc}")
    if what in ("precisions", "all"):
        print("precisions:")
        from precision.formats.catalog import listing

        print("\n".join(listing()))
        print(f"  forms: {VALID_FORMS}")
        print("  spelling: FORMAT[:rne|rz|ru|rd|sr][+acc=FORMAT][+act=FORMAT]"
              "[+casts=keep|promote][+seed=N][+mod[GLOB]=FORMAT]...; roundings other than "
              "rne, +acc= and +act= simulate the format per op (docs/formats.md); sr needs "
              "+seed=N; +mod[GLOB]=FORMAT assigns a format to modules "
              "(docs/precision_assignment.md)")
    if what in ("claims", "all"):
        from reports.papers.claims import load_claims

        print("published claims (a report shows those about its suites):")
        for c in load_claims():
            check = c.get("check")
            suite = check.get("suite") if check else None
            where = (", ".join(suite) if isinstance(suite, list) else str(suite)) if check \
                else "no suite yet"
            print(f"  {c['id']:<24} [{where}] {c['claim']}: {c['published']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``precision`` command."""
    parser = _Parser(
        prog="precision",
        description="Measure error floors of sequence models and reference solvers in "
        "float32, float64 and arbitrary precision.",
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # run / results / report / list

    run = sub.add_parser("run", help="run a probe suite and store its results",
                         description="Compute every run of SUITE missing from the store, "
                         "then print its floor tables.")
    run.add_argument("suite", help="a shipped suite name (see 'precision list') or a .toml path")
    run.add_argument("--db", default=DEFAULT_DB,
                     help=f"SQLite results store (default {DEFAULT_DB})")
    run.add_argument("--profile", default=None, help="budget profile defined in the suite")
    run.add_argument("--precisions", default=None,
                     help="comma-separated precisions replacing the suite's (e.g. float32,mp100; "
                     f"{ALIASES_TEXT})")
    run.add_argument("--solvers", default=None,
                     help="comma-separated subset of the suite's solvers")
    run.add_argument("--jobs", type=int, default=1,
                     help="worker processes (default 1: compute in this process; at most "
                     f"{JOBS_PER_CPU} per CPU, {max_jobs()} here, and never above {JOBS_CEILING})")
    run.add_argument("--executor", choices=["local", "dask"], default="local",
                     help="local: this process or a pool of --jobs processes (default); "
                     "dask: a Dask LocalCluster of --jobs workers, or --address")
    run.add_argument("--address", default=None,
                     help="with --executor dask: a running scheduler (tcp://host:8786)")
    run.add_argument("--save-weights", default=None, metavar="DIR",
                     help="save each newly trained model to DIR/<job id>.safetensors")
    run.add_argument("--checkpoints", default=None, metavar="DIR",
                     help="keep each trained job's training state in DIR (every minute, at "
                     "the end of its Adam phase and when done): a killed, interrupted or "
                     "paused run goes on from it when the same command runs again")
    run.add_argument("--slice", type=float, default=None, metavar="SECONDS",
                     help="with --checkpoints: pause every training still going SECONDS after "
                     "the command started (nothing is stored for it; exit code 75: run the "
                     "same command again to go on)")
    run.add_argument("--device", default=None,
                     help="where trained models train and evaluate their float precisions: "
                     "cpu or cuda[:N] (replaces the suite's 'device'; mpN runs on the CPU)")
    run.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
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
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--report-dir", default="report",
                     help="the suite's report is refreshed in REPORT_DIR/SUITE (default report)")
    run.add_argument("--no-report", action="store_true", help="do not write the report")
    run.set_defaults(func=_cmd_run)

    prb = sub.add_parser("probe", help="train and measure your own architecture on a suite",
                         description="Run a suite's tasks, grid and recipes on the module "
                         "returned by FACTORY(d_in, d_out, depth, width) and store it beside "
                         "the built-in families.")
    prb.add_argument("factory", help="MODULE:FACTORY, path/to/file.py:FACTORY or hf:ClassName")
    prb.add_argument("--suite", required=True, help="a suite with [models.*] (e.g. primitives)")
    prb.add_argument("--tasks", default=None, help="comma-separated subset of the suite's tasks")
    prb.add_argument("--label", default=None,
                     help="the model name its rows are stored under (default: FACTORY's name; "
                     "it may not be an entry of the suite or a stored model of another factory)")
    for action in run._actions:
        if action.dest not in ("help", "suite", "solvers"):
            prb._add_action(action)
    prb.set_defaults(func=_cmd_probe)

    ops = sub.add_parser("ops", help="list the ops of your architecture and their mpN support",
                         description="Export the module of FACTORY(d_in, d_out, depth, width) "
                         "on a (2, tokens, d_in) input and list every core ATen op its graph "
                         "uses, how often, where, and whether mpN runs it (exit 2 if not).")
    ops.add_argument("factory", help="MODULE:FACTORY, path/to/file.py:FACTORY or hf:ClassName")
    ops.add_argument("--d-in", type=int, default=20, help="input features (default 20)")
    ops.add_argument("--d-out", type=int, default=20, help="output features (default 20)")
    ops.add_argument("--depth", type=int, default=2, help="depth (default 2)")
    ops.add_argument("--width", type=int, default=64, help="width (default 64)")
    ops.add_argument("--tokens", type=int, default=40, help="tokens N (default 40)")
    ops.add_argument("--casts", choices=CAST_POLICIES, default="keep",
                     help="the cast policy the casts listing refers to (default keep)")
    ops.set_defaults(func=_cmd_ops)

    ev = sub.add_parser("evaluate", help="one sample through your architecture in each "
                        "precision, and where its casts round",
                        description="Build FACTORY(d_in, d_out, depth, width) (seeded, not "
                        "trained), evaluate one seeded (batch, tokens, d_in) input in each "
                        "precision and print its relative error against the model with every "
                        "cast promoted in the reference precision, the part its casts cause, "
                        "and the modules where they round (exit 1 if a precision cannot "
                        "evaluate it: the op, graph node and module named).")
    ev.add_argument("factory", help="MODULE:FACTORY, path/to/file.py:FACTORY or hf:ClassName")
    ev.add_argument("--precisions", default=None,
                    help="comma-separated precisions (default float32,float64,mp50)")
    ev.add_argument("--casts", choices=CAST_POLICIES, default=None,
                    help="cast policy of every precision (default: as spelled, keep)")
    ev.add_argument("--reference", default="mp100",
                    help="the mpN precision of the truth, casts promoted (default mp100)")
    for flag, default, what in (("--d-in", 20, "input features"),
                                ("--d-out", 20, "output features"), ("--depth", 2, "depth"),
                                ("--width", 64, "width"), ("--tokens", 40, "tokens N"),
                                ("--batch", 1, "sequences"), ("--seed", 0, "seed")):
        ev.add_argument(flag, type=int, default=default, help=f"{what} (default {default})")
    ev.set_defaults(func=_cmd_evaluate)

    add_localize_parser(sub, DEFAULT_DB).set_defaults(func=_cmd_localize)

    res = sub.add_parser("results", help="print or export stored results",
                         description="Dump the runs in the store as a table, CSV or JSON, "
                         "optionally only those matching every filter given (a filter that "
                         "matches no run is a one-line error, exit 2).")
    res.add_argument("--db", default=DEFAULT_DB,
                     help=f"SQLite results store (default {DEFAULT_DB})")
    res.add_argument("--suite", default=None, help="only this suite")
    res.add_argument("--model", "--subject", dest="subject", default=None,
                     help="only this model / solver / suite entry (the runs' subject)")
    res.add_argument("--task", default=None,
                     help="only this task (a suite's task or problem label)")
    res.add_argument("--precision", default=None, help="only this precision (e.g. mp50)")
    res.add_argument("--status", default=None,
                     help="only this status (ok, failed, diverged, timeout, invalid)")
    res.add_argument("--format", choices=["table", "csv", "json"], default="table")
    res.add_argument("--out", default=None, help="write to this file instead of stdout "
                     "(atomically: complete or not at all; never the store itself)")
    res.set_defaults(func=_cmd_results)

    rep = sub.add_parser("report", help="write the precision report of the store",
                         description="Tables, plots, claims check; Markdown, HTML, CSV, LaTeX. "
                         "Reads only the store.")
    rep.add_argument("--db", default=DEFAULT_DB,
                     help=f"SQLite results store (default {DEFAULT_DB})")
    rep.add_argument("--suite", action="append", default=None,
                     help="only this suite (repeatable; default all)")
    rep.add_argument("--out", required=True, help="folder to write the report into")
    rep.set_defaults(func=_cmd_report)

    dele = sub.add_parser("delete", help="delete stored runs (e.g. failed ones, to recompute)",
                          description="Remove the runs matching every given filter, and their "
                          "traces, in one transaction. The next 'precision run' computes "
                          "them again.")
    dele.add_argument("--db", default=DEFAULT_DB,
                      help=f"SQLite results store (default {DEFAULT_DB})")
    dele.add_argument("--suite", default=None, help="only runs of this suite")
    dele.add_argument("--subject", default=None, help="only runs of this solver / model / entry")
    dele.add_argument("--status", choices=["ok", "failed", "diverged", "timeout", "invalid"],
                      default=None, help="only runs with this status")
    dele.add_argument("--precision", default=None,
                      help=f"only runs in this precision ({ALIASES_TEXT})")
    dele.add_argument("--run-id", default=None, help="only the run with this id")
    dele.add_argument("--dry-run", action="store_true",
                      help="print how many runs match, delete nothing")
    dele.set_defaults(func=_cmd_delete)

    merge = sub.add_parser("merge", help="copy the runs of other stores into this one",
                           description="Copy every run of each SOURCE store that the --db "
                           "store lacks (with its traces), one transaction per SOURCE: e.g. "
                           "the runs a lent GPU computed into the store the CPU fills. A run "
                           "already in --db is never replaced; the SOURCE stores are only "
                           "read.")
    merge.add_argument("sources", nargs="+", metavar="SOURCE", help="a results store to copy")
    merge.add_argument("--db", default=DEFAULT_DB,
                       help=f"SQLite results store to copy into (default {DEFAULT_DB}; "
                       "created if absent)")
    merge.set_defaults(func=_cmd_merge)

    lst = sub.add_parser("list", help="list suites, solvers, precisions and claims",
                         description="List shipped suites, reference solvers, precisions "
                         "and the published claims the reports check.")
    lst.add_argument("what", nargs="?", default="all",
                     choices=["all", "suites", "solvers", "precisions", "claims"])
    lst.set_defaults(func=_cmd_list)
    return parser


class _VersionShown(Exception):
    """``--version`` was printed: exit 0 without a command."""


class _Version(argparse.Action):
    """``precision --version``: the installed package's version."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help=kwargs.get("help"))  # type: ignore[arg-type]

    def __call__(self, *args: object, **kwargs: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("precision")
        except PackageNotFoundError:
            text = "unknown (not installed)"
        print(f"precision {text}")
        raise _VersionShown


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code. Standard output that cannot be written (a full
    disk, ``> /dev/full``) is a one-line error and exit 2, caught where it is written."""
    real_stdout = sys.stdout
    sys.stdout = CheckedStdout(real_stdout)  # type: ignore[assignment]
    try:
        code = _main(argv)
        if code != 130:
            sys.stdout.flush()
        return code
    except StdoutError as exc:
        sys.stdout = real_stdout
        drop_stdout()
        print(f"precision: error: cannot write to standard output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        sys.stdout = real_stdout
        drop_stdout()
        return 0
    finally:
        sys.stdout = real_stdout


def _main(argv: Sequence[str] | None = None) -> int:
    """The command of ``argv``; returns its exit code."""
    parser = build_parser()
    stops = StopSignals()
    try:
        args = parser.parse_args(argv)
        if args.command in ("run", "probe"):
            stops.install()
            import torch

            # Small models and solvers: one intra-op thread per process is faster than two
            # (which spin against each other); parallelism comes from --jobs processes.
            torch.set_num_threads(1)
        return int(args.func(args))
    except (UsageError, SuiteError, PrecisionError, SolverError, StoreError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not message.startswith("precision"):
            message = f"precision: error: {message}"
        print(message, file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.Error as exc:  # a store error outside probes.store.db's guarded methods
        print(f"precision: error: results store: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except ExecutorError as exc:
        print(f"precision: error: {exc}; finished runs are stored, re-run to resume",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return interrupted(exc)
    except _VersionShown:
        return 0
    finally:
        stops.restore()
