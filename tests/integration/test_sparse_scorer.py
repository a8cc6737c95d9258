"""A lexical entry scores given candidates (issue 41 item 5): right of `>>`, `.scorer(ds)`, and as an operand of
PyTerrier's `**` feature union (a BM25 feature for learning to rank), with the entry's own retrieval scores of those
documents, bit for bit, on Vaswani (PISA; Lucene through the JVM); real all-MiniLM-L6-v2 weights for the dense
feature (it encodes only the candidates' texts: no index)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest

import irgrid
from irgrid.runner.roles import RoleError

QUERIES = 5


@pytest.fixture(scope="module")
def vaswani():
    return irgrid.dataset("vaswani")


def _exhaustive(name, ds, store, topics):
    """The entry's own run, deep enough to hold every document that matches a query term (Vaswani: 11,429)."""
    entry = irgrid.retriever(name)
    return irgrid.pipeline(entry.with_options(num_results=20000), ds, store=store)(topics)


def _candidates(run, topics):
    """Per query: documents at ranks 0, 5, 999, 1000, 1500 and 3000 of the entry's run (deeper than its 1,000),
    and docno '1' where it matches no query term (score 0 for the entry)."""
    picked = run[run["rank"].isin([0, 5, 999, 1000, 1500, 3000])][["qid", "query", "docno"]]
    unmatched = []
    for qid, query in zip(topics["qid"], topics["query"]):
        seen = set(run.loc[run["qid"] == qid, "docno"])
        unmatched.append({"qid": qid, "query": query, "docno": next(str(d) for d in range(1, 12000)
                                                                     if str(d) not in seen)})
    return pd.concat([picked, pd.DataFrame(unmatched)], ignore_index=True)


@pytest.mark.parametrize("name", ["bm25-pisa", pytest.param("bm25", marks=pytest.mark.slow)])
def test_a_bm25_entry_scores_given_candidates_with_its_own_retrieval_scores(name, vaswani, shared_store):
    topics = vaswani.topics().head(QUERIES)
    run = _exhaustive(name, vaswani, shared_store, topics)
    matching = run.groupby("qid").size()
    assert (matching > 1000).sum() >= 3  # the candidates below reach past the entry's own depth for most queries
    cands = _candidates(run, topics)
    scorer = irgrid.retriever(name).scorer(vaswani, store=shared_store)
    out = scorer(cands)
    assert len(out) == len(cands) and set(zip(out.qid, out.docno)) == set(zip(cands.qid, cands.docno))
    got = out.merge(run[["qid", "docno", "score"]], on=["qid", "docno"], how="left", suffixes=("", "_run"))
    retrieved = got["score_run"].notna()
    assert retrieved.sum() == len(cands) - QUERIES
    assert got.loc[retrieved, "score"].tolist() == got.loc[retrieved, "score_run"].tolist()  # bit for bit
    assert (got.loc[~retrieved, "score"] == 0).all()  # no query term: BM25 0
    passes = scorer.transformer.passes
    # deeper only for the queries whose candidates lay deeper than 1,000 (those matching more documents)
    assert passes == [(1000, QUERIES), (10000, int((matching > 1000).sum()))]
    # ranks follow the new scores
    for _, block in out.groupby("qid"):
        assert block.sort_values("rank")["score"].is_monotonic_decreasing


def test_candidates_feature_union_of_bm25_and_a_dense_entry(vaswani, shared_store):
    """`cands >> (bm25 ** dense)`: the BM25 feature is bm25-pisa's retrieval score of each candidate, the dense one
    MiniLM's; the first-stage door (`irgrid.pipeline('bm25-pisa', ds)`) given candidates scores them the same way."""
    topics = vaswani.topics().head(QUERIES)
    bm25 = irgrid.retriever("bm25-pisa")
    dense = irgrid.retriever("all-minilm-l6-v2")
    first = irgrid.pipeline("bm25-pisa", vaswani, store=shared_store)
    cands = (irgrid.pipeline(bm25.with_options(k1=1.2, b=0.75), vaswani, store=shared_store) % 8)(topics)
    own = first(topics)  # bm25-pisa's own run (k1=0.9, b=0.4), depth 1000
    minilm = dense.scorer(vaswani, store=shared_store)
    dense_scores = minilm(cands)
    for bm25_side in (bm25.scorer(vaswani, store=shared_store), first):
        feats = (bm25_side ** minilm)(cands)
        assert len(feats) == len(cands) and all(len(f) == 2 for f in feats["features"])
        f = feats.assign(bm25=[x[0] for x in feats["features"]], dense=[x[1] for x in feats["features"]])
        both = f.merge(own[["qid", "docno", "score"]].rename(columns={"score": "own"}), on=["qid", "docno"],
                       how="left")
        retrieved = both["own"].notna()
        assert retrieved.mean() > 0.9
        assert both.loc[retrieved, "bm25"].tolist() == both.loc[retrieved, "own"].tolist()
        d = f.merge(dense_scores[["qid", "docno", "score"]].rename(columns={"score": "minilm"}), on=["qid", "docno"])
        assert len(d) == len(cands)
        np.testing.assert_allclose(d["dense"], d["minilm"], rtol=1e-6)
    # a learned model after it is ordinary PyTerrier: here a fixed linear one
    ranked = (bm25.scorer(vaswani, store=shared_store) ** minilm
              >> pt.apply.doc_score(lambda row: float(row["features"] @ np.array([0.1, 1.0]))))(cands)
    assert ranked["score"].notna().all() and len(ranked) == len(cands)


def test_an_expression_reranks_with_a_bm25_entry(vaswani, shared_store):
    """Right of `>>` in the grammar: `k12 % 20 >> bm25-pisa` gives bm25-pisa's own scores of k12's candidates."""
    topics = vaswani.topics().head(QUERIES)
    k12 = irgrid.retriever("bm25-pisa").with_options(k1=1.2)
    pipe = irgrid.pipeline("k12 % 20 >> bm25-pisa", vaswani, names={"k12": k12}, store=shared_store)
    got = pipe(topics)
    own = irgrid.pipeline("bm25-pisa", vaswani, store=shared_store)(topics)
    both = got.merge(own[["qid", "docno", "score"]], on=["qid", "docno"], suffixes=("", "_own"))
    assert len(got) == 20 * QUERIES and len(both) > 0.9 * len(got)
    assert both["score"].tolist() == both["score_own"].tolist()


def test_entries_that_cannot_score_given_candidates_say_which_can(vaswani, shared_store):
    with pytest.raises(RoleError, match=r"'splade-tiny' \(sparse\) cannot score given candidates.*feature union.*"
                                        r"the entries bm25, bm25-lucene-pisa, bm25-pisa"):
        irgrid.retriever("splade-tiny").scorer(vaswani)
    with pytest.raises(irgrid.Error, match=r"'\*\*' \(PyTerrier's feature union\).*scorer\(ds\)"):
        irgrid.pipeline("bm25-pisa % 10 >> (bm25-pisa ** all-minilm-l6-v2)", vaswani)
    cands = pd.DataFrame({"qid": ["1"], "docno": ["10"]})  # no query text
    with pytest.raises(irgrid.Error, match="needs the columns qid, query and docno, it lacks \\['query'\\]"):
        irgrid.retriever("bm25-pisa").scorer(vaswani, store=shared_store)(cands)


def test_a_scorer_on_a_fresh_index_records_the_query_time_files_pisa_writes(vaswani, fresh_store):
    """The scorer opens the index under its lock, as a first stage does: PISA's per-k1/b files written on opening
    are recorded in the index's manifest (a later verification passes; nothing is deleted as a partial file)."""
    import json

    from irgrid.store import LAZY

    entry = irgrid.retriever("bm25-pisa")
    folder = entry.indexer(vaswani, store=fresh_store).index()  # built, never queried
    assert not (folder / LAZY).exists() or not json.loads((folder / LAZY).read_text())
    topics = vaswani.topics().head(2)
    cands = pd.DataFrame({"qid": topics["qid"].repeat(2), "query": topics["query"].repeat(2), "docno": ["1", "2"] * 2})
    out = entry.scorer(vaswani, store=fresh_store)(cands)
    assert len(out) == 4
    lazy = json.loads((folder / LAZY).read_text())
    assert lazy and all(f.startswith("pisa/") for f in lazy)
    assert fresh_store.folder_problem(folder) is None
