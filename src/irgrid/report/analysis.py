"""Analyses of a stored grid (paper Sections 4.1.2 and 4.3): bootstrap standard errors, z-scores against the
paper's published tables and their Δσ classes, failure points (rank of the first relevant document), hard-query
sets and their Jaccard overlap, fusion suggestions with reciprocal rank fusion, win/tie/loss counts and a
random-effects meta-analysis across datasets.

Everything here works on plain DataFrames read from an output folder (results.csv, perquery.csv, runs, qrels),
so it never recomputes a run; `irgrid.report.tables` wires it to an OUT folder.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from irgrid import paper

if TYPE_CHECKING:
    import pyterrier as pt

    from irgrid.core.retrievers import Retriever

# -- bootstrap standard errors -------------------------------------------------------------------------------

BOOTSTRAP_B = 1000
BOOTSTRAP_SEED = 0


def bootstrap_se(values: Sequence[float] | np.ndarray, n_resamples: int = BOOTSTRAP_B,
                 seed: int | Sequence[int] = BOOTSTRAP_SEED) -> float:
    """Bootstrap standard error of the mean of per-query values (queries resampled with replacement, seeded).

    scipy.stats.bootstrap does the resampling; its `standard_error` is the standard deviation (ddof=1) of the
    B resampled means, i.e. Efron and Tibshirani's SE_boot as used for the paper's Δσ.
    """
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):  # scipy refuses degenerate samples; the SE of a constant is 0
        return 0.0 if len(x) else math.nan
    res = bootstrap((x,), np.mean, n_resamples=n_resamples, vectorized=True, method="percentile",
                    rng=np.random.default_rng(seed))
    return float(res.standard_error)


def _cell_seed(seed: int, dataset: str, measure: str) -> list[int]:
    # One stream per (dataset, measure), shared by all systems: every system is resampled on the same
    # bootstrap query samples (common random numbers), and the result does not depend on the grid's order.
    return [seed, zlib.crc32(f"{dataset}\t{measure}".encode())]


def bootstrap_table(perquery: pd.DataFrame, n_resamples: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """Per (dataset, system, measure): mean of the per-query values, its bootstrap SE, #queries, B and seed."""
    rows = []
    for (dataset, system, measure), block in perquery.groupby(["dataset", "system", "measure"], sort=False):
        values = block["value"].to_numpy(dtype=float)
        rows.append({"dataset": dataset, "system": system, "measure": measure, "mean": float(values.mean()),
                     "se": bootstrap_se(values, n_resamples, _cell_seed(seed, dataset, measure)),
                     "queries": len(values), "B": n_resamples, "seed": seed})
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "mean", "se", "queries", "B", "seed"])


# -- Δσ against the paper ------------------------------------------------------------------------------------

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


# The paper's columns, their components and the published tables live in `irgrid.paper` (one description).
PaperColumn = paper.Column
TABLE_FILES = paper.TABLE_FILES
reference_dir = paper.reference_dir


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


# -- failure points (Section 4.3) ---------------------------------------------------------------------------

def qrels_dict(qrels: pd.DataFrame) -> dict[str, dict[str, int]]:
    """qrels (qid, docno, label) as ir_measures' dict-of-dicts: plain Python objects, because ir_measures
    iterating pandas' Arrow-backed string columns row by row is ~50x slower."""
    out: dict[str, dict[str, int]] = {}
    for q, d, rel in zip(qrels["qid"].astype(str).tolist(), qrels["docno"].astype(str).tolist(),
                         qrels["label"].astype(int).tolist()):
        out.setdefault(q, {})[d] = rel
    return out


def run_dict(run: pd.DataFrame) -> dict[str, dict[str, float]]:
    """A result frame (qid, docno, score) as ir_measures' dict-of-dicts (see qrels_dict)."""
    out: dict[str, dict[str, float]] = {}
    for q, d, score in zip(run["qid"].astype(str).tolist(), run["docno"].astype(str).tolist(),
                           run["score"].astype(float).tolist()):
        out.setdefault(q, {})[d] = score
    return out


def evaluate(measures: Sequence[Any], qrels: pd.DataFrame, run: pd.DataFrame) -> dict[str, float]:
    """Mean of each measure over the queries (ir_measures, trec_eval conventions), keyed by measure name."""
    import ir_measures

    agg = ir_measures.calc_aggregate(list(measures), qrels_dict(qrels), run_dict(run))
    return {str(m): float(v) for m, v in agg.items()}


def failure_ranks(run: pd.DataFrame, qrels: pd.DataFrame, depth: int = 1000, rel: int = 1) -> pd.Series:
    """Per query with a relevant document: the 1-based rank of its highest-ranked relevant document, capped at
    depth + 1 (1001 in the paper) when none is retrieved within `depth`.

    ir_measures computes RR@depth with trec_eval's ordering (score descending, ties by docno), so the rank is
    exactly 1 / RR; queries missing from the run or with RR = 0 get depth + 1.
    """
    import ir_measures

    relevant = qrels[qrels["label"] >= rel]
    qids = sorted(set(relevant["qid"].astype(str)))
    ranks = dict.fromkeys(qids, depth + 1)
    for m in ir_measures.iter_calc([ir_measures.RR(rel=rel) @ depth], qrels_dict(relevant), run_dict(run)):
        if m.query_id in ranks and m.value > 0:
            ranks[m.query_id] = int(round(1 / m.value))
    return pd.Series(ranks, name="rank", dtype=int).rename_axis("qid")


def hard_queries(ranks: pd.Series, fraction: float = 0.1) -> list[str]:
    """The worst `fraction` of queries: the ceil(fraction · n) with the largest failure rank.

    The paper fixes the number of hard queries per (model, dataset); ties at the cut (typically many queries at
    1001) are broken by qid so the set is deterministic.
    """
    if len(ranks) == 0:
        return []
    k = max(1, math.ceil(fraction * len(ranks)))
    frame = pd.DataFrame({"qid": ranks.index.astype(str), "rank": ranks.to_numpy()})
    return frame.sort_values(["rank", "qid"], ascending=[False, True]).head(k)["qid"].tolist()


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B| (1.0 for two empty sets: they are equal)."""
    a, b = set(a), set(b)
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def jaccard_matrix(sets: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """Pairwise Jaccard similarity of named sets (Figure 2 / A.1), in the given order."""
    names = list(sets)
    frozen = {n: set(sets[n]) for n in names}
    return pd.DataFrame([[jaccard(frozen[a], frozen[b]) for b in names] for a in names], index=names, columns=names)


# -- fusion suggestions -------------------------------------------------------------------------------------

def fusion_suggestions(jaccard_long: pd.DataFrame, families: Mapping[str, str], effectiveness: pd.DataFrame | None = None,
                       min_relative: float = 0.8, top: int = 3) -> pd.DataFrame:
    """Per dataset, the pairs whose hard-query sets overlap least: candidates for fusion (Section 4.3).

    `jaccard_long` has columns dataset, a, b, jaccard. Pairs across families come first (the paper's "combine
    across families"), then by Jaccard ascending. With `effectiveness` (dataset, system, value), systems below
    `min_relative` × the dataset's best are left out: a weak retriever fails on different queries from everyone
    (the paper's SPARTA/DPR/SimCSE cross) without being worth fusing.
    """
    rows = []
    for dataset, block in jaccard_long.groupby("dataset", sort=False):
        keep = None
        if effectiveness is not None:
            eff = effectiveness[effectiveness["dataset"] == dataset].set_index("system")["value"]
            keep = set(eff[eff >= min_relative * eff.max()].index) if len(eff) else None
        cand = []
        for _, r in block.iterrows():
            if keep is not None and not {r["a"], r["b"]} <= keep:
                continue
            fa, fb = families.get(r["a"]), families.get(r["b"])
            cand.append({"dataset": dataset, "a": r["a"], "b": r["b"], "jaccard": float(r["jaccard"]),
                         "family_a": fa, "family_b": fb, "cross_family": fa != fb})
        cand.sort(key=lambda c: (not c["cross_family"], c["jaccard"], c["a"], c["b"]))
        rows += cand[:top]
    return pd.DataFrame(rows, columns=["dataset", "a", "b", "jaccard", "family_a", "family_b", "cross_family"])


def fusion_expression(a: str, b: str, k: int = 60) -> str:
    """A suggestion as a pipeline expression (irgrid.runner.expressions) over the grid's own system names."""
    return f"rrf({a}, {b}, k={k})"


def fusion_pipelines_yaml(suggestions: pd.DataFrame, fused: pd.DataFrame, k: int = 60) -> str:
    """The suggestions as ready-to-paste `retrievers:` items of the grid's experiment file (one per pair, with
    the datasets it was suggested for and the measured RRF values as comments)."""
    lines = ["# Fusion suggestions (lowest hard-query overlap): paste under `retrievers:` of the experiment file.",
             f"# Each is reciprocal rank fusion (k = {k}) of two of its systems; values: stored runs fused offline."]
    for (a, b), block in suggestions.groupby(["a", "b"], sort=False):
        lines.append("")
        for _, s in block.iterrows():
            f = fused[(fused["dataset"] == s["dataset"]) & (fused["a"] == a) & (fused["b"] == b)]
            values = "; ".join(f"{r['measure']} {r['a_value']:.4f} / {r['b_value']:.4f} -> RRF {r['rrf_value']:.4f}"
                               for _, r in f.iterrows())
            lines.append(f"# {s['dataset']}: Jaccard {s['jaccard']:.2f}"
                         f"{', cross-family' if s['cross_family'] else ''}{'; ' + values if values else ''}")
        lines.append(f'- {{as: rrf-{a}-{b}, pipeline: "{fusion_expression(a, b, k)}"}}')
    return "\n".join(lines) + "\n"


def rrf_runs(*runs: pd.DataFrame, k: int = 60, num_results: int | None = 1000) -> pd.DataFrame:
    """Reciprocal rank fusion of stored result frames: score = Σ 1 / (k + rank), rank 0-based per run as
    PyTerrier ranks (the same fused scores as pyterrier-alpha's rr_fusion, Cormack et al. 2009).

    Written here, vectorised, rather than calling rr_fusion on stored runs: rr_fusion merges frames query by
    query (one pandas merge per query and run), minutes for MS MARCO's 6,980 queries. The live pipeline
    (rrf_pipeline) uses pyterrier-alpha's RRFusion.
    """
    import pyterrier as pt

    parts = []
    for run in runs:
        run = run[["qid", "docno", "score"]].astype({"qid": str, "docno": str}).copy()
        pt.model.add_ranks(run)
        parts.append(run.assign(score=1.0 / (run["rank"] + k))[["qid", "docno", "score"]])
    fused = pd.concat(parts, ignore_index=True).groupby(["qid", "docno"], as_index=False, sort=False)["score"].sum()
    pt.model.add_ranks(fused)
    fused = fused.sort_values(["qid", "rank"], ignore_index=True)
    return fused[fused["rank"] < num_results].reset_index(drop=True) if num_results is not None else fused


def rrf_pipeline(retrievers: Sequence[str | Retriever], dataset: str, k: int = 60, num_results: int = 1000,
                 **kwargs: Any) -> pt.Transformer:
    """An RRF pipeline (pyterrier-alpha's RRFusion) over registry entries or variants on a dataset, to test a
    fusion suggestion live, e.g. in `pt.Experiment`. Each entry's index is built or reused as in a grid;
    `kwargs` go to `irgrid.runner.cell.build_pipeline` (e.g. store=)."""
    from pyterrier_alpha.fusion import RRFusion

    from irgrid.core.retrievers import get
    from irgrid.runner.cell import build_pipeline

    entries = [get(r) if isinstance(r, str) else r for r in retrievers]
    return RRFusion(*[build_pipeline(r, dataset, **kwargs) for r in entries], k=k, num_results=num_results)


# -- cross-dataset view -------------------------------------------------------------------------------------

def win_tie_loss(results: pd.DataFrame) -> pd.DataFrame:
    """Per (system, measure) against the baseline: datasets where it is significantly better (win), worse (loss)
    or neither (tie), using the corrected paired tests already in results.csv."""
    rows = []
    res = results[(results["measure"] != "ms/query") & results["baseline"].notna()]
    for (system, measure), block in res.groupby(["system", "measure"], sort=False):
        if (block["system"] == block["baseline"]).all():
            continue
        w = t = lo = 0
        for _, r in block.iterrows():
            base = res[(res["dataset"] == r["dataset"]) & (res["system"] == r["baseline"]) & (res["measure"] == measure)]
            if base.empty:
                continue
            sig = r["significant"] is True or str(r["significant"]).lower() == "true"
            if sig and r["value"] > base["value"].iloc[0]:
                w += 1
            elif sig and r["value"] < base["value"].iloc[0]:
                lo += 1
            else:
                t += 1
        rows.append({"system": system, "measure": measure, "baseline": block["baseline"].iloc[0],
                     "win": w, "tie": t, "loss": lo, "datasets": w + t + lo})
    return pd.DataFrame(rows, columns=["system", "measure", "baseline", "win", "tie", "loss", "datasets"])


@dataclass(frozen=True)
class MetaResult:
    k: int
    effect: float  # the random-effects pooled effect
    se: float
    ci_low: float
    ci_high: float
    z: float
    p: float
    tau2: float
    q: float
    i2: float
    fixed_effect: float


def dersimonian_laird(effects: Sequence[float], variances: Sequence[float]) -> MetaResult:
    """DerSimonian–Laird random-effects pooling.

    Written here rather than taken from statsmodels: its `combine_effects(method_re='dl')` (0.15) does not
    truncate τ² at zero (negative τ² inflates the weights) and divides by zero for a single study.
    """
    from scipy.stats import norm

    y, v = np.asarray(effects, dtype=float), np.asarray(variances, dtype=float)
    k = len(y)
    w = 1 / v
    fixed = float((w * y).sum() / w.sum())
    q = float((w * (y - fixed) ** 2).sum())
    c = float(w.sum() - (w ** 2).sum() / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    w_re = 1 / (v + tau2)
    effect = float((w_re * y).sum() / w_re.sum())
    se = float(math.sqrt(1 / w_re.sum()))
    z = effect / se if se > 0 else math.copysign(math.inf, effect) if effect else 0.0
    crit = float(norm.ppf(0.975))
    return MetaResult(k=k, effect=effect, se=se, ci_low=effect - crit * se, ci_high=effect + crit * se, z=z,
                      p=float(2 * norm.sf(abs(z))), tau2=tau2, q=q,
                      i2=max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0, fixed_effect=fixed)


def paired_effects(perquery: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per (dataset, system, measure): the mean per-query difference to the baseline and its variance
    (var(d) / n over the queries both were evaluated on) — the per-dataset effect sizes for the meta-analysis."""
    rows = []
    for (dataset, measure), block in perquery.groupby(["dataset", "measure"], sort=False):
        wide = block.pivot_table(index="qid", columns="system", values="value")
        if baseline not in wide.columns:
            continue
        for system in wide.columns:
            if system == baseline:
                continue
            d = (wide[system] - wide[baseline]).dropna().to_numpy()
            if len(d) < 2:
                continue
            rows.append({"dataset": dataset, "system": system, "measure": measure, "effect": float(d.mean()),
                         "variance": float(d.var(ddof=1) / len(d)), "queries": len(d)})
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "effect", "variance", "queries"])


def meta_analysis(perquery: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Random-effects (DerSimonian–Laird) pooled difference to the baseline per (system, measure) across datasets."""
    effects = paired_effects(perquery, baseline)
    rows = []
    for (system, measure), block in effects.groupby(["system", "measure"], sort=False):
        block = block[block["variance"] > 0]
        if block.empty:
            continue
        r = dersimonian_laird(block["effect"], block["variance"])
        rows.append({"system": system, "measure": measure, "baseline": baseline, **r.__dict__,
                     "datasets": " ".join(block["dataset"])})
    cols = ["system", "measure", "baseline", *MetaResult.__dataclass_fields__, "datasets"]
    return pd.DataFrame(rows, columns=cols)


def pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Unordered pairs of distinct names, in order."""
    return list(combinations(names, 2))
