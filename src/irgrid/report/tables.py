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
from irgrid.report.render import Table, TableCell, format_value
from irgrid.report.stored import Grid
from irgrid.runner import limits as limits_mod
from irgrid.util.files import slug


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
                row.append(TableCell(format_value(zr["ours"]), zr["class"]))
                vals.append(float(zr["ours"]))
        for k in extras:
            v = ours.get(s, {}).get(k)
            row.append(TableCell(format_value(v, 4), single.get((s, *k))) if v is not None else TableCell("–"))
            vals.append(v)
        rows.append(row)
        values.append(vals)
    _bold_best(rows, values)
    paper = zscores_mod.load_paper_table(table, reference)
    models = [m for m in dict.fromkeys(grid.paper_names().values()) if m and m in paper.index]
    for m in models:
        rows.append([TableCell(f"paper: {m}", muted=True)]
                    + [TableCell(format_value(_num(paper.at[m, c.column])), muted=True) for c in cols]
                    + [TableCell(format_value(published.get((m, *k))), muted=True) for k in extras])
    notes = ["Colours: the legend above (Δσ of ours against the published value)."]
    if any(cell.text == "failed" for row in rows for cell in row):
        notes.append("failed: a cell of this column did not run (failures.json has the error); not a result.")
    if not any(v is not None for vals in values for v in vals):
        notes.append("No dataset of this grid maps to this table; only the paper's rows are shown.")
    if any(c.scale != 1 for c in cols):
        notes.append("FollowIR columns x100 as the paper prints them: Score and MAP/nDCG@5 on the changed "
                     "instructions with the changed qrels, p-MRR as the paper's code computes it (irgrid.paper).")
    return Table(f"table{table.replace('.', '')}", PAPER_TITLES[table],
                 ["system"] + [c.label for c in cols] + [f"{d} {m}" for d, m in extras], rows, notes)


PAPER_TITLES = {  # captions that say what each of the paper's tables holds, ours beside the published rows
    "2": "Paper Table 2 (averaged columns: MS MARCO, BEIR, LoTTE, InstructIR, FollowIR): ours coloured by Δσ, "
         "then the published rows",
    "A.4": "Paper Table A.4 (MS MARCO dev, TREC-DL 2019/2020): ours coloured by Δσ, then the published rows",
    "A.5": "Paper Table A.5 (BEIR, nDCG@10): ours coloured by Δσ, then the published rows",
    "A.6": "Paper Table A.6 (LoTTE pooled, Success@5): ours coloured by Δσ, then the published rows",
    "A.7": "Paper Table A.7 (InstructIR, FollowIR; FollowIR x100): ours coloured by Δσ, then the published rows",
}


def _num(v: Any) -> float | None:
    return None if pd.isna(v) else float(v)


def zscore_table(z: pd.DataFrame) -> Table:
    rows = [[TableCell(r["system"]), TableCell("–" if pd.isna(r["paper_model"]) else str(r["paper_model"])), TableCell(r["table"]), TableCell(r["label"]),
             TableCell(format_value(r["ours"], 4)), TableCell(format_value(r["se"], 4)), TableCell(format_value(_num(r["published"]))),
             TableCell(format_value(_num(r["delta"]), 4)), TableCell(format_value(_num(r["delta_sigma"]), 3), r["class"]), TableCell(r["class"])]
            for _, r in z.iterrows()]
    return Table("tableA3", "Table A.3 (ours): Δσ = (ours − published) / SE_boot", [
        "system", "paper model", "table", "column", "ours", "SE", "published", "Δ", "Δσ", "class"], rows,
        ["Colours: the legend above."])


def bootstrap_tbl(a: Analyses, grid: Grid) -> Table:
    res = grid.results.set_index(["dataset", "system", "measure"])["value"]
    rows = [[TableCell(r["dataset"]), TableCell(r["system"]), TableCell(r["measure"]),
             TableCell(format_value(float(res.get((r["dataset"], r["system"], r["measure"]), r["mean"])), 4)),
             TableCell(format_value(r["se"], 4)), TableCell(str(r["queries"]))] for _, r in a.bootstrap.iterrows()]
    return Table("bootstrap", f"Bootstrap standard errors (B = {a.params['B']}, seed {a.params['seed']})",
                 ["dataset", "system", "measure", "value", "SE", "queries"], rows)


def failure_tbl(a: Analyses) -> Table:
    rows = []
    k = a.params["depth"] + 1
    for (dataset, system), block in a.failure_ranks.groupby(["dataset", "system"], sort=False):
        hard = a.hard_queries[(a.hard_queries["dataset"] == dataset) & (a.hard_queries["system"] == system)]
        rows.append([TableCell(dataset), TableCell(system), TableCell(str(len(block))), TableCell(format_value(float(block["rank"].median()), 1)),
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
        rows = [[TableCell(s)] + [TableCell(format_value(float(m.at[s, t]), 2)) for t in m.columns] for s in m.index]
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
        rows.append([TableCell(r["dataset"]), TableCell(f"{r['a']} + {r['b']}"), TableCell(format_value(float(s["jaccard"]), 2)),
                     TableCell("yes" if s["cross_family"] else "no"), TableCell(r["measure"]), TableCell(format_value(r["a_value"], 4)),
                     TableCell(format_value(r["b_value"], 4)), TableCell(format_value(r["rrf_value"], 4), bold=r["gain_over_best"] > 0),
                     TableCell(f"{r['gain_over_best']:+.4f}")])
    return Table("fusion", f"Fusion suggestions: lowest hard-query overlap, tested with RRF (k = {a.params['rrf_k']})",
                 ["dataset", "pair", "Jaccard", "cross-family", "measure", "a", "b", "RRF", "RRF − best"], rows,
                 ["Pairs across retriever families first (a pair is cross-family when the entries the two are built "
                  "from share no family), then by Jaccard ascending; systems below 0.8 × the best on a dataset's "
                  "headline measure, pairs a system of the grid already fuses (or nearly: the same members in "
                  "another order, with other weights or k) and pairs with the same hard queries (Jaccard 1) "
                  "are not suggested. Live pipeline: "
                  "irgrid.report.failures.rrf_pipeline.",
                  f"Selection and RRF scores use the same queries ({failures.SELECTED_ON}; the grid stores no runs of a "
                  "held-out split): the gains are optimistic until confirmed on other queries."])


def cross_dataset_tables(a: Analyses) -> list[Table]:
    st = a.params["statistics"]

    def _wtl_row(r) -> list[TableCell]:  # a baseline that failed is said so, never counted as ties
        missing = int(r.get("baseline_missing", 0) or 0)
        base = f"{r['baseline']} (failed on {missing} dataset(s))" if missing else str(r["baseline"])
        counts = [str(r[k]) if r["datasets"] else "–" for k in ("win", "tie", "loss")]
        return [TableCell(r["system"]), TableCell(r["measure"]), TableCell(base), *map(TableCell, counts)]

    wtl = [_wtl_row(r) for _, r in a.win_tie_loss.iterrows()]
    meta = []
    for _, r in a.meta_analysis.iterrows():
        one = int(r["k"]) == 1  # one dataset: no pooling, no heterogeneity; its test is the main table's
        meta.append([TableCell(r["system"]), TableCell(r["measure"]), TableCell(str(r["k"])), TableCell(f"{r['effect']:+.4f}"),
                     TableCell(format_value(r["se"], 4)), TableCell(f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"),
                     TableCell("–" if one else format_value(r["p"], 4)), TableCell(format_value(r["tau2"], 6)), TableCell(format_value(r["i2"], 2))])
    notes = ["p: two-sided z-test of the pooled effect (normal approximation, uncorrected) — the only p-value of "
             "this table; per-dataset tests are the main tables'. τ², I²: between-dataset heterogeneity."]
    if any(int(k) == 1 for k in a.meta_analysis["k"]):
        notes.append("datasets = 1: a single dataset has no heterogeneity (τ², I² not defined) and no pooled test; "
                     "its effect is the dataset's mean difference, tested in the main table.")
    return [
        Table("win-tie-loss", f"Win/tie/loss against the baseline across datasets ({st['describe']}, "
              f"{st['describe_correction']}; results.csv)",
              ["system", "measure", "baseline", "win", "tie", "loss"], wtl,
              ["Win/loss: significantly better/worse than the baseline after correction (results.csv's p-values)."]),
        Table("meta-analysis", "Random-effects meta-analysis (DerSimonian–Laird) of the per-dataset mean difference "
              "to the baseline", ["system", "measure", "datasets", "effect", "SE", "95% CI", "p", "τ²", "I²"], meta,
              notes),
    ]


PAPER_TABLES = ("2", "A.4", "A.5", "A.6", "A.7")


def paper_tables_for(a: Analyses, paper: bool | None = None) -> list[str]:
    """The paper's tables this report shows: by default those with a column that the grid's cells fill (its
    datasets, under the paper's measures), so a grid of other datasets gets none and no table prints empty;
    `paper=True` shows all five (the published rows at least), `paper=False` none."""
    if paper is not None:
        return list(PAPER_TABLES) if paper else []
    filled = set(a.zscores["table"])
    return [t for t in PAPER_TABLES if t in filled]


def build_tables(grid: Grid, a: Analyses, reference: str | Path | None = None, paper: bool | None = None) -> list[Table]:
    tables = [*main_tables(grid, a), effect_size_table(a)]
    shown = paper_tables_for(a, paper)
    if shown:
        tables += [paper_table(grid, a.zscores, t, reference) for t in shown]
        tables.append(zscore_table(a.zscores))
    tables += [bootstrap_tbl(a, grid), failure_tbl(a), *jaccard_tables(a, grid), fusion_tbl(a),
               *cross_dataset_tables(a)]
    return tables


# -- the main tables: the grid's own results with the experiment's test -------------------------------------------
GROUP_LABELS = {"msmarco": "MS MARCO", "beir": "BEIR", "lotte": "LoTTE", "instructir": "InstructIR",
                "followir": "FollowIR", "byo": "own collections", "other": "other datasets"}


def _pair(comp: pd.DataFrame, dataset: str, measure: str, x: str, y: str) -> dict[str, Any] | None:
    """The comparison of x against y (either orientation stored; the difference as x − y)."""
    block = comp[(comp["dataset"] == dataset) & (comp["measure"] == measure)]
    hit = block[(block["system"] == x) & (block["against"] == y)]
    if len(hit):
        return hit.iloc[0].to_dict()
    hit = block[(block["system"] == y) & (block["against"] == x)]
    if len(hit):
        r = hit.iloc[0].to_dict()
        return {**r, "diff": -r["diff"], "ci_low": -r["ci_high"], "ci_high": -r["ci_low"], "effect_d": -r["effect_d"]}
    return None


def _untested(comp: pd.DataFrame, datasets: list[str]) -> str:
    """The note for comparisons without a p-value (too few queries for the test): not computable, so neither
    ▲/▼ nor bold, and not to be read as "no difference"."""
    if "p_note" not in comp.columns or comp.empty:
        return ""
    rows = comp[comp["dataset"].isin(datasets) & comp["p_note"].map(lambda v: isinstance(v, str) and bool(v))]
    if rows.empty:
        return ""
    shown = "; ".join(f"{r.dataset} {r.measure}: {r.system} vs {r.against} ({r.p_note})"
                      for r in rows.itertuples(index=False))
    return f"No p-value (no ▲/▼, no bold) where the test is not computable on the sample: {shown}."


def _significant(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("significant") is True


DEPTH_NOTE = ("†: the measure looks deeper than the system returns (a cut-off above the depth its run holds, or no "
              "cut-off on a run shorter than the deepest compared): part of the value is truncation, not ranking.")
LIMITS_NOTE = ("(a–b x): the 95% rank interval of the system (paired bootstrap over queries) and its tie group: "
               "systems sharing a letter are not resolved by the queries; °: under-powered (less than 80% power at "
               "the observed difference after the correction); ‡: the run's tied scores can move the value by more "
               "than half its bootstrap SE (results.csv tie_min, tie_max, tie_expected).")


def _limits(results: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    """results.csv's rank, power and tie columns per (dataset, system, measure); empty for a grid written before
    they existed."""
    if "tie_group" not in results.columns:
        return {}
    res = results[results["measure"] != "ms/query"]
    cols = ["rank_low", "rank_high", "tie_group", "underpowered", "tie_flag"]
    return {(d, s, m): dict(zip(cols, vals)) for d, s, m, *vals in
            zip(res["dataset"], res["system"], res["measure"], *(res[c] for c in cols))}


def _limits_text(r: dict[str, Any] | None) -> str:
    if not r:
        return ""
    text = " °" if str(r["underpowered"]) == "True" else ""
    text += " ‡" if str(r["tie_flag"]) == "True" else ""
    if not pd.isna(r["rank_low"]):
        lo, hi = int(r["rank_low"]), int(r["rank_high"])
        text += f" ({lo}" + (f"–{hi}" if hi != lo else "") + f" {r['tie_group']})"
    return text


def _letters(group: Any) -> set[str]:
    g = str(group)
    return set(g.split(",")) if "," in g else set(g)


def _tie_group_others(limits: dict, dataset: str, measure: str, system: str, systems: list[str]) -> list[str] | None:
    """The other systems that share a tie group with `system` in this column (None: no rank resolution stored)."""
    mine = limits.get((dataset, system, measure))
    if not mine or pd.isna(mine["tie_group"]):
        return None
    return [o for o in systems if o != system and (r := limits.get((dataset, o, measure))) and
            not pd.isna(r["tie_group"]) and _letters(r["tie_group"]) & _letters(mine["tie_group"])]


def main_tables(grid: Grid, a: Analyses) -> list[Table]:
    """Per dataset group, the grid's systems x (dataset, measure): mean with its 95% bootstrap CI, ▲/▼ where the
    experiment's test (after its correction) finds the system better/worse than the baseline, bold only for a
    column's best where that test supports it. The caption names the baseline, test, correction, alpha, n and
    measures: one p-value story per table."""
    st = a.params["statistics"]
    base, all_pairs, alpha = st["baseline"], st["comparisons"] == "all-pairs", st["alpha"]
    comp = a.comparisons
    scored = grid.results[grid.results["measure"] != "ms/query"].set_index(["dataset", "system", "measure"])
    value = scored["value"]
    # † as results.md marks it: the measure looks deeper than the system returns (results.csv `beyond_depth`)
    deep = (scored["beyond_depth"].astype(str) == "True" if "beyond_depth" in scored.columns
            else pd.Series(False, index=scored.index))
    boot = a.bootstrap.set_index(["dataset", "system", "measure"])
    datasets = [d for d in grid.datasets if d not in paper.AGGREGATES]
    groups: dict[str, list[str]] = {}
    for d in datasets:
        groups.setdefault(grid.group(d), []).append(d)
    n_queries = {d: int(q) for (d, _, _), q in boot["queries"].items()}
    limits = _limits(grid.results)
    tables = []
    for group, members in groups.items():
        tops: list[str] = []
        cols = [(d, m) for d in members for m in grid.measures(d)]
        systems = list(dict.fromkeys(s for d in members for s in grid.systems(d)))
        rows: list[list[TableCell]] = []
        for s in systems:
            row = [TableCell(f"{s} (baseline)" if s == base else s)]
            for d, m in cols:
                v = value.get((d, s, m))
                if v is None or pd.isna(v):
                    row.append(TableCell("failed" if grid.failed(s, [d]) else "–"))
                    continue
                mark = ""
                r = _pair(comp, d, m, s, base) if base and s != base else None
                if _significant(r):
                    mark = " ▲" if r["diff"] > 0 else " ▼"
                ci = ""
                if (d, s, m) in boot.index:
                    ci = f" [{boot.at[(d, s, m), 'ci_low']:.3f}, {boot.at[(d, s, m), 'ci_high']:.3f}]"
                dagger = " †" if bool(deep.get((d, s, m), False)) else ""
                row.append(TableCell(f"{float(v):.4f}{mark}{dagger}{ci}{_limits_text(limits.get((d, s, m)))}"))
            rows.append(row)
        for j, (d, m) in enumerate(cols, start=1):  # bold: the best, where the test supports it
            vals = {s: value.get((d, s, m)) for s in systems}
            vals = {s: float(v) for s, v in vals.items() if v is not None and not pd.isna(v)}
            if len(vals) < 2:
                continue
            best = max(vals, key=lambda s: vals[s])
            others = [o for o in vals if o != best]
            if all_pairs:
                supported = all(_significant(r := _pair(comp, d, m, best, o)) and r["diff"] > 0 for o in others)
            else:
                r = _pair(comp, d, m, best, base) if base and best != base else None
                supported = _significant(r) and r["diff"] > 0
            shared = _tie_group_others(limits, d, m, best, systems)
            if supported and not shared:  # never bold a system whose tie group holds others
                rows[systems.index(best)][j].bold = True
            if shared is not None:
                tops.append(f"{d} {m}: " + (f"highest mean {best}, not resolved from {', '.join(shared)} (no single "
                                            f"best)" if shared else f"{best} is resolved from every other system"))
        measures = list(dict.fromkeys(m for _, m in cols))
        n_text = ", ".join(f"{n_queries.get(d, '?')} ({d})" if len(members) > 1 else str(n_queries.get(d, "?"))
                           for d in members)
        family = (f"over all {len(systems) * (len(systems) - 1) // 2} pairs of the {len(systems)} systems"
                  if all_pairs else f"over the {len(systems) - 1} system{'s' if len(systems) != 2 else ''} compared "
                                    f"with it")
        if base:
            tests = (f"▲/▼: significantly better/worse than the baseline {base} by the {st['describe']}, "
                     f"{st['describe_correction']} {family} per dataset and measure, α = {alpha}")
        else:
            tests = "no baseline: no significance tests"
        title = (f"{GROUP_LABELS.get(group, group)}: {', '.join(measures)} on {', '.join(members)} "
                 f"(n = {n_text} queries); baseline {base}; {tests}")
        bold = ("significantly better than every other system (all pairs)" if all_pairs else
                f"significantly better than the baseline {base}")
        notes = [f"Cells: mean over the queries [95% bootstrap percentile confidence interval of the mean, B = "
                 f"{a.params['B']}, seed {a.params['seed']}].",
                 f"Bold: a column's highest mean only where the test supports it ({bold}) and no other system "
                 f"shares its tie group; effect sizes: the next table."]
        untested = _untested(comp, members)
        if untested:
            notes.append(untested)
        if any(bool(deep.get((d, s, m), False)) for s in systems for d, m in cols):
            notes.append(DEPTH_NOTE)
        if limits:
            notes += [LIMITS_NOTE, *(f"Top of {t}." for t in tops)]
            mde = grid.manifest.get("mde") or {}
            notes += [f"{d} {limits_mod.mde_line(m, s, st.get('correction'))}." for d in members
                      for m, s in (mde.get(d) or {}).items()]
        tables.append(Table(f"main-{slug(group)}", title, ["system"] + [f"{d} {m}" if len(members) > 1 else m
                                                                          for d, m in cols], rows, notes))
    return tables


def effect_size_table(a: Analyses) -> Table:
    """Every comparison the main tables test, with its effect size: the mean difference and its 95% CI, the
    standardised effect d, and the test's p before and after correction."""
    st = a.params["statistics"]
    rows = []
    for _, r in a.comparisons.iterrows():
        rows.append([TableCell(r["dataset"]), TableCell(r["measure"]), TableCell(f"{r['system']} − {r['against']}"),
                     TableCell(str(r["n"])), TableCell(f"{r['diff']:+.4f}"),
                     TableCell(f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"), TableCell(format_value(r["effect_d"], 2)),
                     TableCell(format_value(r["p"], 4)), TableCell(format_value(r["p_corrected"], 4), bold=r["significant"] is True)])
    pairs_ = "all pairs of systems" if st["comparisons"] == "all-pairs" else f"each system against {st['baseline']}"
    untested = _untested(a.comparisons, list(dict.fromkeys(a.comparisons["dataset"])) if len(a.comparisons) else [])
    return Table("effect-sizes", f"Effect sizes and tests: {pairs_} ({st['describe']}, {st['describe_correction']})",
                 ["dataset", "measure", "comparison", "n", "Δ mean", "95% CI of Δ", "d", "p", "p corrected"], rows,
                 [f"Δ: mean per-query difference; its CI: bootstrap percentile (B = {a.params['B']}, seed "
                  f"{a.params['seed']}); d: standardised effect mean(Δ) / sd(Δ) (paired Cohen's d). p: the "
                  "experiment's test; against the baseline as in results.csv. Bold: corrected p < α.",
                  *([untested] if untested else [])])
