"""001 side by side: paper 001's Figures 1-4 and 6-10 redrawn from a store, with the values
the paper states marked on the same axes.

Each ``figure_N(runs, series, published, path)`` draws 001 Fig. N in its own layout (its x
axis and its lines, from the caption and the text around it) from the store's runs:

* Fig. 1 -- MSE against the number of in-context examples N (fully determined, N >= D):
  the Transformer on ``ls_parallel`` (one MSE per run, the mean over the predictions with
  N = D..20, drawn across them) and OLS (``solvers`` on ``ls_gauss``, at its N);
* Fig. 2 -- MSE against depth L (Transformer on ``ls_fixed_n``) and against iterations
  (full-batch GD on ``ls_gauss``), one log2 axis;
* Fig. 3 -- Transformer MSE against depth on READ / AFFINE / MULTIPLY (a panel each), a line
  with and one without LayerNorm;
* Fig. 4 -- 2-layer Transformers on MULTIPLY against attention dimension (width), heads
  and MLP width factor, a panel for each that the store varies;
* Fig. 6 -- feature-initialised least squares: MSE against depth, a line per k = 0, 1, 2;
* Fig. 7 -- explicitly learned gradient: the gradient's MSE against depth (left) and the
  iterates' MSE against iteration (right; the BaseConv GD weight construction per layer
  beside them when the store has it);
* Fig. 8 -- Transformer and BaseConv, with and without LayerNorm, MSE against depth on
  READ / AFFINE / MULTIPLY;
* Fig. 9 -- MSE against training iterations (log axis): each ``train_length`` run's
  held-out curve (``val_log10_mse``);
* Fig. 10 -- learned Transformer vs learned BaseConv on ``ls_fixed_n``, MSE against depth.

Our values are coloured; the published ones (``reports/papers/published_001.toml``, loaded and
validated by :func:`load_published`) are black, lettered (a), (b), ... on the axes and in
the legend, "001 (published)": a level as an open marker (about), a down / up triangle
(below / above), or a dashed line across the x range it is stated for; a relative statement
("2 orders better than ...") as a dashed line or grey band that many decades from our own
measured line; a rate ("2-3 orders over 3 decades of iterations") as a grey wedge ending at
the last (longest-trained) point of our curve, back over up to that many decades. Every value
is a log10 MSE. Each function returns the PNG path,
or None when the store has none of the figure's runs; :func:`side_by_side_section` is the
report section ("001 side by side") built from them.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from probes.store.frames import runs_frame  # noqa: E402
from reports.files import FileNames  # noqa: E402
from reports.papers.claims import rounding_limited  # noqa: E402
from reports.plots import _save, label, legend_below  # noqa: E402
from reports.render import Section  # noqa: E402
from reports.tables import Pivot  # noqa: E402
from reports.text_table import precision_order  # noqa: E402

#: ``series(run_id, name)``: that stored trace of the run as (step, value) pairs.
SeriesSource = Callable[[str, str], list[tuple[int, Any]]]

FIGURE_NUMBERS = (1, 2, 3, 4, 6, 7, 8, 9, 10)
PUBLISHED_FILE = "published_001.toml"
#: The suites the figures draw from.
SUITES = ("least_squares", "primitives", "constructions", "solvers", "train_length")
#: The paper's model families (a probe's own family never enters a paper figure).
FAMILIES = ("transformer", "baseconv")
#: 001 trains and evaluates in single precision; its primitives use n_embd 64 (App. D).
PAPER_PRECISION = "float32"
PAPER_WIDTH = 64
PRIMITIVES = ("read", "affine", "multiply")

# --- the published values ------------------------------------------------------------------

#: Per figure: the panels and the lines a mark may name (None: the figure has one panel).
_PANELS: dict[int, tuple[str, ...] | None] = {
    1: None, 2: None, 3: PRIMITIVES, 4: ("attention dim", "heads", "MLP width"), 6: None,
    7: ("gradient", "iterates"), 8: PRIMITIVES, 9: None, 10: None}
_LN_LINES = ("transformer, LN", "transformer, no LN", "baseconv, LN", "baseconv, no LN")
_LINES: dict[int, tuple[str, ...]] = {
    1: ("transformer", "ols"), 2: ("transformer", "gd"), 3: _LN_LINES[:2], 4: (),
    6: ("k=0", "k=1", "k=2"), 7: ("transformer", "baseconv", "hardcoded"),
    8: (*FAMILIES, *_LN_LINES), 9: FAMILIES, 10: FAMILIES}
_FIGURE_KEYS = {"title": str, "layout": str, "note": str, "mark": list}
_MARK_KEYS: dict[str, type | tuple[type, ...]] = {
    "what": str, "kind": str, "line": str, "panel": str, "relation": str, "log10": float,
    "x": list, "decades": list, "relative_to": str, "at_largest": bool, "per_decades": float,
    "reading": str, "where": str, "quote": str}
_NEEDED = {"level": ("log10",), "relative": ("decades", "relative_to", "line"),
           "slope": ("decades", "per_decades", "line")}
_ALWAYS = ("what", "kind", "relation", "reading", "where", "quote")


class PublishedError(ValueError):
    """``published_001.toml`` is malformed (one line naming the figure and the key)."""


@dataclass(frozen=True)
class Mark:
    """One value 001 states for a figure (see ``published_001.toml`` for the fields)."""

    figure: int
    letter: str
    what: str
    kind: str            # "level" | "relative" | "slope"
    relation: str        # "~" | "<" | ">"
    reading: str         # "exact" | "approximate"
    where: str
    quote: str
    line: str | None = None
    panel: str | None = None
    log10: float | None = None
    x: tuple[float, ...] | None = None
    decades: tuple[float, float] | None = None
    relative_to: str | None = None
    at_largest: bool = False
    per_decades: float | None = None

    def value_text(self) -> str:
        """The stated value in words: ``~1e-5``, ``< 1e-8``, ``2-4 decades below baseconv,
        LN``, ``2-3 decades per 3 decades``."""
        if self.kind == "level":
            rel = {"~": "~", "<": "< ", ">": "> "}[self.relation]
            return f"{rel}1e{self.log10:g}"
        lo, hi = self.decades or (0.0, 0.0)
        small, large = sorted((abs(lo), abs(hi)))
        size = f"{large:g}" if lo == hi else f"{small:g}-{large:g}"
        if self.kind == "slope":
            return f"{size} decades lower per {self.per_decades:g} decades of x"
        side = "below" if hi <= 0 else "above"
        at = " at the largest x" if self.at_largest else ""
        return f"~{size} decades {side} our {self.relative_to}{at}"


@dataclass(frozen=True)
class Published:
    """What 001 states for one figure."""

    figure: int
    title: str
    layout: str
    note: str
    marks: tuple[Mark, ...]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_table(where: str, table: dict[str, Any],
                 known: dict[str, type | tuple[type, ...]]) -> None:
    """Every key of ``table`` is one of ``known`` and its value of the type named there."""
    for key, value in table.items():
        if key not in known:
            raise PublishedError(f"{PUBLISHED_FILE}: {where}: unknown key '{key}' (known: "
                                 f"{', '.join(sorted(known))})")
        kind = known[key]
        if not (_number(value) if kind is float else isinstance(value, kind)):
            name = "a number" if kind is float else f"a {getattr(kind, '__name__', kind)}"
            raise PublishedError(f"{PUBLISHED_FILE}: {where}: '{key}' must be {name}, "
                                 f"got {value!r}")


def _mark(figure: int, index: int, raw: Any) -> Mark:
    where = f"fig{figure}.mark[{index}]"
    if not isinstance(raw, dict):
        raise PublishedError(f"{PUBLISHED_FILE}: {where}: must be a table")
    _check_table(where, raw, _MARK_KEYS)
    kind = raw.get("kind")
    if kind not in _NEEDED:
        raise PublishedError(f"{PUBLISHED_FILE}: {where}: 'kind' must be level, relative or "
                             f"slope, got {kind!r}")
    for key in (*_ALWAYS, *_NEEDED[kind]):
        if key not in raw:
            raise PublishedError(f"{PUBLISHED_FILE}: {where}: a {kind} mark needs '{key}'")
    choices = {"relation": ("~", "<", ">"), "reading": ("exact", "approximate"),
               "panel": _PANELS[figure] or (), "line": _LINES[figure],
               "relative_to": _LINES[figure]}
    for key, allowed in choices.items():
        if key in raw and raw[key] not in allowed:
            raise PublishedError(f"{PUBLISHED_FILE}: {where}: '{key}' {raw[key]!r} is not one "
                                 f"of {', '.join(allowed) or 'nothing (no such choice)'}")
    x = raw.get("x")
    if x is not None and (len(x) not in (1, 2) or not all(_number(v) for v in x)):
        raise PublishedError(f"{PUBLISHED_FILE}: {where}: 'x' must be [x] or [lo, hi] numbers")
    decades = raw.get("decades")
    if decades is not None and (len(decades) != 2 or not all(_number(v) for v in decades)
                                or decades[0] > decades[1]):
        raise PublishedError(f"{PUBLISHED_FILE}: {where}: 'decades' must be [lo, hi] numbers, "
                             "lo <= hi")
    return Mark(
        figure=figure, letter="abcdefghijklmnopqrstuvwxyz"[index], what=raw["what"],
        kind=kind, relation=raw["relation"], reading=raw["reading"], where=raw["where"],
        quote=raw["quote"], line=raw.get("line"), panel=raw.get("panel"),
        log10=float(raw["log10"]) if "log10" in raw else None,
        x=tuple(float(v) for v in x) if x is not None else None,
        decades=(float(decades[0]), float(decades[1])) if decades is not None else None,
        relative_to=raw.get("relative_to"), at_largest=bool(raw.get("at_largest", False)),
        per_decades=float(raw["per_decades"]) if "per_decades" in raw else None)


def load_published(text: str | None = None) -> dict[int, Published]:
    """The values 001 states per figure, from ``reports/papers/published_001.toml`` (or ``text``),
    validated: an unknown key, a wrong type, a missing figure or an unknown line or panel is a
    one-line :class:`PublishedError`."""
    if text is None:
        text = (resources.files("reports.papers") / PUBLISHED_FILE).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PublishedError(f"{PUBLISHED_FILE}: not TOML: {exc}") from None
    expected = [f"fig{n}" for n in FIGURE_NUMBERS]
    unknown = sorted(set(data) - set(expected))
    if unknown:
        raise PublishedError(f"{PUBLISHED_FILE}: unknown key '{unknown[0]}' (figures: "
                             f"{', '.join(expected)})")
    out = {}
    for n, key in zip(FIGURE_NUMBERS, expected, strict=True):
        fig = data.get(key)
        if not isinstance(fig, dict):
            raise PublishedError(f"{PUBLISHED_FILE}: figure '{key}' is missing")
        _check_table(key, fig, _FIGURE_KEYS)
        for k in ("title", "layout"):
            if k not in fig:
                raise PublishedError(f"{PUBLISHED_FILE}: {key}: '{k}' is missing")
        marks = tuple(_mark(n, i, m) for i, m in enumerate(fig.get("mark", [])))
        out[n] = Published(n, fig["title"], fig["layout"], fig.get("note", ""), marks)
    return out


# --- the runs ------------------------------------------------------------------------------

PAPER_COLUMNS = ["run_id", "suite", "kind", "subject", "task", "precision", "status",
                 "log10_mse", "floor_log10", "floor_index", "job_task", "family", "k", "dim",
                 "n", "depth", "width", "layernorm", "heads", "mlp_factor", "recipe",
                 "train_steps", "seed", "limited"]


def _option(cfg: dict[str, Any], table: str, key: str) -> Any:
    inner = cfg.get(table)
    return inner.get(key) if isinstance(inner, dict) else None


def paper_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The store's runs (rows as :meth:`Store.runs <probes.store.db.Store.runs>` returns them),
    one per row, columns :data:`PAPER_COLUMNS`: the stored numbers plus what the figures
    group by, read from each run's config (``job_task`` the task's own name, e.g.
    ``ls_feature`` for the label ``ls_feature_k1``; ``k``, ``dim``, ``n`` its options;
    ``layernorm``, ``heads``, ``mlp_factor`` the model's; ``recipe`` and ``train_steps`` the
    training's; ``seed`` the job's or the problem's; ``limited``: a trained run whose
    convergence check did not pass, labelled ``T``, unless its error in its precision is that
    precision's rounding, :func:`~reports.papers.claims.rounding_limited`, as the claims count
    it)."""
    frame = runs_frame(rows)
    if frame.empty:
        return pd.DataFrame(columns=PAPER_COLUMNS)
    cfgs = [c if isinstance(c, dict) else {} for c in frame["config"]]
    frame = frame.assign(
        job_task=[c.get("task") for c in cfgs], family=[c.get("family") for c in cfgs],
        k=[_option(c, "task_options", "k") for c in cfgs],
        dim=[_option(c, "task_options", "dim") or _option(c, "problem", "dim") for c in cfgs],
        n=[_option(c, "task_options", "n") or _option(c, "problem", "n_samples") for c in cfgs],
        depth=[c.get("depth") for c in cfgs], width=[c.get("width") for c in cfgs],
        layernorm=[_option(c, "model_options", "layernorm") for c in cfgs],
        heads=[_option(c, "model_options", "heads") for c in cfgs],
        mlp_factor=[_option(c, "model_options", "mlp_factor") for c in cfgs],
        recipe=[_option(c, "train", "recipe") for c in cfgs],
        train_steps=[_option(c, "train", "steps") for c in cfgs],
        seed=[c.get("seed", _option(c, "problem", "seed")) for c in cfgs],
        limited=[isinstance(r.get("result"), dict) and r["result"].get("train_converged")
                 is False and not rounding_limited(r) for r in rows])
    return frame[PAPER_COLUMNS].reset_index(drop=True)


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == "ok") & runs["log10_mse"].notna()]


def _models(runs: pd.DataFrame, suite: str, tasks: tuple[str, ...]) -> pd.DataFrame:
    """Trained runs of the paper's families in ``suite`` on the job tasks ``tasks``."""
    return _ok(runs[(runs["kind"] == "trained") & (runs["suite"] == suite)
                    & runs["family"].isin(FAMILIES) & runs["job_task"].isin(tasks)])


def _solver(runs: pd.DataFrame, suite: str, subjects: tuple[str, ...], task: str
            ) -> pd.DataFrame:
    sel = runs[(runs["suite"] == suite) & runs["subject"].isin(subjects)
               & (runs["task"] == task) & (runs["status"] == "ok")]
    return sel


def _in_precision(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The runs evaluated in 001's precision (float32) when there are any, else in the
    highest one; and that precision's name."""
    if runs.empty:
        return runs, PAPER_PRECISION
    precs = set(runs["precision"])
    prec = PAPER_PRECISION if PAPER_PRECISION in precs else max(precs, key=precision_order)
    return runs[runs["precision"] == prec], prec


def _median_by(runs: pd.DataFrame, by: str, metric: str = "log10_mse") -> list[tuple[float,
                                                                                     float]]:
    """(x, median of ``metric`` over the runs at x), sorted by x, finite values only."""
    vals = runs[[by, metric]].dropna()
    vals = vals[np.isfinite(vals[metric].astype(float))]
    med = vals.groupby(by)[metric].median()
    return [(float(x), float(y)) for x, y in med.items()]


def _limited_by(runs: pd.DataFrame, by: str, metric: str = "log10_mse") -> tuple[float, ...]:
    """The x values of :func:`_median_by` where a run is training-limited (``T``): the
    point may still fall with more training."""
    vals = runs[[by, metric, "limited"]].dropna(subset=[by, metric])
    vals = vals[np.isfinite(vals[metric].astype(float)) & vals["limited"].astype(bool)]
    return tuple(sorted({float(x) for x in vals[by]}))


def _trace(series: SeriesSource, run_ids: list[str], name: str, first: int = 0
           ) -> list[tuple[float, float]]:
    """The median over runs, step by step, of trace ``name`` (finite points, step >= first)."""
    points: dict[int, list[float]] = {}
    for rid in run_ids:
        for step, value in series(rid, name):
            if value is not None and math.isfinite(float(value)) and step >= first:
                points.setdefault(int(step), []).append(float(value))
    return [(float(s), float(np.median(v))) for s, v in sorted(points.items())]


def _ln(value: Any) -> str:
    return "LN" if value is True or value == 1 else "no LN" if value is not None else "LN"


def _first(runs: pd.DataFrame, column: str, default: float) -> float:
    """The first stored value of ``column`` (a task option), else 001's ``default``."""
    values = runs[column].dropna()
    return float(values.iloc[0]) if not values.empty else default


def _pick_width(runs: pd.DataFrame) -> Any:
    widths = set(runs["width"].dropna())
    return PAPER_WIDTH if PAPER_WIDTH in widths else max(widths)


def _longest(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs at the longest training budget among ``runs`` (one model variant)."""
    steps = runs["train_steps"]
    return runs[steps == steps.max()] if steps.notna().any() else runs


def _variants(models: pd.DataFrame, extra: tuple[str, ...] = (), *, one_width: bool = True,
              longest: bool = True) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """The trained runs split into the lines a figure draws: one per family, LayerNorm
    (``ln``), training recipe and the ``extra`` columns, sorted; each at 001's width (64, else
    its largest: ``one_width``) and its longest training (``longest``), so a line never
    mixes recipes (the paper's Adam and the second-order engine), widths or budgets."""
    if models.empty:
        return []
    frame = models.assign(ln=models["layernorm"].map(_ln),
                          recipe=models["recipe"].fillna("paper"))
    keys = ["family", "ln", "recipe", *extra]
    out = []
    for key, g in frame.groupby(keys, sort=True):
        if one_width and g["width"].notna().any():
            g = g[g["width"] == _pick_width(g)]
        out.append((dict(zip(keys, key, strict=True)), _longest(g) if longest else g))
    return out


def _variant_label(v: dict[str, Any], g: pd.DataFrame, ln: bool = True) -> str:
    """``transformer, no LN, engine, width 32``: the family, its LayerNorm, and the recipe and
    width where they are not 001's (paper, 64)."""
    parts = [str(v["family"]), *([v["ln"]] if ln else [])]
    if v["recipe"] != "paper":
        parts.append(str(v["recipe"]))
    widths = set(g["width"].dropna())
    if len(widths) == 1 and widths != {PAPER_WIDTH}:
        parts.append(f"width {next(iter(widths)):g}")
    return ", ".join(parts)


# --- drawing -------------------------------------------------------------------------------

_BLACK = "black"
_COLOURS = plt.get_cmap("tab10").colors


@dataclass
class Line:
    """One measured line: its key (what a mark names), legend label, points, style; ``group``
    pairs it with a relative mark's reference of the same group (a model family)."""

    key: str
    label: str
    points: list[tuple[float, float]]
    colour: Any
    style: str = "-"
    marker: str | None = "o"
    group: str = ""
    limited: tuple[float, ...] = ()   # x values of training-limited points (drawn open)


@dataclass
class Panel:
    """One axes of a figure: its name (what a mark's ``panel`` names), title, x axis."""

    name: str
    title: str
    xlabel: str
    lines: list[Line] = field(default_factory=list)
    xlog: int | None = None          # log axis base (None: linear)
    xticks: list[float] | None = None
    xlim: tuple[float, float] | None = None
    shade: tuple[float, float, str] | None = None   # (lo, hi, text): an x range not stored


class _Letters:
    """The letters of the published marks on one axes: marks drawn at one spot share one
    label, ``(a, b)``, instead of printing over each other."""

    def __init__(self) -> None:
        self.at: dict[tuple[int, float, float], tuple[Any, list[str]]] = {}

    def put(self, ax: Any, letter: str, xy: tuple[float, float], **where: Any) -> None:
        key = (id(ax), round(float(xy[0]), 6), round(float(xy[1]), 1))
        if key in self.at:
            text, letters = self.at[key]
            if letter in letters:      # one mark drawn twice here (two groups' bands)
                return
            letters.append(letter)
            text.set_text(f"({', '.join(letters)})")
            return
        style = {"xytext": (6, 3), "textcoords": "offset points", "fontsize": 8, **where}
        self.at[key] = (ax.annotate(f"({letter})", xy, **style), [letter])


def _mark_text(mark: Mark) -> str:
    return f"({mark.letter}) {mark.what}: {mark.value_text()} [{mark.where}]"


def _reference(panel: Panel, mark: Mark) -> list[Line]:
    """Our lines a relative / slope mark is drawn against: per group, the first line named
    ``relative_to`` (a slope: ``line``)."""
    key = mark.relative_to if mark.kind == "relative" else mark.line
    seen: dict[str, Line] = {}
    for line in panel.lines:
        if line.key == key and line.points and line.group not in seen:
            seen[line.group] = line
    return list(seen.values())


def _draw_level(ax: Any, mark: Mark, letters: _Letters) -> None:
    y = mark.log10
    style = "--" if mark.relation == "~" else ":"
    marker = {"~": "o", "<": "v", ">": "^"}[mark.relation]
    if mark.x is None:
        ax.axhline(y, color=_BLACK, ls=style, lw=1.2, zorder=4)
        letters.put(ax, mark.letter, (0.99, y), xycoords=("axes fraction", "data"),
                    xytext=(0, 2), ha="right", va="bottom")
        return
    xs = list(mark.x)
    if len(xs) == 2:
        ax.plot(xs, [y, y], color=_BLACK, ls=style, lw=1.4, zorder=4)
    ax.plot(xs, [y] * len(xs), ls="none", marker=marker, ms=8, markerfacecolor="none",
            markeredgecolor=_BLACK, markeredgewidth=1.4, zorder=5)
    letters.put(ax, mark.letter, (xs[-1], y))


def _draw_relative(ax: Any, mark: Mark, refs: list[Line], letters: _Letters) -> bool:
    lo, hi = mark.decades or (0.0, 0.0)
    for ref in refs:
        pts = sorted(ref.points)[-1:] if mark.at_largest else sorted(ref.points)
        xs = [x for x, _ in pts]
        if lo == hi or len(pts) == 1:
            mid = [y + (lo + hi) / 2 for _, y in pts]
            ax.plot(xs, mid, color=_BLACK, ls="--", lw=1.2, marker="D", ms=7,
                    markerfacecolor="none", markeredgewidth=1.3, zorder=5)
            if lo != hi:
                ax.vlines(xs, [y + lo for _, y in pts], [y + hi for _, y in pts],
                          color=_BLACK, lw=1.2, zorder=5)
        else:
            ax.fill_between(xs, [y + lo for _, y in pts], [y + hi for _, y in pts],
                            facecolor="0.85", edgecolor=_BLACK, ls="--", lw=1.0, zorder=1)
        letters.put(ax, mark.letter, (xs[-1], pts[-1][1] + hi), xytext=(6, 0), va="center")
    return bool(refs)


def _draw_slope(ax: Any, mark: Mark, refs: list[Line], letters: _Letters) -> bool:
    """The rate as a wedge over up to ``per_decades`` decades of x back from each reference
    line's last point; False when no line spans more than one x."""
    lo, hi = mark.decades or (0.0, 0.0)
    per = mark.per_decades or 1.0
    drawn = False
    for ref in refs:   # 001's regime is long training: the wedge ends where ours trained most
        pts = sorted(ref.points)
        x1, y1 = pts[-1]
        x0 = max(pts[0][0], x1 / 10.0 ** per)
        if x0 >= x1:
            continue
        xs = np.geomspace(x0, x1, 20)
        back = np.log10(x1 / xs) / per     # 1 at x1 / 10^per, 0 at x1
        ax.fill_between(xs, y1 - lo * back, y1 - hi * back, facecolor=ref.colour,
                        alpha=0.18, zorder=1)          # tinted as the line it is drawn from
        for edge in (lo, hi):
            ax.plot(xs, y1 - edge * back, color=_BLACK, ls="--", lw=1.0, zorder=2)
        letters.put(ax, mark.letter, (x0, y1 - lo * back[0]), xytext=(-4, 4), ha="right")
        drawn = True
    return drawn


def _draw_marks(panels: list[Panel], axes: list[Any], marks: tuple[Mark, ...]
                ) -> list[Any]:
    """Draw each mark on its panels; the legend handles of the published values."""
    if not marks:
        return [Line2D([], [], ls="none", label="001 (published): no value stated for this "
                       "figure")]
    handles: list[Any] = [Line2D([], [], ls="none", label="001 (published), black:")]
    letters = _Letters()
    for mark in marks:
        targets = [(p, ax) for p, ax in zip(panels, axes, strict=True)
                   if mark.panel is None or p.name == mark.panel]
        drawn = False
        for panel, ax in targets:
            if mark.kind == "level":
                _draw_level(ax, mark, letters)
                drawn = True
            elif refs := _reference(panel, mark):
                draw = _draw_relative if mark.kind == "relative" else _draw_slope
                drawn = draw(ax, mark, refs, letters) or drawn
        text = _mark_text(mark)
        if mark.kind == "slope":
            text += "; wedge back from our line's last point"
        if not drawn:
            why = (f"no {mark.panel} panel" if not targets else
                   f"no measured {mark.relative_to or mark.line} line")
            handles.append(Line2D([], [], ls="none", label=label(f"{text} (not drawn: {why})",
                                                                 70)))
        elif mark.kind == "level":
            point = mark.x is not None and len(mark.x) == 1
            handles.append(Line2D([], [], color=_BLACK, ls="none" if point else
                                  "--" if mark.relation == "~" else ":",
                                  marker={"~": "o", "<": "v", ">": "^"}[mark.relation],
                                  markerfacecolor="none", label=label(text, 70)))
        elif mark.decades and mark.decades[0] != mark.decades[1]:
            handles.append(Patch(facecolor="0.85", edgecolor=_BLACK, ls="--",
                                 label=label(text, 70)))
        else:
            handles.append(Line2D([], [], color=_BLACK, ls="--", marker="D",
                                  markerfacecolor="none", label=label(text, 70)))
    return handles


def _draw(title: str, ylabel: str, panels: list[Panel], published: Published, path: Path
          ) -> Path | None:
    """The figure: a panel per :class:`Panel` (one y axis for all), our lines in colour, the
    published marks in black, one legend below."""
    panels = [p for p in panels if any(line.points for line in p.lines)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.9), squeeze=False,
                             sharey=True)
    row = list(axes[0])
    ours: dict[str, Any] = {}
    limited = False
    for panel, ax in zip(panels, row, strict=True):
        for line in panel.lines:
            if not line.points:
                continue
            xs, ys = zip(*sorted(line.points), strict=True)
            ax.plot(xs, ys, color=line.colour, ls=line.style, marker=line.marker, ms=5,
                    lw=1.5, zorder=3)
            ours.setdefault(line.label, Line2D([], [], color=line.colour, ls=line.style,
                                               marker=line.marker, ms=5, lw=1.5,
                                               label=label(line.label, 70)))
            open_pts = [(x, y) for x, y in line.points if x in line.limited]
            if open_pts:
                ax.plot(*zip(*open_pts, strict=True), ls="none", marker=line.marker or "o",
                        color=line.colour, ms=5, markerfacecolor="white",
                        markeredgecolor=line.colour, markeredgewidth=1.3, zorder=3.5)
                limited = True
        if panel.shade:
            lo, hi, text = panel.shade
            ax.axvspan(lo, hi, color="0.93", zorder=0)
            ax.text((lo + hi) / 2, 0.5, text, transform=ax.get_xaxis_transform(),
                    ha="center", va="center", rotation=90, fontsize=8, color="0.4")
        if panel.xlog:
            ax.set_xscale("log", base=panel.xlog)
        ticks = panel.xticks or _whole_ticks(panel, published.marks)
        if ticks:
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
        ax.set_xlabel(panel.xlabel)
        ax.set_title(label(panel.title, 45), fontsize=10)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], ls="none", label="this store, colour:"), *ours.values()]
    if limited:
        handles.append(Line2D([], [], ls="none", marker="o", ms=5, markerfacecolor="white",
                              markeredgecolor="0.3", label="open: training-limited (T), "
                              "still falling when training stopped"))
    marks = _draw_marks(panels, row, published.marks)
    wide = len(panels) >= 3       # two legend columns: ours left, 001's right
    if wide:
        blank = Line2D([], [], ls="none", label=" ")
        handles += [blank] * (len(marks) - len(handles))
        marks += [blank] * (len(handles) - len(marks))
    handles += marks
    for panel, ax in zip(panels, row, strict=True):
        _fit_x(ax, panel, published.marks)
    low, high = row[0].get_ylim()            # shared: room for the letters above and below
    row[0].set_ylim(low - 0.4, high + 0.4)
    row[0].set_ylabel(ylabel)
    fig.suptitle(label(f"001 Fig. {published.figure} side by side: {title}",
                       max(50, 55 * len(panels))), fontsize=11)
    fig.tight_layout()
    legend_below(fig, handles, ncol=2 if wide else 1, fontsize=8)
    return _save(fig, path)


def _panel_xs(panel: Panel, marks: tuple[Mark, ...]) -> list[float]:
    """Every x the panel shows: its lines' and its point marks'."""
    xs = [x for line in panel.lines for x, _ in line.points]
    xs += [x for m in marks if m.kind == "level" and m.x and (m.panel in (None, panel.name))
           for x in m.x]
    return xs


def _whole_ticks(panel: Panel, marks: tuple[Mark, ...]) -> list[float] | None:
    """A depth-like axis (a few whole numbers): a tick at each (None: matplotlib's)."""
    xs = sorted(set(_panel_xs(panel, marks)))
    if not xs or len(xs) > 10 or any(x != int(x) for x in xs):
        return None
    return xs


def _fit_x(ax: Any, panel: Panel, marks: tuple[Mark, ...]) -> None:
    """x limits: the panel's own, else every x it shows with a margin (one point is not
    drawn on the frame)."""
    if panel.xlim:
        ax.set_xlim(*panel.xlim)
        return
    xs = _panel_xs(panel, marks)
    if not xs or _whole_ticks(panel, marks) is None:
        return
    lo, hi = min(xs), max(xs)
    if panel.xlog:
        ax.set_xlim(lo / 1.5, hi * 1.5)
    else:
        pad = max(0.5, 0.08 * (hi - lo))
        ax.set_xlim(lo - pad, hi + pad)


def _ylabel(prec: str, what: str = "test MSE") -> str:
    return f"log10 {what} (evaluated in {prec})"


# --- the figures ---------------------------------------------------------------------------

def _fig1_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (_models(runs, "least_squares", ("ls_parallel",)),
            _solver(runs, "solvers", ("ols_qr", "ols_svd", "ols_normal"), "ls_gauss"))


def figure_1(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 1 (right, fully determined): MSE against N; our Transformers' MSE, a line per
    depth and recipe (the mean over the predictions with N = D..N_max, drawn across them),
    and OLS's floor (``ols_qr``, else ``ols_svd`` / ``ols_normal``) at its N."""
    models, ols = _fig1_runs(runs)
    models, prec = _in_precision(models[models["family"] == "transformer"])
    lines = []
    for i, (v, g) in enumerate(_variants(models, ("depth",))):
        d, n = int(_first(g, "dim", 5)), int(_first(g, "n", 20))
        y = float(g["log10_mse"].median())
        text = _variant_label(v, g, ln=False).replace("transformer", "Transformer")
        lines.append(Line("transformer", f"{text}, depth {v['depth']:g} (mean over N = "
                          f"{d}..{n})", [(d, y), (n, y)], _COLOURS[i % 10], marker="|",
                          limited=(float(d), float(n)) if g["limited"].any() else ()))
    ols, ols_prec = _in_precision(ols)
    if not ols.empty:
        name = next(s for s in ("ols_qr", "ols_svd", "ols_normal") if s in set(ols["subject"]))
        sel = ols[ols["subject"] == name]
        y = float(sel["floor_log10"].fillna(sel["log10_mse"]).median())
        n = int(_first(sel, "n", 20))
        lines.append(Line("ols", f"OLS ({name}, {ols_prec}, median over seeds)", [(n, y)],
                          "tab:red", marker="s"))
    d = int(_first(models, "dim", 5)) if not models.empty else 5
    panel = Panel("", "fully determined (N >= D)", "in-context examples N", lines,
                  xticks=[0, 5, 10, 15, 20], xlim=(0, 21),
                  shade=(0, d, "N < D: no MSE\nper N stored"))
    return _draw(published.title, _ylabel(prec if not models.empty else ols_prec), [panel],
                 published, path)


def _fig2_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (_models(runs, "least_squares", ("ls_fixed_n",)),
            _solver(runs, "solvers", ("gd",), "ls_gauss"))


def figure_2(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 2: MSE against depth L of Transformers on fixed-N least squares (a line per
    recipe, median over seeds) and against iterations of full-batch GD (its stored trace,
    median over seeds), one log2 x axis up to 64 (or as far as the data go)."""
    models, gd = _fig2_runs(runs)
    models, prec = _in_precision(models[models["family"] == "transformer"])
    gd, gd_prec = _in_precision(gd)
    top = max([64.0, *models["depth"].dropna().astype(float)])
    if not gd.empty:
        floors = gd["floor_index"].dropna()
        top = max(top, 2.0 ** math.ceil(math.log2(max(1.0, 1.5 * floors.max())))
                  if not floors.empty else top)
    lines = [Line("transformer", _variant_label(v, g).replace("transformer", "Transformer")
                  + " (median over seeds)", _median_by(g, "depth"), _COLOURS[i % 10],
                  limited=_limited_by(g, "depth"))
             for i, (v, g) in enumerate(_variants(models))]
    trace = [(x, y) for x, y in _trace(series, list(gd["run_id"]), "log10_mse", first=1)
             if x <= top]
    lines.append(Line("gd", f"full-batch GD on ls_gauss ({gd_prec}, median over seeds)", trace,
                      "tab:green", marker=None))
    ticks = [2.0 ** i for i in range(int(math.log2(top)) + 1)]
    panel = Panel("", "fixed N, fully determined", "depth L (layers) / GD iterations", lines,
                  xlog=2, xticks=ticks)
    return _draw(published.title, _ylabel(prec if not models.empty else gd_prec), [panel],
                 published, path)


def _primitive_lines(runs: pd.DataFrame, task: str) -> list[Line]:
    """Per family x LayerNorm x recipe: median log10 MSE by depth on ``task`` at 001's width
    (64, else the largest), each variant at its longest training."""
    order = [(v["family"], v["ln"], v["recipe"]) for v, _ in _variants(runs)]
    lines = []
    for v, g in _variants(runs[runs["job_task"] == task]):   # one colour per variant in
        i = order.index((v["family"], v["ln"], v["recipe"]))  # every task's panel
        lines.append(Line(f"{v['family']}, {v['ln']}", _variant_label(v, g),
                          _median_by(g, "depth"), _COLOURS[i % 10],
                          style="-" if v["ln"] == "no LN" else "--",
                          marker="o" if v["family"] == "transformer" else "s",
                          limited=_limited_by(g, "depth")))
    return lines


def _fig3_runs(runs: pd.DataFrame) -> pd.DataFrame:
    models = _models(runs, "primitives", PRIMITIVES)
    return models[models["family"] == "transformer"]


def figure_3(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 3: Transformer MSE against depth, a panel per primitive, a line with and
    one without LayerNorm (per recipe; median over seeds, width 64 or the largest stored)."""
    models, prec = _in_precision(_fig3_runs(runs))
    panels = [Panel(task, task.upper(), "depth (layers)", _primitive_lines(models, task))
              for task in PRIMITIVES]
    return _draw(published.title, _ylabel(prec), panels, published, path)


_FIG4_AXES = (("width", "attention dim", "attention dimension (width)"),
              ("heads", "heads", "attention heads"),
              ("mlp_factor", "MLP width", "MLP width factor (hidden = factor x width)"))


def _fig4_runs(runs: pd.DataFrame) -> pd.DataFrame:
    models = _models(runs, "primitives", ("multiply",))
    return models[(models["family"] == "transformer") & (models["depth"] == 2)]


def _fig4_varied(models: pd.DataFrame) -> list[tuple[str, str, str, pd.DataFrame]]:
    """The axes of Fig. 4 the runs vary (two or more values) with the runs that vary it
    alone: the other two held at their most common value."""
    out = []
    for column, name, xlabel in _FIG4_AXES:
        held = models
        for other, _, _ in _FIG4_AXES:
            if other != column and held[other].notna().any():
                held = held[held[other] == held[other].mode().iloc[0]]
        if held[column].dropna().nunique() >= 2:
            out.append((column, name, xlabel, held))
    return out


def figure_4(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 4: 2-layer Transformers on MULTIPLY, MSE against attention dimension,
    heads and MLP width factor: a panel for each that the store's runs vary, a line with /
    without LayerNorm per recipe (median over seeds, each point at its longest training)."""
    models, prec = _in_precision(_fig4_runs(runs))
    panels = []
    for column, name, xlabel, held in _fig4_varied(models):
        lines = []
        for i, (v, g) in enumerate(_variants(held, one_width=column != "width",
                                             longest=False)):
            g = pd.concat([_longest(h) for _, h in g.groupby(column)])
            text = _variant_label(v, g.iloc[:0] if column == "width" else g)
            lines.append(Line(f"transformer, {v['ln']}", text, _median_by(g, column),
                              _COLOURS[i % 10], limited=_limited_by(g, column)))
        ticks = sorted(float(v) for v in held[column].dropna().unique())
        panels.append(Panel(name, name, xlabel, lines,
                            xlog=2 if column == "width" else None, xticks=ticks))
    return _draw(published.title, _ylabel(prec), panels, published, path)


def _fig6_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return _models(runs, "least_squares", ("ls_feature",))


def figure_6(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 6: feature-initialised in-context least squares, MSE against depth, a line
    per k (colour), model family (line style) and recipe (marker), median over seeds."""
    models, prec = _in_precision(_fig6_runs(runs))
    lines = []
    for v, g in _variants(models, ("k",)):
        k = int(v["k"])
        lines.append(Line(f"k={k}", f"{_variant_label(v, g)}, k = {k}",
                          _median_by(g, "depth"), _COLOURS[k % 10],
                          style="-" if v["family"] == "transformer" else "--",
                          marker="o" if v["recipe"] == "paper" else "s",
                          group=f"{v['family']}, {v['ln']}, {v['recipe']}",
                          limited=_limited_by(g, "depth")))
    panel = Panel("", "features of the first k GD-construction layers", "depth (layers)",
                  lines)
    return _draw(published.title, _ylabel(prec), [panel], published, path)


def _fig7_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (_models(runs, "least_squares", ("explicit_gradient",)),
            _solver(runs, "constructions", ("baseconv_gd",), "ls_gauss5"))


def figure_7(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 7: left, the learned gradient's test MSE against depth (a line per model
    entry and recipe); right, the MSE of the iterates w_{t+1} = w_t - eta model(w_t) against
    iteration (the deepest model of each, median over seeds) and, when stored, the BaseConv
    GD weight construction per layer (``constructions``)."""
    models, construction = _fig7_runs(runs)
    models, prec = _in_precision(models)
    construction, _ = _in_precision(construction)
    left, right = [], []
    for i, (v, g) in enumerate(_variants(models, ("subject",))):
        text = (f"{v['subject']} ({_variant_label(v, g)}; D = {_first(g, 'dim', 5):g}, "
                f"N = {_first(g, 'n', 20):g})")
        left.append(Line(str(v["family"]), f"{text}: gradient", _median_by(g, "depth"),
                         _COLOURS[i % 10], group=str(v["recipe"]),
                         limited=_limited_by(g, "depth")))
        deepest = g[g["depth"] == g["depth"].max()]
        right.append(Line(str(v["family"]), f"{text}: iterated, depth "
                          f"{deepest['depth'].iloc[0]:g}",
                          _trace(series, list(deepest["run_id"]), "log10_mse"),
                          _COLOURS[i % 10], marker=None, group=str(v["recipe"])))
    if not construction.empty:
        right.append(Line("construction", "BaseConv GD weight construction (x = layer)",
                          _trace(series, list(construction["run_id"]), "log10_mse", first=1),
                          "0.45", style=":", marker=None))
    panels = [Panel("gradient", "the learned gradient", "depth (layers)", left),
              Panel("iterates", "iterated: gradient descent with it", "iteration", right)]
    return _draw(published.title, _ylabel(prec, "MSE"), panels, published, path)


def _fig8_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return _models(runs, "primitives", PRIMITIVES)


def figure_8(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 8: Transformer and BaseConv, with and without LayerNorm, MSE against depth,
    a panel per primitive (per recipe; median over seeds, width 64 or the largest stored)."""
    models, prec = _in_precision(_fig8_runs(runs))
    panels = [Panel(task, task.upper(), "depth (layers)", _primitive_lines(models, task))
              for task in PRIMITIVES]
    return _draw(published.title, _ylabel(prec), panels, published, path)


def _fig9_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return _models(runs, "train_length", ("multiply",))


def figure_9(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
             ) -> Path | None:
    """001 Fig. 9: MSE against training iterations (log axis), a colour per family: where a
    model was trained for several lengths (001's layout, App. E.2), its final test MSE at
    each length (markers); where once (the engine), its held-out curve during training
    (``val_log10_mse``, step = iteration; dashed)."""
    models, prec = _in_precision(_fig9_runs(runs))
    lines = []
    for v, g in _variants(models, longest=False):
        colour = "tab:blue" if v["family"] == "transformer" else "tab:orange"
        text = _variant_label(v, g, ln=False)
        if g["train_steps"].nunique() >= 2:
            lines.append(Line(str(v["family"]), f"{text}: final test MSE per training length",
                              _median_by(g, "train_steps"), colour, group=str(v["recipe"]),
                              limited=_limited_by(g, "train_steps")))
        else:
            pts = [(x, y) for x, y in _trace(series, list(g["run_id"]), "val_log10_mse")
                   if x > 0]
            lines.append(Line(str(v["family"]), f"{text}: held-out MSE during training", pts,
                              colour, style="--", marker=None, group=str(v["recipe"])))
    panel = Panel("", "MULTIPLY, 1 layer", "training iterations (log scale)", lines, xlog=10)
    return _draw(published.title, f"log10 MSE (test: evaluated in {prec})", [panel],
                 published, path)


def _fig10_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return _models(runs, "least_squares", ("ls_fixed_n",))


def figure_10(runs: pd.DataFrame, series: SeriesSource, published: Published, path: Path
              ) -> Path | None:
    """001 Fig. 10: learned Transformer vs learned BaseConv on fixed-N least squares, MSE
    against depth, a line per family, LayerNorm and recipe (median over seeds)."""
    models, prec = _in_precision(_fig10_runs(runs))
    lines = [Line(str(v["family"]), f"{_variant_label(v, g)} (learned)",
                  _median_by(g, "depth"), _COLOURS[i % 10],
                  style="-" if v["family"] == "transformer" else "--",
                  marker="o" if v["family"] == "transformer" else "s", group=str(v["recipe"]),
                  limited=_limited_by(g, "depth"))
             for i, (v, g) in enumerate(_variants(models))]
    panel = Panel("", "fixed N, fully determined", "depth (layers)", lines, xlog=2)
    return _draw(published.title, _ylabel(prec), [panel], published, path)


# --- the section ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """A part of a figure: the runs it needs, as a reader reads it, and how to find them."""

    what: str
    needs: str
    select: Callable[[pd.DataFrame], pd.DataFrame]


@dataclass(frozen=True)
class FigureSpec:
    number: int
    draw: Callable[[pd.DataFrame, SeriesSource, Published, Path], Path | None]
    caption: str
    needs: str           # what a store without any of its runs needs
    parts: tuple[Part, ...]


def _family(select: Callable[[pd.DataFrame], pd.DataFrame], family: str
            ) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda runs: (lambda m: m[m["family"] == family])(select(runs))


def _fig4_parts(runs: pd.DataFrame) -> pd.DataFrame:
    varied = _fig4_varied(_fig4_runs(runs))
    return pd.concat([h for *_, h in varied]) if varied else runs.iloc[:0]


SPECS: tuple[FigureSpec, ...] = (
    FigureSpec(1, figure_1, "MSE against in-context examples N (fully determined): our "
               "Transformer and OLS", "suite least_squares (transformer on ls_parallel) or "
               "solvers (ols_qr on ls_gauss)", (
                   Part("the Transformer", "suite least_squares (transformer on ls_parallel)",
                        _family(lambda r: _fig1_runs(r)[0], "transformer")),
                   Part("OLS", "suite solvers (ols_qr on ls_gauss)",
                        lambda r: _fig1_runs(r)[1]))),
    FigureSpec(2, figure_2, "MSE against Transformer depth and GD iterations (fixed N)",
               "suite least_squares (transformer on ls_fixed_n) or solvers (gd on ls_gauss)", (
        Part("the Transformer", "suite least_squares (transformer on ls_fixed_n)",
             _family(lambda r: _fig2_runs(r)[0], "transformer")),
        Part("gradient descent", "suite solvers (gd on ls_gauss)",
             lambda r: _fig2_runs(r)[1]))),
    FigureSpec(3, figure_3, "Transformer MSE against depth on READ / AFFINE / MULTIPLY, with "
               "and without LayerNorm", "suite primitives (transformer on read / affine / "
               "multiply)", tuple(
                   Part(task.upper(), f"suite primitives (transformer on {task})",
                        lambda r, t=task: (lambda m: m[m["job_task"] == t])(_fig3_runs(r)))
                   for task in PRIMITIVES)),
    FigureSpec(4, figure_4, "2-layer Transformers on MULTIPLY against attention dimension, "
               "heads and MLP width", "suite primitives: transformer on multiply at depth 2 "
               "varying width, heads or mlp_factor", (
                   Part("the Transformers", "suite primitives: transformer on multiply at "
                        "depth 2 varying width, heads or mlp_factor", _fig4_parts),)),
    FigureSpec(6, figure_6, "feature-initialised least squares, MSE against depth per k",
               "suite least_squares (transformer_features on ls_feature_k0 / k1 / k2)", (
        Part("the Transformers", "suite least_squares (transformer_features on "
             "ls_feature_k0 / k1 / k2)", _family(_fig6_runs, "transformer")),
        Part("the BaseConvs", "suite least_squares (a baseconv entry on ls_feature_k0 / k1 / "
             "k2)", _family(_fig6_runs, "baseconv")))),
    FigureSpec(7, figure_7, "the explicitly learned gradient against depth, and iterated",
               "suite least_squares (baseconv_gradient on explicit_gradient_k2)", (
        Part("the BaseConv", "suite least_squares (baseconv_gradient on "
             "explicit_gradient_k2)", _family(lambda r: _fig7_runs(r)[0], "baseconv")),
        Part("the Transformer", "suite least_squares (a transformer entry on "
             "explicit_gradient_k2)", _family(lambda r: _fig7_runs(r)[0], "transformer")),
        Part("the weight construction", "suite constructions (baseconv_gd on ls_gauss5)",
             lambda r: _fig7_runs(r)[1]))),
    FigureSpec(8, figure_8, "Transformer vs BaseConv MSE against depth on READ / AFFINE / "
               "MULTIPLY", "suite primitives (transformer and baseconv)", (
                   Part("the Transformers", "suite primitives (transformer)",
                        _family(_fig8_runs, "transformer")),
                   Part("the BaseConvs", "suite primitives (baseconv)",
                        _family(_fig8_runs, "baseconv")))),
    FigureSpec(9, figure_9, "MSE against training iterations, 1-layer models on MULTIPLY",
               "suite train_length", (
        Part("the Transformer", "suite train_length (transformer)",
             _family(_fig9_runs, "transformer")),
        Part("the BaseConv", "suite train_length (baseconv)",
             _family(_fig9_runs, "baseconv")))),
    FigureSpec(10, figure_10, "learned Transformer vs learned BaseConv on fixed-N least "
               "squares, MSE against depth",
               "suite least_squares (transformer and baseconv on ls_fixed_n)", (
                   Part("the Transformer", "suite least_squares (transformer on ls_fixed_n)",
                        _family(_fig10_runs, "transformer")),
                   Part("the BaseConv", "suite least_squares (baseconv on ls_fixed_n)",
                        _family(_fig10_runs, "baseconv")))),
)


def _needs_line(spec: FigureSpec, runs: pd.DataFrame) -> str | None:
    """For a figure not drawn: the runs it needs; for one drawn without some of its lines:
    which runs those need; None when every part is there."""
    missing = [p for p in spec.parts if p.select(runs).empty]
    if not missing:
        return None
    if len(missing) == len(spec.parts):
        return f"Fig. {spec.number}: needs runs of {spec.needs}"
    return f"Fig. {spec.number}: drawn " + "; ".join(
        f"without {p.what}, which needs runs of {p.needs}" for p in missing)


def published_pivot(published: dict[int, Published]) -> Pivot:
    """Every value 001 states for these figures: the letter it has on the figure, what, the
    value, how it is stated, where, and the paper's words."""
    body, index = [], []
    for pub in published.values():
        for m in pub.marks:
            index.append(f"Fig. {pub.figure} ({m.letter})")
            body.append([m.what, m.value_text(), m.reading, m.where, m.quote])
        if not pub.marks:
            index.append(f"Fig. {pub.figure}")
            body.append([pub.title, "-", "-", "-", pub.note])
    frame = pd.DataFrame(body, index=pd.Index(index, name="figure"),
                         columns=["what", "published", "stated", "where", "001's words"])
    return Pivot("published-001", "The values 001 states for these figures (log10 MSE; "
                 "letters as on the figures)", frame)


def side_by_side_section(rows: list[dict[str, Any]], series: SeriesSource, folder: Path,
                         names: FileNames | None = None) -> Section | None:
    """The report section "001 side by side": every figure of :data:`SPECS` the store's
    ``rows`` can draw (written into ``folder``), a line per figure it cannot draw or draws in
    part, and the table of published values. None when no figure can be drawn (no runs of
    the paper's models or references: a probe's own model draws none)."""
    runs = paper_runs([r for r in rows if r.get("suite") in SUITES])
    if runs.empty:
        return None
    published = load_published()
    names = names or FileNames()
    figures, notes, missing = [], [], []
    for spec in SPECS:
        path = folder / f"{names.stem('001', 'fig', spec.number)}.png"
        drawn = spec.draw(runs, series, published[spec.number], path)
        note = _needs_line(spec, runs)
        if drawn is not None:
            figures.append((f"001 Fig. {spec.number} side by side: {spec.caption}; our values "
                            "in colour, 001's stated values in black (letters: the table)",
                            drawn))
        elif note is None:
            note = f"Fig. {spec.number}: the store's runs give it no finite point"
        elif note.startswith(f"Fig. {spec.number}: needs runs of "):   # one line for all
            missing.append(note.replace(": needs runs of ", ": "))
            continue
        if note:
            notes.append(note)
        if drawn is not None and published[spec.number].note:
            notes.append(f"Fig. {spec.number}: {published[spec.number].note}")
    if not figures:
        return None
    if missing:
        notes.append("Not drawn, for want of runs in this store: " + "; ".join(missing) + ".")
    intro = ("001's Figures 1-4 and 6-10 redrawn from this store in the paper's layout (its "
             "x axis and lines): our measured values in colour, the values 001's text and "
             "captions state in black ('001 (published)'; a relative statement such as '2 "
             "orders better' is drawn that many decades from our own line). 001 trains and "
             "evaluates in float32: our lines are the float32 evaluations where stored. The "
             "values are also in the table below, with the paper's words.")
    return Section("001 side by side", paragraphs=[intro, *notes], figures=figures,
                   tables=[published_pivot(published)], figures_first=True)
