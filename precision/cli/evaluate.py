"""``precision evaluate FACTORY``: one seeded sample through your architecture's (untrained)
module in each precision, its relative error against the model with every cast promoted in
the reference precision, the part its casts cause and where they round; exit 1 if a
precision cannot evaluate it (the op, graph node and module named). The computation is
:func:`probes.sample_check.evaluate_sample`, in a child process."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from precision.cli.common import (
    EXIT_USAGE,
    FACTORY_HELP,
    UsageError,
    add_shape_options,
    check_shape_options,
    csv_names,
)
from precision.precisions import CAST_POLICIES, Precision, parse_precision, with_casts

if TYPE_CHECKING:
    from probes.sample_check import SampleEvaluation


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``evaluate`` subcommand on ``sub`` (the main parser's subparsers)."""
    ev = sub.add_parser("evaluate", help="one sample through your architecture in each "
                        "precision, and where its casts round",
                        description="Build FACTORY(d_in, d_out, depth, width) (seeded, not "
                        "trained), evaluate one seeded (batch, tokens, d_in) input in each "
                        "precision and print its relative error against the model with every "
                        "cast promoted in the reference precision, the part its casts cause, "
                        "and the modules where they round (exit 1 if a precision cannot "
                        "evaluate it: the op, graph node and module named).")
    ev.add_argument("factory", help=FACTORY_HELP)
    ev.add_argument("--precisions", default=None,
                    help="comma-separated precisions (default float32,float64,mp50)")
    ev.add_argument("--casts", choices=CAST_POLICIES, default=None,
                    help="cast policy of every precision (default: as spelled, keep)")
    ev.add_argument("--reference", default="mp100",
                    help="the mpN precision of the truth, casts promoted (default mp100)")
    add_shape_options(ev, sample=True)
    return ev


def main(args: argparse.Namespace) -> int:
    """``precision evaluate``: the options checked, the sample evaluated in a child process,
    its table printed (up to the first precision that cannot evaluate it: that one is a
    one-line error naming the module and op, exit 2, as ``probe``'s check before training)."""
    from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated
    from probes.sample_check import evaluate_sample

    precisions, reference = _precisions(args)
    check_shape_options(args, ("d_in", "d_out", "depth", "width", "tokens", "batch"))
    try:  # the user's factory is imported, called and evaluated in a child process
        result = call_isolated(evaluate_sample, args.factory, precisions, reference,
                               args.d_in, args.d_out, args.depth, args.width, args.tokens,
                               args.batch, args.seed, time_limit=DEFAULT_USER_TIME_LIMIT)
    except ChildFailure as exc:
        raise UsageError(f"factory '{args.factory}' cannot be evaluated: {exc.message}") from None
    if result.build_error is not None:
        raise UsageError(result.build_error)
    if result.rows or not result.problem:   # (no table when the reference itself failed)
        _print(result, reference)
    if result.problem:
        print(f"precision: error: {result.problem}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _precisions(args: argparse.Namespace) -> tuple[list[Precision], Precision]:
    """The precisions to evaluate (``--casts``'s policy when given) and the reference (an
    mpN, every cast promoted)."""
    names = csv_names(args.precisions, "--precisions") or ["float32", "float64", "mp50"]
    precisions = [parse_precision(n) for n in names]
    if args.casts is not None:
        precisions = [with_casts(p, args.casts) for p in precisions]
    reference = with_casts(parse_precision(args.reference), "promote")
    if not reference.is_mp:
        raise UsageError(f"--reference must be an mpN precision, not {args.reference}")
    return precisions, reference


def _print(result: SampleEvaluation, reference: Precision) -> None:
    """The table of the precisions evaluated, then where their casts round."""
    wide = max([24, *(len(row.precision) for row in result.rows)])
    print(f"{'precision':<{wide}}  {'relative error':>14}  {'digits':>6}  casts (keep vs promote)")
    for row in result.rows:
        print(f"{row.precision:<{wide}}  {row.relative:>14.2e}  {row.digits:>6.1f}  "
              + (f"{row.casts:.2e}" if row.casts is not None else "-"))
    print(f"(against the model in {reference.name}: every cast promoted)")
    if result.notes:
        print("\n".join(result.notes))
