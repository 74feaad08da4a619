"""Store records of one trained job: one :class:`RunRecord` per evaluation precision.

Every record of a job carries the job's training curve (``train_log10_loss``, subsampled),
its held-out validation curve (``val_log10_mse``) and, for iterated explicit-gradient
runs, its precision's iterate trace (``log10_mse`` per iteration). ``result`` holds the
decomposition (log10 of the approximation and rounding MSE, as ``reports.tables`` reads
it), the final training loss, parameter count, steps, the training status message,
whether the validation curve reached its plateau (``train_converged``; False =
training-limited) and why training stopped (``train_stop``).
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from precision.metrics import detect_floor
from probes.model_suite import record_id
from probes.run_config import RunConfig
from probes.trained_run import finite_or_none, run_trained
from results.store import RunRecord


def trained_records(run: RunConfig) -> list[RunRecord]:
    """Train and measure the job of ``run``; one record per evaluation precision."""
    job = {k: v for k, v in run.config.items() if k != "precisions"}
    outcome = run_trained(run.config)
    tr = outcome.training
    curve = [(s, math.log10(v) if v > 0 else None) for s, v in tr.curve
             if v is not None and math.isfinite(v)]
    val_curve = [(s, math.log10(v) if v > 0 else None) for s, v in tr.val_curve
                 if v is not None and math.isfinite(v)]
    train_floor = None
    # The floor of training is that of the held-out validation curve when there is one (the
    # training loss of a fixed LM batch can fall below what the model does on new data).
    logs = [v for _, v in (val_curve or curve) if v is not None]
    if len(logs) >= 4:
        train_floor = detect_floor([10.0 ** v for v in logs], log10_trace=logs)
    records = []
    worker = f"{socket.gethostname()}:{os.getpid()}"
    for out in outcome.per_precision:
        floor = out.floor or train_floor
        series: dict[str, list[Any]] = {"train_log10_loss": curve}
        if val_curve:
            series["val_log10_mse"] = val_curve
        if tr.lr_trace:
            series["lr"] = list(tr.lr_trace)
        if out.iterate_trace:
            series["log10_mse"] = list(enumerate(out.iterate_trace, start=1))
        result: dict[str, Any] = {
            "problem_label": run.problem_label, "task": outcome.task,
            "decomposition": {"approximation": out.log10_approximation,
                              "rounding": out.log10_rounding},
            "digits": out.digits, "n_params": outcome.n_params,
            "train_status": tr.status, "train_message": tr.message,
            "train_steps_done": tr.steps, "train_wall_time": tr.wall_time,
            "final_train_loss": tr.curve[-1][1] if tr.curve else None,
            "floor_source": "iterates" if out.floor else
            ("validation curve" if val_curve else "training curve"),
            # converged: the held-out curve reached its plateau; False = cut by the budget
            "train_converged": tr.converged, "train_stop": tr.stop_reason,
        }
        if floor is not None:
            result["floor"] = floor.to_dict()
        records.append(RunRecord(
            run_id=record_id(job, out.precision), suite=run.suite, kind="trained",
            subject=run.solver, task=run.problem_label, precision=out.precision,
            status=out.status, error=out.error, mse=out.total, log10_mse=out.log10_total,
            floor_log10=finite_or_none(floor.log10_level) if floor else None,
            floor_index=floor.index if floor else None,
            rate=floor.rate if floor else None, conv_order=floor.order if floor else None,
            steps=tr.steps, wall_time=outcome.wall_time, worker=worker,
            config={**job, "precision": out.precision}, result=result, series=series,
        ))
    return records
