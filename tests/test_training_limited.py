"""Trained numbers say whether training converged: the validation curve, ``until = "floor"``,
and the T / A / R labels of the tables and claims."""

import torch
from conftest import tiny_affine_suite
from torch import nn

from precision.cli.main import main
from probes.store.db import Store
from probes.training.recipes import TrainConfig, Validation, train
from reports.model_table import limit_label, model_tables

W = torch.tensor([[0.5], [-1.25]], dtype=torch.float64)


def _linear_task(batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """y = x W for x (batch, 3 tokens, 2): a map a linear layer represents exactly."""
    x = torch.randn(batch, 3, 2, generator=gen, dtype=torch.float64)
    return x, x @ W


def _fit(**kw: object):
    torch.manual_seed(0)
    model = nn.Linear(2, 1, bias=False)
    cfg = TrainConfig(**{"recipe": "constant", "batch_size": 16, "lr": 3e-2, **kw})
    return train(model, _linear_task, lambda m, x: m(x), cfg)


def test_too_few_steps_is_training_limited():
    res = _fit(steps=40, lr=1e-3)
    assert res.status == "ok" and res.stop_reason == "steps"
    assert res.converged is False                    # the held-out error is still falling
    assert res.val_curve[-1][0] == 40 and res.val_curve[-1][1] < res.val_curve[0][1]


def test_until_floor_stops_at_the_validation_plateau():
    full = _fit(steps=6000)
    assert full.converged is True and full.stop_reason == "steps"
    early = _fit(steps=6000, until="floor", validation_points=300)
    assert early.stop_reason == "floor" and early.converged is True
    assert early.steps < 6000
    assert early.val_curve[-1][1] < 1e-12            # float32 weights: the rounding floor


def test_a_curve_that_falls_a_little_every_measurement_is_not_a_plateau():
    """The held-out curve (log10) of an engine run on AFFINE (Transformer without LayerNorm,
    depth 1, width 32), measured every 3 iterations: it falls 0.05-0.1 decades a point, and
    the plateau test, judging only the last fifth (4 points) of a 20-point window, called it
    flat and the cell stopped at 10^-6.0 where it goes on falling. Its last half falls
    steadily. The flat end of a MULTIPLY run (the same model, depth 2) is a plateau."""
    falling = [-1.82, -2.84, -3.29, -3.69, -4.04, -4.31, -4.53, -4.73, -4.89, -5.03, -5.19,
               -5.31, -5.43, -5.52, -5.60, -5.68, -5.74, -5.83, -5.89, -5.94, -6.02]
    flat = [-2.89, -2.92, -2.95, -2.99, -3.02, -3.06, -3.08, -3.09, -3.10, -3.10, -3.09,
            -3.09, -3.10, -3.10, -3.10, -3.10, -3.10, -3.10, -3.10, -3.10, -3.10]
    cfg = TrainConfig(recipe="constant", steps=60, batch_size=8, until="floor")
    val = Validation(nn.Linear(2, 1, bias=False).double(), _linear_task,
                     lambda m, x: m(x), cfg, 60)
    val.curve = [(3 * k, 10.0**v) for k, v in enumerate(falling)]
    assert val.plateaued() is False
    val.curve = [(3 * k, 10.0**v) for k, v in enumerate(flat)]
    assert val.plateaued() is True
    # the same engine curve 16 points later: 0.36 decades in its last 10, one tie among them
    slower = [-5.52, -5.60, -5.68, -5.74, -5.83, -5.89, -5.94, -6.02, -6.07, -6.13, -6.18,
              -6.24, -6.26, -6.31, -6.36, -6.41, -6.45, -6.49, -6.51, -6.54, -6.55, -6.59,
              -6.63, -6.63]
    val.curve = [(3 * k, 10.0**v) for k, v in enumerate(slower)]
    assert val.plateaued() is False


def test_validation_set_does_not_change_training():
    a, b = _fit(steps=200, validation_size=0), _fit(steps=200)
    assert a.curve == b.curve and a.val_curve == [] and a.converged is None


def test_labels():
    assert limit_label(False, -3.0, -14.0) == "T"
    assert limit_label(True, -3.0, -14.0) == "A"
    assert limit_label(None, -3.0, -14.0) == "A"
    assert limit_label(False, -16.0, -14.0) == "R"   # rounding dominates whatever training did


SUITE = tiny_affine_suite("tiny_trained", 'recipe = "paper", steps = 30, batch_size = 8',
                          precisions='"float32", "mp30"')


def test_a_budget_cut_run_is_labelled_t_in_the_table(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    with Store(db) as store:
        rows = store.runs()
        series = store.series(rows[0]["run_id"])
    assert rows and all(r["result"]["train_converged"] is False for r in rows)
    # the check's evidence is stored with each record, the Hessian's curvature among it
    assert all(isinstance(r["result"].get("check_curvature"), float) for r in rows)
    assert "val_log10_mse" in series
    # each validation point's wall time: the time-to-floor curve, rising with the steps
    seconds = series["val_seconds"]
    assert [s for s, _ in seconds] == [s for s, _ in series["val_log10_mse"]]
    assert all(0 <= a[1] <= b[1] for a, b in zip(seconds, seconds[1:], strict=False))
    assert all(r["result"].get("refused_floors") == 0 for r in rows)   # until = "steps"
    assert all(r["result"]["recipe_settings"] == {} for r in rows)   # the paper fixes none
    text = model_tables(rows)
    assert " T " in text + " " and "T = training-limited" in text


def test_a_training_stopped_by_time_is_marked_in_the_printed_table():
    """A budget in steps measures the architecture; a wall-clock stop measures the machine,
    so its cell says so and the legend below the table explains it."""
    from reports.model_table import TIME_LEGEND, model_tables

    def row(run_id: str, stop: str) -> dict:
        return {"kind": "trained", "task": "read", "subject": "tf", "precision": "float32",
                "status": "ok", "mse": 1e-4, "created_at": "2026", "run_id": run_id,
                "config": {"depth": 1, "width": 4 if stop == "steps" else 8},
                "result": {"decomposition": {"approximation": -4.0, "rounding": -9.0},
                           "train_converged": False, "train_stop": stop}}

    text = model_tables([row("a", "time limit"), row("b", "steps")])
    assert "1.0e-04 T time" in text and TIME_LEGEND in text
    assert "1.0e-04 T time" not in model_tables([row("b", "steps")])
    assert TIME_LEGEND not in model_tables([row("b", "steps")])


def test_a_grid_cell_stopped_by_time_says_so_in_its_table_and_heatmap():
    """The report's depth x width tables and heatmaps mark a cell one of whose trainings
    the clock stopped, and explain the mark; a cell stopped by its budget in work is not
    marked."""
    import pandas as pd

    from reports.model_table import TIME_LEGEND
    from reports.plots import heatmap_cells
    from reports.tables import grid_pivots, grid_runs

    def row(run_id: str, stop: str, width: int) -> dict:
        return {"kind": "trained", "task": "read", "subject": "tf", "precision": "float32",
                "status": "ok", "mse": 1e-4, "log10_mse": -4.0, "created_at": "2026",
                "run_id": run_id, "config": {"depth": 1, "width": width},
                "result": {"decomposition": {"approximation": -4.0, "rounding": -9.0},
                           "train_converged": False, "train_stop": stop}}

    runs = grid_runs([row("a", "time limit", 8), row("b", "work", 4)])
    table = next(p for p in grid_pivots(runs) if p.key == "grid-read")
    assert list(table.frame["float32"]) == ["1.0e-04 T", "1.0e-04 T time"]   # widths 4, 8
    assert TIME_LEGEND in table.title
    cells = heatmap_cells("read", "tf", "float32", runs)
    assert cells[(1, 8)][1] == "T time" and cells[(1, 4)][1] == "T"
    untimed = grid_pivots(grid_runs([row("b", "work", 4)]))
    assert all(TIME_LEGEND not in p.title for p in untimed)
    assert isinstance(runs, pd.DataFrame)
