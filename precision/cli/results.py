"""``precision results``: print or export the stored runs as a table, CSV or JSON, only those
matching every filter given (a filter that matches no run is a one-line error, exit 2);
``--out`` writes a file atomically (complete or not at all; never the store itself)."""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from precision.cli.common import (
    UsageError,
    add_db_option,
    nonempty,
    refuse_output_over_store,
    store_exists,
)
from precision.precisions import parse_precision
from probes.store.atomic import expand_user
from probes.store.db import Store
from reports.data_version import left_out_note, newest_data_rows

#: The option that sets each ``runs`` column filter (the others are --COLUMN).
OPTION = {"subject": "--model"}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``results`` subcommand on ``sub`` (the main parser's subparsers)."""
    res = sub.add_parser("results", help="print or export stored results",
                         description="Dump the runs in the store as a table, CSV or JSON, "
                         "optionally only those matching every filter given (a filter that "
                         "matches no run is a one-line error, exit 2).")
    add_db_option(res)
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
    return res


def main(args: argparse.Namespace) -> int:
    """``precision results``: the filters and paths checked, the runs written."""
    filters = _filters(args)
    if args.out is not None:
        nonempty("--out", args.out)
    if not store_exists(args.db):
        raise UsageError(f"no results store at {args.db} (run 'precision run solvers' first)")
    if args.out is not None:
        refuse_output_over_store("--out", args.out, args.db)
        if expand_user(args.out).is_dir():
            raise UsageError(f"--out {args.out} is a folder (give a file name)")
    with Store(args.db, read_only=True) as store:
        _check_matches(store, filters, args.db)
        if args.out is None:
            _write(store, filters, args.format, sys.stdout)
        else:
            _write_file(store, filters, args)
    return 0


def _filters(args: argparse.Namespace) -> dict[str, str]:
    """The ``runs`` column filters of ``precision results`` (an empty value is an error; a
    precision alias such as fp32 selects its canonical name, as stored)."""
    precision = args.precision
    if precision is not None and precision.strip():
        precision = parse_precision(precision).name
    chosen = {"suite": args.suite, "subject": args.subject, "task": args.task,
              "precision": precision, "status": args.status}
    return {column: value for column, value in chosen.items()
            if nonempty(OPTION.get(column, f"--{column}"), value) is not None}


def _check_matches(store: Store, filters: dict[str, str], db: str) -> None:
    """UsageError when the suite filter names no stored suite, or no run matches them all."""
    if filters.get("suite") and filters["suite"] not in store.suites():
        known = ", ".join(store.suites()) or "none"
        raise UsageError(f"no results for suite '{filters['suite']}' in {db} "
                         f"(suites: {known})")
    if filters and not store.matching(**filters):
        chosen = " ".join(f"{OPTION.get(k, f'--{k}')} {v}" for k, v in filters.items())
        raise UsageError(f"no runs in {db} match {chosen}; nothing was written")


def _write(store: Store, filters: dict[str, str], form: str, out: IO[str]) -> None:
    """The matching runs in ``form`` (table, csv or json) on ``out``."""
    if form == "csv":
        store.export_csv(out, **filters)
    elif form == "json":
        store.export_json(out, **filters)
    else:
        from reports.console import floor_tables  # (numpy, torch: with the table only)

        rows, older = newest_data_rows(store.runs(**filters))
        out.write(floor_tables(rows) + "\n")
        if older:
            out.write(f"({left_out_note(older)}; --format csv or json lists them)\n")


def _write_file(store: Store, filters: dict[str, str], args: argparse.Namespace) -> None:
    """The matching runs written to ``--out`` atomically (an existing file is kept whole
    when the write fails)."""
    from probes.store.atomic import atomic_write

    existed = expand_user(args.out).exists()
    try:
        with atomic_write(args.out, "w", encoding="utf-8", newline="") as out:
            _write(store, filters, args.format, out)
    except OSError as exc:
        kept = f"{args.out} is unchanged" if existed else "nothing was written"
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}; {kept}") from None
