"""A cell starts from the best thing it contains (``train.start = "contained"``).

A model of depth ``d`` of a residual family contains every shallower model of the same
family, options and width exactly (:mod:`precision.models.containment`). A job whose
training config says ``start = "contained"`` therefore starts from the trained weights of the
job one layer shallower (the same config at depth ``d - 1``, itself started the same way, down
to depth 1, which starts fresh: nothing is shallower), embedded with its new layer the
identity, and trains from there with the same recipe. Each link of that chain is trained
once (its weights are read from the store's weights folder when kept there, else trained now
and kept), so the start is a function of the job alone, the same whatever order a sweep
runs its cells in. One rule for every family and cell; the record says where training started
(``TrainResult.start``). A family without an exact identity layer starts fresh, and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from precision.models.containment import embed_shallower, nests_by_depth
from probes.store.canonical import config_hash

if TYPE_CHECKING:
    from probes.training.job import Job


def contained_job(job: Job, job_config: dict[str, Any] | None
                  ) -> tuple[Job, dict[str, Any] | None]:
    """The job one layer shallower that ``job`` starts from, and its stored config (None
    when ``job_config`` is None): depth ``d - 1``, started ``"contained"`` unless at depth 1."""
    start = "contained" if job.depth - 1 > 1 else "fresh"
    inner = replace(job, depth=job.depth - 1, train=replace(job.train, start=start))
    if job_config is None:
        return inner, None
    train = {k: v for k, v in job_config["train"].items() if k != "start"}
    if start != "fresh":
        train["start"] = start
    return inner, {**job_config, "depth": job.depth - 1, "train": train}


def contained_start(job: Job, model: nn.Module, device: str, folder: str | Path | None,
                    job_config: dict[str, Any] | None, train_once: Callable[..., Any]) -> str:
    """Embed into ``model`` (``job``'s freshly built model, in place) the trained weights of
    :func:`contained_job`, trained once by ``train_once`` (:func:`probes.training.measure.
    trained_model`: read when kept, else trained and kept; module docstring); returns the
    start to record: ``"contained <job id> (depth d, held-out MSE m)"``, or why it starts
    fresh."""
    if job.depth <= 1:
        return "fresh (depth 1 contains no shallower model)"
    if not nests_by_depth(model):
        return "fresh (this family has no exact identity layer: it contains no shallower model)"
    inner, inner_config = contained_job(job, job_config)
    with torch.random.fork_rng(devices=[]):   # read or trained now: the same global state
        small = train_once(inner, device, folder=folder, job_config=inner_config,
                              check=False)
    if small.result.status != "ok":
        return f"fresh (the depth-{inner.depth} model it contains {small.result.status})"
    embed_shallower(small.model.to(next(model.parameters()).dtype), model)
    curve = small.result.val_curve or small.result.curve
    held = f", held-out MSE {curve[-1][1]:.3g}" if curve else ""
    who = config_hash(inner_config) if inner_config is not None else "trained here"
    return f"contained {who} (depth {inner.depth}{held})"
