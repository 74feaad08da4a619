"""``precision ops FACTORY``: the census of the core ATen ops of your architecture's exported
graph (how often, where) and whether mpN runs each one; exit 2 if mpN lacks any."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from precision.cli.common import (
    EXIT_USAGE,
    FACTORY_HELP,
    UsageError,
    add_shape_options,
    check_shape_options,
)
from precision.precisions import CAST_POLICIES


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``ops`` subcommand on ``sub`` (the main parser's subparsers)."""
    ops = sub.add_parser("ops", help="list the ops of your architecture and their mpN support",
                         description="Export the module of FACTORY(d_in, d_out, depth, width) "
                         "on a (2, tokens, d_in) input and list every core ATen op its graph "
                         "uses, how often, where, and whether mpN runs it (exit 2 if not).")
    ops.add_argument("factory", help=FACTORY_HELP)
    add_shape_options(ops)
    ops.add_argument("--casts", choices=CAST_POLICIES, default="keep",
                     help="the cast policy the casts listing refers to (default keep)")
    return ops


def main(args: argparse.Namespace) -> int:
    """Census of the ops of FACTORY's exported graph; exit 2 if mpN lacks any."""
    from probes.census import census_or_error
    from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated

    check_shape_options(args, ("d_in", "d_out", "depth", "width", "tokens"))
    try:  # the user's factory is imported and called in a child process
        c = call_isolated(census_or_error, args.factory, args.d_in, args.d_out, args.depth,
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
