"""Renderers: Markdown, one self-contained HTML file, CSV per table, LaTeX (booktabs).

A report is a list of sections; a section holds paragraphs, :class:`~reports.tables.Pivot`
tables and figure paths. Every renderer writes the same content; nothing here adds dates or
absolute paths, so the same store gives the same bytes.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from reports.tables import Pivot


@dataclass
class Section:
    """A titled part of the report."""

    title: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Pivot] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, png path)


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[object]]]:
    """The header and the rows of a table, the index as their first column."""
    return ([str(c) for c in [frame.index.name or "", *frame.columns]],
            [[idx, *row.tolist()] for idx, row in frame.iterrows()])


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (index as the first column)."""
    head, rows = _cells(frame)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(title: str, sections: list[Section], out: Path) -> Path:
    parts = [f"# {title}", ""]
    for s in sections:
        parts += ["#" * s.level + " " + s.title, ""]
        for p in s.paragraphs:
            parts += [p, ""]
        for t in s.tables:
            parts += [f"**{t.title}**", "", markdown_table(t.frame), ""]
        for caption, path in s.figures:
            parts += [f"![{caption}]({path.name})", ""]
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #1d2430; line-height: 1.45; padding: 0 1em; }
h1 { border-bottom: 2px solid #2b5797; padding-bottom: .3em; }
h2 { margin-top: 2em; color: #2b5797; }
table { border-collapse: collapse; margin: .6em 0 1.4em; font-size: 0.9em; }
th, td { border: 1px solid #cdd3dc; padding: .3em .7em; text-align: right; }
th { background: #eef2f8; } td:first-child, th:first-child { text-align: left; }
table.text td, table.text th { text-align: left; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .3em; }
.holds { background: #e3f4e1; } .fails { background: #fbe3e1; } .nm { color: #7a8291; }
figure { margin: 1em 0; } figcaption { font-size: .85em; color: #5a6270; }
img { max-width: 100%; border: 1px solid #e2e6ec; }
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


def html_table(t: Pivot) -> str:
    cls = {"holds": "holds", "does not hold": "fails", "not measured": "nm"}
    head, rows = _cells(t.frame)
    ths = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = []
    for cells in rows:
        tds = "".join(
            f'<td class="{cls[str(v)]}">{html.escape(str(v))}</td>' if str(v) in cls
            else f"<td>{html.escape(str(v))}</td>" for v in cells)
        body.append(f"<tr>{tds}</tr>")
    kind = ' class="text"' if t.key == "claims" else ""
    return (f"<table{kind}><caption>{html.escape(t.title)}</caption><thead><tr>{ths}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def render_html(title: str, sections: list[Section], out: Path) -> Path:
    """One file, images embedded as data URIs: opens offline, no external assets."""
    parts = [f"<h1>{html.escape(title)}</h1>", '<p id="image-check"></p>']
    for s in sections:
        parts.append(f"<h{s.level}>{html.escape(s.title)}</h{s.level}>")
        parts += [f"<p>{html.escape(p)}</p>" for p in s.paragraphs]
        parts += [html_table(t) for t in s.tables]
        for caption, path in s.figures:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(caption)}" '
                         f'src="data:image/png;base64,{data}"><figcaption>'
                         f"{html.escape(caption)}</figcaption></figure>")
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
           + "\n".join(parts) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")
    path = out / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path


_TEX = str.maketrans({"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$",
                      "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"})


def latex_table(t: Pivot) -> str:
    """A booktabs table environment."""
    if t.key == "claims":  # text columns wrap
        cols = "p{2.1cm}p{3.6cm}p{2.8cm}p{1.8cm}p{1.4cm}p{3.4cm}"
    else:
        cols = "l" + "r" * len(t.frame.columns)
    head, rows = _cells(t.frame)
    lines = [r"\begin{table}[ht]", r"\centering", r"\small",
             rf"\caption{{{t.title.translate(_TEX)}}}", rf"\begin{{tabular}}{{{cols}}}",
             r"\toprule", " & ".join(c.translate(_TEX) for c in head) + r" \\", r"\midrule"]
    lines += [" & ".join(str(v).translate(_TEX) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\label{{tab:{t.key}}}", r"\end{table}", ""]
    return "\n".join(lines)


def render_latex(sections: list[Section], out: Path) -> Path:
    """``tables.tex``: every table, ready to \\input into a paper (needs booktabs)."""
    body = ["% Generated by `precision report`; needs \\usepackage{booktabs}.", ""]
    for s in sections:
        body += [latex_table(t) for t in s.tables]
    path = out / "tables.tex"
    path.write_text("\n".join(body), encoding="utf-8")
    return path


def render_csv(sections: list[Section], out: Path) -> list[Path]:
    """One CSV per table, named by its key."""
    paths = []
    for s in sections:
        for t in s.tables:
            path = out / f"{t.key}.csv"
            t.frame.to_csv(path, lineterminator="\n")
            paths.append(path)
    return paths
