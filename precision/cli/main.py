"""The ``precision`` command: ``run``, ``probe``, ``ops``, ``evaluate``, ``gradient``, ``localize``,
``results``, ``report``, ``delete``, ``merge``, ``list``, one module each in
:mod:`precision.cli` (its ``add_parser`` and ``main``); this module assembles the parser,
dispatches, and turns every error into its one line and exit code.

Every user error (unknown suite / solver / precision, malformed suite file, bad parameter,
impossible shape, unreadable, damaged or read-only store, unwritable output) is one line on
stderr and exit code 2. ``run`` checks all of it -- the suite, the store (intact and
writable) and the report folder -- before computing anything, so no work is lost to an error
it could have reported first. No output path may be one of the command's inputs (``results
--out`` / ``report --out`` onto the store, in any spelling), files are written complete or not
at all, and standard output that cannot be written (``> /dev/full``) or is closed (``>&-``)
is one line and exit 2; a stream whose encoding cannot hold a character (``LC_ALL=C``,
``PYTHONIOENCODING=ascii``) writes it as a backslash escape instead of failing.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any

from precision.cli import (
    delete,
    evaluate,
    gradient,
    listing,
    localize,
    merge,
    ops,
    probe,
    report,
    results,
    run,
)
from precision.cli.common import (
    DEFAULT_DB,
    EXIT_USAGE,
    JOBS_CEILING,
    JOBS_PER_CPU,
    UsageError,
    max_jobs,
)
from precision.cli.localize import LocalizeUsageError
from precision.cli.run import EXIT_PAUSED
from precision.cli.stdout import (
    CheckedStdout,
    StdoutError,
    drop_stdout,
    encode_with_replacement,
    keep_going,
)
from precision.cli.stopping import StopSignals, interrupted
from precision.precisions import PrecisionError
from precision.solvers.solver_error import SolverError
from precision.text_numbers import shown
from probes.executor_error import ExecutorError
from probes.store.db import StoreError
from probes.suite_error import SuiteError

# (scripts and tests import these from here)
__all__ = ["DEFAULT_DB", "EXIT_PAUSED", "EXIT_USAGE", "JOBS_CEILING", "JOBS_PER_CPU",
           "UsageError", "build_parser", "main", "max_jobs"]

#: The commands in the order of the help: (add its subparser, run it).
COMMANDS: tuple[tuple[Callable[[Any], argparse.ArgumentParser],
                      Callable[[argparse.Namespace], int]], ...] = (
    (run.add_parser, run.main),
    (probe.add_parser, probe.main),
    (ops.add_parser, ops.main),
    (evaluate.add_parser, evaluate.main),
    (gradient.add_parser, gradient.main),
    (lambda sub: localize.add_parser(sub, DEFAULT_DB), localize.run),
    (results.add_parser, results.main),
    (report.add_parser, report.main),
    (delete.add_parser, delete.main),
    (merge.add_parser, merge.main),
    (listing.add_parser, listing.main),
)
#: The commands that compute a sweep: Ctrl-C / SIGTERM stop it, one torch thread each.
SWEEPS = ("run", "probe")
#: The errors that are the user's: one line, exit 2.
USER_ERRORS = (UsageError, LocalizeUsageError, SuiteError, PrecisionError, StoreError,
               SolverError)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``precision`` command."""
    parser = _Parser(
        prog="precision",
        description="Measure error floors of sequence models and reference solvers in "
        "float32, float64 and arbitrary precision.",
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add_parser, command in COMMANDS:
        add_parser(sub).set_defaults(func=command)
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
    if sys.stdout is None or sys.stderr is None:   # started with '>&-' or '2>&-'
        if sys.stderr is not None:
            print("precision: error: standard output is closed: give the command somewhere "
                  "to write (a file, a pipe or /dev/null)", file=sys.stderr)
        return EXIT_USAGE
    encode_with_replacement(sys.stdout, sys.stderr)
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.stdout = CheckedStdout(real_stdout)  # type: ignore[assignment]
    try:
        code = _main(argv)
        if code != 130:
            sys.stdout.flush()
        return code
    except KeyboardInterrupt as exc:   # between the command's handlers and its exit
        return interrupted(exc)
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
        sys.stdout, sys.stderr = real_stdout, real_stderr


def _main(argv: Sequence[str] | None = None) -> int:
    """The command of ``argv``; returns its exit code."""
    stops = StopSignals()
    try:
        args = build_parser().parse_args(argv)
        if args.command in SWEEPS:
            stops.install()
            keep_going()   # a reader that leaves early (| head) never ends the work
            from precision.provenance import code_version

            code_version()   # read now: the records name the code the sweep started with
            import torch

            # Small models and solvers: one intra-op thread per process is faster than two
            # (which spin against each other); parallelism comes from --jobs processes.
            torch.set_num_threads(1)
        return int(args.func(args))
    except SystemExit:   # --help: before the handlers that import their errors
        raise
    except _VersionShown:
        return 0
    except KeyboardInterrupt as exc:   # first: the clauses below must not run on a stop
        return interrupted(exc)
    except USER_ERRORS as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not message.startswith("precision"):
            message = f"precision: error: {message}"
        print(message, file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:   # the reader left: main() ends quietly
        raise
    except OSError as exc:   # a path the system refuses (a name too long, a loop, no access)
        where = shown(exc.filename, 60) + ": " if exc.filename is not None else ""
        print(f"precision: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.Error as exc:  # a store error outside probes.store.db's guarded methods
        print(f"precision: error: results store: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except ExecutorError as exc:
        print(f"precision: error: {exc}; finished runs are stored, re-run to resume",
              file=sys.stderr)
        return 1
    finally:
        stops.restore()
