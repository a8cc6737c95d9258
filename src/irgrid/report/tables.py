"""`irgrid report OUT`: the paper's tables and figures regenerated from a stored grid only.

Reads OUT/results.csv, perquery.csv, manifest.json, runs/ and qrels/ (never recomputes a run), runs the analyses
of `irgrid.report.failures` and writes, under OUT/report (or --to):

- analysis CSVs: bootstrap_se, zscores, failure_ranks, hard_queries, jaccard, fusion_suggestions, fusion_rrf,
  win_tie_loss, meta_analysis;
- tables (Table 2 coloured by Δσ class, Tables A.3–A.7, Jaccard, fusion, cross-dataset) as Markdown, LaTeX and
  HTML, each alone (table2.md, table2.tex, table2.html, …) and together (report.md, report.tex, report.html);
- figures as PNG: figure1.png (effectiveness vs query latency, log scale) and jaccard-<dataset>.png (Figure 2/A.1).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import paper
from irgrid.core.files import write_text_atomic
from irgrid.report import failures
from irgrid.report import stats as stats_mod
from irgrid.report import zscores as zscores_mod

# -- loading a stored grid ----------------------------------------------------------------------------------


def slug(dataset: str) -> str:
    return dataset.replace("/", "--")  # as irgrid.data.datasets.Dataset.slug names the run folders


@dataclass
class Grid:
    """An output folder of `irgrid run`."""

    out: Path
    results: pd.DataFrame
    perquery: pd.DataFrame
    manifest: dict[str, Any]

    failures: list[dict[str, Any]] = field(default_factory=list)  # failures.json: cells that did not run

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(self.results["dataset"]))

    def failed(self, system: str, datasets: Iterable[str]) -> bool:
        """Whether this system failed on one of these datasets (tables say 'failed', not '–', for such cells)."""
        names = set(datasets)
        return any(f.get("retriever") == system and (f.get("dataset") in names or f.get("dataset") == "*")
                   for f in self.failures)

    def systems(self, dataset: str | None = None) -> list[str]:
        res = self.results if dataset is None else self.results[self.results["dataset"] == dataset]
        return list(dict.fromkeys(res["system"]))

    def measures(self, dataset: str) -> list[str]:
        res = self.results[(self.results["dataset"] == dataset) & (self.results["measure"] != "ms/query")]
        return list(dict.fromkeys(res["measure"]))

    @property
    def baseline(self) -> str | None:
        base = self.results["baseline"].dropna()
        return str(base.iloc[0]) if len(base) else None

    def families(self) -> dict[str, str]:
        return {name: str(e.get("family", "?")) for name, e in self.manifest.get("retrievers", {}).items()}

    def paper_names(self) -> dict[str, str | None]:
        """Our systems -> the paper's model names: from the manifest, else from the registry when the stored
        configuration hash is the registered entry's (a changed variant is a new result)."""
        out: dict[str, str | None] = {}
        for name, entry in self.manifest.get("retrievers", {}).items():
            if "paper_name" in entry:
                out[name] = entry["paper_name"]
                continue
            from irgrid.core.registry import UnknownNameError
            from irgrid.core.retrievers import get

            try:
                registered = get(name)
            except UnknownNameError:
                out[name] = None
                continue
            out[name] = registered.paper_name if registered.key() == entry.get("config_hash") else None
        return out

    def has_run(self, dataset: str, system: str) -> bool:
        """Whether the stored run is here (results.csv alone is enough for the tables; failure points, Jaccard
        and fusion need runs)."""
        return (self.out / "runs" / slug(dataset) / f"{system}.res.gz").exists()

    def run(self, dataset: str, system: str) -> pd.DataFrame:
        path = self.out / "runs" / slug(dataset) / f"{system}.res.gz"
        run = pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "Q0", "docno", "rank", "score", "name"],
                          dtype={"qid": str, "docno": str})
        return run[["qid", "docno", "rank", "score"]]

    def qrels(self, dataset: str) -> pd.DataFrame:
        path = self.out / "qrels" / f"{slug(dataset)}.qrels"
        if path.exists():
            return pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "iter", "docno", "label"],
                               dtype={"qid": str, "docno": str})[["qid", "docno", "label"]]
        # folders written before qrels were stored with the runs: read them from the dataset
        from irgrid.data.datasets import get

        return get(dataset).qrels()[["qid", "docno", "label"]]


def load(out: str | Path) -> Grid:
    out = Path(out)
    missing = [n for n in ("results.csv", "perquery.csv", "manifest.json") if not (out / n).exists()]
    if missing:
        raise FileNotFoundError(f"{out} is not an irgrid output folder: missing {', '.join(missing)}")
    results = pd.read_csv(out / "results.csv")
    perquery = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    failures_path = out / "failures.json"
    failures = json.loads(failures_path.read_text() or "[]") if failures_path.exists() else []
    return Grid(out, results, perquery, json.loads((out / "manifest.json").read_text()),
                [f for f in failures if isinstance(f, dict)])


# -- analyses -----------------------------------------------------------------------------------------------


@dataclass
class Analyses:
    bootstrap: pd.DataFrame
    zscores: pd.DataFrame
    failure_ranks: pd.DataFrame
    hard_queries: pd.DataFrame
    jaccard: pd.DataFrame  # long: dataset, a, b, jaccard
    fusion_suggestions: pd.DataFrame
    fusion_rrf: pd.DataFrame
    win_tie_loss: pd.DataFrame
    meta_analysis: pd.DataFrame
    params: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, pd.DataFrame)}


def analyse(grid: Grid, n_resamples: int = stats_mod.BOOTSTRAP_B, seed: int = stats_mod.BOOTSTRAP_SEED, fraction: float = 0.1,
            depth: int = 1000, reference: str | Path | None = None, rrf_k: int = 60) -> Analyses:
    import ir_measures

    boot = stats_mod.bootstrap_table(grid.perquery, n_resamples, seed)
    z = zscores_mod.zscores(grid.results, boot, grid.paper_names(), reference)
    ranks, hard, jac, skipped = [], [], [], []
    for dataset in grid.datasets:
        systems = [s for s in grid.systems(dataset) if grid.has_run(dataset, s)]
        if not systems:
            skipped.append(dataset)
            continue
        qrels = grid.qrels(dataset)
        sets = {}
        for system in systems:
            r = failures.failure_ranks(grid.run(dataset, system), qrels, depth=depth)
            ranks.append(pd.DataFrame({"dataset": dataset, "system": system, "qid": r.index, "rank": r.to_numpy()}))
            sets[system] = failures.hard_queries(r, fraction)
            hard += [{"dataset": dataset, "system": system, "qid": q, "rank": int(r[q])} for q in sets[system]]
        matrix = failures.jaccard_matrix(sets)
        jac += [{"dataset": dataset, "a": a, "b": b, "jaccard": float(matrix.at[a, b])} for a, b in stats_mod.pairs(list(sets))]
    jac_df = pd.DataFrame(jac, columns=["dataset", "a", "b", "jaccard"])
    first = _first_measure_values(grid)
    sugg = failures.fusion_suggestions(jac_df, grid.families(), first)
    sugg["expression"] = [failures.fusion_expression(x, y, rrf_k) for x, y in zip(sugg["a"], sugg["b"])]  # paste-ready
    fused = []
    for _, s in sugg.iterrows():
        dataset = s["dataset"]
        qrels = grid.qrels(dataset)
        measures = [ir_measures.parse_measure(m) for m in grid.measures(dataset)]
        runs = {n: grid.run(dataset, n) for n in (s["a"], s["b"])}
        runs["rrf"] = failures.rrf_runs(runs[s["a"]], runs[s["b"]], k=rrf_k)
        values = {n: failures.evaluate(measures, qrels, r) for n, r in runs.items()}
        for m in map(str, measures):
            fused.append({"dataset": dataset, "a": s["a"], "b": s["b"], "measure": m,
                          "a_value": values[s["a"]][m], "b_value": values[s["b"]][m], "rrf_value": values["rrf"][m],
                          "gain_over_best": values["rrf"][m] - max(values[s["a"]][m], values[s["b"]][m]), "k": rrf_k})
    base = grid.baseline
    return Analyses(
        bootstrap=boot, zscores=z,
        failure_ranks=pd.concat(ranks, ignore_index=True) if ranks else pd.DataFrame(columns=["dataset", "system", "qid", "rank"]),
        hard_queries=pd.DataFrame(hard, columns=["dataset", "system", "qid", "rank"]),
        jaccard=jac_df, fusion_suggestions=sugg,
        fusion_rrf=pd.DataFrame(fused, columns=["dataset", "a", "b", "measure", "a_value", "b_value", "rrf_value",
                                                "gain_over_best", "k"]),
        win_tie_loss=stats_mod.win_tie_loss(grid.results),
        meta_analysis=stats_mod.meta_analysis(grid.perquery, base) if base else stats_mod.meta_analysis(grid.perquery.iloc[:0], ""),
        params={"B": n_resamples, "seed": seed, "fraction": fraction, "depth": depth, "rrf_k": rrf_k,
                "skipped": skipped},
    )


def _first_measure_values(grid: Grid) -> pd.DataFrame:
    """Each dataset's first measure (its headline metric, as in Table 2) per system."""
    rows = []
    for dataset in grid.datasets:
        m = grid.measures(dataset)[0]
        block = grid.results[(grid.results["dataset"] == dataset) & (grid.results["measure"] == m)]
        rows += [{"dataset": dataset, "system": r["system"], "measure": m, "value": float(r["value"])}
                 for _, r in block.iterrows()]
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "value"])


# -- tables: one structure, three renderers ---------------------------------------------------------------


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


def _fmt(v: Any, digits: int = 3) -> str:
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

    lines = [f"### {t.title}", "", "| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(cell(c).replace("|", "\\|") for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["–"] * len(t.columns)) + " |")
    return "\n".join(lines + [""] + [f"{n}  " for n in t.notes]) + "\n"


_TEX_ESCAPE = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "–": "--", "−": "$-$",
               "Δ": r"$\Delta$", "σ": r"$\sigma$", "∞": r"$\infty$", "≥": r"$\geq$", "≤": r"$\leq$"}


def tex_escape(text: str) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in text)


def to_latex(t: Table) -> str:
    def cell(c: TableCell) -> str:
        text = tex_escape(c.text)
        if c.cls and c.cls != "new":
            r, g, b = zscores_mod.CLASS_COLOURS[c.cls][1]
            text = rf"\textcolor[rgb]{{{r:.4f},{g:.4f},{b:.4f}}}{{{text}}}"
        text = rf"\textbf{{{text}}}" if c.bold else text
        return rf"\textit{{{text}}}" if c.muted else text

    spec = "l" + "r" * (len(t.columns) - 1)
    lines = [r"\begin{table}[ht]", r"\centering", rf"\caption{{{tex_escape(t.title)}}}", r"\small",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(tex_escape(c) for c in t.columns) + r" \\",
             r"\midrule"]
    lines += [" & ".join(cell(c) for c in row) + r" \\" for row in t.rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
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


# -- the tables ---------------------------------------------------------------------------------------------


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
    wtl = [[TableCell(r["system"]), TableCell(r["measure"]), TableCell(str(r["baseline"])), TableCell(str(r["win"])), TableCell(str(r["tie"])),
            TableCell(str(r["loss"]))] for _, r in a.win_tie_loss.iterrows()]
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


# -- figures ------------------------------------------------------------------------------------------------


FAMILY_COLOURS = {"sparse": "#1f77b4", "expansion": "#2ca02c", "dense": "#d62728", "late-interaction": "#9467bd"}


def figure1(grid: Grid, path: Path) -> Path:
    """Effectiveness (each dataset's headline measure) vs mean query latency (ms/query, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    datasets = grid.datasets
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False)
    families = grid.families()
    first = _first_measure_values(grid)
    lat = grid.results[grid.results["measure"] == "ms/query"].set_index(["dataset", "system"])["value"]
    for ax, dataset in zip(axes[0], datasets):
        block = first[first["dataset"] == dataset]
        for _, r in block.iterrows():
            x = float(lat.get((dataset, r["system"]), np.nan))
            fam = families.get(r["system"], "?")
            ax.scatter([x], [r["value"]], color=FAMILY_COLOURS.get(fam, "grey"), s=36, zorder=3)
            ax.annotate(r["system"], (x, r["value"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.margins(x=0.25, y=0.15)
        ax.set_xlabel("query latency (ms/query, log scale)")
        ax.set_ylabel(block["measure"].iloc[0] if len(block) else "")
        ax.set_title(dataset, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f) for f, c in FAMILY_COLOURS.items()
               if f in set(families.values())]
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08 if handles else 0, 1, 1))
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def jaccard_figure(matrix: pd.DataFrame, title: str, path: Path) -> Path:
    """A Figure 2 style heatmap of pairwise Jaccard similarity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(matrix)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 0.6 * n), max(3.8, 1.4 + 0.55 * n)))
    im = ax.imshow(matrix.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(n), matrix.columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(n), matrix.index, fontsize=8)
    for i in range(n):
        for j in range(n):
            v = float(matrix.iat[i, j])
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="Jaccard")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


# -- writing ------------------------------------------------------------------------------------------------


def build_tables(grid: Grid, a: Analyses, reference: str | Path | None = None) -> list[Table]:
    tables = [paper_table(grid, a.zscores, "2", reference, with_extras=True), zscore_table(a.zscores)]
    tables += [paper_table(grid, a.zscores, t, reference) for t in ("A.4", "A.5", "A.6", "A.7")]
    tables += [bootstrap_tbl(a, grid), failure_tbl(a), *jaccard_tables(a, grid), fusion_tbl(a),
               *cross_dataset_tables(a)]
    return tables


def write_report(out: str | Path, to: str | Path | None = None, n_resamples: int = stats_mod.BOOTSTRAP_B,
                 seed: int = stats_mod.BOOTSTRAP_SEED, fraction: float = 0.1, reference: str | Path | None = None) -> list[Path]:
    """Analyse the grid stored in `out` and write every table and figure under `to` (default OUT/report)."""
    grid = load(out)
    to = Path(to) if to is not None else grid.out / "report"
    to.mkdir(parents=True, exist_ok=True)
    a = analyse(grid, n_resamples=n_resamples, seed=seed, fraction=fraction, reference=reference)
    written: list[Path] = []
    for name, frame in a.frames().items():
        path = to / f"{name}.csv"
        write_text_atomic(path, frame.to_csv(index=False))
        written.append(path)
    path = to / "fusion_pipelines.yaml"  # the suggestions as experiment items (irgrid.runner.expressions)
    write_text_atomic(path, failures.fusion_pipelines_yaml(a.fusion_suggestions, a.fusion_rrf, a.params["rrf_k"]))
    written.append(path)
    tables = build_tables(grid, a, reference)
    for t in tables:
        for ext, render in (("md", to_markdown), ("tex", to_latex), ("html", to_html)):
            path = to / f"{t.stem}.{ext}"
            write_text_atomic(path, render(t))
            written.append(path)
    figures = []
    if (grid.results["measure"] == "ms/query").any():
        figures.append(figure1(grid, to / "figure1.png"))
    for dataset in grid.datasets:
        if dataset in a.params["skipped"]:
            continue
        m = jaccard_square(a, grid, dataset)
        figures.append(jaccard_figure(m, f"Hard-query overlap (worst {fraction:.0%})\n{dataset}",
                                      to / f"jaccard-{slug(dataset)}.png"))
    written += figures
    written += _write_documents(grid, a, tables, figures, to)
    return written


def _write_documents(grid: Grid, a: Analyses, tables: Sequence[Table], figures: Sequence[Path], to: Path) -> list[Path]:
    name = grid.manifest.get("experiment", grid.out.name)
    params = (f"bootstrap B = {a.params['B']}, seed = {a.params['seed']}; hard queries: worst {a.params['fraction']:.0%}"
              f" with failure rank capped at {a.params['depth'] + 1}; RRF k = {a.params['rrf_k']}")
    skipped = a.params.get("skipped") or []
    note = (f"Skipped (no stored runs in {grid.out / 'runs'}): failure points, hard queries, Jaccard and fusion "
            f"for {', '.join(skipped)}." if skipped else "")
    md = [f"# {name}: report", "", f"From `{grid.out}` ({params}).", ""] + ([note, ""] if note else [])
    md += [to_markdown(t) for t in tables]
    md += [f"![{p.stem}]({p.name})\n" for p in figures]
    tex = [r"\documentclass{article}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{booktabs}",
           r"\usepackage[table]{xcolor}", r"\usepackage{graphicx}", r"\begin{document}",
           rf"\section*{{{tex_escape(name)}: report}}", tex_escape(params)] + ([tex_escape(note)] if note else [])
    tex += [to_latex(t) for t in tables]
    tex += [rf"\begin{{figure}}[ht]\centering\includegraphics[width=\linewidth]{{{p.name}}}\end{{figure}}"
            for p in figures]
    tex.append(r"\end{document}")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:.5em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}.note{font-size:small;color:#444}img{max-width:100%}")
    body = [f"<h1>{html.escape(name)}: report</h1>", f"<p>{html.escape(params)}</p>"]
    body += [f"<p class=\"note\">{html.escape(note)}</p>"] if note else []
    body += [to_html(t) for t in tables]
    body += [f'<figure><img src="{p.name}" alt="{p.stem}"><figcaption>{p.stem}</figcaption></figure>' for p in figures]
    doc = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(name)}</title>"
           f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    paths = [to / "report.md", to / "report.tex", to / "report.html"]
    for path, text in zip(paths, ("\n".join(md), "\n".join(tex) + "\n", doc)):
        write_text_atomic(path, text)
    return paths
