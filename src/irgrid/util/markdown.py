"""The one Markdown table renderer: results.md, the report's tables, QA summaries, `irgrid profiles --format
markdown`, the generated docs pages and the benchmarks' README tables all lay tables out here.

Written here because pandas' `to_markdown` needs `tabulate` (not a dependency) and pads columns, which would
change every stored results.md byte for byte."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "", *,
                   spaced: bool = False, escape: bool = False) -> str:
    """A GitHub-flavoured Markdown table (lines joined by newlines, no final newline).

    `align`: one letter per column, "r" right-aligned (numbers), anything else left; missing letters are "l".
    `spaced`: the rule row as `| --- | ---: |` instead of `|---|---:|`. `escape`: a `|` in a cell becomes `\\|`
    and a newline a space (cells from user data: system names, settings, sources); headers are never escaped."""
    rule = [("---:" if align[i:i + 1] == "r" else "---") for i in range(len(columns))]
    lines = [_row(columns), _row(rule) if spaced else "|" + "".join(f"{r}|" for r in rule)]
    for row in rows:
        cells = [str(c) for c in row]
        lines.append(_row([c.replace("|", "\\|").replace("\n", " ") for c in cells] if escape else cells))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
