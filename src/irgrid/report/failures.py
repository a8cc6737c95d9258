"""Where retrievers fail (paper Section 4.3): the rank of the first relevant document per query, hard-query
sets and their Jaccard overlap across retrievers, and fusion suggestions tested with reciprocal rank fusion."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from irgrid import paper

if TYPE_CHECKING:
    import pyterrier as pt

    from irgrid.core.retrievers import Retriever


# The paper's columns, their components and the published tables live in `irgrid.paper` (one description).
PaperColumn = paper.Column


reference_dir = paper.reference_dir


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


SELECTED_ON = "the evaluated (test) queries"  # what the suggestions were chosen and scored on


def fusion_suggestions(jaccard_long: pd.DataFrame, families: Mapping[str, str], effectiveness: pd.DataFrame | None = None,
                       min_relative: float = 0.8, top: int = 3, components: Mapping[str, set[str]] | None = None,
                       fused: set[frozenset[str]] | None = None) -> pd.DataFrame:
    """Per dataset, the pairs whose hard-query sets overlap least: candidates for fusion (Section 4.3).

    `jaccard_long` has columns dataset, a, b, jaccard. Pairs across families come first (the paper's "combine
    across families"), then by Jaccard ascending. With `effectiveness` (dataset, system, value), systems below
    `min_relative` × the dataset's best are left out: a weak retriever fails on different queries from everyone
    (the paper's SPARTA/DPR/SimCSE cross) without being worth fusing.

    `components` (system -> the families of the entries it is built from) decides "cross-family": two systems
    are only when they share no family, so a BM25 >> MiniLM cascade and MiniLM are not. Pairs in `fused` (a
    system of the grid fuses them already) and pairs with the same hard queries (Jaccard 1) are not suggested. The pairs are chosen and their RRF scored on the
    same queries (the grid stores runs of its evaluated queries only): `selected_on` says so.
    """
    fused = fused or set()
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
            if frozenset((r["a"], r["b"])) in fused or r["jaccard"] >= 1.0:
                continue  # fused already, or failing on exactly the same queries: nothing for fusion to gain
            fa, fb = families.get(r["a"]), families.get(r["b"])
            ca = (components or {}).get(r["a"]) or {fa}
            cb = (components or {}).get(r["b"]) or {fb}
            cand.append({"dataset": dataset, "a": r["a"], "b": r["b"], "jaccard": float(r["jaccard"]),
                         "family_a": "+".join(sorted(map(str, ca))), "family_b": "+".join(sorted(map(str, cb))),
                         "cross_family": not (ca & cb), "selected_on": SELECTED_ON})
        cand.sort(key=lambda c: (not c["cross_family"], c["jaccard"], c["a"], c["b"]))
        rows += cand[:top]
    return pd.DataFrame(rows, columns=["dataset", "a", "b", "jaccard", "family_a", "family_b", "cross_family",
                                       "selected_on"])


def fusion_expression(a: str, b: str, k: int = 60) -> str:
    """A suggestion as a pipeline expression (irgrid.runner.grammar) over the grid's own system names."""
    return f"rrf({a}, {b}, k={k})"


def fusion_pipelines_yaml(suggestions: pd.DataFrame, fused: pd.DataFrame, k: int = 60) -> str:
    """The suggestions as ready-to-paste `retrievers:` items of the grid's experiment file (one per pair, with
    the datasets it was suggested for and the measured RRF values as comments)."""
    lines = ["# Fusion suggestions (lowest hard-query overlap): paste under `retrievers:` of the experiment file.",
             f"# Each is reciprocal rank fusion (k = {k}) of two of its systems; values: stored runs fused offline.",
             f"# Chosen and scored on {SELECTED_ON}: the gains are optimistic; confirm on held-out queries.",
             "# Pairs a system of the grid already fuses, or nearly (the same members in another order, with other "
             "weights or k), are not suggested."]
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
    each is built by the one builder of the Python door (`irgrid.pipeline`; `kwargs` such as store= go to it)."""
    from pyterrier_alpha.fusion import RRFusion

    from irgrid.core.retrievers import get
    from irgrid.runner.build import python_pipeline

    entries = [get(r) if isinstance(r, str) else r for r in retrievers]
    return RRFusion(*[python_pipeline(r, dataset, **kwargs) for r in entries], k=k, num_results=num_results)
