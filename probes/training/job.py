"""A trained job (:class:`Job`: what is trained, on which task, how, with which seed) and its
task instance and freshly initialised model (seeded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from precision.tasks import TASK_CLASSES, Task, make_task
from probes.factory import build_family
from probes.training.train_config import TrainConfig


@dataclass(frozen=True)
class Job:
    """One trained job: a model (``family``: a built-in name, a ``MODULE:FACTORY`` spec or a
    factory callable; its ``model_options``; ``depth`` x ``width``) trained on a task
    (``task`` with ``task_options``) by ``train`` (its seed and device are the job's and the
    run's, not ``train``'s) from ``seed``, then measured on ``test_size``
    seeded test sequences (``iterate``: iterations of the explicit-gradient model, 0 = none;
    ``gradient_error``: the training precision's gradient error by module, at the initial and
    the final weights, :func:`probes.gradient_check.training_gradient_error`).
    ``label`` and ``problem_label`` are the suite's model entry and task labels, ``suite`` its
    name (they name the job's records; a job outside a suite leaves them empty)."""

    family: str | Callable[..., nn.Module]
    task: str
    depth: int
    width: int
    train: TrainConfig
    seed: int = 0
    task_options: dict[str, Any] = field(default_factory=dict)
    model_options: dict[str, Any] = field(default_factory=dict)
    test_size: int = 32
    iterate: int = 0
    gradient_error: bool = False
    label: str = ""
    problem_label: str = ""
    suite: str = ""

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Job:
        """The job of a stored job config (as :meth:`config` writes it; an older config's
        partial ``train`` table gets today's defaults)."""
        return cls(family=config["family"], task=config["task"], depth=config["depth"],
                   width=config["width"], train=TrainConfig.from_table(config["train"]),
                   seed=config.get("seed", 0),
                   task_options=dict(config.get("task_options", {})),
                   model_options=dict(config.get("model_options", {})),
                   test_size=config.get("test_size", 32), iterate=config.get("iterate", 0),
                   gradient_error=bool(config.get("gradient_error", False)),
                   label=config.get("entry", config.get("solver", "")),
                   problem_label=config.get("problem_label", ""),
                   suite=config.get("suite", ""))

    def config(self, version: int) -> dict[str, Any]:
        """The job as plain JSON data, with the trained kind's config ``version``: hashed into
        the job's id, stored with its records and in its weights file. A task whose
        :attr:`~precision.tasks.base.Task.target_version` is above 1 adds it (its training
        targets changed: the id changes; the other tasks' ids stay)."""
        targets = TASK_CLASSES[self.task].target_version if self.task in TASK_CLASSES else 1
        return {"version": version, "kind": "trained", "entry": self.label,
                "family": self.family, "task": self.task, "problem_label": self.problem_label,
                "task_options": self.task_options, "model_options": self.model_options,
                "depth": self.depth, "width": self.width,
                "train": self.train.table(), "seed": self.seed,
                "suite": self.suite, "test_size": self.test_size, "iterate": self.iterate,
                **({"target_version": targets} if targets > 1 else {}),
                **({"gradient_error": True} if self.gradient_error else {})}   # ids of before

    def build_task(self) -> Task:
        """The task instance alone (no model is built: no user code runs)."""
        task_opts = dict(self.task_options)
        if self.task == "read":
            task_opts.setdefault("causal", bool(self.model_options.get("causal", True)))
        return make_task(self.task, seed=self.seed, **task_opts)

    def build(self, n_tokens: int | None = None) -> tuple[Task, nn.Module]:
        """The task instance and the freshly initialised float64 model (seeded), built for
        the task's token count or ``n_tokens`` (a longer evaluation length)."""
        task = self.build_task()
        return task, build_family(self.family, task.d_in, task.d_out, self.depth, self.width,
                                  n_tokens or task.n_tokens, self.model_options,
                                  seed=self.seed)
