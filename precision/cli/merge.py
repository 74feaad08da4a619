"""``precision merge SOURCE... --db STORE``: copy every run of each SOURCE store that STORE
lacks (with its traces), one transaction per SOURCE, e.g. the runs a lent GPU computed into
the store the CPU fills. A run already in STORE is never replaced; the SOURCE stores are only
read."""

from __future__ import annotations

import argparse
from typing import Any

from precision.cli.common import DEFAULT_DB, UsageError, add_db_option, store_exists
from probes.names import stored_names_problem
from probes.store.db import Store


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``merge`` subcommand on ``sub`` (the main parser's subparsers)."""
    merge = sub.add_parser("merge", help="copy the runs of other stores into this one",
                           description="Copy every run of each SOURCE store that the --db "
                           "store lacks (with its traces), one transaction per SOURCE: e.g. "
                           "the runs a lent GPU computed into the store the CPU fills. A run "
                           "already in --db is never replaced; the SOURCE stores are only "
                           "read.")
    merge.add_argument("sources", nargs="+", metavar="SOURCE", help="a results store to copy")
    add_db_option(merge, f"SQLite results store to copy into (default {DEFAULT_DB}; "
                  "created if absent)")
    return merge


def main(args: argparse.Namespace) -> int:
    """``precision merge``: every SOURCE checked, then copied into ``--db``."""
    for source in args.sources:
        if not store_exists(source):
            raise UsageError(f"no results store at {source}")
    with Store(args.db) as target:
        for source in args.sources:
            with Store(source, create=False, read_only=True) as other:
                copied, present, differing, refused = target.merge_from(
                    other, refuse=stored_names_problem)
            kept = (f", {differing} of them with other numbers (kept {args.db}'s)"
                    if differing else "")
            left = (f"; refused {len(refused)} whose names a store does not take "
                    f"(first: {refused[0]})" if refused else "")
            print(f"merged {copied} run{'' if copied == 1 else 's'} from {source} into "
                  f"{args.db}; {present} already there{kept}{left}")
    return 0
