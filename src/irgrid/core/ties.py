"""Tied scores: the order a run is stored and scored in, and what the tie order can do to a measure.

trec_eval (and pytrec_eval, hence ir_measures and `pt.Experiment`) ranks a query's documents by score descending and
breaks equal scores by docno descending (`strcmp`, trec_eval's `comp_sim_docno`). A run stored in any other order of
its ties reads differently to tools that score by rank (ranx on ranks, ir_measures on `-rank`): irgrid therefore
stores every run in exactly that order with ranks renumbered (`canonical_order`) and hands evaluators that very
order (`for_evaluation`: ir_measures serves RR@k from MS MARCO's script, which breaks ties by docno ascending), so
the TREC file and every column of results.csv describe one ranking.

Which tied order is "right" is arbitrary. For a query whose tied documents differ in relevance, the measure's
value depends on it; `audit_query` gives, per query, the value in trec_eval's order, the minimum and maximum over
all orders of the ties, and the tie-aware expected value: the mean over all orders of every tie group, each equally
likely (McSherry & Najork, "Computing information retrieval performance measures efficiently in the presence of
tied scores", ECIR 2008). All are exact (closed forms over each tie group; no sampling):

* nDCG@k, P@k, R@k (sums of per-position weights x gains): a tie group spreads its mean gain over its positions;
  min and max pair its gains with its positions' weights in opposite / the same order (rearrangement inequality).
* RR@k: the first relevant document lies in the first group holding one; its position within that group is the
  minimum of r of n uniformly placed positions, P(j) = C(n-j, r-1) / C(n, r).
* AP@k: at a relevant document placed at position s+j of a group (s before it, n in it, r relevant), the relevant
  documents above it are those of earlier groups, itself, and on average (j-1)(r-1)/(n-1) of its group.
* Success@k: the group across the cut-off holds none of its r relevant in its m top-k positions with probability
  C(n-r, m) / C(n, m).

Measures with other parameters (nDCG with custom gains or dcg, judged_only) and other measures have no tie-aware
form here: `measure_form` returns None and the audit says "not audited" for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

TIE_POLICY = ("trec_eval: documents ranked by score descending, equal scores by docno descending (strcmp); "
              "stored runs are written in this order with ranks renumbered 0..n-1, so scoring the TREC file by rank "
              "or by score gives the same values")
TIE_FLAG_SE = 0.5  # a cell is flagged when its tie range (max - min over tie orders) exceeds this x its bootstrap SE
KINDS = ("nDCG", "P", "R", "RR", "AP", "Success")


def canonical_order(res: pd.DataFrame) -> pd.DataFrame:
    """The run in trec_eval's order (qid, score descending, docno descending), ranks renumbered from 0 per query:
    the order irgrid stores and scores. Columns other than rank are kept as they are."""
    if len(res) == 0:
        return res
    out = res.assign(_q=res["qid"].astype(str), _d=res["docno"].astype(str))
    out = out.sort_values(["_q", "score", "_d"], ascending=[True, False, False], kind="mergesort")
    out = out.drop(columns=["_q", "_d"]).reset_index(drop=True)
    out["rank"] = out.groupby(out["qid"].astype(str), sort=False).cumcount().astype("int64")
    return out


def for_evaluation(res: pd.DataFrame) -> pd.DataFrame:
    """The run as every evaluator must see it: in trec_eval's order with the scores replaced by -rank, so that no
    evaluator breaks a tie its own way. ir_measures serves RR@k from MS MARCO's script, which breaks ties by docno
    *ascending* (trec_eval: descending): on tied runs RR@10 and nDCG@10 of one results.csv otherwise rank
    different orders."""
    out = canonical_order(res)
    if len(out):
        out["score"] = -out["rank"].astype("float64")
    return out


def is_canonical(res: pd.DataFrame) -> bool:
    """Whether the run's ranks already follow trec_eval's order (rank 0.. by score desc, docno desc)."""
    if len(res) == 0:
        return True
    if "rank" not in res.columns:
        return False
    want = canonical_order(res)
    got = res.assign(_q=res["qid"].astype(str)).sort_values(["_q", "rank"], kind="mergesort")
    return (got["docno"].astype(str).to_numpy() == want["docno"].astype(str).to_numpy()).all() and \
        (got["rank"].to_numpy() == want["rank"].to_numpy()).all()


@dataclass(frozen=True)
class MeasureForm:
    """What the tie audit needs of a measure: its family, cut-off (None: the whole run) and relevance threshold."""

    kind: str  # one of KINDS
    cutoff: int | None
    rel: int = 1


def measure_form(measure: Any) -> MeasureForm | None:
    """The tie-aware form of an ir_measures measure (by its NAME and params), or None when there is none here."""
    name = getattr(measure, "NAME", None)
    params = dict(getattr(measure, "params", None) or {})
    if name not in KINDS:
        return None
    cutoff = params.pop("cutoff", None)
    rel = params.pop("rel", 1) if name != "nDCG" else 1
    if params.pop("judged_only", False):
        return None
    if name == "nDCG" and (params.pop("dcg", "log2") != "log2" or params.pop("gains", None) is not None):
        return None
    if params:  # a parameter this audit does not model
        return None
    return MeasureForm(name, None if cutoff is None else int(cutoff), int(rel))


@dataclass(frozen=True)
class QueryTies:
    """One query under one measure: the value in trec_eval's order, its min / max over tie orders, the tie-aware
    expectation, and whether a tie group crosses the cut-off (without one: whether a tie group mixes labels)."""

    observed: float
    expected: float
    low: float
    high: float
    tied: bool


def tie_groups(scores: np.ndarray) -> np.ndarray:
    """Sizes of the runs of equal scores in an already ordered (descending) score array."""
    if len(scores) == 0:
        return np.zeros(0, dtype=int)
    breaks = np.flatnonzero(scores[1:] != scores[:-1]) + 1
    edges = np.concatenate([[0], breaks, [len(scores)]])
    return np.diff(edges)


def _dcg_weights(length: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, length + 2))


def audit_query(form: MeasureForm, labels: np.ndarray, sizes: np.ndarray, judged: Sequence[int]) -> QueryTies:
    """The tie audit of one ranked query. `labels`: the relevance label of each ranked document in trec_eval's
    order (0 for unjudged); `sizes`: its tie groups' sizes in that order; `judged`: every qrels label of the
    query (the ideal ranking and the number of relevant documents come from these)."""
    length = len(labels)
    k = length if form.cutoff is None else form.cutoff
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int) if length else np.zeros(0, dtype=int)
    if form.cutoff is None:  # no cut-off to tie across: whether a tie group mixes documents of different labels
        tied = any(len(set(labels[s:s + n].tolist())) > 1 for s, n in zip(starts, sizes) if n > 1)
    else:
        tied = bool(((starts < k) & (starts + sizes > k)).any())
    if form.kind in ("nDCG", "P", "R"):
        return _linear(form, labels, sizes, starts, judged, k, tied)
    relevant = (labels >= form.rel).astype(int)
    if form.kind == "RR":
        return _rr(relevant, sizes, starts, k, tied)
    if form.kind == "Success":
        return _success(relevant, sizes, starts, k, tied)
    return _ap(relevant, sizes, starts, judged, form.rel, k, tied)


def _linear(form: MeasureForm, labels: np.ndarray, sizes: np.ndarray, starts: np.ndarray, judged: Sequence[int],
            k: int, tied: bool) -> QueryTies:
    """nDCG, P, R: value = sum over positions p <= k of weight(p) * gain(doc at p), scaled."""
    length = len(labels)
    if form.kind == "nDCG":
        gains = np.maximum(labels.astype(float), 0.0)
        weights = _dcg_weights(length)
        ideal = np.sort(np.maximum(np.asarray(judged, dtype=float), 0.0))[::-1]
        ideal = ideal[: (len(ideal) if form.cutoff is None else form.cutoff)]
        scale = float((ideal * _dcg_weights(len(ideal))).sum())
    else:
        gains = (labels >= form.rel).astype(float)
        weights = np.ones(length)
        n_rel = int(sum(1 for x in judged if x >= form.rel))
        scale = float(form.cutoff) if form.kind == "P" else float(n_rel)
        if form.kind == "P" and form.cutoff is None:
            scale = float(length)
    weights = np.where(np.arange(length) < k, weights, 0.0)
    if scale <= 0 or length == 0:
        return QueryTies(0.0, 0.0, 0.0, 0.0, tied)
    observed = float((weights * gains).sum())
    expected = low = high = 0.0
    for s, n in zip(starts, sizes):
        w, g = weights[s:s + n], gains[s:s + n]
        expected += float(g.mean() * w.sum())
        ws, gs = np.sort(w)[::-1], np.sort(g)
        high += float((ws * gs[::-1]).sum())
        low += float((ws * gs).sum())
    return QueryTies(observed / scale, expected / scale, low / scale, high / scale, tied)


def _first_relevant(relevant: np.ndarray, sizes: np.ndarray, starts: np.ndarray) -> tuple[int, int, int] | None:
    """(start, size, relevant count) of the first tie group that holds a relevant document."""
    for s, n in zip(starts, sizes):
        r = int(relevant[s:s + n].sum())
        if r:
            return int(s), int(n), r
    return None


def _rr(relevant: np.ndarray, sizes: np.ndarray, starts: np.ndarray, k: int, tied: bool) -> QueryTies:
    hits = np.flatnonzero(relevant[:k])
    observed = 1.0 / (hits[0] + 1) if len(hits) else 0.0
    first = _first_relevant(relevant, sizes, starts)
    if first is None:
        return QueryTies(observed, 0.0, 0.0, 0.0, tied)
    s, n, r = first
    expected, p = 0.0, r / n  # P(first relevant of the group at its j-th position), j = 1
    for j in range(1, n - r + 2):
        if s + j > k:
            break
        expected += p / (s + j)
        p *= (n - j - r + 1) / (n - j) if n - j > 0 else 0.0
    high = 1.0 / (s + 1) if s + 1 <= k else 0.0
    low = 1.0 / (s + n - r + 1) if s + n - r + 1 <= k else 0.0
    return QueryTies(observed, expected, low, high, tied)


def _success(relevant: np.ndarray, sizes: np.ndarray, starts: np.ndarray, k: int, tied: bool) -> QueryTies:
    observed = float(relevant[:k].any())
    first = _first_relevant(relevant, sizes, starts)
    if first is None or first[0] >= k:
        return QueryTies(observed, 0.0, 0.0, 0.0, tied)
    s, n, r = first
    m = k - s  # the group's positions inside the cut-off
    if m >= n:
        return QueryTies(observed, 1.0, 1.0, 1.0, tied)
    none_inside = math.comb(n - r, m) / math.comb(n, m)
    return QueryTies(observed, 1.0 - none_inside, 1.0 if r > n - m else 0.0, 1.0, tied)


def _ap(relevant: np.ndarray, sizes: np.ndarray, starts: np.ndarray, judged: Sequence[int], rel: int, k: int,
        tied: bool) -> QueryTies:
    n_rel = int(sum(1 for x in judged if x >= rel))
    if n_rel == 0:
        return QueryTies(0.0, 0.0, 0.0, 0.0, tied)
    hits = np.flatnonzero(relevant[:k])
    observed = float(((np.arange(len(hits)) + 1) / (hits + 1)).sum())
    expected = low = high = 0.0
    before = 0
    for s, n in zip(starts, sizes):
        s, n = int(s), int(n)
        r = int(relevant[s:s + n].sum())
        if r and s < k:
            share = (r - 1) / (n - 1) if n > 1 else 0.0
            for j in range(1, min(n, k - s) + 1):
                expected += (r / n) * (before + 1 + (j - 1) * share) / (s + j)
            for i in range(1, r + 1):
                if s + i <= k:
                    high += (before + i) / (s + i)
                if s + n - r + i <= k:
                    low += (before + i) / (s + n - r + i)
        before += r
    return QueryTies(observed / n_rel, expected / n_rel, low / n_rel, high / n_rel, tied)


AUDIT_COLUMNS = ["qid", "measure", "observed", "expected", "low", "high", "tied"]


def audit_run(run: pd.DataFrame, qrels: pd.DataFrame, measures: Iterable[Any],
              qids: Iterable[str] | None = None) -> pd.DataFrame:
    """Per (query, measure) of one run: trec_eval-order value, tie-aware expectation, min and max over tie orders,
    and whether ties cross the cut-off. `run`: qid, docno, score; `qrels`: qid, docno, label. `qids`: the queries to
    report (default: those of the qrels); a query with no ranked documents scores 0 in every order. Measures
    without a tie-aware form (`measure_form` is None) are left out."""
    forms = {str(m): f for m in measures if (f := measure_form(m)) is not None}
    if not forms:
        return pd.DataFrame(columns=AUDIT_COLUMNS)
    labels_by_q: dict[str, dict[str, int]] = {}
    for q, d, label in zip(qrels["qid"].astype(str), qrels["docno"].astype(str), qrels["label"]):
        labels_by_q.setdefault(q, {})[d] = int(label)
    ranked = canonical_order(run[["qid", "docno", "score"]]) if len(run) else run
    groups = {str(q): g for q, g in ranked.groupby(ranked["qid"].astype(str), sort=False)} if len(ranked) else {}
    wanted = list(dict.fromkeys(map(str, qids))) if qids is not None else list(labels_by_q)
    rows = []
    for q in wanted:
        judged = labels_by_q.get(q, {})
        block = groups.get(q)
        if block is None:
            labels, sizes = np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        else:
            labels = np.array([judged.get(d, 0) for d in block["docno"].astype(str)], dtype=int)
            sizes = tie_groups(block["score"].to_numpy(dtype=float))
        for name, form in forms.items():
            t = audit_query(form, labels, sizes, list(judged.values()))
            rows.append((q, name, t.observed, t.expected, t.low, t.high, t.tied))
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


SUMMARY_COLUMNS = ["tie_queries", "tie_min", "tie_max", "tie_expected", "tie_range"]


def summarise(audit: pd.DataFrame) -> pd.DataFrame:
    """Per measure: the share of queries with ties across the cut-off, the mean over queries of the per-query min,
    max and expectation (tie orders are independent between queries, so these are the mean's own min, max and
    expectation over tie orders) and the range max - min."""
    rows = []
    for measure, block in audit.groupby("measure", sort=False):
        low, high = float(block["low"].mean()), float(block["high"].mean())
        rows.append({"measure": measure, "tie_queries": float(block["tied"].mean()), "tie_min": low, "tie_max": high,
                     "tie_expected": float(block["expected"].mean()), "tie_range": high - low})
    return pd.DataFrame(rows, columns=["measure", *SUMMARY_COLUMNS])


def flagged(tie_range: float, se: float) -> bool:
    """Whether the tie order can move a cell's mean by more than TIE_FLAG_SE of its bootstrap SE. A constant
    sample (SE 0) is flagged by any positive range."""
    if math.isnan(tie_range) or math.isnan(se):
        return False
    return tie_range > TIE_FLAG_SE * se if se > 0 else tie_range > 0
