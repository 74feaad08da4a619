"""``precision localize``: a factory's module built, its rounding error localized
(:mod:`precision.localize`), and the result as store records of kind ``localize``.

The module is built as ``precision evaluate`` builds it: ``FACTORY(d_in, d_out, depth, width)``
(a ``MODULE:FACTORY`` / ``file.py:FACTORY`` / ``hf:ClassName`` spec, or a built-in family of
the grid such as ``transformer``), seeded, not trained, in float64, and run on one seeded
(batch, tokens, d_in) standard normal input; or, with ``--weights``, the trained model of a
``--save-weights`` file, run on seeded sequences of the task it was trained on. A
localization writes one record per unit (:class:`~probes.store.records.LocalizeConfig`: the whole
setting plus the ``unit``, hashed into the record's id;
:class:`~probes.store.records.LocalizeResult`: the unit's errors and the localization's totals)
under the suite ``localize``, the subject being the model's label.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass
from typing import Any

import torch

from precision.deterministic import DATA_VERSION
from precision.localize import Localization, LocalizeError, localize
from precision.models import MODELS
from precision.precisions import Precision, seeded_by
from precision.provenance import provenance
from probes.factory import FactoryError, build_family, is_factory_spec
from probes.store.canonical import config_hash
from probes.store.db import RunRecord
from probes.store.records import LocalizeResult

#: 1: the first version of a localize record's config.
VERSION = 1
#: The suite name localize records are stored under.
SUITE = "localize"
#: The task column of a localize record: the model is untrained, the input seeded.
TASK = "seeded sample"


@dataclass(frozen=True)
class LocalizeSpec:
    """One localization to compute (the module docstring says how the model is built)."""

    factory: str
    label: str
    low: Precision
    reference: Precision
    target: float | None = None
    unit_depth: int | None = None
    modules: tuple[str, ...] | None = None
    d_in: int = 20
    d_out: int = 20
    depth: int = 2
    width: int = 64
    tokens: int = 40
    batch: int = 1
    seed: int = 0
    #: a weights file of ``precision run --save-weights`` (the trained model; its job config
    #: gives the shapes, and its task draws the input) and its job id; None: untrained
    weights: str | None = None
    weights_job: str | None = None
    weights_task: str | None = None   # the task it was trained on (the records' task)
    ops: bool = False   # a containing module's own ops as units PATH::OP

    def config(self, unit: str) -> dict[str, Any]:
        """The config of the record of ``unit`` (its id is the hash)."""
        return {"version": VERSION, "kind": "localize", "suite": SUITE,
                "data_version": DATA_VERSION, "family": self.factory, "d_in": self.d_in,
                "d_out": self.d_out, "depth": self.depth, "width": self.width,
                "tokens": self.tokens, "batch": self.batch, "seed": self.seed,
                "precision": self.low.name, "reference": self.reference.name,
                "truth": "", "target": self.target, "unit_depth": self.unit_depth,
                "modules": list(self.modules) if self.modules else None, "unit": unit,
                **({"weights": self.weights_job} if self.weights_job else {}),
                **({"ops": True} if self.ops else {})}   # absent: the ids of before


def build(spec: LocalizeSpec) -> tuple[torch.nn.Module, torch.Tensor]:
    """The seeded module and input of ``spec``; FactoryError (one line) if it cannot be
    built. With ``weights``: the trained model (float64) and ``batch`` seeded sequences of
    the task it was trained on."""
    if spec.weights is not None:
        from probes.training.job import Job
        from probes.training.weights import WeightsError, load_trained_model

        try:
            model, job = load_trained_model(
                spec.weights, factory=spec.factory if is_factory_spec(spec.factory) else None)
        except WeightsError as exc:
            raise FactoryError(str(exc)) from None
        task = Job.from_config(job).build_task()
        x, _ = task.sample(spec.batch, torch.Generator().manual_seed(spec.seed + 1))
        return model.double().eval(), x.to(torch.float64)
    family: Any = spec.factory
    if not is_factory_spec(family):
        if family not in MODELS:
            raise FactoryError(f"unknown factory '{family}': give MODULE:FACTORY, "
                               "path/to/file.py:FACTORY, hf:ClassName or a built-in family "
                               f"({', '.join(sorted(MODELS))})")
        family = MODELS[family]
    try:
        model = build_family(family, spec.d_in, spec.d_out, spec.depth, spec.width,
                             spec.tokens, seed=spec.seed)
    except ValueError as exc:
        raise FactoryError(str(exc)) from None
    gen = torch.Generator().manual_seed(spec.seed + 1)
    x = torch.randn(spec.batch, spec.tokens, spec.d_in, dtype=torch.float64, generator=gen)
    return model.eval(), x


def compute(spec: LocalizeSpec, verbose: bool = True) -> Localization | str:
    """The localization of ``spec``, or its one-line error (a factory that cannot be built, a
    glob that matches no unit, a target never met). ``verbose``: progress lines on stdout."""
    try:
        model, x = build(spec)
        return localize(model, x, seeded_by(spec.low, spec.seed), spec.reference,
                        target=spec.target,
                        depth=spec.unit_depth, ops=spec.ops, modules=spec.modules,
                        progress=(lambda text: print(text, flush=True)) if verbose else None)
    except (FactoryError, LocalizeError, ValueError) as exc:
        return (str(exc).splitlines() or [type(exc).__name__])[0]


def records(spec: LocalizeSpec, loc: Localization, wall_time: float) -> list[RunRecord]:
    """One record per unit of ``loc`` (module docstring)."""
    ranks = {u.path: i + 1 for i, u in enumerate(loc.ranked())}
    kept = set(loc.kept or [])
    where = {"provenance": provenance(), "worker": f"{socket.gethostname()}:{os.getpid()}"}
    task = spec.weights_task or TASK
    out = []
    for u in loc.units:
        config = {**spec.config(u.path), "truth": loc.truth}
        result = LocalizeResult(
            problem_label=task, provenance=where["provenance"], unit=u.path, block=u.block,
            ops=u.ops, weights=u.weights, alone_low=_finite(loc.alone_low[u.path]),
            alone_reference=_finite(loc.alone_reference[u.path]), rank=ranks[u.path],
            kept=None if loc.kept is None else u.path in kept, all_low=_finite(loc.all_low),
            all_reference=_finite(loc.all_reference), units=len(loc.units),
            kept_count=None if loc.kept is None else len(kept),
            kept_error=None if loc.kept_error is None else _finite(loc.kept_error))
        out.append(RunRecord(
            run_id=config_hash(config), suite=SUITE, kind="localize", subject=spec.label,
            task=task, precision=spec.low.name, status="ok", wall_time=wall_time,
            worker=where["worker"], config=config, result=result.to_json()))
    return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
