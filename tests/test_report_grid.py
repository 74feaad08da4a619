"""Depth x width figures a reader can compare: one log-MSE axis per task, the rounding levels
as labelled reference lines, heatmaps that print each cell's value and label on one colour
scale per task."""

import math
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from grid_store import write_grid_store

matplotlib.use("Agg")

from probes.store.db import Store  # noqa: E402
from reports import plots  # noqa: E402
from reports.floor_cells import format_log10  # noqa: E402
from reports.tables import GRID_COLUMNS, grid_runs  # noqa: E402


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    with Store(write_grid_store(tmp_path_factory.mktemp("fig") / "g.db")) as store:
        return grid_runs(store.runs())


@pytest.fixture
def drawn(drawn_from):
    """The figures drawn, left open (``_save`` writes nothing)."""
    return drawn_from(plots)


def _panels(fig):
    return [ax for ax in fig.axes if ax.axison]


def _horizontal_levels(ax):
    """The y of every horizontal line across the whole panel (``axhline``)."""
    return {line.get_ydata()[0] for line in ax.get_lines()
            if list(line.get_xdata()) == [0, 1] and len(set(line.get_ydata())) == 1}


def _legend_texts(fig):
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_depth_panels_share_one_axis_that_covers_every_family(grid, drawn, tmp_path):
    assert plots.grid_lines("affine", grid, tmp_path / "d.png") is not None
    panels = _panels(drawn[0])
    assert [ax.get_title() for ax in panels] == [
        "baseconv, no LN", "transformer, LN", "transformer, no LN"]
    low, high = panels[0].get_ylim()
    assert all(ax.get_ylim() == (low, high) for ax in panels)
    ys = [y for ax in panels for line in ax.get_lines() for y in line.get_ydata()]
    assert low <= min(ys) and max(ys) <= high
    # The 1e-9 Transformer and the 1e-2 ones are read off one axis, 6+ decades apart.
    ok = grid[(grid["task"] == "affine") & (grid["precision"] == "mp50")]
    assert ok["log10_mse"].max() - ok["log10_mse"].min() > 6
    assert high - low > ok["log10_mse"].max() - ok["log10_mse"].min()


def test_rounding_levels_are_labelled_reference_lines(grid, drawn, tmp_path):
    plots.grid_lines("read", grid, tmp_path / "d.png")
    level32 = plots.rounding_level("float32")
    assert level32 == pytest.approx(2 * math.log10(2.0 ** -24))
    for ax in _panels(drawn[0]):
        assert level32 in _horizontal_levels(ax)
        assert ax.get_ylim()[0] < level32
    texts = _legend_texts(drawn[0])
    assert f"float32 rounding level u² = {format_log10(level32)}" in texts
    # float64's level (1e-32) lies 30 decades below the data: named, not drawn
    level64 = plots.rounding_level("float64")
    assert f"float64 rounding level u² = {format_log10(level64)} (below the axis)" in texts
    assert all(level64 not in _horizontal_levels(ax) for ax in _panels(drawn[0]))


def test_both_levels_are_drawn_when_the_data_reaches_down_to_them(drawn, tmp_path):
    rows = [{"task": "t", "subject": s, "precision": "mp50", "depth": d, "width": 8,
             "seed": 0, "train_steps": 10, "status": "ok", "log10_mse": v - d,
             "approximation": v - d, "rounding": -100.0, "converged": True,
             "run_id": f"{s}{d}"} for s, v in (("a", -20.0), ("b", -3.0)) for d in (1, 2)]
    plots.grid_lines("t", pd.DataFrame(rows, columns=GRID_COLUMNS), tmp_path / "d.png")
    panels = _panels(drawn[0])
    levels = {plots.rounding_level(p) for p in ("float32", "float64")}
    assert all(levels <= _horizontal_levels(ax) for ax in panels)
    assert panels[0].get_ylim()[0] < plots.rounding_level("float64")
    assert not any("below the axis" in t for t in _legend_texts(drawn[0]))


def _cell_texts(fig):
    return {t.get_text() for ax in fig.axes for t in ax.texts}


def test_heatmap_prints_value_and_label_on_the_task_colour_scale(grid, drawn, tmp_path):
    for subject in ("transformer, no LN", "baseconv, no LN"):
        assert plots.grid_heatmap("affine", subject, "mp50", grid, tmp_path / "h.png")
    plots.grid_heatmap("multiply", "baseconv, no LN", "mp50", grid, tmp_path / "m.png")
    plots.grid_heatmap("affine", "baseconv, no LN", "float32", grid, tmp_path / "f.png")
    noln, conv, mult, f32 = drawn[:4]
    assert "-9.0\nA" in _cell_texts(noln)          # the value and its label, in the cell
    assert "-2.4\nA" in _cell_texts(noln)
    assert all(text.endswith("\nT") for text in _cell_texts(mult) if text[0] == "-")
    plots.grid_heatmap("read", "transformer, LN", "mp50", grid, tmp_path / "r.png")
    assert any(t.endswith("\nA\n3 seeds") for t in _cell_texts(drawn[-1]))   # a median
    assert any(text.endswith("\nR") for text in _cell_texts(f32))
    # one colour scale for the task: every heatmap of affine has the same limits
    limits = {fig.axes[0].get_images()[0].get_clim() for fig in (noln, conv, f32)}
    assert limits == {plots.heatmap_range("affine", grid)}
    vmin, vmax = limits.pop()
    task = grid[grid["task"] == "affine"]["log10_mse"]
    assert vmin <= task.min() and task.max() <= vmax
    assert all(len(fig.axes) == 2 for fig in drawn)   # the heatmap and its colourbar
    assert "log10 test MSE" in noln.axes[1].get_ylabel()


def test_heatmap_cell_is_the_median_over_seeds_with_their_labels(grid):
    cells = plots.heatmap_cells("read", "transformer, LN", "mp50", grid)
    seeds = grid[(grid["task"] == "read") & (grid["subject"] == "transformer, LN")
                 & (grid["precision"] == "mp50") & (grid["depth"] == 2)
                 & (grid["width"] == 32)]["log10_mse"]
    assert len(seeds) == 3
    assert cells[(2, 32)] == (pytest.approx(sorted(seeds)[1]), "A", 3)
    assert cells[(3, 64)][1] == "T"
    mixed = grid.copy()
    mixed.loc[mixed["run_id"] == "read-transformer-2-32-1-mp50", "converged"] = False
    assert plots.heatmap_cells("read", "transformer, LN", "mp50", mixed)[(2, 32)][1] == "A/T"


def test_model_table_shows_the_label_evidence_where_stored(tmp_path):
    from reports.model_table import model_tables

    with Store(write_grid_store(tmp_path / "g.db")) as store:
        rows = store.runs()
    text = model_tables([r for r in rows if r["task"] == "multiply"])
    head = next(line for line in text.splitlines() if line.startswith("model "))
    assert head.split()[-5:] == ["gain", "|grad|", "drift", "curvature", "power"]
    assert "check gain" in head
    lines = [line.split() for line in text.splitlines() if line.startswith(("transformer",
                                                                            "baseconv"))]
    # a Transformer job: its label in every precision, then its evidence (stored once per job)
    # (stored before the curvature and the check's power were measured: '-')
    assert any(cols[8:] == ["9.3e-03", "A"] * 3 + ["1.2", "2.0e-09", "0.8", "-", "-"]
               for cols in lines)
    # BaseConv records were stored without the check: '-', and the labels stay T
    conv = [cols for cols in lines if cols[0] == "baseconv"]
    assert conv and all(cols[-5:] == ["-"] * 5 and cols[9] == "T" for cols in conv)
    # a store without any evidence keeps the old columns
    old = [{**r, "result": {k: v for k, v in r["result"].items()
                            if k not in ("check_gain", "grad_norm", "check_drift")}} for r in rows]
    assert "check gain" not in model_tables(old)


def test_report_tables_carry_labels_and_the_evidence(grid):
    from reports.tables import grid_pivots

    pivots = {p.key: p for p in grid_pivots(grid)}
    assert list(pivots) == [f"grid-{t}{e}" for t in ("affine", "multiply", "read")
                            for e in ("", "-evidence")]   # a table per task, then evidence
    affine = pivots["grid-affine"].frame.loc[["baseconv, no LN"]].set_index(["depth", "width"])
    assert affine.loc[(1, 64), "float32"].endswith(" R")
    assert affine.loc[(1, 32), "float32"].endswith(" A")
    mult = pivots["grid-multiply"].frame.loc[["baseconv, no LN"]]
    assert all(cell.endswith(" T") for cell in mult["mp50"])
    evidence = pivots["grid-read-evidence"].frame.loc[["transformer, LN"]]
    cell = evidence.set_index(["depth", "width"])
    assert list(cell.loc[(3, 64)]) == ["37", "4.0e-03", "9.5", "-", "-"]   # the T cell
    assert list(cell.loc[(2, 32)]) == ["1.2", "2.0e-09", "0.8", "-", "-"]  # three seeds
    # BaseConv's records were stored without it
    assert "baseconv, no LN" not in pivots["grid-multiply-evidence"].frame.index


def test_training_length_draws_only_subjects_trained_at_several_lengths(drawn, tmp_path):
    """An engine subject has one Adam length: it is no line against training length (it was
    drawn as a lone point at its 200 Adam steps, left of the Adam runs)."""
    rows = [("transformer, LN", 100, -1.0), ("transformer, LN", 1000, -2.0),
            ("transformer, LN", 10000, -3.0), ("transformer, LN, engine", 200, -6.0)]
    runs = pd.DataFrame([{"task": "multiply", "status": "ok", "precision": "float64",
                          "subject": s, "train_steps": n, "log10_mse": v} for s, n, v in rows])
    assert plots.training_length("multiply", runs, tmp_path / "l.png") is not None
    (ax,) = _panels(drawn[-1])
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
    assert len(lines) == 1 and list(lines[0].get_xdata()) == [100, 1000, 10000]
    assert all("engine" not in t.get_text() for t in ax.get_legend().get_texts())
    only_engine = runs[runs["subject"].str.contains("engine")]
    assert plots.training_length("multiply", only_engine, tmp_path / "e.png") is None


def test_a_one_cell_grid_draws_no_heatmap_and_legends_wrap(grid, tmp_path):
    """train_precision quick wrote sixteen 1x1 heatmaps (a cell the table already shows);
    the console table's legend was one line of ~700 characters."""
    from reports.model_table import model_tables
    from reports.text_table import TITLE_WIDTH

    one = grid[(grid["depth"] == grid["depth"].min()) & (grid["width"] == grid["width"].min())]
    assert one.groupby(["task", "subject", "precision"]).size().max() >= 1
    task, subject, prec = one.iloc[0][["task", "subject", "precision"]]
    assert plots.grid_heatmap(task, subject, prec, one, tmp_path / "one.png") is None
    assert not (tmp_path / "one.png").exists()
    shipped = Path(__file__).resolve().parents[1] / "reports" / "stores" / "primitives_floor.db"
    with Store(shipped, create=False, read_only=True) as store:
        text = model_tables(store.runs())
    title_lines = [line for line in text.splitlines() if not line.startswith(
        ("model", "-", "transformer", "baseconv"))]
    assert title_lines and max(map(len, title_lines)) <= TITLE_WIDTH


def test_a_precision_whose_output_is_not_finite_is_marked_in_the_depth_figure(grid, drawn,
                                                                               tmp_path):
    """No figure showed a float32 overflow of a trained model (the depth figure plots the
    highest precision): it is an 'x' in that precision's colour, with its legend entry."""
    from reports import precision_style

    row = grid[(grid["task"] == "affine") & (grid["precision"] == "float32")].index[0]
    broken = grid.copy()
    broken.loc[row, ["status", "log10_mse"]] = ["nonfinite", None]
    assert plots.grid_lines("affine", broken, tmp_path / "d.png") is not None
    fig = drawn[-1]
    assert "not finite in float32 (at the top)" in _legend_texts(fig)
    crosses = [line for ax in _panels(fig) for line in ax.get_lines()
               if line.get_marker() == "x"]
    assert len(crosses) == 1 and crosses[0].get_color() == precision_style.colour("float32")
