"""Renderers: Markdown, one self-contained HTML file, CSV per table, LaTeX (booktabs).

A report is a list of sections; a section holds paragraphs, :class:`~reports.tables.Pivot`
tables and figure paths. Every renderer writes the same content; nothing here adds dates or
absolute paths, so the same store gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from reports.files import FileNames, slug, write_text
from reports.tables import Pivot


@dataclass
class Section:
    """A titled part of the report."""

    title: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Pivot] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, png path)
    figures_first: bool = False   # figures above the tables (an overview, then the numbers)


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[object]]]:
    """The header and the rows of a table, the index as their first column."""
    return ([str(c) for c in [frame.index.name or "", *frame.columns]],
            [[idx, *row.tolist()] for idx, row in frame.iterrows()])


def _one_line(value: object) -> str:
    """A cell or title as one line: control characters (NUL, newlines, tabs) from stored names
    become spaces, so they cannot break a table row or a heading."""
    return re.sub(r"[\x00-\x1f\x7f]", " ", str(value))


def _md(value: object) -> str:
    """A title, caption, paragraph or cell for ``report.md``: one line (:func:`_one_line`),
    and ``&``, ``<``, ``>`` outside code spans written as entities, so a stored name holding
    HTML (``<img src=x onerror=...>``) shows as text, as ``report.html`` shows it, instead of
    being rendered by a Markdown viewer."""
    parts = re.split(r"(`[^`]*`)", _one_line(value))
    return "".join(p if p.startswith("`") and p.endswith("`") and len(p) > 1 else
                   html.escape(p, quote=False) for p in parts)


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (index as the first column)."""
    head, rows = _cells(frame)
    cell = lambda v: _md(v).replace("|", "\\|")   # noqa: E731
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _figure_markdown(caption: str, path: Path, out: Path) -> list[str]:
    rel = path.relative_to(out).as_posix()
    text = _md(caption).replace("[", "(").replace("]", ")")
    return [f"![{text}]({rel})", "", f"[SVG]({Path(rel).with_suffix('.svg').as_posix()})", ""]


def render_markdown(title: str, sections: list[Section], out: Path) -> Path:
    """``report.md``: the sections in order, figures linked from ``figures/``."""
    parts = [f"# {_md(title)}", ""]
    for s in sections:
        parts += ["#" * s.level + " " + _md(s.title), ""]
        for p in s.paragraphs:
            parts += [_md(p), ""]
        tables = [line for t in s.tables
                  for line in (f"**{_md(t.title)}**", "", markdown_table(t.frame), "")]
        figures = [line for caption, path in s.figures
                   for line in _figure_markdown(caption, path, out)]
        parts += figures + tables if s.figures_first else tables + figures
    return write_text(out / "report.md", "\n".join(parts))


_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #1d2430; line-height: 1.45; padding: 0 1em; }
h1 { border-bottom: 2px solid #2b5797; padding-bottom: .3em; }
h2 { margin-top: 2em; color: #2b5797; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: .6em 0 1.4em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #cdd3dc; padding: .3em .7em; text-align: right;
         white-space: nowrap; }
table.text td { white-space: normal; min-width: 8em; }
th { background: #eef2f8; } td:first-child, th:first-child { text-align: left; }
table.text td, table.text th { text-align: left; }
td.t, th.t { text-align: left; white-space: normal; min-width: 10em; }
p.caption { font-weight: 600; margin: 0 0 .3em; }
.holds { background: #e3f4e1; } .fails { background: #fbe3e1; } .nm { color: #7a8291; }
figure { margin: 1em 1.5em 1em 0; display: inline-table; vertical-align: top; }
figcaption { display: table-caption; caption-side: bottom; font-size: .85em; color: #5a6270; }
img { max-width: 100%; height: auto; border: 1px solid #e2e6ec; }
nav ol { columns: 2; font-size: .9em; } nav summary { cursor: pointer; font-weight: 600; }
#image-check { font-size: .8em; color: #7a8291; }
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute('data-images-ok', ok + '/' + imgs.length);
  document.getElementById('image-check').textContent = ok + ' of ' + imgs.length +
    ' figures rendered';
});
"""


#: Tables whose cells are sentences: they wrap in HTML and get paragraph columns in LaTeX.
TEXT_TABLES = {"claims": "p{1.9cm}p{2.8cm}p{2.3cm}p{2.1cm}p{1.3cm}p{2.1cm}p{1.3cm}",
               "published-001": "p{1.7cm}p{3.2cm}p{2.2cm}p{1.6cm}p{2.4cm}p{4.4cm}"}


#: A cell longer than this that is not a printed number is text: its column wraps, left.
TEXT_CELL = 30


def _text_columns(rows: list[list[object]]) -> set[int]:
    """The columns (by position) holding text: a cell of more than :data:`TEXT_CELL`
    characters that does not read as a printed number (:data:`_CELL`). They are left-aligned
    and wrap in HTML (numbers stay right-aligned on one line)."""
    return {j for cells in rows for j, v in enumerate(cells)
            if len(str(v)) > TEXT_CELL and not _CELL.match(str(v))}


def html_table(t: Pivot) -> str:
    cls = {"holds": "holds", "does not hold": "fails", "not measured": "nm"}
    head, rows = _cells(t.frame)
    text = _text_columns(rows)
    ths = "".join(f'<th class="t">{html.escape(c)}</th>' if j in text
                  else f"<th>{html.escape(c)}</th>" for j, c in enumerate(head))
    body = []
    for cells in rows:
        tds = "".join(
            f'<td class="{cls[str(v)]}">{html.escape(str(v))}</td>' if str(v) in cls
            else f'<td class="t">{html.escape(str(v))}</td>' if j in text
            else f"<td>{html.escape(str(v))}</td>" for j, v in enumerate(cells))
        body.append(f"<tr>{tds}</tr>")
    kind = ' class="text"' if t.key in TEXT_TABLES else ""
    return (f'<div class="table-wrap"><p class="caption">{html.escape(t.title)}</p>'
            f"<table{kind}><thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            "</div>")


#: The PNGs are drawn at reports.plots.DPI; shown at this many CSS pixels per inch, every
#: figure has the same type size on the page whatever its pixel width.
_CSS_PPI = 100


def _png_width(data: bytes) -> int | None:
    """A PNG's pixel width from its header (None when it is not a PNG)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return None
    return int.from_bytes(data[16:20], "big")


def _figure_html(caption: str, path: Path, out: Path) -> str:
    from reports.plots import DPI

    raw = path.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    px = _png_width(raw)
    width = f' style="width: {round(px * _CSS_PPI / DPI)}px"' if px else ""
    svg = html.escape(path.relative_to(out).with_suffix(".svg").as_posix())
    return (f'<figure><img alt="{html.escape(caption)}"{width} '
            f'src="data:image/png;base64,{data}"><figcaption>'
            f'{html.escape(caption)} (<a href="{svg}">SVG</a>)</figcaption></figure>')


def render_html(title: str, sections: list[Section], out: Path) -> Path:
    """One file, images embedded as data URIs: opens offline, no external assets. A list of
    contents links to every section; wide tables scroll sideways inside their own box."""
    toc = "".join(f'<li><a href="#s{i}">{html.escape(s.title)}</a></li>'
                  for i, s in enumerate(sections))
    parts = [f"<h1>{html.escape(title)}</h1>", '<p id="image-check"></p>',
             f'<nav><details open><summary>Contents</summary><ol>{toc}</ol></details></nav>']
    for i, s in enumerate(sections):
        parts.append(f'<h{s.level} id="s{i}">{html.escape(s.title)}</h{s.level}>')
        parts += [f"<p>{html.escape(p)}</p>" for p in s.paragraphs]
        tables = [html_table(t) for t in s.tables]
        figures = [_figure_html(caption, path, out) for caption, path in s.figures]
        parts += figures + tables if s.figures_first else tables + figures
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
           + "\n".join(parts) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")
    return write_text(out / "report.html", doc)


_TEX = str.maketrans({"\\": r"\textbackslash{}", "\x00": " ", "_": r"\_", "%": r"\%",
                      "&": r"\&", "#": r"\#", "$": r"\$", "{": r"\{", "}": r"\}",
                      "~": r"\textasciitilde{}", "^": r"\^{}"})


def latex_table(t: Pivot) -> str:
    """A booktabs table environment."""
    if t.key in TEXT_TABLES:  # text columns wrap
        cols = TEXT_TABLES[t.key]
    else:
        cols = "l" + "r" * len(t.frame.columns)
    head, rows = _cells(t.frame)
    lines = [r"\begin{table}[ht]", r"\centering", r"\small",
             rf"\caption{{{t.title.translate(_TEX)}}}", rf"\begin{{tabular}}{{{cols}}}",
             r"\toprule", " & ".join(c.translate(_TEX) for c in head) + r" \\", r"\midrule"]
    lines += [" & ".join(str(v).translate(_TEX) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\label{{tab:{slug(t.key)}}}", r"\end{table}", ""]
    return "\n".join(lines)


def render_latex(sections: list[Section], out: Path) -> Path:
    """``tables.tex``: every table, ready to \\input into a paper (needs booktabs)."""
    body = ["% Generated by `precision report`; needs \\usepackage{booktabs}.", ""]
    for s in sections:
        body += [latex_table(t) for t in s.tables]
    return write_text(out / "tables.tex", "\n".join(body))


#: A table cell as the report prints it: a number (an MSE, a log10, a count), then optionally
#: ``±spread`` (decades), ``@step`` and a note (a label T / A / R, ``falling 2/5``, ...).
_CELL = re.compile(r"^(?P<value>-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?)"   # ASCII
                   r"(?: ±(?P<spread>[0-9]+\.?[0-9]*))?(?: @(?P<at>[0-9]+))?(?: (?P<note>.+))?$")


def _number(text: str) -> int | float:
    """A printed number as it was printed: an integer stays one (a depth, a count)."""
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else float(text)


def numeric_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every column whose cells read as printed numbers (:data:`_CELL`) split
    into numbers: ``COL`` (the value), ``COL ±`` (the spread), ``COL @`` (the step) and
    ``COL note`` (the label and the rest), the last three only where a cell has them; a cell
    that is not a number (``-``, ``failed 1/3``) leaves ``COL`` empty and goes to the note.
    Columns with no number in them stay as they are."""
    out = {}
    for col in frame.columns:
        cells = ["" if pd.isna(v) else str(v).strip() for v in frame[col]]
        found = [_CELL.match(c) for c in cells]
        if not any(found):
            out[col] = frame[col]
            continue
        parts = {"": [], " ±": [], " @": [], " note": []}
        for cell, m in zip(cells, found, strict=True):
            parts[""].append(_number(m["value"]) if m else None)
            parts[" ±"].append(float(m["spread"]) if m and m["spread"] else None)
            parts[" @"].append(int(m["at"]) if m and m["at"] else None)
            parts[" note"].append((m["note"] or "") if m else cell)
        for suffix, values in parts.items():
            if suffix == "" or any(v not in (None, "") for v in values):
                out[f"{col}{suffix}"] = pd.Series(values, index=frame.index, dtype=object)
    return pd.DataFrame(out, index=frame.index)


def render_csv(sections: list[Section], out: Path, names: FileNames | None = None
               ) -> list[Path]:
    """One CSV per table in folder ``out``, named by the sanitised key of the table; numbers
    in columns of their own (:func:`numeric_frame`), not the printed strings."""
    names = names or FileNames()
    paths = []
    for s in sections:
        for t in s.tables:
            path = out / f"{names.stem(t.key)}.csv"
            paths.append(write_text(path, numeric_frame(t.frame).to_csv(lineterminator="\n")))
    return paths
