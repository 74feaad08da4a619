"""The store as pandas DataFrames: a table of runs, or of a run's traces, in one call.

    import probes
    runs = probes.runs("results.db", suite="solvers", precision="float32")
    traces = probes.series("results.db", runs["run_id"][0])

A path is opened read-only (``Store(path, read_only=True)``: a missing path, or a file that is
not a store, is a one-line :class:`~probes.store.db.StoreError`, and nothing is written); an
open :class:`~probes.store.db.Store` may be passed instead. The report builds its tables on
:func:`runs_frame`, so a notebook reads the numbers the report shows.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from probes.store.db import RUN_COLUMNS, Store, StoreError

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :func:`runs`: the store's, with ``config`` / ``result`` as decoded dicts.
RUN_FRAME_COLUMNS: tuple[str, ...] = (
    *(c for c in RUN_COLUMNS if not c.endswith("_json")), "config", "result")
_REAL_COLUMNS = ["mse", "log10_mse", "floor_log10", "rate", "conv_order", "wall_time"]
#: How the store writes non-finite floats inside the config / result JSON.
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

Source = str | os.PathLike[str] | Store
Choice = str | Iterable[str] | None


@contextmanager
def _opened(store: Source) -> Iterator[Store]:
    if isinstance(store, Store):
        yield store
    else:
        with Store(store, read_only=True) as opened:
            yield opened


def runs(store: Source, *, suite: Choice = None, kind: Choice = None, subject: Choice = None,
         task: Choice = None, precision: Choice = None, status: Choice = None,
         flatten: bool = False) -> pd.DataFrame:
    """One row per stored run, in the store's order (suite, kind, task, subject, precision,
    run_id); each filter is a value or a list of values (any of them).

    Columns :data:`RUN_FRAME_COLUMNS`: the numbers as stored (NULL as NaN / None),
    ``created_at`` the stored UTC ISO-8601 text, ``config`` / ``result`` dicts. With
    ``flatten`` those two are replaced by one column per leaf, ``config.<dotted key>`` and
    ``result.<dotted key>`` (sorted), see :func:`runs_frame`.
    """
    chosen = {"suite": suite, "kind": kind, "subject": subject, "task": task,
              "precision": precision, "status": status}
    filters = {k: v if isinstance(v, str) else list(v) for k, v in chosen.items()
               if v is not None}
    with _opened(store) as opened:
        return runs_frame(opened.runs(**filters), flatten=flatten)


def runs_frame(rows: list[dict[str, Any]], *, flatten: bool = False) -> pd.DataFrame:
    """The frame of :func:`runs` from rows as :meth:`Store.runs <probes.store.db.Store.runs>`
    returns them. The REAL columns are float64; the integer ones (``steps``,
    ``floor_index``) int64, or float64 with NaN where a run has none.

    ``flatten``: nested keys joined by dots (``config.train.recipe``), lists kept as cells, a
    key a run lacks NaN; in a column of numbers, the strings "nan" / "inf" / "-inf" (the
    store's JSON for non-finite floats) read back as floats.
    """
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(RUN_FRAME_COLUMNS))
    frame[_REAL_COLUMNS] = frame[_REAL_COLUMNS].astype(float)
    if not flatten:
        return frame
    parts = [frame.drop(columns=["config", "result"])]
    for column in ("config", "result"):
        flat = pd.json_normalize([d if isinstance(d, dict) else {} for d in frame[column]],
                                 sep=".")
        flat = flat[sorted(flat.columns)].apply(_numbers).add_prefix(f"{column}.")
        parts.append(flat.set_index(frame.index))
    return pd.concat(parts, axis=1)


def _numbers(column: pd.Series) -> pd.Series:
    """A column of JSON numbers with some stored as "nan" / "inf" / "-inf", as floats."""
    values = column.dropna().tolist()
    numbers = all(v in _NON_FINITE if isinstance(v, str) else
                  isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if not numbers or not any(isinstance(v, str) for v in values):
        return column
    return column.map(lambda v: _NON_FINITE.get(v, v) if isinstance(v, str) else v
                      ).astype(float)


def series(store: Source, run_id: str | Iterable[str], name: Choice = None, *,
           wide: bool = False) -> pd.DataFrame:
    """The traces of a run (``run_id`` a str) or of several: one row per point, columns
    ``run_id``, ``name``, ``step``, ``value`` (a stored NaN is NaN), by run (in the order
    given), name and step; ``name`` keeps only those traces.

    ``wide``: index ``step``, one column per trace name (per ``(run_id, name)`` for several
    runs), NaN where a trace has no point at that step. A run id the store does not hold is a
    :class:`~probes.store.db.StoreError`.
    """
    import pandas as pd

    ids = [run_id] if isinstance(run_id, str) else list(run_id)
    names = None if name is None else {name} if isinstance(name, str) else set(name)
    points = []
    with _opened(store) as opened:
        missing = [i for i in ids if not opened.has_run(i)]
        if missing:
            raise StoreError(f"no run {', '.join(missing)} in results store {opened.path}")
        for rid in ids:
            for trace, pts in opened.series(rid).items():
                if names is None or trace in names:
                    points += [(rid, trace, step, value) for step, value in pts]
    frame = pd.DataFrame(points, columns=["run_id", "name", "step", "value"])
    frame = frame.astype({"step": "int64", "value": "float64"})
    if not wide:
        return frame
    return frame.pivot(index="step", columns="name" if isinstance(run_id, str)
                       else ["run_id", "name"], values="value")
