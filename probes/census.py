"""The op census applied to what a suite trains: a user factory, every model of a suite.

``census_for_factory(spec, ...)`` builds the module from a user factory (``MODULE:FACTORY``
or ``path/to/file.py:FACTORY``) and takes its census; ``suite_mp_problem(suite)`` names, in
one line, every op that a trained suite's mpN evaluations would lack, before anything trains;
``check_factories(runs)`` builds (and takes the census of, and evaluates one sample of) a
suite's user factories in a child process (:mod:`probes.isolation`), so their import
cannot take the driver down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from precision.formats.module_assignment import work_precision
from precision.op_census import Census, CensusError, census
from probes.factory import FactoryError, build_family, is_factory_spec
from probes.isolation import DEFAULT_USER_TIME_LIMIT, ChildFailure, call_isolated
from probes.run import Run
from probes.sample_check import check_sample, sample_input


def census_for_factory(spec: str | Callable[..., nn.Module], d_in: int = 20, d_out: int = 20,
                       depth: int = 2, width: int = 64, tokens: int = 40, batch: int = 2
                       ) -> Census:
    """Build the module from a factory (as ``precision probe`` does, float64) and take its
    census on a (batch, tokens, d_in) input."""
    model = build_family(spec, d_in, d_out, depth, width, tokens)
    model.eval()
    return census(model, torch.zeros(batch, tokens, d_in, dtype=torch.float64))


def census_or_error(spec: str, *shape: int) -> Census | str:
    """:func:`census_for_factory` of ``spec`` at ``shape`` (d_in, d_out, depth, width,
    tokens), or its one-line error (``precision ops`` calls it in a child process)."""
    try:
        return census_for_factory(spec, *shape)
    except (FactoryError, CensusError) as exc:
        return str(exc)


def suite_mp_problem(suite: Any, runs: list[Run] | None = None) -> str | None:
    """For a trained suite (or only ``runs`` of it): None if every model that is evaluated in
    an mpN precision uses only supported ops, else one line naming all unsupported ops (of
    all its models).

    Each distinct (family, options, task shape, depth, width) is built and exported once,
    before anything is trained."""
    missing: dict[str, str] = {}
    seen: set[str] = set()
    for run in (runs if runs is not None else suite.runs):
        if run.kind != "trained" or not any(work_precision(p) for p in run.precisions):
            continue
        job = run.spec
        key = repr((job.family, job.model_options, job.task, job.task_options, job.depth,
                    job.width))
        if key in seen:
            continue
        seen.add(key)
        task, model = job.build()
        model.eval()
        try:
            c = census(model, torch.zeros(2, task.n_tokens, task.d_in, dtype=torch.float64))
        except CensusError as exc:
            return f"{job.family}: {exc}"
        for u in c.missing:
            missing.setdefault(u.op, u.modules[0] if u.modules else "<root>")
    if not missing:
        return None
    parts = [f"{op} (in {where})" for op, where in missing.items()]
    return (f"{len(parts)} op{'s' if len(parts) != 1 else ''} without an arbitrary-precision "
            f"implementation (mpN is among the suite's precisions): " + "; ".join(parts))


def _check_family(runs: list[Any], census: bool, sample: bool = False
                  ) -> tuple[str | None, list[str]]:
    """In the child of :func:`check_factories`: build every distinct module of one factory
    (import, call, shape check) and, with ``census``, take the op census of those evaluated
    in an mpN precision; with ``sample``, evaluate one sample of each in every precision of
    its runs (:mod:`probes.sample_check`). One line naming the first problem, or None;
    and the island reports of the sample check (lines)."""
    seen: dict[str, list[Any]] = {}
    for run in runs:
        job = run.spec
        key = repr((job.model_options, job.task, job.task_options, job.depth, job.width))
        if key in seen:
            seen[key].append(run)
            continue
        seen[key] = [run]
        try:
            job.build()
        except FactoryError as exc:
            return str(exc), []
    problem = suite_mp_problem(None, runs) if census else None
    if problem or not sample:
        return problem, []
    notes: list[str] = []
    for same in seen.values():
        task, model = same[0].spec.build()
        precisions = list(dict.fromkeys(p for run in same for p in run.precisions))
        label = f"'{same[0].spec.family}' on {task.name}"
        check = check_sample(model.eval(), sample_input(task.d_in, task.n_tokens), precisions,
                             label=label)
        if check.problem:
            return check.problem, notes
        notes += [line for line in check.lines() if line not in notes]
    return None, notes


def check_factories(runs: list[Any], *, census: bool = False, sample: bool = False,
                    time_limit: float | None = None, notes: list[str] | None = None
                    ) -> str | None:
    """Check the user factories of ``runs`` (a suite's expanded runs) before anything is
    computed, each in a child process (:mod:`probes.isolation`), so that its import, call and
    forward cannot take the driver down: None when every factory builds its modules (and,
    with ``census``, the mpN interpreter runs all their ops; with ``sample``, one sample
    evaluates in every precision of the runs, and ``notes`` receives its island reports),
    else one line naming the factory and what went wrong (an exception, an exit, a crash, or
    ``time_limit`` seconds passed)."""
    by_family: dict[str, list[Any]] = {}
    for run in runs:
        family = run.config.get("family") if run.kind == "trained" else None
        if isinstance(family, str) and is_factory_spec(family):
            by_family.setdefault(family, []).append(run)
    if by_family:  # imported once here, not again in every forked child
        import torch._dynamo  # noqa: F401
        import torch.export  # noqa: F401
    for family, family_runs in by_family.items():
        try:
            problem, lines = call_isolated(_check_family, family_runs, census, sample,
                                           time_limit=time_limit or DEFAULT_USER_TIME_LIMIT)
        except ChildFailure as exc:
            problem, lines = f"factory '{family}' cannot be built: {exc.message}", []
        if notes is not None:
            notes.extend(lines)
        if problem:
            return problem
    return None
