"""Constructions by name, and :func:`run_construction`, which measures one layer by layer.

For each depth (layer or step count) t, the constructed model is evaluated in the precision
and compared with (a) the matching reference algorithm's iterate t computed in the *same*
precision and (b) the certified truth of the task from the rounded inputs (:mod:`.traces`).
The result has the format of a solver run, plus the trace against the algorithm, so the
store, the floor detector and the report treat both alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from precision.backends import backend_for
from precision.constructions import traces
from precision.constructions.catalog import CONSTRUCTION_CATALOG
from precision.constructions.transformer_read import DEFAULT_GAP, DEFAULT_SCALE
from precision.metrics import error_summary
from precision.params import Param, count, positive
from precision.precisions import Precision, as_precision, seeded_by
from precision.registry import Declared, Registry
from precision.solvers.measure import SolverError, SolverResult, make_problem
from precision.truth import TruthError


@dataclass(frozen=True)
class ConstructionSpec(Declared):
    """A construction: its parameters (default, type and range of each,
    :class:`~precision.params.Param`) and its trace function
    ``trace(p, problem, **params) -> (models, refs, truth)`` (:mod:`.traces`); the task family
    it solves and one line of description are declared in
    :data:`~precision.constructions.catalog.CONSTRUCTION_CATALOG`."""

    kind = "construction"
    error = SolverError

    name: str
    params: dict[str, Param]
    trace: Callable[..., tuple[list[Any], list[Any], Any]]

    @property
    def task(self) -> str:
        """The task family whose problems it takes (``least_squares``, ``primitive``, ...)."""
        return CONSTRUCTION_CATALOG[self.name].task

    @property
    def description(self) -> str:
        """One line, as ``precision list solvers`` shows it."""
        return CONSTRUCTION_CATALOG[self.name].description


#: Layer / step counts of a construction: each is a layer of a model built in memory.
MAX_LAYERS = 10_000
_STEP = positive(None, optional=True)  # GD step; None: 2/(lmin+lmax) of the rounded inputs


def _layers(default: int, lo: int = 1, hi: int = MAX_LAYERS) -> Param:
    return count(default, lo=lo, hi=hi)


CONSTRUCTIONS: Registry[ConstructionSpec] = Registry(
    ConstructionSpec, [
        ConstructionSpec("lsa_gd", {"layers": _layers(12), "step": _STEP}, traces.trace_lsa_gd),
        ConstructionSpec("baseconv_gd", {"iters": _layers(40), "step": _STEP},
                         traces.trace_baseconv_gd),
        ConstructionSpec(
            "baseconv_gd_noncausal", {"iters": _layers(40), "step": _STEP},
            lambda p, prob, iters, step: traces.trace_baseconv_gd(p, prob, iters, step, False)),
        ConstructionSpec("lsa_newton_schulz", {"steps": _layers(12)}, traces.trace_lsa_newton),
        ConstructionSpec("baseconv_read", {},
                         lambda p, prob: traces.trace_primitive(p, prob, "read")),
        ConstructionSpec(
            "transformer_read", {"gap": Param(DEFAULT_GAP, lo=1.0, hi=4096.0)},
            lambda p, prob, gap: traces.trace_primitive(p, prob, "read", "transformer", gap)),
        ConstructionSpec(
            "transformer_read_ln",
            {"gap": Param(DEFAULT_GAP, lo=1.0, hi=4096.0),
             "scale": Param(DEFAULT_SCALE, lo=1.0, hi=1e30)},
            lambda p, prob, gap, scale: traces.trace_primitive(
                p, prob, "read", "transformer", gap, layernorm=True, scale=scale)),
        ConstructionSpec("baseconv_affine", {},
                         lambda p, prob: traces.trace_primitive(p, prob, "affine")),
        ConstructionSpec("baseconv_multiply", {},
                         lambda p, prob: traces.trace_primitive(p, prob, "multiply")),
        ConstructionSpec(
            "logistic_newton",
            {"N": _layers(32), "k": _layers(8, lo=0, hi=64), "steps": _layers(4)},
            traces.trace_logistic_newton),
        ConstructionSpec(
            "lsa_least_squares", {"steps": _layers(16)},
            lambda p, prob, steps: traces.trace_lsa_least_squares(p, prob, steps, 0.0)),
        ConstructionSpec("lsa_ridge", {"steps": _layers(16), "mu": Param(4.0, lo=0.0)},
                         traces.trace_lsa_least_squares),
        ConstructionSpec("lsa_newton_schulz_sym", {"steps": _layers(12)},
                         traces.trace_lsa_newton_symmetric),
        ConstructionSpec("lsa_gdpp", {"precondition": _layers(8, lo=0), "gd_steps": _layers(4)},
                         traces.trace_lsa_gdpp),
    ], declared=CONSTRUCTION_CATALOG)


def get_construction(name: str) -> ConstructionSpec:
    """The construction called ``name``; :class:`SolverError` listing the valid names."""
    return CONSTRUCTIONS[name]


def run_construction(name: str, precision: Precision | str, problem: dict[str, Any],
                     params: dict[str, Any] | None = None) -> SolverResult:
    """Per-layer errors of construction ``name`` in ``precision`` (see the module docstring).

    ``steps`` holds the errors against the truth per layer; ``reference`` those against the
    reference algorithm's iterates in the same precision.
    """
    spec = get_construction(name)
    prm = spec.resolve(params)
    spelled = as_precision(precision)  # the Python API's edge
    p = seeded_by(spelled, int(problem.get("seed", 0)))   # unseeded ':sr': the problem's seed
    backend_for(p).restart()  # stochastic rounding: reproducible whatever ran before
    prob = make_problem(spec.task, problem)
    t0 = time.perf_counter()
    result = SolverResult(solver=name, precision=spelled.name, status="ok", params=prm)
    try:
        models, refs, truth = spec.trace(p, prob, **prm)
    except TruthError as exc:  # that run's result; the sweep goes on
        return result.finish(t0, "failed", str(exc))
    for out, ref in zip(models, refs, strict=True):
        result.steps.append(error_summary(out, truth))
        result.reference.append(error_summary(out, ref))
        result.param_mse.append(result.steps[-1].mse)
    if any(s.log10_mse != s.log10_mse for s in result.steps):  # NaN: diverged
        result.status = "diverged"
    return result.finish(t0, precision=p)
