"""``precision localize FACTORY --precision LOW``: which modules limit the error.

Builds the module as ``precision evaluate`` does (seeded, untrained, one seeded input), then
(:mod:`precision.localize`) measures every unit alone in LOW with the rest in the reference
(a), every unit alone in the reference with the rest in LOW (b), and with ``--target`` the
units to keep in the reference so that the relative error against the mp100 truth is at most
the target. Prints one line per unit sorted by (a) and stores one record per unit (kind
``localize``, suite ``localize``) in ``--db``; ``precision report`` shows their table and
figure. Every bad input (an unknown factory or module glob, a target never met) is one line,
exit 2, nothing stored.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import TYPE_CHECKING, Any

from precision.cli.common import check_shape_options, real, whole
from precision.precisions import ALIASES_TEXT, PrecisionError, parse_precision
from probes.names import check_name
from probes.store.db import Store

if TYPE_CHECKING:   # torch loads with the command, not with --help
    from probes.localize import LocalizeSpec


class LocalizeUsageError(Exception):
    """A one-line user error of ``localize`` (exit 2)."""


def add_parser(sub: Any, default_db: str) -> argparse.ArgumentParser:
    """The ``localize`` subcommand on ``sub`` (the main parser's subparsers)."""
    loc = sub.add_parser(
        "localize", help="which modules of your architecture limit its error in a precision",
        description="Build FACTORY(d_in, d_out, depth, width) (seeded, not trained), run one "
        "seeded input with each unit (a module that holds parameters or computes itself) "
        "alone in --precision and the rest in --reference (a), and alone in --reference with "
        "the rest in --precision (b); with --target, search the fewest units to keep in "
        "--reference for a relative error at most the target. Prints a table sorted by (a) "
        "and stores one record per unit.")
    loc.add_argument("factory", help="MODULE:FACTORY, path/to/file.py:FACTORY, hf:ClassName "
                     "or a built-in family (transformer, baseconv, ...)")
    loc.add_argument("--precision", required=True,
                     help=f"the low precision whose error is localized (e.g. bfloat16; "
                     f"{ALIASES_TEXT})")
    loc.add_argument("--reference", default="float64",
                     help="the precision kept units compute in: float64 (default) or mpN")
    loc.add_argument("--target", type=real, default=None,
                     help="relative error to reach (against the mp100 truth) by keeping "
                     "units in --reference (default: no search)")
    loc.add_argument("--unit-depth", type=whole, default=None, metavar="D",
                     help="merge every module deeper than D into its ancestor at depth D "
                     "(blocks.0 = depth 2; default: every module that owns ops or weights)")
    loc.add_argument("--ops", action="store_true",
                     help="split the ops a module runs itself (its '(own ops)': a block's "
                     "residual additions, a custom forward's exp or mask) into one unit per "
                     "ATen op, PATH::OP (the glob +mod[PATH::OP]=FORMAT assigns it)")
    loc.add_argument("--modules", default=None, metavar="GLOB,...",
                     help="only the units these globs match (over module paths) are "
                     "attributed and searched; the others stay in --precision")
    loc.add_argument("--weights", default=None, metavar="FILE",
                     help="localize the trained model of a 'precision run --save-weights' "
                     "file (its shapes come from the file, its input from the task it was "
                     "trained on); FACTORY is then its family, or the user factory it was "
                     "trained from")
    loc.add_argument("--trained", default=None, metavar="RUN_ID",
                     help="localize the trained model of a stored trained record of --db (its "
                     "run id, as 'precision results' lists it): its job's weights, kept "
                     "beside the store when it was trained, are read; nothing is trained")
    loc.add_argument("--label", default=None,
                     help="the model name its records are stored under (default: FACTORY's "
                     "name)")
    loc.add_argument("--db", default=default_db,
                     help=f"SQLite results store (default {default_db})")
    for flag, default, what in (("--d-in", 20, "input features"),
                                ("--d-out", 20, "output features"), ("--depth", 2, "depth"),
                                ("--width", 64, "width"), ("--tokens", 40, "tokens N"),
                                ("--batch", 1, "sequences"), ("--seed", 0, "seed")):
        loc.add_argument(flag, type=whole, default=default, help=f"{what} (default {default})")
    loc.add_argument("--time-limit", type=real, default=3600.0, metavar="SECONDS",
                     help="stop after SECONDS (default 3600)")
    return loc


def spec_of(args: argparse.Namespace) -> LocalizeSpec:
    """The localization ``args`` ask for, every option checked (LocalizeUsageError)."""
    from probes.localize import LocalizeSpec

    try:
        low = parse_precision(args.precision)
        reference = parse_precision(args.reference)
    except PrecisionError as exc:
        raise LocalizeUsageError(str(exc)) from None
    for p, flag in ((low, "--precision"), (reference, "--reference")):
        if p.modules:
            raise LocalizeUsageError(f"{flag} takes one format, not the assignment {p.name}")
    if low.is_mp or (not reference.is_mp and reference.bits <= low.bits):
        raise LocalizeUsageError(f"--reference {reference.name} must be more precise than "
                                 f"--precision {low.name} (e.g. float64 or mp50)")
    if args.target is not None and not (math.isfinite(args.target) and args.target > 0):
        raise LocalizeUsageError(f"--target must be a positive relative error, not "
                                 f"{args.target:g}")
    if args.unit_depth is not None and args.unit_depth < 1:
        raise LocalizeUsageError(f"--unit-depth must be at least 1, not {args.unit_depth}")
    if args.unit_depth is not None and args.ops:
        raise LocalizeUsageError("--ops splits the modules' own ops, --unit-depth merges "
                                 "modules: give one of them")
    check_shape_options(args, ("d_in", "d_out", "depth", "width", "tokens", "batch"),
                        LocalizeUsageError)
    if not (math.isfinite(args.time_limit) and args.time_limit > 0):
        raise LocalizeUsageError("--time-limit must be a positive number of seconds")
    modules = None
    if args.modules is not None:
        modules = tuple(g.strip() for g in args.modules.split(",") if g.strip())
        if not modules:
            raise LocalizeUsageError("--modules: empty list (give comma-separated globs)")
    shapes = (args.d_in, args.d_out, args.depth, args.width, args.tokens)
    weights_job = weights_task = None
    if args.trained is not None:
        if args.weights is not None:
            raise LocalizeUsageError("give --weights FILE or --trained RUN_ID, not both")
        args.weights = trained_weights(args.db, args.trained)
    if args.weights is not None:
        shapes, weights_job, weights_task = _weights_shapes(args.weights, args.factory)
    label = args.label if args.label is not None else args.factory.rpartition(":")[2]
    try:
        label = check_name(label, "--label" if args.label is not None else
                           f"label (from factory '{args.factory}')")
    except ValueError as exc:
        raise LocalizeUsageError(str(exc)) from None
    return LocalizeSpec(args.factory, label, low, reference, args.target, args.unit_depth,
                        modules, *shapes, args.batch, args.seed,
                        weights=args.weights, weights_job=weights_job, ops=args.ops,
                        weights_task=weights_task)


def trained_weights(db: str, run_id: str) -> str:
    """The weights file of the job of the trained record ``run_id`` of the store ``db``
    (:func:`probes.run.weights_folder`); LocalizeUsageError when the store has no such
    trained record or its job's weights are not there."""
    from probes.run import weights_folder
    from probes.store.db import StoreError
    from probes.training.measure import weights_path
    from probes.training.weights import WeightsError, check_job

    try:
        with Store(db, create=False, read_only=True) as store:
            rows = store.runs(run_id=run_id)
    except StoreError as exc:
        raise LocalizeUsageError(str(exc)) from None
    if not rows or rows[0]["kind"] != "trained":
        raise LocalizeUsageError(f"--trained: {db} has no trained record {run_id!r} (see "
                                 f"'precision results --db {db}')")
    job = {k: v for k, v in rows[0]["config"].items() if k != "precision"}
    path = weights_path(weights_folder(db), job)
    if not path.is_file():
        raise LocalizeUsageError(f"--trained {run_id}: its weights are not in "
                                 f"{path.parent} (trained before weights were kept, or "
                                 "moved); run its suite again to train it once more")
    try:   # the file must hold this record's job (not a file swapped in from another)
        check_job(path, job)
    except WeightsError as exc:
        raise LocalizeUsageError(f"--trained {run_id}: {exc}; run its suite again to train "
                                 "it once more") from None
    return str(path)


def _weights_shapes(path: str, factory: str) -> tuple[tuple[int, int, int, int, int], str, str]:
    """(d_in, d_out, depth, width, tokens), the job id and the task of the weights file
    ``path`` (its header only: nothing is built or imported); LocalizeUsageError when it
    cannot be read or FACTORY is not its family."""
    from precision.tasks import TaskError
    from probes.factory import is_factory_spec
    from probes.store.canonical import config_hash
    from probes.training.job import Job
    from probes.training.weights import WeightsError, weights_job

    try:
        job = weights_job(path)
        task = Job.from_config(job).build_task()
    except (WeightsError, TaskError, TypeError, ValueError) as exc:
        raise LocalizeUsageError(f"--weights: {(str(exc).splitlines() or [''])[0]}") from None
    if not is_factory_spec(factory) and factory != job["family"]:
        raise LocalizeUsageError(f"--weights {path} holds a '{job['family']}' model, not "
                                 f"'{factory}'")
    return ((task.d_in, task.d_out, int(job["depth"]), int(job["width"]), task.n_tokens),
            config_hash(job), str(job.get("problem_label") or job["task"]))


def run(args: argparse.Namespace) -> int:
    """``precision localize``: compute, print, store (module docstring); 0, or
    LocalizeUsageError for bad input."""
    from precision.invariants import checked
    from probes.isolation import ChildFailure, call_isolated
    from probes.localize import SUITE, compute, records

    spec = spec_of(args)
    with Store(args.db) as store:  # a store that cannot be written: before computing
        store.check_writable()
    start = time.perf_counter()
    try:  # the user's factory is imported, called and localized in a child process
        loc = call_isolated(compute, spec, time_limit=args.time_limit)
    except ChildFailure as exc:
        raise LocalizeUsageError(f"'{spec.factory}' cannot be localized: {exc.message}"
                                 ) from None
    if isinstance(loc, str):
        raise LocalizeUsageError(loc)
    wall = time.perf_counter() - start
    print("\n".join(loc.lines()))
    with Store(args.db) as store:
        written = store.write_runs(checked(records(spec, loc, wall)))   # the invariants
    print(f"{loc.evaluations} evaluations in {wall:.0f} s; {written} new record"
          f"{'s' if written != 1 else ''} of kind localize in {args.db} (suite {SUITE}, "
          f"model {spec.label}); 'precision report --db {args.db} --out report/localize' "
          "shows the table and figure")
    return 0
