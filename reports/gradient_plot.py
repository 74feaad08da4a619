"""The gradient's error by module, drawn: a row per module (the model's order, ``(all)`` last),
the relative error of its parameters' gradient against the mpN truth on a log axis, a marker
per precision in that precision's style (:mod:`reports.precision_style`). Drawn by ``precision
gradient --plot`` and by the report for the ``gradient_error`` tables
(:mod:`reports.gradient_table`)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from reports.length_plot import _save  # noqa: E402
from reports.precision_style import colour, marker  # noqa: E402


def gradient_figure(errors: dict[str, dict[str, float]], title: str, path: Path,
                    truth: str = "mp50") -> Path | None:
    """``errors``: precision (or column label) -> module -> relative error; None when there
    is nothing finite and positive to draw. Written as ``path`` (PNG) and as SVG beside it."""
    modules = [*dict.fromkeys(m for per in errors.values() for m in per)]
    modules = [m for m in modules if m != "(all)"] + (["(all)"] if any(
        "(all)" in per for per in errors.values()) else [])
    shown = [v for per in errors.values() for v in per.values() if v > 0 and math.isfinite(v)]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(8.0, max(2.5, 0.3 * len(modules) + 1.5)))
    rows = {m: len(modules) - 1 - i for i, m in enumerate(modules)}   # the first on top
    for name, per in errors.items():
        key = name.split(",")[0]   # "bfloat16, no master": bfloat16's look
        points = [(v, rows[m]) for m, v in per.items() if v > 0 and math.isfinite(v)]
        ax.plot([v for v, _ in points], [y for _, y in points], ls="none", ms=6,
                marker=marker(key), color=colour(key), label=name, alpha=0.85)
    hi = max(shown) * 2
    ax.set_xlim(min(min(shown) / 2, 10.0 ** (math.floor(math.log10(hi)) - 1)), hi)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(list(rows.values()), list(rows), fontsize=7)
    for tick in ax.get_yticklabels():
        if tick.get_text() == "(all)":
            tick.set_fontweight("bold")
    ax.set_ylim(-0.7, len(modules) - 0.3)
    ax.set_xlabel(f"relative error of the module's parameter gradients against {truth}")
    ax.set_title(title, fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _save(fig, path)
