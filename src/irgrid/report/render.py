"""Tables as data (cells with a Δσ class) rendered to Markdown, LaTeX and HTML with the paper's colours."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irgrid.report import zscores as zscores_mod
from irgrid.util.markdown import markdown_table


@dataclass
class TableCell:
    text: str
    cls: str | None = None  # a Δσ class (analysis.CLASSES) colours the cell
    bold: bool = False
    muted: bool = False  # the paper's published rows


@dataclass
class Table:
    stem: str
    title: str
    columns: list[str]
    rows: list[list[TableCell]]
    notes: list[str] = field(default_factory=list)


MD_MARKS = {"within": "=", "above": "↑", "far-above": "⇈", "below": "↓", "far-below": "⇊", "new": "", "no-se": "?"}


LEGEND = ("Colours (Table 2 of the paper): blue = within 2 SE of the published result (=), teal = 2–3 SE above (↑), "
          "green = ≥ 3 SE above (⇈), purple = 2–3 SE below (↓), red = ≥ 3 SE below (⇊), black = new result. "
          "grey (?) = published, but no per-query values to estimate an SE. SE: bootstrap standard error of our "
          "result; an averaged column's SE is sqrt(Σ w² SE²) over its cells.")


def format_value(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and (math.isnan(v))):
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if isinstance(v, (float, np.floating)):
        return f"{v:.{digits}f}"
    return str(v)


def to_markdown(t: Table) -> str:
    def cell(c: TableCell) -> str:
        text = c.text + (f" {MD_MARKS[c.cls]}" if c.cls and MD_MARKS.get(c.cls) else "")
        text = f"**{text}**" if c.bold else text
        return f"_{text}_" if c.muted else text

    rows = [[cell(c) for c in row] for row in t.rows] or [["–"] * len(t.columns)]
    lines = [f"### {t.title}", "", markdown_table(t.columns, rows, escape=True)]
    return "\n".join(lines + [""] + [f"{n}  " for n in t.notes]) + "\n"


# Every character pdflatex's default input would not typeset: text macros, or math symbols (amssymb for the
# arrows and triangles) wrapped in \ensuremath so they work in text and in math alike.
_TEX_ESCAPE = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "–": "--", "—": "---",
               "…": r"\ldots{}", "‘": "`", "’": "'", "“": "``", "”": "''", "é": r"\'e", "Š": r"\v{S}", "á": r"\'a"}
_TEX_MATH = {"−": "-", "Δ": r"\Delta", "σ": r"\sigma", "τ": r"\tau", "α": r"\alpha", "μ": r"\mu", "Σ": r"\Sigma",
             "∞": r"\infty", "≥": r"\geq", "≤": r"\leq", "≈": r"\approx", "±": r"\pm", "×": r"\times",
             "·": r"\cdot", "√": r"\surd", "²": r"^{2}", "→": r"\rightarrow", "↑": r"\uparrow", "↓": r"\downarrow",
             "⇈": r"\upuparrows", "⇊": r"\downdownarrows", "▲": r"^{\blacktriangle}", "▼": r"^{\blacktriangledown}",
             "∩": r"\cap", "∪": r"\cup", "†": r"\dagger", "‡": r"\ddagger", "§": r"\S", "°": r"^{\circ}"}
TEX_PACKAGES = (r"\usepackage{booktabs}", r"\usepackage{amssymb}", r"\usepackage{graphicx}")


def tex_escape(text: str) -> str:
    """Plain text as pdflatex input, ASCII only: LaTeX's specials escaped, symbols as macros, any other
    non-ASCII letter by its ASCII base (é -> e) or '?' rather than an input error."""
    import unicodedata

    out = []
    for ch in text:
        if ch in _TEX_ESCAPE:
            out.append(_TEX_ESCAPE[ch])
        elif ch in _TEX_MATH:
            out.append(rf"\ensuremath{{{_TEX_MATH[ch]}}}")
        elif ch.isascii():
            out.append(ch)
        elif unicodedata.combining(ch):
            continue  # an accent on the previous character: dropped
        else:
            base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(tex_escape(base) if base else "?")
    return "".join(out)


def to_latex(t: Table) -> str:
    def cell(c: TableCell) -> str:
        text = tex_escape(c.text)
        if c.cls and c.cls != "new":
            r, g, b = zscores_mod.CLASS_COLOURS[c.cls][1]
            text = rf"\textcolor[rgb]{{{r:.4f},{g:.4f},{b:.4f}}}{{{text}}}"
        text = rf"\textbf{{{text}}}" if c.bold else text
        return rf"\textit{{{text}}}" if c.muted else text

    spec = "l" + "r" * (len(t.columns) - 1)
    wide = len(t.columns) > 7 or sum(len(c) for c in t.columns) > 110  # shrunk to the text width
    lines = [r"\begin{table}[ht]", r"\centering", rf"\caption{{{tex_escape(t.title)}}}", r"\small",
             r"\resizebox{\linewidth}{!}{%" if wide else "",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(tex_escape(c) for c in t.columns) + r" \\",
             r"\midrule"]
    lines += [" & ".join(cell(c) for c in row) + r" \\" for row in t.rows]
    lines += [r"\bottomrule", r"\end{tabular}" + ("}" if wide else "")]
    lines = [line for line in lines if line]
    lines += [rf"\par\smallskip\footnotesize {tex_escape(n)}" for n in t.notes]
    return "\n".join(lines + [r"\end{table}"]) + "\n"


def to_html(t: Table) -> str:
    def cell(c: TableCell) -> str:
        style = []
        if c.cls and c.cls != "new":
            r, g, b = zscores_mod.CLASS_COLOURS[c.cls][1]
            style.append(f"color: rgb({round(255 * r)}, {round(255 * g)}, {round(255 * b)})")
        if c.bold:
            style.append("font-weight: bold")
        if c.muted:
            style.append("font-style: italic; color: #666")
        attr = f' style="{"; ".join(style)}"' if style else ""
        title = f' title="{html.escape(c.cls)}"' if c.cls else ""
        return f"<td{attr}{title}>{html.escape(c.text)}</td>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = "\n".join("<tr>" + "".join(cell(c) for c in row) + "</tr>" for row in t.rows)
    notes = "".join(f"<p class=\"note\">{html.escape(n)}</p>" for n in t.notes)
    return (f"<h3 id=\"{t.stem}\">{html.escape(t.title)}</h3>\n<table>\n<thead><tr>{head}</tr></thead>\n"
            f"<tbody>\n{body}\n</tbody>\n</table>\n{notes}\n")
