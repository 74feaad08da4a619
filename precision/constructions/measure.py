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
from precision.constructions.transformer_read import DEFAULT_GAP, DEFAULT_SCALE
from precision.metrics import error_summary
from precision.params import Param, count, positive
from precision.precisions import Precision, as_precision, seeded_by
from precision.registry import Declared, Registry
from precision.solvers.measure import SolverError, SolverResult, make_problem
from precision.truth import TruthError


@dataclass(frozen=True)
class ConstructionSpec(Declared):
    """A construction: the task family it solves, its parameters (default, type and range of
    each, :class:`~precision.params.Param`), one line of description, and its trace function
    ``trace(p, problem, **params) -> (models, refs, truth)`` (:mod:`.traces`)."""

    kind = "construction"
    error = SolverError

    name: str
    task: str
    params: dict[str, Param]
    description: str
    trace: Callable[..., tuple[list[Any], list[Any], Any]]


#: Layer / step counts of a construction: each is a layer of a model built in memory.
MAX_LAYERS = 10_000
_STEP = positive(None, optional=True)  # GD step; None: 2/(lmin+lmax) of the rounded inputs


def _layers(default: int, lo: int = 1, hi: int = MAX_LAYERS) -> Param:
    return count(default, lo=lo, hi=hi)


CONSTRUCTIONS: Registry[ConstructionSpec] = Registry(
    ConstructionSpec, [
        ConstructionSpec(
            "lsa_gd", "least_squares", {"layers": _layers(12), "step": _STEP},
            "linear attention = GD with step eta (003 eq. 2.8-2.10); default 2/(lmin+lmax)",
            traces.trace_lsa_gd),
        ConstructionSpec(
            "baseconv_gd", "least_squares", {"iters": _layers(40), "step": _STEP},
            "causal BaseConv running GD on least squares (001 App. C.2.2)",
            traces.trace_baseconv_gd),
        ConstructionSpec(
            "baseconv_gd_noncausal", "least_squares", {"iters": _layers(40), "step": _STEP},
            "non-causal BaseConv, O(D) state, 3 layers per GD step (001 App. C.2.1)",
            lambda p, prob, iters, step: traces.trace_baseconv_gd(p, prob, iters, step, False)),
        ConstructionSpec(
            "lsa_newton_schulz", "inverse", {"steps": _layers(12)},
            "Newton-Schulz steps in 2 linear-attention layers each (000 Lemma 4.1)",
            traces.trace_lsa_newton),
        ConstructionSpec(
            "baseconv_read", "primitive", {},
            "single-layer BaseConv READ(i, j, a, b) (001 App. C.1.1), one point",
            lambda p, prob: traces.trace_primitive(p, prob, "read")),
        ConstructionSpec(
            "transformer_read", "primitive", {"gap": Param(DEFAULT_GAP, lo=1.0, hi=4096.0)},
            "READ(i, j, a, b) in one causal softmax-attention head, width max(32, D + 3), no "
            "LayerNorm; every unwanted key `gap` logits down (leak ~exp(-gap)), one point",
            lambda p, prob, gap: traces.trace_primitive(p, prob, "read", "transformer", gap)),
        ConstructionSpec(
            "transformer_read_ln", "primitive",
            {"gap": Param(DEFAULT_GAP, lo=1.0, hi=4096.0),
             "scale": Param(DEFAULT_SCALE, lo=1.0, hi=1e30)},
            "the same READ head in the LayerNorm cell (width max(32, D + 6); LN before the "
            "attention, the MLP and the readout): two constant channels +-`scale`, relative "
            "error ~t^2 / (4 scale^2), one point",
            lambda p, prob, gap, scale: traces.trace_primitive(
                p, prob, "read", "transformer", gap, layernorm=True, scale=scale)),
        ConstructionSpec(
            "baseconv_affine", "primitive", {},
            "single-layer BaseConv AFFINE(H) (001 App. C.1.2), one point",
            lambda p, prob: traces.trace_primitive(p, prob, "affine")),
        ConstructionSpec(
            "baseconv_multiply", "primitive", {},
            "single-layer BaseConv MULTIPLY(a, b, d_out) (001 App. C.1.3), one point",
            lambda p, prob: traces.trace_primitive(p, prob, "multiply")),
        ConstructionSpec(
            "logistic_newton", "logistic", {"N": _layers(32), "k": _layers(8, lo=0, hi=64),
             "steps": _layers(4)},
            "damped Newton for logistic regression in 11+2k layers, ReLU gadgets of N "
            "intervals, k Newton-Schulz steps (000 Thm 5.2, App. C)",
            traces.trace_logistic_newton),
        ConstructionSpec(
            "lsa_least_squares", "least_squares", {"steps": _layers(16)},
            "least squares in 3+T linear-attention layers, width 4d+3, T Newton-Schulz steps "
            "(000 Thm 4.2), per step t: a^T X_t A^T y",
            lambda p, prob, steps: traces.trace_lsa_least_squares(p, prob, steps, 0.0)),
        ConstructionSpec(
            "lsa_ridge", "least_squares", {"steps": _layers(16), "mu": Param(4.0, lo=0.0)},
            "ridge regression (A^T A + mu I)^{-1} A^T y in 3+T linear-attention layers "
            "(000 Remark 4.4), per Newton-Schulz step",
            traces.trace_lsa_least_squares),
        ConstructionSpec(
            "lsa_newton_schulz_sym", "inverse", {"steps": _layers(12)},
            "Newton-Schulz for symmetric A, one linear-attention layer per step "
            "(000 Lemma 4.1, last sentence)",
            traces.trace_lsa_newton_symmetric),
        ConstructionSpec(
            "lsa_gdpp", "least_squares",
            {"precondition": _layers(8, lo=0), "gd_steps": _layers(4)},
            "GD++ linear transformer: preconditioning layers gamma_l = 1/(3 nu_l) per sequence, "
            "then GD layers (002 Thm 5.1), per layer against the OLS prediction",
            traces.trace_lsa_gdpp),
    ])


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
