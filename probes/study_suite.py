"""Study suites: ``[studies.*]`` tables expanded into runs, and a study run's store record.

::

    precisions = ["float64"]
    seeds = [0]

    [studies.baselines]                     # an entry label (the record's subject)
    study = "noisy_regression.baselines"    # a registered study (probes/studies/)
    sigma_max = [0, 1, 2, 3]                # a list is a grid axis, a scalar a fixed value
    sigmas = [[1, 3], [1, 3, 5]]            # a list-valued parameter: a list of lists
    precisions = ["float64", "mp50"]        # optional: replaces the suite's list

Every (entry, grid point, seed, precision) is one run of kind ``study``; its task label names
the grid point (``sigma_max=3``), its config holds the resolved parameters, so a change of a
default is a new run, never a stale reuse.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import time
from typing import Any

from precision.precisions import PrecisionError, parse_precision
from probes.run_config import RunConfig, SuiteError
from probes.studies import StudyError, StudyOutcome, get_study
from results.store import RunRecord, config_hash

#: Bump when the meaning of a study run config changes (2: the suite name is part of it).
STUDY_CONFIG_VERSION = 2

_RESERVED = {"study", "precisions"}


def _label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "{" + ",".join(_label(v) for v in value) + "}"
    return str(value)


def expand_studies(suite_name: str, data: dict[str, Any], precisions: list[str],
                   seeds: list[int], where: str) -> list[RunConfig]:
    """Runs of the ``[studies.*]`` tables of a suite (validated; SuiteError otherwise)."""
    entries = data.get("studies", {})
    if not isinstance(entries, dict):
        raise SuiteError(f"{where}: 'studies' must be a table")
    runs: list[RunConfig] = []
    for entry_name, entry in entries.items():
        at = f"{where} [studies.{entry_name}]"
        if not isinstance(entry, dict) or "study" not in entry:
            raise SuiteError(f"{at}: needs study = \"<registered study>\"")
        try:
            spec = get_study(str(entry["study"]))
        except StudyError as exc:
            raise SuiteError(f"{at}: {exc}") from None
        precs = entry.get("precisions", precisions)
        if not isinstance(precs, list) or not precs:
            raise SuiteError(f"{at}: 'precisions' must be a non-empty list")
        try:
            precs = [parse_precision(p).name for p in precs]
        except (PrecisionError, TypeError) as exc:
            raise SuiteError(f"{at}: {exc}") from None
        given = {k: v for k, v in entry.items() if k not in _RESERVED}
        keys = sorted(given)
        axes = [given[k] if isinstance(given[k], list) else [given[k]] for k in keys]
        for k, axis in zip(keys, axes, strict=True):
            if not axis:
                raise SuiteError(f"{at}: grid axis '{k}' is empty")
        # axes name the grid point, also a one-value axis of scalars (a profile's ``noise =
        # [5]``), so a label does not depend on how many values a profile kept; a list-valued
        # parameter given once (``[[1, 3]]``) is a fixed value
        varying = [k for k, a in zip(keys, axes, strict=True) if isinstance(given[k], list)
                   and (len(a) > 1 or not isinstance(a[0], list))]
        for point in itertools.product(*axes):
            chosen = dict(zip(keys, point, strict=True))
            try:
                params = spec.resolve(chosen)
            except StudyError as exc:
                raise SuiteError(f"{at}: {exc}") from None
            label = ",".join(f"{k}={_label(chosen[k])}" for k in varying) or entry_name
            for seed in seeds:
                for prec in precs:
                    config = {"version": STUDY_CONFIG_VERSION, "kind": "study",
                              "suite": suite_name, "study": spec.name,
                              "study_version": spec.version,
                              "entry": entry_name, "params": params,
                              "seed": seed, "precision": prec}
                    runs.append(RunConfig(
                        run_id=config_hash(config), suite=suite_name, solver=entry_name,
                        problem_label=label, precision=prec, config=config))
    return runs


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def study_record(run: RunConfig) -> RunRecord:
    """Run one study and package its outcome as a store record.

    An exception inside the study is the run's ``failed`` status with the message, not a
    crash of the sweep; non-finite metrics are stored as null.
    """
    cfg = run.config
    spec = get_study(cfg["study"])
    prec = parse_precision(cfg["precision"])
    start = time.perf_counter()
    try:
        out = spec.fn(dict(cfg["params"]), prec, int(cfg["seed"]))
    except Exception as exc:  # noqa: BLE001 -- any failure is this run's status, not the sweep's
        out = StudyOutcome(metrics={}, status="failed", error=f"{type(exc).__name__}: {exc}")
    wall = time.perf_counter() - start
    mse = out.primary_value
    series: dict[str, list[Any]] = {}
    for name, values in out.series.items():
        pts = [v if isinstance(v, tuple | list) else (i, v) for i, v in enumerate(values)]
        series[name] = [(int(s), _finite(v)) for s, v in pts]
    result = {"problem_label": run.problem_label, "primary": out.primary,
              "metrics": {k: _finite(v) for k, v in out.metrics.items()},
              "columns": list(out.metrics), **out.info}  # the study's metric order
    steps = max((len(v) for v in series.values()), default=0)
    return RunRecord(
        run_id=run.run_id, suite=run.suite, kind="study", subject=run.solver,
        task=run.problem_label, precision=run.precision, status=out.status, error=out.error,
        mse=mse, log10_mse=(math.log10(mse) if mse and mse > 0 else
                            (-math.inf if mse == 0 else None)),
        floor_log10=None, floor_index=None, rate=None, conv_order=None, steps=steps,
        wall_time=wall, worker=f"{socket.gethostname()}:{os.getpid()}", config=cfg,
        result=result, series=series)
