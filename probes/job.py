"""A trained job's task instance and freshly initialised model, from its config (seeded)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from precision.models import build_model
from probes.factory import build_from_factory, is_factory_spec
from probes.tasks import Task, make_task


def model_options(family: str, options: dict[str, Any], task: Task) -> dict[str, Any]:
    """Family options from a suite's generic ones: ``layernorm`` switches every LayerNorm of a
    Transformer; sequence models get ``max_len`` = the task's token count (BaseConv filters,
    the Transformer's learned positional embedding as in GPT-2, 001 App. D.1)."""
    opts = dict(options)
    if family == "transformer":
        if "layernorm" in opts:
            ln = bool(opts.pop("layernorm"))
            opts.update(ln_attn=ln, ln_mlp=ln, ln_final=ln)
        opts.setdefault("max_len", task.n_tokens)
    elif family == "baseconv":
        opts.setdefault("max_len", task.n_tokens)
    return opts


def build_job(config: dict[str, Any]) -> tuple[Task, nn.Module]:
    """The task instance and the freshly initialised model of a job config (seeded)."""
    opts = dict(config.get("model_options", {}))
    task_opts = dict(config.get("task_options", {}))
    if config["task"] == "read":
        task_opts.setdefault("causal", bool(opts.get("causal", True)))
    task = make_task(config["task"], seed=config["seed"], **task_opts)
    with torch.random.fork_rng():
        torch.manual_seed(config["seed"])
        if is_factory_spec(config["family"]):
            return task, build_from_factory(config["family"], task.d_in, task.d_out,
                                            config["depth"], config["width"], task.n_tokens,
                                            **opts)
        model = build_model(config["family"], task.d_in, task.d_out, config["depth"],
                            config["width"], **model_options(config["family"], opts, task))
    return task, model.double()
