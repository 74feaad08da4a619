"""``precision gradient FACTORY``: the gradient of the MSE of your architecture's (untrained)
module on one seeded sample, in each precision against the mpN truth, module by module: which
module's arithmetic bends the gradient most. The computation is
:func:`probes.gradient_check.gradient_errors`, in a child process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from precision.cli.common import (
    EXIT_USAGE,
    FACTORY_HELP,
    UsageError,
    add_shape_options,
    check_shape_options,
    csv_names,
)
from precision.precisions import parse_precision

#: The precisions of the table unless ``--precisions`` names others.
DEFAULT_PRECISIONS = ("float32", "bfloat16", "float8_e4m3", "float64")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``gradient`` subcommand on ``sub`` (the main parser's subparsers)."""
    gr = sub.add_parser("gradient", help="the gradient of your architecture in each "
                        "precision against the mpN truth, module by module",
                        description="Build FACTORY(d_in, d_out, depth, width) (seeded, not "
                        "trained), compute the gradient of the MSE of its output on one seeded "
                        "(batch, tokens, d_in) input against a seeded target, in --reference "
                        "(mpN, casts promoted: the truth) and in each precision, and print "
                        "each module's relative gradient error (exit 2 if a precision cannot "
                        "compute it: one line).")
    gr.add_argument("factory", help=FACTORY_HELP)
    gr.add_argument("--precisions", default=None,
                    help=f"comma-separated precisions (default {','.join(DEFAULT_PRECISIONS)})")
    gr.add_argument("--reference", default="mp50",
                    help="the mpN precision of the true gradient (default mp50)")
    gr.add_argument("--plot", default=None, metavar="FILE.png",
                    help="also draw the table: a row per module, a marker per precision "
                    "(PNG, and SVG beside it)")
    add_shape_options(gr, sample=True)
    return gr


def main(args: argparse.Namespace) -> int:
    """``precision gradient``: options checked, the gradients computed in a child process,
    the table printed (a precision that cannot compute it: one line, exit 2)."""
    from probes.gradient_check import gradient_errors
    from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated

    names = csv_names(args.precisions, "--precisions") or list(DEFAULT_PRECISIONS)
    precisions = [parse_precision(n) for n in names]
    reference = parse_precision(args.reference)
    if not reference.is_mp:
        raise UsageError(f"--reference must be an mpN precision, not {args.reference}")
    assigned = [p.name for p in precisions if p.modules]
    if assigned:
        raise UsageError(f"--precisions {assigned[0]}: a gradient is computed in one "
                         "precision, not a per-module assignment")
    check_shape_options(args, ("d_in", "d_out", "depth", "width", "tokens", "batch"))
    plot = _plot_path(args.plot)
    try:  # the user's factory is imported, called and differentiated in a child process
        result = call_isolated(gradient_errors, args.factory, precisions, reference,
                               args.d_in, args.d_out, args.depth, args.width, args.tokens,
                               args.batch, args.seed, time_limit=DEFAULT_USER_TIME_LIMIT)
    except ChildFailure as exc:
        raise UsageError(f"factory '{args.factory}' cannot be differentiated: "
                         f"{exc.message}") from None
    if result.build_error is not None:
        raise UsageError(result.build_error)
    if result.errors:
        wide = max(len(m) for m in result.modules)
        cols = list(result.errors)
        widths = [max(10, len(c)) for c in cols]
        print(f"{'module':<{wide}}  {'entries':>7}  "
              + "  ".join(f"{c:>{w}}" for c, w in zip(cols, widths, strict=True)))
        for m in result.modules:
            print(f"{m or '(root)':<{wide}}  {result.entries[m]:>7}  " + "  ".join(
                f"{result.errors[c][m]:>{w}.2e}" for c, w in zip(cols, widths, strict=True)))
        print(f"(relative error of each module's parameter gradients against {reference.name}, "
              "every cast promoted; loss: the MSE against a seeded target)")
        if plot is not None:
            from reports.gradient_plot import gradient_figure

            title = (f"{args.factory} (depth {args.depth}, width {args.width}, {args.batch}x"
                     f"{args.tokens} tokens, seed {args.seed}): the MSE's gradient by module")
            errors = {p: {m or "(root)": e for m, e in per.items()}
                      for p, per in result.errors.items()}
            if gradient_figure(errors, title, plot, reference.name) is not None:
                print(f"figure: {plot}")
    if result.problem:
        print(f"precision: error: {result.problem}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _plot_path(text: str | None) -> Path | None:
    """``--plot``'s file (a .png whose folder exists), or UsageError before any work."""
    if text is None:
        return None
    path = Path(text).expanduser()
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot {text}: give a .png file (an .svg is written beside it)")
    if not path.parent.is_dir():
        raise UsageError(f"--plot {text}: no folder {path.parent}")
    return path
