"""``precision delete``: remove the stored runs matching every given filter, and their
traces, in one transaction (at least one filter; ``--dry-run`` only counts them). The next
``precision run`` computes them again."""

from __future__ import annotations

import argparse
from typing import Any

from precision.cli.common import UsageError, add_db_option, nonempty, store_exists
from precision.precisions import ALIASES_TEXT, parse_precision
from probes.store.db import Store


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``delete`` subcommand on ``sub`` (the main parser's subparsers)."""
    dele = sub.add_parser("delete", help="delete stored runs (e.g. failed ones, to recompute)",
                          description="Remove the runs matching every given filter, and their "
                          "traces, in one transaction. The next 'precision run' computes "
                          "them again.")
    add_db_option(dele)
    dele.add_argument("--suite", default=None, help="only runs of this suite")
    dele.add_argument("--subject", default=None, help="only runs of this solver / model / entry")
    dele.add_argument("--status", default=None,
                      choices=["ok", "failed", "diverged", "nonfinite", "timeout", "invalid"],
                      help="only runs with this status")
    dele.add_argument("--precision", default=None,
                      help=f"only runs in this precision ({ALIASES_TEXT})")
    dele.add_argument("--run-id", default=None, help="only the run with this id")
    dele.add_argument("--dry-run", action="store_true",
                      help="print how many runs match, delete nothing")
    return dele


def main(args: argparse.Namespace) -> int:
    """``precision delete``: the filters checked, the matching runs deleted (or counted)."""
    if args.precision is not None:  # stored precisions are canonical: fp32 is float32
        args.precision = parse_precision(args.precision).name
    filters = {column: value for column, value in (
        ("suite", args.suite), ("subject", args.subject), ("status", args.status),
        ("precision", args.precision), ("run_id", args.run_id)) if value is not None}
    if not filters:
        raise UsageError("delete needs at least one of --suite, --subject, --status, "
                         "--precision, --run-id (nothing is deleted without a filter)")
    for column, value in filters.items():
        nonempty(f"--{column.replace('_', '-')}", value)
    if not store_exists(args.db):
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
