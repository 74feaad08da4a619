"""A synthetic store of trained depth x width runs, shaped like a quick ``primitives`` run.

Three tasks (read, affine, multiply) x three families (Transformer with and without LayerNorm,
BaseConv) x depth 1, 2, 3 x width 32, 64, evaluated in float32, float64 and mp50, seed 0 (and
seeds 0, 1, 2 for the depth-2 width-32 Transformer on read and affine). The numbers are made
up to span what a reader must compare: most cells near 1e-2, a few six orders of magnitude
lower, one float32 cell at its rounding level (``R``), training-limited cells (``T``), and
the label evidence (``check_gain``, ``grad_norm``, ``check_drift``) stored on all but the
BaseConv runs (as an older store would have them). Writing it takes well under a second;
figures and tables are built from it in the report tests, and ``python tests/grid_store.py
DB`` writes one to look at.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from precision.precisions import parse_precision
from probes.store.db import RunRecord, Store

PRECISIONS = ("float32", "float64", "mp50")
FAMILIES = {  # key (in run ids) -> (family, layernorm): the stored subject is the family
    "transformer": ("transformer", True),
    "transformer_noln": ("transformer", False),
    "baseconv": ("baseconv", False),
}
DEPTHS = (1, 2, 3)
WIDTHS = (32, 64)

#: log10 approximation error per (task, subject): a base value, and cells that differ from it.
_BASE = {
    ("read", "transformer"): -1.62, ("read", "transformer_noln"): -1.60,
    ("read", "baseconv"): -1.75,
    ("affine", "transformer"): -1.9, ("affine", "transformer_noln"): -2.4,
    ("affine", "baseconv"): -3.1,
    ("multiply", "transformer"): -2.2, ("multiply", "transformer_noln"): -2.0,
    ("multiply", "baseconv"): -4.7,
}
_SPECIAL = {
    ("read", "transformer_noln", 1, 64): -8.15,
    ("read", "baseconv", 3, 64): -4.4,
    ("affine", "transformer_noln", 1, 32): -9.02,
    ("affine", "baseconv", 1, 64): -14.3,     # near float32's rounding level: R in float32
}
#: Training-limited cells (``train_converged`` False): every BaseConv MULTIPLY cell, one READ.
_NOT_CONVERGED = {("multiply", "baseconv"), ("read", "transformer", 3, 64)}


def _approximation(task: str, subject: str, depth: int, width: int, seed: int) -> float:
    special = _SPECIAL.get((task, subject, depth, width))
    if special is not None:
        return special + 0.05 * seed
    return _BASE[(task, subject)] - 0.07 * depth + 0.04 * (width // 32) + (0.1 * seed - 0.1
                                                                           if seed else 0.0)


def _converged(task: str, subject: str, depth: int, width: int) -> bool:
    return not ((task, subject) in _NOT_CONVERGED or (task, subject, depth, width)
                in _NOT_CONVERGED)


def grid_records() -> list[RunRecord]:
    """The synthetic runs (deterministic)."""
    out = []
    for task in ("read", "affine", "multiply"):
        for subject, (family, layernorm) in FAMILIES.items():
            for depth in DEPTHS:
                for width in WIDTHS:
                    seeds = (0, 1, 2) if (subject == "transformer" and depth == 2 and width == 32
                                          and task != "multiply") else (0,)
                    for seed in seeds:
                        out += _cell_records(task, subject, family, layernorm, depth, width,
                                             seed)
    return out


def _cell_records(task: str, subject: str, family: str, layernorm: bool, depth: int,
                  width: int, seed: int) -> list[RunRecord]:
    approx = _approximation(task, subject, depth, width, seed)
    converged = _converged(task, subject, depth, width)
    evidence = ({} if family == "baseconv" else
                {"check_gain": 1.2 if converged else 37.0,
                 "grad_norm": 2e-9 if converged else 4e-3,
                 "check_drift": 0.8 if converged else 9.5})
    cfg = {"family": family, "task": task, "depth": depth, "width": width, "seed": seed,
           "train": {"recipe": "paper", "steps": 2000, "batch_size": 32},
           "model_options": {"layernorm": layernorm}}
    records = []
    for prec in PRECISIONS:
        rounding = 2 * math.log10(parse_precision(prec).unit_roundoff) + 0.3
        total = math.log10(10.0 ** approx + 10.0 ** rounding)
        result = {"task": task, "decomposition": {"approximation": approx, "rounding": rounding},
                  "train_converged": converged, **evidence}
        records.append(RunRecord(
            run_id=f"{task}-{subject}-{depth}-{width}-{seed}-{prec}", suite="primitives",
            kind="trained", subject=family, task=task, precision=prec, status="ok",
            log10_mse=total, mse=10.0 ** total, config={**cfg, "precision": prec},
            result=result))
    return records


def write_grid_store(path: Path) -> Path:
    """Write the synthetic runs into a new store at ``path``; return ``path``."""
    with Store(path) as store:
        for record in grid_records():
            store.write_run(record)
    return path


if __name__ == "__main__":
    write_grid_store(Path(sys.argv[1]))
