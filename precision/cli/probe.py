"""``precision probe FACTORY --suite SUITE``: train and measure your own architecture on a
suite's tasks, grid and recipes, stored beside the built-in families.

Before anything trains, the factory is imported, built, exported (an op mpN cannot run is an
error) and one sample evaluated in each precision, in a child process; then the sweep is
``precision run``'s (:mod:`precision.cli.run`), with the same options but ``--solvers``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precision.cli.common import FACTORY_HELP, UsageError, csv_names
from precision.cli.run import (
    add_run_options,
    check_factories,
    check_run_args,
    parse_lengths,
    run_loaded,
)
from probes.store.db import Store

if TYPE_CHECKING:   # torch loads with the command, not with --help
    from probes.suite import Suite


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``probe`` subcommand on ``sub`` (the main parser's subparsers)."""
    prb = sub.add_parser("probe", help="train and measure your own architecture on a suite",
                         description="Run a suite's tasks, grid and recipes on the module "
                         "returned by FACTORY(d_in, d_out, depth, width) and store it beside "
                         "the built-in families.")
    prb.add_argument("factory", help=FACTORY_HELP)
    prb.add_argument("--suite", required=True, help="a suite with [models.*] (e.g. primitives)")
    prb.add_argument("--tasks", default=None, help="comma-separated subset of the suite's tasks")
    prb.add_argument("--label", default=None,
                     help="the model name its rows are stored under (default: FACTORY's name; "
                     "it may not be an entry of the suite or a stored model of another factory)")
    prb.add_argument("--depths", default=None, metavar="D1,D2,...",
                     help="the depths of the grid instead of the suite's (e.g. 1,2)")
    prb.add_argument("--widths", default=None, metavar="W1,W2,...",
                     help="the widths of the grid instead of the suite's (e.g. 32)")
    add_run_options(prb, solvers=False)
    return prb


def _whole_list(value: str | None, flag: str) -> list[int] | None:
    """``1,2,3`` as whole numbers (None when not given); a one-line UsageError otherwise."""
    from precision.text_numbers import NumberError, parse_whole

    names = csv_names(value, flag)
    if names is None:
        return None
    try:
        return [parse_whole(n, flag, lo=1, hi=1_000_000) for n in names]
    except NumberError as exc:
        raise UsageError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    """``precision probe``: the suite of FACTORY checked (module docstring), then the sweep."""
    from probes.suite import load_suite, suite_for_factory, suite_with_lengths

    check_run_args(args)
    lengths = parse_lengths(args.lengths)
    base = load_suite(args.suite, profile=args.profile, expand=False,
                      precisions=csv_names(args.precisions, "--precisions"),
                      casts=args.casts, device=args.device)
    suite = suite_for_factory(base, args.factory, tasks=csv_names(args.tasks, "--tasks"),
                              label=args.label, depths=_whole_list(args.depths, "--depths"),
                              widths=_whole_list(args.widths, "--widths"))
    suite = suite_with_lengths(suite, lengths)
    _check_label(suite, args)
    # the factory's import, build, op census (an op mpN cannot run) and one sample evaluated
    # in every precision, in a child process, before anything trains
    check_factories(suite, args, census=True, sample=True)
    return run_loaded(suite, args)


def _check_label(suite: Suite, args: argparse.Namespace) -> None:
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
