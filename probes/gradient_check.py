"""How far each precision bends each module's gradient: ``precision gradient FACTORY``.

The module is built as ``precision evaluate`` builds it (FACTORY(d_in, d_out, depth, width),
seeded, not trained) and given one seeded input ``x`` (seed + 1) and target (seed + 2, the
output's shape). Its gradient dL/dtheta of L = mean((f(x) - target)^2)
(:func:`precision.gradient.gradient`) is computed in the reference mpN (every cast promoted:
the truth) and in each precision. For each module that holds parameters (its own, not its
children's) the row is the relative error ||g_p - g*||_2 / ||g*||_2 over those parameters'
gradient entries, and ``(all)`` the same over every parameter: which module's arithmetic bends
the gradient most. Runs the user's code: call it in a child process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from precision.precisions import Precision, seeded_by, with_casts
from probes.factory import FactoryError
from probes.isolation import one_line
from probes.sample_check import sample_input, seeded_model

if TYPE_CHECKING:
    from precision.tasks.base import Task
    from probes.training.job import Job

#: The row of the whole gradient.
ALL = "(all)"


@dataclass
class GradientErrors:
    """The outcome of :func:`gradient_errors`: ``build_error`` (the factory cannot build its
    module: one line) or ``modules`` (module paths, ``(all)`` last), per precision the relative
    error of each (``errors[precision][module]``), ``entries`` per module, up to
    ``problem`` (one line: the first precision that cannot compute the gradient)."""

    build_error: str | None = None
    modules: list[str] = field(default_factory=list)
    entries: dict[str, int] = field(default_factory=dict)
    errors: dict[str, dict[str, float]] = field(default_factory=dict)
    problem: str | None = None


def module_of(name: str) -> str:
    """A parameter's module path (``blocks.0.mlp.fc.weight`` -> ``blocks.0.mlp.fc``)."""
    return name.rpartition(".")[0]


def relative_by_module(grads: dict[str, np.ndarray], truth: dict[str, np.ndarray]
                       ) -> dict[str, float]:
    """Module path -> ||g - g*|| / ||g*|| over its parameters' entries (float64 images of the
    exact values; a module whose true gradient is 0 gets the absolute norm), and ``(all)``."""
    out: dict[str, float] = {}
    groups: dict[str, list[str]] = {}
    for name in truth:
        groups.setdefault(module_of(name), []).append(name)
    groups[ALL] = list(truth)
    for module, names in groups.items():
        diff = sum(float(np.sum((_f64(grads[n]) - _f64(truth[n])) ** 2)) for n in names)
        norm = sum(float(np.sum(_f64(truth[n]) ** 2)) for n in names)
        out[module] = float(np.sqrt(diff / norm)) if norm > 0 else float(np.sqrt(diff))
    return out


def _f64(values: object) -> np.ndarray:
    """float64 image of a gradient (a tensor, or an MPOutput / object array of arb)."""
    if isinstance(values, torch.Tensor):
        return values.detach().to(torch.float64).numpy()
    numpy = getattr(values, "numpy", None)
    if numpy is not None:
        return numpy()
    return np.array([float(v.mid()) for v in np.asarray(values).reshape(-1)],
                    dtype=np.float64).reshape(np.shape(values))


def gradient_errors(spec: str, precisions: Sequence[Precision], reference: Precision,
                    d_in: int, d_out: int, depth: int, width: int, tokens: int, batch: int,
                    seed: int) -> GradientErrors:
    """The gradient of FACTORY ``spec``'s module on one seeded sample in ``reference`` (an
    mpN, casts promoted) and in each precision, compared module by module (module
    docstring)."""
    from precision.backends.interpreter.program import as_float64
    from precision.gradient import gradient

    try:
        model = seeded_model(spec, d_in, d_out, depth, width, tokens, seed)
    except FactoryError as exc:
        return GradientErrors(build_error=str(exc))
    x = sample_input(d_in, tokens, batch, seed=seed + 1)
    with torch.no_grad():
        shape = as_float64(model)(x).shape
    target = torch.randn(shape, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(seed + 2))
    result = GradientErrors()
    try:
        truth = gradient(model, x, target, with_casts(reference, "promote"))
    except Exception as exc:  # noqa: BLE001 - the failing op, node and module, one line
        result.problem = f"'{spec}' has no gradient in {reference.name}: {one_line(exc)}"
        return result
    result.modules = [*dict.fromkeys(module_of(n) for n in truth), ALL]
    result.entries = {m: sum(int(np.prod(truth[n].shape)) for n in truth
                             if m in (ALL, module_of(n))) for m in result.modules}
    for p in precisions:
        try:
            grads = gradient(model, x, target, seeded_by(p, seed))
        except Exception as exc:  # noqa: BLE001
            result.problem = f"'{spec}' has no gradient in {p.name}: {one_line(exc)}"
            return result
        result.errors[p.name] = relative_by_module(grads, truth)
    return result


#: Seed offset of the batch a trained job's gradient error is measured on (apart from the
#: test set's and the training batches').
GRADIENT_SEED_OFFSET = 7_777
#: Sequences of that batch (at most the job's test size).
GRADIENT_BATCH = 8


class _Predicted(torch.nn.Module):
    """A task's prediction from a model's output, as training computes its loss on it."""

    def __init__(self, model: torch.nn.Module,
                 select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self._select = select

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._select(self.model(x))


def training_gradient_error(job: Job, task: Task, trained: torch.nn.Module
                            ) -> dict[str, object]:
    """The gradient of a trained job's training loss (MSE of the task's prediction against its
    target, on a seeded batch) computed in the job's training precision, against mp50 (casts
    promoted), module by module, at the job's seeded initial weights and at its trained
    weights: ``{"precision": name, "initial": [[module, error], ...], "final": [...]}``
    (module paths of the model in its order, as pairs so the stored JSON keeps the order;
    ``(all)``: every parameter, last)."""
    from precision.gradient import gradient
    from precision.precisions import parse_precision
    from probes.training.recipe_book import RECIPES

    # the second-order recipes train in float64 whatever dtype says (train_config.py)
    trained_in = "float64" if RECIPES[job.train.recipe].second_order else job.train.dtype
    p = seeded_by(parse_precision(trained_in), job.seed)
    gen = torch.Generator().manual_seed(job.seed + GRADIENT_SEED_OFFSET)
    x, y = task.sample(min(job.test_size, GRADIENT_BATCH), gen)
    _, initial = job.build()
    out: dict[str, object] = {"precision": p.name}
    for when, model in (("initial", initial), ("final", trained)):
        wrapped = _Predicted(model, task.select)
        truth = gradient(wrapped, x, y, parse_precision("mp50+casts=promote"))
        errors = relative_by_module(gradient(wrapped, x, y, p), truth)
        out[when] = [[m.removeprefix("model.").removeprefix("model") or "(root)", e]
                     for m, e in errors.items()]
    return out
