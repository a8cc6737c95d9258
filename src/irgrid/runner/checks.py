"""Every run that enters a grid is checked (computed or read from the cache; entries, expressions, pipelines
composed in Python): unique (qid, docno), at most the system's depth rows per query, scores that do not rise as
rank falls, and only the dataset's own queries. A violation is one error naming the system, the dataset and an
example row, so a malformed run is never evaluated (pt.Experiment would silently score duplicates).

PyTerrier validates columns (`pta.validate`), not these properties of a run; ir_measures de-duplicates
silently. Hence ours.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from irgrid.util.errors import Error

RERANK_HINT = ("a first stage composed after another one retrieves anew for every input row; re-rank with a "
               "scorer instead, e.g. irgrid.retriever('all-minilm-l6-v2').scorer(ds)")


class RunCheckError(Error, ValueError):
    """A run that is not a ranking of the dataset's queries (duplicates, too deep, disordered, foreign queries)."""


def _row(res: pd.DataFrame, i: Any) -> str:
    r = res.loc[i]
    return f"qid={r['qid']} docno={r['docno']} rank={r.get('rank', '?')} score={r.get('score', '?')}"


def check_run(res: pd.DataFrame, system: str, dataset: str, topics: pd.DataFrame | None,
              depth: int | None) -> list[str]:
    """Raise RunCheckError on the first violation; return the topic qids without any result (recorded as empty).

    Some queries without results are a valid run (counted, and named in the grid's outputs); a run with no result
    for any of its queries is refused: nothing in it can be evaluated (pt.Experiment refuses it too), and it is
    almost always a broken pipeline, so it is never stored. A score that is not a number (NaN, text) is refused:
    the order of tied NaNs is arbitrary, so every measure over it would be noise."""
    where = f"run of {system!r} on {dataset!r}"
    if not isinstance(res, pd.DataFrame):
        raise RunCheckError(f"{where}: the pipeline returned {type(res).__name__} {_short(res)}, not a result frame; "
                            f"its transform() must return a DataFrame with qid, docno, score (rank optional)")
    if len(res) == 0:
        if topics is not None and len(topics):
            raise RunCheckError(f"{where}: no result for any of its {topics['qid'].nunique()} queries, so there is "
                                f"nothing to evaluate (the run is not stored); check the pipeline on one query, "
                                f"e.g. pipeline.search('...'), and that it retrieves from {dataset!r}'s documents")
        return sorted(topics["qid"].astype(str).unique()) if topics is not None else []
    missing_cols = [c for c in ("qid", "docno", "score") if c not in res.columns]
    if missing_cols:
        raise RunCheckError(f"{where}: no {', '.join(missing_cols)} column(s); a run needs qid, docno, score "
                            f"(and rank); got {list(res.columns)}")
    res = res.reset_index(drop=True)
    score = pd.to_numeric(res["score"], errors="coerce")
    bad = score.isna()
    if bad.any():
        raise RunCheckError(f"{where}: {int(bad.sum())} of {len(res)} result(s) have a score that is not a number "
                            f"(NaN or text), e.g. {_row(res, bad.idxmax())}; the pipeline's last stage must give "
                            f"every result a numeric score (drop or fill the others before returning them)")
    qid, docno = res["qid"].astype(str), res["docno"].astype(str)
    dupes = pd.DataFrame({"qid": qid, "docno": docno}).duplicated()
    if dupes.any():
        raise RunCheckError(f"{where}: {int(dupes.sum())} duplicate (qid, docno) pair(s), e.g. {_row(res, dupes.idxmax())}; "
                            f"{RERANK_HINT}")
    sizes = qid.value_counts()
    if depth is not None and int(sizes.max()) > depth:
        q = sizes.idxmax()
        example = res.index[qid == q][depth]
        raise RunCheckError(f"{where}: query {q} has {int(sizes.max())} results, more than the system's depth "
                            f"{depth} (num_results / cut-off), e.g. {_row(res, example)}; cut it (`% {depth}`) or "
                            f"raise num_results")
    if "rank" in res.columns:
        order = res.assign(_q=qid).sort_values(["_q", "rank"], kind="stable")
        same_q = order["_q"].to_numpy()[1:] == order["_q"].to_numpy()[:-1]
        score = order["score"].to_numpy(dtype=float)
        rank = order["rank"].to_numpy()
        rises = same_q & ((score[1:] > score[:-1] + 1e-9 * np.maximum(1.0, np.abs(score[:-1])))
                          | (rank[1:] == rank[:-1]))
        if rises.any():
            j = int(np.argmax(rises))
            raise RunCheckError(f"{where}: rank and score disagree: {_row(res, order.index[j + 1])} comes after "
                                f"{_row(res, order.index[j])} (ranks must be distinct, and scores must not rise as "
                                f"rank falls); recompute ranks from scores (pyterrier.model.add_ranks)")
    if topics is None:
        return []
    known = set(topics["qid"].astype(str))
    foreign = ~qid.isin(known)
    if foreign.any():
        raise RunCheckError(f"{where}: {int(qid[foreign].nunique())} query id(s) that are not queries of "
                            f"{dataset!r}, e.g. {_row(res, foreign.idxmax())}; was it computed on another dataset "
                            f"or query sample?")
    return sorted(known - set(qid))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def depth_of(retriever: Any) -> int | None:
    """The most results per query the system may return (None: not declared, e.g. a pipeline composed in Python)."""
    depth = getattr(retriever, "depth", None)
    return depth() if callable(depth) else None


EVALUATION_DEPTH = 1000  # TREC's usual run depth: a run at least this deep is not "truncated" for AP, R, nDCG


def run_depth(retriever: Any, res: pd.DataFrame, reach: int | None = None) -> int:
    """The depth a run is compared at. A system declared shallower than `reach` (the deepest compared run) is cut:
    its run's own depth counts, never more than it declares. Why: a declared depth is a ceiling, not a promise; an
    intersection of two cut-offs (`(a % 100 & b % 100) >> c`) declares 100 yet may hold 41 documents per query,
    and its R@100 then looks deeper than it returns (issue 41). A system declared at least as deep as `reach` is
    not cut: fewer results are then its matching (BM25 on a small collection), not truncation."""
    declared = depth_of(retriever)
    observed = observed_depth(res)
    if declared is None:
        return observed
    if reach is not None and declared >= reach:
        return declared
    return min(declared, observed)


def observed_depth(res: pd.DataFrame) -> int:
    return int(res["qid"].value_counts().max()) if len(res) else 0


def beyond_depth(measure: Any, depth: int, reach: int) -> bool:
    """Whether a measure looks deeper than the system returns. `reach`: the most results any compared system
    holds for a query (what the collection allows). A cut-off above the system's depth (R@100 on a 50-deep
    cascade), or no cut-off (AP, R, nDCG) on a run cut shorter than min(reach, 1000): part of the value is then
    lost to the cut, not to the ranking."""
    cutoff = (getattr(measure, "params", None) or {}).get("cutoff")
    if cutoff is not None:
        return int(cutoff) > depth and depth < reach
    return depth < min(reach, EVALUATION_DEPTH)
