"""Length runs: a trained job's weights evaluated at several sequence lengths.

A ``[models.*]`` entry with ``lengths`` (or ``precision run`` / ``probe`` with ``--lengths``)
expands, beside its trained jobs, into one length run per job::

    [models.llama]
    family = "examples/zoo/llama.py:llama"
    tasks = ["multiply"]
    depth = 1
    width = [32]
    train = { recipe = "paper", steps = 300, batch_size = 16 }
    lengths = [16, 64, 256, 1024]     # evaluation only: not a grid axis

A length run trains its job exactly as the job's trained run does (training is seeded, so the
weights are the same ones the trained records measure), then evaluates those weights, without
further training, on seeded inputs of every length in every evaluation precision against the
mp100 reference (:mod:`precision.lengths`). It writes one record of kind ``length`` per
(length, precision): config = the job's config + ``length``, ``reference``, ``batch`` and the
precision (:class:`~probes.store.records.LengthConfig`, hashed into the record's id), result = the
relative error and the reference's certain digits (:class:`~probes.store.records.LengthResult`).
The run's precisions list one precision per record (each evaluation precision once per length),
so a run that cannot be computed is one ``failed`` / ``timeout`` record per id like any other.

Longer sequences than the job trained on: a family whose only length-dependent state is not
trained (a RoPE table: a buffer that is not saved) is rebuilt for the longest length and given
the trained weights; one whose trained weights depend on the length (a learned positional
embedding, a long convolution filter) keeps its trained size, and each longer length is a
``failed`` record whose error is the one-line note of why the model does not accept it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from precision.lengths import DEFAULT_REFERENCE, LengthPoint, LengthSweep, sweep
from precision.precisions import Precision
from precision.tasks import Task
from probes.kinds import trained
from probes.kinds.base import RunKind, SuiteData
from probes.run import Run, RunOptions, make_record, new_run
from probes.store.canonical import config_hash
from probes.store.db import RunRecord
from probes.store.records import LengthResult
from probes.training.job import Job
from probes.training.measure import TEST_SEED_OFFSET, trained_model

#: 1: the first version of a length record's config.
VERSION = 1
#: Input sequences per length (one sequence of L tokens already holds L x d_out outputs).
BATCH = 1


@dataclass(frozen=True)
class LengthWork:
    """What a length run measures: the trained ``job``'s weights at each of ``lengths`` in
    each of ``precisions`` (one record per pair, lengths outermost)."""

    job: Job
    lengths: tuple[int, ...]
    precisions: tuple[Precision, ...]


def record_config(job: dict[str, Any], length: int, precision: Precision) -> dict[str, Any]:
    """The config of one (job, length, precision) record (its id is the hash)."""
    return {**job, "version": VERSION, "kind": "length", "length": length,
            "reference": DEFAULT_REFERENCE.name, "batch": BATCH, "precision": precision.name}


def expand(suite: SuiteData, entries: tuple[trained.ModelEntry, ...]) -> list[Run]:
    """One length run per job of every model entry that has ``lengths``."""
    runs: list[Run] = []
    for entry in entries:
        if not entry.lengths:
            continue
        for job in entry.jobs(suite):
            base = trained.job_config(job)
            pairs = [(n, p) for n in entry.lengths for p in entry.precisions]
            config = {**base, "version": VERSION, "kind": "length",
                      "reference": DEFAULT_REFERENCE.name, "batch": BATCH,
                      "lengths": list(entry.lengths),
                      "precisions": [p.name for p in entry.precisions]}
            runs.append(new_run(
                "length", entry.label, job.problem_label, [p for _, p in pairs], config,
                record_ids=tuple(config_hash(record_config(base, n, p)) for n, p in pairs),
                spec=LengthWork(job, tuple(entry.lengths), tuple(entry.precisions))))
    return runs


def model_for_length(job: Job, task: Task, model: nn.Module, longest: int) -> nn.Module:
    """The trained ``model`` in a module built for ``longest`` tokens when the trained
    weights fit it exactly (``load_state_dict``, strict: the length-dependent state is
    untrained buffers), else ``model`` itself."""
    if longest <= task.n_tokens:
        return model
    try:
        _, longer = job.build(n_tokens=longest)
        longer.load_state_dict(model.state_dict())
    except Exception:  # noqa: BLE001 -- weights that need the trained size: keep the model
        return model
    return longer


def compute(run: Run, options: RunOptions) -> list[RunRecord]:
    """Sweep the lengths of the run's job (trained once: its stored weights when
    ``options.weights_dir`` holds them, else trained and stored); one record per (length,
    precision). A failed training, or an exception in the sweep, is every record's status
    with its reason."""
    work: LengthWork = run.spec
    job, lengths, precisions = work.job, list(work.lengths), list(work.precisions)
    base = trained.job_config(job)
    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: 1 thread beats 2 (as the trained runs)
    result: LengthSweep | None = None
    task_text, status, error = "", "failed", None
    try:
        trained_ = trained_model(job, options.device, folder=options.weights_dir,
                                 job_config=trained.job_config(job), check=False)
        task, tr = trained_.task, trained_.result
        task_text = task.describe()
        if tr.status != "ok":
            status, error = tr.status, tr.message
        else:
            longest = model_for_length(job, task, trained_.model, max(lengths))
            result = sweep(longest, lengths, precisions, d_in=task.d_in, batch=BATCH,
                           seed=job.seed + TEST_SEED_OFFSET, reference=DEFAULT_REFERENCE,
                           device=options.device)
    except Exception as exc:  # noqa: BLE001 -- any failure is this run's status, not the sweep's
        first = (str(exc).splitlines() or [""])[0]
        error = f"{type(exc).__name__}: {first}"
    finally:
        torch.set_num_threads(threads)
    wall = time.perf_counter() - start
    points = {(pt.length, pt.precision): pt for pt in (result.points if result else [])}
    records = []
    for (n, p), rid in zip(((n, p) for n in lengths for p in precisions), run.ids,
                           strict=True):
        config = record_config(base, n, p)
        if result is None:
            records.append(make_record(run, record_id=rid, precision=p, status=status,
                                       error=error, wall_time=wall, config=config,
                                       result={"problem_label": run.label, "length": n}))
        elif n in result.skipped:
            records.append(make_record(run, record_id=rid, precision=p, status="failed",
                                       error=result.skipped[n], wall_time=wall, config=config,
                                       result={"problem_label": run.label, "length": n}))
        else:
            records.append(_record(run, rid, config, points[(n, p)], task_text,
                                   result.truth_digits[n], wall))
    return records


def _record(run: Run, record_id: str, config: dict[str, Any], pt: LengthPoint, task: str,
            truth_digits: float, wall: float) -> RunRecord:
    """The store record of one measured (length, precision): the MSE against the reference
    in the ``mse`` column, the relative error in the result."""
    res = LengthResult(problem_label=run.label, task=task, length=pt.length,
                       reference=DEFAULT_REFERENCE.name, relative=pt.relative,
                       digits=None if pt.digits is None or math.isinf(pt.digits) else pt.digits,
                       max_abs=pt.max_abs, truth_digits=truth_digits)
    log10_mse = None
    if pt.mse is not None:
        log10_mse = math.log10(pt.mse) if pt.mse > 0 else -math.inf
    return make_record(run, record_id=record_id, precision=pt.precision, status=pt.status,
                       error=None if pt.status == "ok" else
                       f"output not finite in {pt.precision.name} at length {pt.length}",
                       mse=pt.mse, log10_mse=log10_mse, wall_time=wall, config=config,
                       result=res.to_json())


def cost(run: Run) -> float:
    """A trained job's cost plus the sweep's: the reference's work grows with the length
    squared (attention) per record."""
    lengths = run.config["lengths"]
    return trained.cost(run) + 1e3 * sum(n * n for n in lengths) / 64


KIND = RunKind(names=("length",), tables=(), version=VERSION, entry=trained.ModelEntry,
               parse=lambda suite: (), expand=expand, compute=compute, cost=cost)
