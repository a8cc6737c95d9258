"""The reproduction card of a cell, next to Δσ: how well a result reproduces another, with the measures of Breuer et
al. (SIGIR 2020, "How to Measure the Reproducibility of System-oriented IR Experiments") as the `repro_eval`
package defines them (tests/unit/test_repro_card.py checks them against it on fixtures, |Δ| <= 1e-9):

- ER (effect ratio): the reproduced mean improvement of a system over the baseline divided by the original one;
  from means alone (the mean of per-topic differences is the difference of the means).
- ΔRI (delta relative improvement): RI_original − RI_reproduced, RI = (mean_system − mean_baseline) /
  mean_baseline.
- KTU (Kendall's τ union), per topic: both rankings cut at `depth`, every document replaced by its position in the
  sorted union of the two, and τ-b of the two position lists (scipy); mean over the reproduced run's topics.
- RBO (rank-biased overlap, Clarke et al.'s form used by repro_eval): Σ_{d<depth} p^d |overlap@d+1| / (d+1),
  normalised by Σ p^d; p = 0.95, depth 1000.
- RMSE of the per-topic scores, over the original's topics.

A run's order is trec_eval's (score descending, ties by document id descending), as repro_eval's break_ties.
Where repro_eval has no answer (two rankings of different lengths for KTU: scipy refuses), both are cut to the
shorter.

`published_card`: ER and ΔRI of every cell of the paper's tables against the paper's baseline (BM25), from the
published means. `run_card`: a grid against an earlier stored one (paper vs card profile, CPU vs GPU, last month
vs today): KTU, RBO from the stored runs, RMSE from the per-query values, ER and ΔRI against each grid's baseline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from irgrid.report.stored import Grid
from irgrid.util.errors import Error

RBO_P, DEPTH = 0.95, 1000
class ReproError(Error, ValueError):
    """Two results that cannot be compared topic by topic (a topic of one is missing from the other)."""


CARD_COLUMNS = ["dataset", "system", "measure", "original", "reproduced", "er", "delta_ri", "ktu", "rbo", "rmse",
                "topics"]


def effect_ratio(orig_system: float, orig_baseline: float, rep_system: float, rep_baseline: float) -> float:
    """ER: reproduced improvement / original improvement (NaN when the original has none)."""
    improvement = orig_system - orig_baseline
    return (rep_system - rep_baseline) / improvement if improvement != 0 else math.nan


def delta_ri(orig_system: float, orig_baseline: float, rep_system: float, rep_baseline: float) -> float:
    """ΔRI = RI_original − RI_reproduced (NaN when a baseline mean is 0)."""
    if orig_baseline == 0 or rep_baseline == 0:
        return math.nan
    return (orig_system - orig_baseline) / orig_baseline - (rep_system - rep_baseline) / rep_baseline


def rmse(original: Mapping[str, float], reproduced: Mapping[str, float]) -> float:
    """Root mean square error of the per-topic scores over the original's topics (a topic the reproduction lacks
    is an error: the two must score the same topics)."""
    missing = [t for t in original if t not in reproduced]
    if missing:
        raise ReproError(f"the reproduction has no score for {len(missing)} topic(s) of the original, e.g. "
                         f"{missing[:3]}")
    d = np.array([original[t] - reproduced[t] for t in original], dtype=float)
    return math.sqrt(float(np.sum(np.square(d))) / len(d)) if len(d) else math.nan


def ordered(run: pd.DataFrame) -> dict[str, list[str]]:
    """Per topic, the documents in trec_eval order: score descending, ties by document id descending."""
    frame = run[["qid", "docno", "score"]].astype({"qid": str, "docno": str})
    frame = frame.sort_values(["qid", "score", "docno"], ascending=[True, False, False], kind="mergesort")
    return {q: list(block["docno"]) for q, block in frame.groupby("qid", sort=True)}


def ktu_topic(original: Sequence[str], reproduced: Sequence[str], depth: int = DEPTH) -> float:
    from scipy.stats import kendalltau

    a, b = list(original)[:depth], list(reproduced)[:depth]
    k = min(len(a), len(b))
    a, b = a[:k], b[:k]
    position = {d: i for i, d in enumerate(sorted(set(a) | set(b)))}
    return float(round(kendalltau([position[d] for d in a], [position[d] for d in b]).correlation, 14))


def rbo_topic(original: Sequence[str], reproduced: Sequence[str], p: float = RBO_P, depth: int = DEPTH) -> float:
    seen_o: set[str] = set()
    seen_r: set[str] = set()
    overlap = 0
    score = norm = 0.0
    weight = 1.0
    for i in range(depth):
        new_r = reproduced[i] if i < len(reproduced) else None
        new_o = original[i] if i < len(original) else None
        for doc, mine, other in ((new_r, seen_r, seen_o), (new_o, seen_o, seen_r)):
            if doc is not None and doc not in mine:
                mine.add(doc)
                overlap += doc in other
        score += weight * overlap / (i + 1)
        norm += weight
        weight *= p
    return score / norm


def _per_topic(original: pd.DataFrame, reproduced: pd.DataFrame, fn, **kw) -> dict[str, float]:
    orig, rep = ordered(original), ordered(reproduced)
    missing = [t for t in rep if t not in orig]
    if missing:
        raise ReproError(f"the original run has no ranking for {len(missing)} topic(s) of the reproduction, e.g. "
                         f"{missing[:3]}")
    return {t: fn(orig[t], rep[t], **kw) for t in rep}


def ktu(original: pd.DataFrame, reproduced: pd.DataFrame, depth: int = DEPTH, per_topic: bool = False):
    """Kendall's τ union of two runs (qid, docno, score), mean over the reproduced run's topics."""
    scores = _per_topic(original, reproduced, ktu_topic, depth=depth)
    return scores if per_topic else float(np.mean(list(scores.values())))


def rbo(original: pd.DataFrame, reproduced: pd.DataFrame, p: float = RBO_P, depth: int = DEPTH,
        per_topic: bool = False):
    """Rank-biased overlap of two runs, mean over the reproduced run's topics."""
    scores = _per_topic(original, reproduced, rbo_topic, p=p, depth=depth)
    return scores if per_topic else float(np.mean(list(scores.values())))


# -- cards --------------------------------------------------------------------------------------------------------
def published_card(grid: Grid, reference: str | None = None, baseline_model: str = "BM25") -> pd.DataFrame:
    """ER and ΔRI of each of the grid's cells in the paper's tables against the paper's baseline, original = the
    published means, reproduced = ours (the baseline's own row has no improvement: NaN)."""
    from irgrid.report.zscores import zscores

    empty_se = pd.DataFrame(columns=["dataset", "system", "measure", "se"])
    z = zscores(grid.results, empty_se, grid.paper_names(), reference)
    z = z[z["published"].notna()]
    base = z[z["paper_model"] == baseline_model].set_index(["table", "column"])
    rows = []
    for r in z.itertuples():
        if (r.table, r.column) not in base.index or r.paper_model == baseline_model:
            continue
        b = base.loc[(r.table, r.column)]
        b = b.iloc[0] if isinstance(b, pd.DataFrame) else b
        rows.append({"table": r.table, "column": r.column, "system": r.system, "paper_model": r.paper_model,
                     "published": r.published, "ours": r.ours, "baseline_published": float(b["published"]),
                     "baseline_ours": float(b["ours"]),
                     "er": effect_ratio(r.published, float(b["published"]), r.ours, float(b["ours"])),
                     "delta_ri": delta_ri(r.published, float(b["published"]), r.ours, float(b["ours"]))})
    return pd.DataFrame(rows, columns=["table", "column", "system", "paper_model", "published", "ours",
                                       "baseline_published", "baseline_ours", "er", "delta_ri"])


def run_card(original: Grid, reproduced: Grid, depth: int = DEPTH, p: float = RBO_P) -> pd.DataFrame:
    """Per (dataset, system, measure) in both grids: the means, ER and ΔRI against each grid's baseline (when both
    have it), RMSE over the shared per-query values, and KTU and RBO from the stored runs (when both have them)."""
    def means(g: Grid) -> dict[tuple[str, str, str], float]:
        res = g.results[g.results["measure"] != "ms/query"]
        return {(str(d), str(s), str(m)): float(v) for d, s, m, v in
                zip(res["dataset"], res["system"], res["measure"], res["value"]) if not pd.isna(v)}

    mo, mr = means(original), means(reproduced)
    bo, br = original.baseline, reproduced.baseline
    pq_o = _topic_scores(original)
    pq_r = _topic_scores(reproduced)
    rows = []
    order_cache: dict[tuple[str, str], tuple[float, float] | None] = {}
    for key in sorted(set(mo) & set(mr)):
        d, s, m = key
        er = dri = math.nan
        if bo and br and s not in (bo, br) and (d, bo, m) in mo and (d, br, m) in mr:
            er = effect_ratio(mo[key], mo[(d, bo, m)], mr[key], mr[(d, br, m)])
            dri = delta_ri(mo[key], mo[(d, bo, m)], mr[key], mr[(d, br, m)])
        err, topics = math.nan, 0
        if key in pq_o and key in pq_r:
            shared = {t: v for t, v in pq_o[key].items() if t in pq_r[key]}
            topics = len(shared)
            err = rmse(shared, pq_r[key]) if shared else math.nan
        if (d, s) not in order_cache:
            order_cache[(d, s)] = None
            if original.has_run(d, s) and reproduced.has_run(d, s):
                a, b = original.run(d, s), reproduced.run(d, s)
                order_cache[(d, s)] = (ktu(a, b, depth), rbo(a, b, p, depth))
        orders = order_cache[(d, s)]
        rows.append({"dataset": d, "system": s, "measure": m, "original": mo[key], "reproduced": mr[key],
                     "er": er, "delta_ri": dri, "ktu": orders[0] if orders else math.nan,
                     "rbo": orders[1] if orders else math.nan, "rmse": err, "topics": topics})
    return pd.DataFrame(rows, columns=CARD_COLUMNS)


def _topic_scores(grid: Grid) -> dict[tuple[str, str, str], dict[str, float]]:
    pq = grid.perquery
    if pq.empty:
        return {}
    return {(str(d), str(s), str(m)): dict(zip(block["qid"].astype(str), block["value"].astype(float)))
            for (d, s, m), block in pq.dropna(subset=["value"]).groupby(["dataset", "system", "measure"], sort=False)}


def to_markdown(card: pd.DataFrame, title: str) -> str:
    from irgrid.util.markdown import markdown_table

    def f(x: object) -> str:
        return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else (
            f"{x:.4f}" if isinstance(x, float) else str(x))

    cols = list(card.columns)
    return f"## {title}\n\n" + markdown_table(cols, [[f(v) for v in row] for row in card.itertuples(index=False)],
                                              escape=True) + "\n"
