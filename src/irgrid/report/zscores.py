"""Our scores against the paper's published tables: Δσ = (ours − published) / SE per cell, and the paper's
colour classes (within, above, far-above, below, far-below)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from irgrid import paper

if TYPE_CHECKING:

    pass
from irgrid.report.failures import reference_dir

# Table 2's colour classes (Section 4.1.2): |Δσ| <= 2 "within"; 2 < Δσ < 3 "above"; Δσ >= 3 "far-above";
# -3 < Δσ < -2 "below"; Δσ <= -3 "far-below"; no published value: "new".
CLASSES = ("within", "above", "far-above", "below", "far-below", "new", "no-se")  # no-se: published, no per-query SE


CLASS_COLOURS = {  # the paper's colour names; red and purple use the RGB values of its text
    "within": ("blue", (0.0, 0.27, 0.85)), "above": ("teal", (0.0, 0.5, 0.5)),
    "far-above": ("green", (0.0, 0.55, 0.0)), "below": ("purple", (0.5898, 0.2344, 0.668)),
    "far-below": ("red", (0.7852, 0.0, 0.0)), "new": ("black", (0.0, 0.0, 0.0)),
    "no-se": ("grey", (0.4, 0.4, 0.4)),
}


def delta_sigma(ours: float, published: float, se: float) -> float:
    """Equation (6): (ours − published) / SE_boot; ±inf when SE is 0 and the values differ."""
    diff = ours - published
    if se == 0 or math.isnan(se):
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / se


def classify(z: float | None) -> str:
    """Table 2's class of a Δσ (None/NaN: no published value, a new result)."""
    if z is None or (isinstance(z, float) and math.isnan(z)):
        return "new"
    if abs(z) <= 2:
        return "within"
    if z >= 3:
        return "far-above"
    if z <= -3:
        return "far-below"
    return "above" if z > 0 else "below"


TABLE_FILES = paper.TABLE_FILES


def paper_columns() -> list[paper.Column]:
    """Every column of Tables 2 and A.4-A.7 with the cells of ours that make it (see `irgrid.paper`)."""
    return list(paper.COLUMNS)


def load_paper_table(table: str, reference: str | Path | None = None) -> pd.DataFrame:
    """One of the paper's tables ('2', 'A.3' … 'A.7') indexed by the paper's model name."""
    return pd.read_csv(reference_dir(reference) / TABLE_FILES[table]).set_index("model")


def column_cells(col: paper.Column, cells: Mapping[tuple[str, str], Any]) -> list[tuple[str, str]] | None:
    """The (dataset, measure) keys of `cells` that fill every component of `col`, or None if one is missing."""
    return col.cells(cells)


def zscores(results: pd.DataFrame, se: pd.DataFrame, paper_names: Mapping[str, str | None],
            reference: str | Path | None = None) -> pd.DataFrame:
    """Our cells against the paper's published values (Equation 6), for every column whose cells this grid has.

    `results` is results.csv (its `value` is μ̂), `se` the bootstrap table, `paper_names` maps our system names
    to the paper's model names (None: not the paper's configuration, so every cell is a new result). A column's
    value and SE are its nested weighted mean (`paper.Column`): BEIR = (13 sets + the mean of CQADupStack's 12
    forums) / 14, with SE = sqrt(Σ w² SE²), as the paper's aggregator bootstraps it; FollowIR columns x100.
    A column with a cell that has no SE (no per-query values) gets SE NaN and no Δσ.
    """
    res = results[results["measure"] != "ms/query"]
    value = res.set_index(["system", "dataset", "measure"])["value"]
    se_map = se.set_index(["system", "dataset", "measure"])["se"]
    tables = {t: load_paper_table(t, reference) for t in TABLE_FILES}
    rows = []
    for system in dict.fromkeys(res["system"]):
        ours = {(d, m): float(v) for (s, d, m), v in value.items() if s == system}
        ses = {(d, m): float(v) for (s, d, m), v in se_map.items() if s == system}
        paper_model = paper_names.get(system)
        for col in paper_columns():
            keys = col.cells(ours)
            if keys is None:
                continue
            mean = col.value(ours)
            se_col = col.se(ses)
            se_col = math.nan if se_col is None else se_col
            table = tables[col.table]
            published = None
            if paper_model is not None and paper_model in table.index and not pd.isna(table.at[paper_model, col.column]):
                published = float(table.at[paper_model, col.column])
            z = None if published is None or math.isnan(se_col) else delta_sigma(mean, published, se_col)
            klass = "no-se" if published is not None and z is None else classify(z)
            rows.append({"system": system, "paper_model": paper_model, "table": col.table, "column": col.column,
                         "label": col.label, "datasets": " ".join(sorted({d for d, _ in keys})),
                         "ours": mean, "se": se_col, "published": published,
                         "delta": None if published is None else mean - published,
                         "delta_sigma": z, "class": klass})
    return pd.DataFrame(rows, columns=["system", "paper_model", "table", "column", "label", "datasets", "ours", "se",
                                       "published", "delta", "delta_sigma", "class"])
