"""Tasks: seeded samplers with exact truths, one class per task (001 App. D.2-D.3).

| name              | 001   | input (tokens x channels)            | target                  |
|-------------------|-------|--------------------------------------|-------------------------|
| identity          | D.2.3 | u: N x D                             | u                       |
| read              | eq 5  | u: N x D                             | u with row j := row i   |
| affine            | eq 6  | u: N x D                             | u H, H: D x 1           |
| multiply          | eq 7  | u: N x D (D even)                    | u[:, :D/2] ⊙ u[:, D/2:] |
| square            | eq 8  | u: N x D                             | u ⊙ u                   |
| ls_parallel       | D.2.1 | x_1, y_1 e_1, ..., x_N, y_N e_1, x_q | y_1 .. y_N, y_q         |
| ls_fixed_n        | D.2.2 | [x_i, y_i] (N rows), [x_q, 0]        | y_q                     |
| ls_feature (k)    | D.2.4 | [x_i, y_i, features_k] (N rows)      | w* (last token)         |
| explicit_gradient | D.2.5 | ls_feature rows, then [w_0, 0, 0]    | grad L(w_0), eq. 13     |

Each is one class (:class:`Identity`, :class:`Read`, ..., :class:`LsFixedN`,
:class:`ExplicitGradient`), registered by name in :data:`TASK_CLASSES`.

Inputs are drawn from N(0, 1) per entry (D.3), by numpy's PCG64 generator seeded from the
caller's torch generator, and built with :mod:`precision.deterministic` (the same values on
every machine, kernel and thread count; :data:`precision.deterministic.DATA_VERSION`), and so
are the float64 training targets (elementwise IEEE maps, or that module's sums and least
squares: :attr:`Task.target_version`).
A task's hidden parameters (READ's i, j, AFFINE's H) are drawn once per instance from the
``rng`` its constructor gets (:func:`make_task`: ``default_rng(seed)``; the constructions'
:func:`~precision.problems.primitive_problem`: ``default_rng([seed, 7])`` after their u).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from precision.tasks.base import Task, TaskError
from precision.tasks.least_squares import (
    ExplicitGradient,
    LsFeature,
    LsFixedN,
    LsParallel,
    feature_rows,
    gradient_query_row,
)
from precision.tasks.primitives import Affine, Identity, Multiply, Read, Square

#: Every task class by name.
TASK_CLASSES: dict[str, type[Task]] = {cls.name: cls for cls in (
    Identity, Read, Affine, Multiply, Square, LsParallel, LsFixedN, LsFeature, ExplicitGradient)}
TASKS = tuple(TASK_CLASSES)

__all__ = ["TASKS", "TASK_CLASSES", "Affine", "ExplicitGradient", "Identity", "LsFeature",
           "LsFixedN", "LsParallel", "Multiply", "Read", "Square", "Task", "TaskError",
           "feature_rows", "gradient_query_row", "make_task"]


def make_task(name: str, seed: int = 0, **options: Any) -> Task:
    """Task ``name`` with ``options`` (dim, n, k, causal, i, j, ...: its class's) and hidden
    parameters drawn from ``default_rng(seed)``. Raises :class:`TaskError` (one line) for an
    unknown name or impossible options."""
    if name not in TASK_CLASSES:
        raise TaskError(f"unknown task '{name}'; choose from: {', '.join(TASKS)}")
    return TASK_CLASSES[name](np.random.default_rng(seed), **options)
