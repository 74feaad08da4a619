"""001 side by side: each of 001's Figures 1-4 and 6-10 is drawn from a store that holds its
runs, with the published values on the same axes, and is named with the runs it needs when
the store lacks them; the published values file is validated; the section is absent from a
store with none of the figures' runs (a probe's own model included)."""

from __future__ import annotations

import math

import matplotlib
import pytest

matplotlib.use("Agg")

from probes.store.db import RunRecord, Store  # noqa: E402
from reports.build import build_report  # noqa: E402
from reports.papers import figures as pf  # noqa: E402

PRECISIONS = ("float32", "float64")


def _trained(suite: str, subject: str, family: str, label: str, task: str, depth: int,
             width: int, log10_mse: float, *, seed: int = 0, options: dict | None = None,
             model: dict | None = None, recipe: str = "paper", steps: int = 1000,
             series: dict | None = None) -> list[RunRecord]:
    cfg = {"kind": "trained", "family": family, "task": task, "problem_label": label,
           "task_options": options or {}, "depth": depth, "width": width, "seed": seed,
           "model_options": {"layernorm": True, **(model or {})},
           "train": {"recipe": recipe, "steps": steps}}
    key = f"{suite}-{subject}-{label}-{depth}-{width}-{seed}-{recipe}-{steps}-" + "-".join(
        f"{k}{v}" for k, v in sorted((model or {}).items()))
    return [RunRecord(run_id=f"{key}-{p}", suite=suite, kind="trained", subject=subject,
                      task=label, precision=p, status="ok", log10_mse=log10_mse,
                      mse=10.0 ** log10_mse, config={**cfg, "precision": p},
                      series=series or {}) for p in PRECISIONS]


def _solver(suite: str, subject: str, problem: str, floor: float, trace: list[float],
            seed: int = 0) -> RunRecord:
    return RunRecord(run_id=f"{suite}-{subject}-{problem}-{seed}", suite=suite,
                     kind="solver" if suite == "solvers" else "construction", subject=subject,
                     task=problem, precision="float32", status="ok", log10_mse=floor,
                     floor_log10=floor, floor_index=len(trace) - 1, steps=len(trace),
                     config={"solver": subject, "problem_label": problem,
                             "problem": {"dim": 5, "n_samples": 20, "seed": seed}},
                     series={"log10_mse": trace})


def paper_records() -> list[RunRecord]:
    """Every figure's runs, made up (a few per figure)."""
    out: list[RunRecord] = []
    ls = {"dim": 5, "n": 20}
    for depth in (2, 4, 8):
        out += _trained("least_squares", "transformer", "transformer", "ls_parallel",
                        "ls_parallel", depth, 64, -2.0 - 0.3 * depth, options=ls)
        out += _trained("least_squares", "transformer", "transformer", "ls_fixed_n",
                        "ls_fixed_n", depth, 64, -3.0 - 0.4 * depth, options=ls)
        out += _trained("least_squares", "baseconv", "baseconv", "ls_fixed_n", "ls_fixed_n",
                        depth, 64, -2.0 - 0.2 * depth, options=ls, model={"layernorm": False})
    for k in (0, 1, 2):
        for depth in (2, 4):
            out += _trained("least_squares", "transformer_features", "transformer",
                            f"ls_feature_k{k}", "ls_feature", depth, 64, -1.0 - k - 0.2 * depth,
                            options={"k": k})
            out += _trained("least_squares", "baseconv_features", "baseconv",
                            f"ls_feature_k{k}", "ls_feature", depth, 64, -0.5 - k - 0.2 * depth,
                            options={"k": k}, model={"layernorm": False})
    iterates = [-0.5 - 0.2 * i for i in range(30)]
    out += _trained("least_squares", "baseconv_gradient", "baseconv", "explicit_gradient_k2",
                    "explicit_gradient", 3, 64, -4.0, options={"k": 2},
                    model={"layernorm": False}, series={"log10_mse": iterates})
    out += _trained("least_squares", "transformer_gradient", "transformer",
                    "explicit_gradient_k2", "explicit_gradient", 3, 64, -2.5, options={"k": 2},
                    series={"log10_mse": [-0.5 - 0.1 * i for i in range(30)]})
    out.append(_solver("solvers", "ols_qr", "ls_gauss", -13.2, [-13.2]))
    out.append(_solver("solvers", "gd", "ls_gauss", -14.1,
                       [max(-14.1, 0.3 - 0.2 * i) for i in range(120)]))
    out.append(_solver("constructions", "baseconv_gd", "ls_gauss5", -14.0,
                       [max(-14.0, 0.3 - 0.2 * i) for i in range(120)]))
    for task in ("read", "affine", "multiply"):
        for family in ("transformer", "baseconv"):
            for ln in (True, False):
                for depth in (1, 2, 4):
                    out += _trained("primitives", family, family, task, task, depth, 64,
                                    -3.0 - depth - (2 if family == "baseconv" else 0)
                                    - (1 if not ln else 0),
                                    model={"layernorm": ln, "heads": 1, "mlp_factor": 4})
    for heads in (2, 4):
        out += _trained("primitives", "transformer", "transformer", "multiply", "multiply", 2,
                        64, -5.0 - 0.1 * heads, model={"heads": heads, "mlp_factor": 4})
    for mlp in (2, 8):
        out += _trained("primitives", "transformer", "transformer", "multiply", "multiply", 2,
                        64, -5.0 - 0.1 * mlp, model={"heads": 1, "mlp_factor": mlp})
    out += _trained("primitives", "transformer", "transformer", "multiply", "multiply", 2, 32,
                    -4.5, model={"heads": 1, "mlp_factor": 4})
    for family in ("transformer", "baseconv"):     # as the train_length suite stores them
        rate = 0.7 if family == "transformer" else 0.9
        for steps in (100, 1000, 10000):              # one run per length (001 App. E.2)
            out += _trained("train_length", family, family, "multiply", "multiply", 1, 64,
                            -1.0 - rate * math.log10(steps), recipe="paper-length",
                            steps=steps)
        curve = [(s, -0.5 - rate * math.log10(s)) for s in (10, 30, 100, 300, 1000)]
        out += _trained("train_length", f"{family}_engine", family, "multiply", "multiply", 1,
                        64, curve[-1][1], recipe="engine", steps=200,
                        series={"val_log10_mse": curve})
    for depth in (2, 4):     # a second recipe and width: the engine's floor profile
        for width in (32, 64):
            out += _trained("least_squares", "transformer", "transformer", "ls_fixed_n",
                            "ls_fixed_n", depth, width, -6.0 - depth - width / 64,
                            options=ls, recipe="engine", steps=1000)
    return out


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("paper") / "paper.db"
    with Store(path) as store:
        store.write_runs(paper_records())
    return path


@pytest.fixture(scope="module")
def rows(store_path):
    with Store(store_path, read_only=True) as store:
        return store.runs()


@pytest.fixture(scope="module")
def series(store_path):
    store = Store(store_path, read_only=True)
    yield lambda rid, name: store.series(rid, name).get(name, [])
    store.close()


@pytest.fixture
def drawn(drawn_from):
    """The figures drawn, left open (``_save`` writes nothing)."""
    return drawn_from(pf)


def _without(rows, spec_number):
    """The rows minus those of every part of one figure."""
    runs = pf.paper_runs(rows)
    spec = next(s for s in pf.SPECS if s.number == spec_number)
    gone = {rid for part in spec.parts for rid in part.select(runs)["run_id"]}
    return [r for r in rows if r["run_id"] not in gone]


def _legend(fig):
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _black_points(ax):
    """(x, y) of every black (published) marker or line point on the axes."""
    return {(float(x), float(y)) for line in ax.get_lines()
            if line.get_color() == "black" or line.get_markeredgecolor() == "black"
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}


# --- the published values ------------------------------------------------------------------

def test_published_file_states_every_figure_from_the_text():
    published = pf.load_published()
    assert sorted(published) == list(pf.FIGURE_NUMBERS)
    levels = {(n, m.letter): m.log10 for n, p in published.items() for m in p.marks}
    assert levels[(1, "a")] == -5.0 and levels[(1, "b")] == -14.0   # Sec. 3.1
    assert levels[(2, "a")] == -7.0 and levels[(2, "b")] == -14.0   # Fig. 2 caption
    assert levels[(3, "a")] == -8.0 and levels[(3, "c")] == -6.0    # Fig. 3 caption
    assert levels[(7, "d")] == -13.0                                # hard-coded layer
    assert published[4].marks == () and "no number" in published[4].note
    for p in published.values():
        for m in p.marks:
            assert m.where and m.quote and m.reading in ("exact", "approximate")
    rel = {m.relative_to for m in published[6].marks}
    assert rel == {"k=0"} and all(m.decades == (-2.0, -2.0) for m in published[6].marks)
    assert published[10].marks[0].decades == (2.0, 2.0)


def _one(toml: str, old: str, new: str) -> str:
    assert old in toml
    return toml.replace(old, new, 1)


@pytest.mark.parametrize(("old", "new", "message"), [
    ('what = "OLS in single precision"', 'wat = "OLS"', "fig1.mark[1]: unknown key 'wat'"),
    ("log10 = -14.0", 'log10 = "-14"', "'log10' must be a number"),
    ('relation = "<"', 'relation = "<="', "'relation' '<=' is not one of"),
    ('line = "gd"', 'line = "sgd"', "'line' 'sgd' is not one of"),
    ('panel = "read"', 'panel = "write"', "'panel' 'write' is not one of"),
    ('[fig10]', '[fig11]', "unknown key 'fig11'"),
    ('decades = [2.0, 2.0]', 'decades = [2.0]', "'decades' must be [lo, hi]"),
    ('kind = "slope"', 'kind = "band"', "'kind' must be level, relative or slope"),
])
def test_published_file_is_validated(old, new, message):
    text = (pf.resources.files("reports.papers") / pf.PUBLISHED_FILE).read_text(encoding="utf-8")
    with pytest.raises(pf.PublishedError) as err:
        pf.load_published(_one(text, old, new))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_figure_or_a_missing_value_is_an_error():
    text = (pf.resources.files("reports.papers") / pf.PUBLISHED_FILE).read_text(encoding="utf-8")
    with pytest.raises(pf.PublishedError, match="figure 'fig4' is missing"):
        pf.load_published(text[:text.index("[fig4]")] + text[text.index("[fig6]"):])
    with pytest.raises(pf.PublishedError, match="a level mark needs 'log10'"):
        pf.load_published(text.replace("log10 = -7.0\n", "", 1))


# --- the figures ---------------------------------------------------------------------------

def test_every_figure_is_drawn_from_a_store_with_its_runs(rows, series, tmp_path, drawn):
    section = pf.side_by_side_section(rows, series, tmp_path)
    assert section is not None and section.title == "001 side by side"
    names = sorted(path.name for _, path in section.figures)
    assert names == sorted(f"001-fig-{n}.png" for n in pf.FIGURE_NUMBERS)
    assert len(drawn) == len(pf.FIGURE_NUMBERS)
    assert not [p for p in section.paragraphs if "needs runs" in p]
    assert section.tables[0].key == "published-001"
    assert "Fig. 3 (a)" in section.tables[0].frame.index


@pytest.mark.parametrize("number", pf.FIGURE_NUMBERS)
def test_a_figure_without_its_runs_is_skipped_with_its_line(number, rows, series, tmp_path,
                                                            drawn):
    spec = next(s for s in pf.SPECS if s.number == number)
    runs = pf.paper_runs(_without(rows, number))
    published = pf.load_published()[number]
    assert spec.draw(runs, series, published, tmp_path / "f.png") is None
    assert pf._needs_line(spec, runs) == f"Fig. {number}: needs runs of {spec.needs}"
    assert spec.draw(pf.paper_runs(rows), series, published, tmp_path / "f.png") is not None


def test_figure_9_needs_train_length_and_figure_10_names_a_missing_line(rows, series):
    runs = pf.paper_runs(_without(rows, 9))
    spec9 = next(s for s in pf.SPECS if s.number == 9)
    assert pf._needs_line(spec9, runs) == "Fig. 9: needs runs of suite train_length"
    no_baseconv = [r for r in rows if not (r["suite"] == "least_squares"
                                           and r["subject"] == "baseconv")]
    spec10 = next(s for s in pf.SPECS if s.number == 10)
    line = pf._needs_line(spec10, pf.paper_runs(no_baseconv))
    assert line.startswith("Fig. 10: drawn without the BaseConv")
    assert "baseconv on ls_fixed_n" in line


def test_published_levels_sit_on_the_axes_of_our_values(rows, series, drawn, tmp_path):
    runs = pf.paper_runs(rows)
    published = pf.load_published()
    pf.figure_3(runs, series, published[3], tmp_path / "f.png")
    fig = drawn[-1]
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title().split(" (")[0] for ax in panels] == ["READ", "AFFINE", "MULTIPLY"]
    assert (2.0, -8.0) in _black_points(panels[0])      # (a): < 1e-8 at 2 layers
    assert (8.0, -6.0) in _black_points(panels[2])      # (c): ~1e-6 at 8 layers
    low, high = panels[0].get_ylim()
    assert low < -8.0 < high and panels[2].get_xlim()[1] > 8.0   # the mark is in view
    texts = _legend(fig)
    assert "001 (published), black:" in texts
    assert any(t.startswith("(a) 2-layer Transformers on READ: < 1e-8") for t in texts)
    # our lines: with and without LayerNorm, coloured
    assert {"transformer, LN", "transformer, no LN"} <= set(texts)


def test_a_relative_statement_is_drawn_from_our_own_line(rows, series, drawn, tmp_path):
    runs = pf.paper_runs(rows)
    pf.figure_6(runs, series, pf.load_published()[6], tmp_path / "f.png")
    ax = [a for a in drawn[-1].axes if a.axison][0]
    ours = {(float(x), float(y)) for line in ax.get_lines() if line.get_color() != "black"
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}
    k0 = sorted(p for p in ours if any(abs(p[1] - (-1.0 - 0.2 * d)) < 1e-9 and p[0] == d
                                      for d in (2, 4)))
    assert len(k0) == 2
    black = _black_points(ax)
    for x, y in k0:   # 001: k = 1, 2 about 2 orders below k = 0
        assert (x, pytest.approx(y - 2.0)) in [(bx, by) for bx, by in black if bx == x]


def _line_points(ax, colour=None):
    return [list(zip(line.get_xdata(), line.get_ydata(), strict=True))
            for line in ax.get_lines() if line.get_color() != "black"
            and (colour is None or line.get_color() == colour)]


def test_figure_9_draws_final_mse_per_length_and_held_out_curves(rows, series, drawn,
                                                                  tmp_path):
    pf.figure_9(pf.paper_runs(rows), series, pf.load_published()[9], tmp_path / "f.png")
    ax = [a for a in drawn[-1].axes if a.axison][0]
    assert ax.get_xscale() == "log"
    labels = _legend(drawn[-1])
    assert "transformer, paper-length: final test MSE per training length" in labels
    assert "baseconv, engine: held-out MSE during training" in labels
    lengths = [pts for pts in _line_points(ax) if [x for x, _ in pts] == [100, 1000, 10000]]
    assert sorted(round(y, 6) for pts in lengths for _, y in pts) == sorted(
        round(-1.0 - r * e, 6) for r in (0.7, 0.9) for e in (2, 3, 4))
    assert len(ax.collections) >= 2          # the published 2-3 decades / 3 decades wedges


def test_a_line_never_mixes_recipes_or_widths(rows, series, drawn, tmp_path):
    pf.figure_2(pf.paper_runs(rows), series, pf.load_published()[2], tmp_path / "f.png")
    ax = [a for a in drawn[-1].axes if a.axison][0]
    labels = _legend(drawn[-1])
    assert "Transformer, LN (median over seeds)" in labels          # the paper's recipe
    assert "Transformer, LN, engine (median over seeds)" in labels  # the engine, width 64
    depth_lines = [pts for pts in _line_points(ax) if len(pts) <= 3]
    engine = [pts for pts in depth_lines if [x for x, _ in pts] == [2, 4]]
    assert engine == [[(2, -9.0), (4, -11.0)]]     # width 64 alone, not a median with 32


def test_a_training_limited_point_is_drawn_open_and_named_in_the_legend(rows, series, drawn,
                                                                       tmp_path):
    """A run labelled T (its convergence check did not pass) may still fall: its point is
    an open marker on its line, and the legend says what an open marker means."""
    pf.figure_3(pf.paper_runs(rows), series, pf.load_published()[3], tmp_path / "f.png")
    assert not any("training-limited" in t for t in _legend(drawn[-1]))
    runs = pf.paper_runs(rows)
    chosen = runs[(runs["job_task"] == "read") & (runs["family"] == "transformer")
                  & (runs["depth"] == 2)]["run_id"]
    assert len(chosen) > 0
    limited = [{**r, "result": {"train_converged": False}} if r["run_id"] in set(chosen)
               else r for r in rows]
    pf.figure_3(pf.paper_runs(limited), series, pf.load_published()[3], tmp_path / "f.png")
    assert any("training-limited (T)" in t for t in _legend(drawn[-1]))
    read = [a for a in drawn[-1].axes if a.axison][0]
    open_points = [(float(x), float(y)) for line in read.get_lines()
                   if line.get_markerfacecolor() == "white"
                   for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)]
    assert open_points and {x for x, _ in open_points} == {2.0}


def test_figure_4_draws_each_axis_the_store_varies(rows, series, drawn, tmp_path):
    pf.figure_4(pf.paper_runs(rows), series, pf.load_published()[4], tmp_path / "f.png")
    titles = [ax.get_title() for ax in drawn[-1].axes if ax.axison]
    assert titles == ["attention dim", "heads", "MLP width"]
    one_cell = [r for r in rows if not (r["suite"] == "primitives" and r["task"] == "multiply"
                                        and r["config"]["depth"] == 2
                                        and (r["config"]["width"] != 64
                                             or r["config"]["model_options"]["heads"] != 1
                                             or r["config"]["model_options"]["mlp_factor"] != 4))]
    assert pf.figure_4(pf.paper_runs(one_cell), series, pf.load_published()[4],
                       tmp_path / "f.png") is None


# --- the section in the report -------------------------------------------------------------

_SERIES: dict[str, dict] = {}


def _series_of(rows, run_id):
    """The traces the synthetic records were written with (by run id)."""
    if not _SERIES:
        _SERIES.update({r.run_id: r.series for r in paper_records()})
    return _SERIES[run_id]


def _probe_rows(rows):
    """The primitives runs as a probe of a user's model would store them."""
    out = []
    for r in rows:
        if r["suite"] == "primitives":
            out.append({**r, "subject": "mine", "config": {**r["config"],
                                                           "family": "mymodels.py:build"}})
    return out


def test_no_section_without_the_figures_runs(rows, series, tmp_path):
    assert pf.side_by_side_section([], series, tmp_path) is None
    assert pf.side_by_side_section(_probe_rows(rows), series, tmp_path) is None
    other = [{**r, "suite": "memformer"} for r in rows]
    assert pf.side_by_side_section(other, series, tmp_path) is None


def test_the_report_places_the_section_after_the_results_before_the_claims(rows, tmp_path):
    small = [r for r in rows if r["suite"] == "solvers"]
    with Store(tmp_path / "small.db") as store:
        store.write_runs([RunRecord(**{k: r[k] for k in (
            "run_id", "suite", "kind", "subject", "task", "precision", "status", "log10_mse",
            "floor_log10", "floor_index", "steps", "config")}, series=store_series)
            for r in small for store_series in [_series_of(rows, r["run_id"])]])
        report = build_report(store, None, tmp_path / "r")
    text = report.markdown.read_text(encoding="utf-8")
    page = report.html.read_text(encoding="utf-8")
    table = page[page.index("The values 001 states"):]
    assert table.index('<table class="text">') < table.index("</table>")   # quotes wrap
    side = text.index("## 001 side by side")
    assert text.index("## solvers: ls_gauss") < side < text.index("## Published claims")
    assert "figures/001-fig-1.png" in text and "figures/001-fig-2.png" in text
    assert (tmp_path / "r" / "figures" / "001-fig-2.svg").is_file()
    assert "Fig. 1: drawn without the Transformer, which needs runs of suite least_squares" \
        in text
    # the figures it cannot draw at all are one line (they were one paragraph each)
    missing = [line for line in text.splitlines() if line.startswith("Not drawn, for want")]
    assert len(missing) == 1 and "Fig. 3: suite primitives" in missing[0]
    assert "Fig. 9: suite train_length" in missing[0]
    assert "001-fig-3.png" not in text and "001-fig-9.png" not in text
