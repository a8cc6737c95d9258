"""The paper's tables filled from a stored grid and its analyses: Table 2 coloured by Δσ class, Tables
A.3-A.7, z-scores, bootstrap SEs, failure ranks, Jaccard, fusion and cross-dataset tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import paper
from irgrid.report import failures
from irgrid.report import zscores as zscores_mod
from irgrid.report.analyses import Analyses
from irgrid.report.render import LEGEND, Table, TableCell, _fmt
from irgrid.report.stored import Grid, slug


def _our_values(grid: Grid) -> dict[str, dict[tuple[str, str], float]]:
    res = grid.results[(grid.results["measure"] != "ms/query") & ~grid.results["dataset"].isin(paper.AGGREGATES)]
    out: dict[str, dict[tuple[str, str], float]] = {}
    for _, r in res.iterrows():
        out.setdefault(r["system"], {})[(r["dataset"], r["measure"])] = float(r["value"])
    return out


def _bold_best(rows: list[list[TableCell]], values: list[list[float | None]]) -> None:
    for j in range(len(values[0]) if values else 0):
        col = [v[j] for v in values if v[j] is not None]
        if len(col) > 1:
            best = max(col)
            for i, v in enumerate(values):
                if v[j] is not None and v[j] == best:
                    rows[i][j + 1].bold = True


def paper_table(grid: Grid, z: pd.DataFrame, table: str, reference: str | Path | None = None,
                with_extras: bool = False) -> Table:
    """Table 2 or A.4–A.7 in the paper's layout: our systems (coloured by Δσ class), then the paper's rows for
    the models we reproduce. Table 2 keeps only the columns this grid fills and adds columns for our other
    (dataset, measure) cells (e.g. vaswani AP), coloured by their own comparison when a table has one."""
    ours = _our_values(grid)
    # systems that failed everywhere have no results rows: they are listed with their cells marked failed
    systems = list(dict.fromkeys(grid.systems() + [str(f["retriever"]) for f in grid.failures
                                                   if f.get("retriever") not in (None, "*")]))
    cols = [c for c in zscores_mod.paper_columns() if c.table == table]
    filled = {c.column: {s: zscores_mod.column_cells(c, ours.get(s, {})) for s in systems} for c in cols}
    if with_extras:
        cols = [c for c in cols if any(v is not None for v in filled[c.column].values())]
    used = {k for c in cols for keys in filled[c.column].values() if keys for k in keys}
    extras = []
    if with_extras:
        extras = [k for s in systems for k in ours.get(s, {}) if k not in used]
        extras = list(dict.fromkeys(extras))
    zmap = {(r["system"], r["table"], r["column"]): r for _, r in z.iterrows()}
    single = {}  # (system, dataset, measure) -> class, from single-component comparisons in any table
    published = {}  # (paper model, dataset, measure) -> the paper's value for such a cell
    for _, r in z.iterrows():
        col = next(c for c in zscores_mod.paper_columns() if c.table == r["table"] and c.column == r["column"])
        if len(col.components) == 1 and r["class"] != "new":
            single[(r["system"], r["datasets"], col.components[0][1])] = r["class"]
            published[(r["paper_model"], r["datasets"], col.components[0][1])] = float(r["published"])
    rows, values = [], []
    for s in systems:
        row, vals = [TableCell(s)], []
        for c in cols:
            zr = zmap.get((s, table, c.column))
            if zr is None:
                failed = grid.failed(s, (d for names_, _ in c.components for d in names_))
                row.append(TableCell("failed" if failed else "–"))
                vals.append(None)
            else:
                row.append(TableCell(_fmt(zr["ours"]), zr["class"]))
                vals.append(float(zr["ours"]))
        for k in extras:
            v = ours.get(s, {}).get(k)
            row.append(TableCell(_fmt(v, 4), single.get((s, *k))) if v is not None else TableCell("–"))
            vals.append(v)
        rows.append(row)
        values.append(vals)
    _bold_best(rows, values)
    paper = zscores_mod.load_paper_table(table, reference)
    models = [m for m in dict.fromkeys(grid.paper_names().values()) if m and m in paper.index]
    for m in models:
        rows.append([TableCell(f"paper: {m}", muted=True)]
                    + [TableCell(_fmt(_num(paper.at[m, c.column])), muted=True) for c in cols]
                    + [TableCell(_fmt(published.get((m, *k))), muted=True) for k in extras])
    names = dict(failures.paper.TABLE_TITLES)
    notes = [LEGEND]
    if any(cell.text == "failed" for row in rows for cell in row):
        notes.append("failed: a cell of this column did not run (failures.json has the error); not a result.")
    if not any(v is not None for vals in values for v in vals):
        notes.append("No dataset of this grid maps to this table; only the paper's rows are shown.")
    if any(c.scale != 1 for c in cols):
        notes.append("FollowIR columns x100 as the paper prints them: Score and MAP/nDCG@5 on the changed "
                     "instructions with the changed qrels, p-MRR as the paper's code computes it (irgrid.paper).")
    return Table(f"table{table.replace('.', '')}", names[table],
                 ["system"] + [c.label for c in cols] + [f"{d} {m}" for d, m in extras], rows, notes)


def _num(v: Any) -> float | None:
    return None if pd.isna(v) else float(v)


def zscore_table(z: pd.DataFrame) -> Table:
    rows = [[TableCell(r["system"]), TableCell("–" if pd.isna(r["paper_model"]) else str(r["paper_model"])), TableCell(r["table"]), TableCell(r["label"]),
             TableCell(_fmt(r["ours"], 4)), TableCell(_fmt(r["se"], 4)), TableCell(_fmt(_num(r["published"]))),
             TableCell(_fmt(_num(r["delta"]), 4)), TableCell(_fmt(_num(r["delta_sigma"]), 3), r["class"]), TableCell(r["class"])]
            for _, r in z.iterrows()]
    return Table("tableA3", "Table A.3 (ours): Δσ = (ours − published) / SE_boot", [
        "system", "paper model", "table", "column", "ours", "SE", "published", "Δ", "Δσ", "class"], rows, [LEGEND])


def bootstrap_tbl(a: Analyses, grid: Grid) -> Table:
    res = grid.results.set_index(["dataset", "system", "measure"])["value"]
    rows = [[TableCell(r["dataset"]), TableCell(r["system"]), TableCell(r["measure"]),
             TableCell(_fmt(float(res.get((r["dataset"], r["system"], r["measure"]), r["mean"])), 4)),
             TableCell(_fmt(r["se"], 4)), TableCell(str(r["queries"]))] for _, r in a.bootstrap.iterrows()]
    return Table("bootstrap", f"Bootstrap standard errors (B = {a.params['B']}, seed {a.params['seed']})",
                 ["dataset", "system", "measure", "value", "SE", "queries"], rows)


def failure_tbl(a: Analyses) -> Table:
    rows = []
    k = a.params["depth"] + 1
    for (dataset, system), block in a.failure_ranks.groupby(["dataset", "system"], sort=False):
        hard = a.hard_queries[(a.hard_queries["dataset"] == dataset) & (a.hard_queries["system"] == system)]
        rows.append([TableCell(dataset), TableCell(system), TableCell(str(len(block))), TableCell(_fmt(float(block["rank"].median()), 1)),
                     TableCell(str(int((block["rank"] == k).sum()))), TableCell(str(len(hard))),
                     TableCell(str(int(hard["rank"].min())) if len(hard) else "–")])
    return Table("failures", f"Failure points: rank of the first relevant document (capped at {k})",
                 ["dataset", "system", "queries", "median rank", f"rank {k}", "hard queries", "hard from rank"], rows,
                 [f"Hard queries: the worst {a.params['fraction']:.0%} per (system, dataset), ties broken by qid."])


def jaccard_tables(a: Analyses, grid: Grid) -> list[Table]:
    out = []
    for dataset in grid.datasets:
        if dataset in a.params.get("skipped", ()):
            continue
        m = jaccard_square(a, grid, dataset)
        rows = [[TableCell(s)] + [TableCell(_fmt(float(m.at[s, t]), 2)) for t in m.columns] for s in m.index]
        out.append(Table(f"jaccard-{slug(dataset)}", f"Jaccard similarity of hard-query sets: {dataset}",
                         ["system"] + list(m.columns), rows))
    return out


def jaccard_square(a: Analyses, grid: Grid, dataset: str) -> pd.DataFrame:
    families = grid.families()
    fam_order = {"sparse": 0, "expansion": 1, "dense": 2, "late-interaction": 3}
    systems = sorted(grid.systems(dataset), key=lambda s: (fam_order.get(families.get(s, ""), 9),
                                                           grid.systems(dataset).index(s)))
    m = pd.DataFrame(np.eye(len(systems)), index=systems, columns=systems)
    for _, r in a.jaccard[a.jaccard["dataset"] == dataset].iterrows():
        m.at[r["a"], r["b"]] = m.at[r["b"], r["a"]] = r["jaccard"]
    return m


def fusion_tbl(a: Analyses) -> Table:
    sugg = a.fusion_suggestions.set_index(["dataset", "a", "b"])
    rows = []
    for _, r in a.fusion_rrf.iterrows():
        s = sugg.loc[(r["dataset"], r["a"], r["b"])]
        rows.append([TableCell(r["dataset"]), TableCell(f"{r['a']} + {r['b']}"), TableCell(_fmt(float(s["jaccard"]), 2)),
                     TableCell("yes" if s["cross_family"] else "no"), TableCell(r["measure"]), TableCell(_fmt(r["a_value"], 4)),
                     TableCell(_fmt(r["b_value"], 4)), TableCell(_fmt(r["rrf_value"], 4), bold=r["gain_over_best"] > 0),
                     TableCell(f"{r['gain_over_best']:+.4f}")])
    return Table("fusion", f"Fusion suggestions: lowest hard-query overlap, tested with RRF (k = {a.params['rrf_k']})",
                 ["dataset", "pair", "Jaccard", "cross-family", "measure", "a", "b", "RRF", "RRF − best"], rows,
                 ["Pairs across retriever families first, then by Jaccard ascending; systems below 0.8 × the best "
                  "on a dataset's headline measure are not suggested. Live pipeline: irgrid.report.failures.rrf_pipeline."])


def cross_dataset_tables(a: Analyses) -> list[Table]:
    def _wtl_row(r) -> list[TableCell]:  # a baseline that failed is said so, never counted as ties
        missing = int(r.get("baseline_missing", 0) or 0)
        base = f"{r['baseline']} (failed on {missing} dataset(s))" if missing else str(r["baseline"])
        counts = [str(r[k]) if r["datasets"] else "–" for k in ("win", "tie", "loss")]
        return [TableCell(r["system"]), TableCell(r["measure"]), TableCell(base), *map(TableCell, counts)]

    wtl = [_wtl_row(r) for _, r in a.win_tie_loss.iterrows()]
    meta = [[TableCell(r["system"]), TableCell(r["measure"]), TableCell(str(r["k"])), TableCell(f"{r['effect']:+.4f}"),
             TableCell(_fmt(r["se"], 4)), TableCell(f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"), TableCell(_fmt(r["p"], 4)),
             TableCell(_fmt(r["tau2"], 6)), TableCell(_fmt(r["i2"], 2))] for _, r in a.meta_analysis.iterrows()]
    return [
        Table("win-tie-loss", "Win/tie/loss against the baseline across datasets",
              ["system", "measure", "baseline", "win", "tie", "loss"], wtl,
              ["Win/loss: significantly better/worse than the baseline after correction (results.csv)."]),
        Table("meta-analysis", "Random-effects meta-analysis (DerSimonian–Laird) of the per-dataset mean difference "
              "to the baseline", ["system", "measure", "datasets", "effect", "SE", "95% CI", "p", "τ²", "I²"], meta),
    ]


def build_tables(grid: Grid, a: Analyses, reference: str | Path | None = None) -> list[Table]:
    tables = [paper_table(grid, a.zscores, "2", reference, with_extras=True), zscore_table(a.zscores)]
    tables += [paper_table(grid, a.zscores, t, reference) for t in ("A.4", "A.5", "A.6", "A.7")]
    tables += [bootstrap_tbl(a, grid), failure_tbl(a), *jaccard_tables(a, grid), fusion_tbl(a),
               *cross_dataset_tables(a)]
    return tables
