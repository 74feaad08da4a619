"""``precision report --out DIR``: write the precision report of the store (tables, plots,
claims check; Markdown, HTML, CSV, LaTeX) into DIR. Reads only the store."""

from __future__ import annotations

import argparse
from typing import Any

from precision.cli.common import (
    UsageError,
    add_db_option,
    nonempty,
    refuse_output_over_store,
    store_exists,
)
from probes.store.db import Store


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``report`` subcommand on ``sub`` (the main parser's subparsers)."""
    rep = sub.add_parser("report", help="write the precision report of the store",
                         description="Tables, plots, claims check; Markdown, HTML, CSV, LaTeX. "
                         "Reads only the store.")
    add_db_option(rep)
    rep.add_argument("--suite", action="append", default=None,
                     help="only this suite (repeatable; default all)")
    rep.add_argument("--out", required=True, help="folder to write the report into")
    return rep


def main(args: argparse.Namespace) -> int:
    """``precision report``: the paths checked, the report built, where it is printed."""
    nonempty("--out", args.out)
    for suite in args.suite or []:
        nonempty("--suite", suite)
    if not store_exists(args.db):
        raise UsageError(f"no results store at {args.db} (run 'precision run solvers' first)")
    refuse_output_over_store("--out", args.out, args.db, folder=True)
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
