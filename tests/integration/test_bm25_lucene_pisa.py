"""`bm25-lucene-pisa`: the paper's Lucene BM25 (Anserini analysis, Lucene's BM25 weights and one-byte length
norms) precomputed into a PISA impact index. Checked against Lucene itself: its SmallFloat, its per-document
scores, and nDCG@10/AP within 0.002 of `bm25` on vaswani, BEIR SciFact and the DisastQA-derived collection."""

from __future__ import annotations

import ir_measures
import pytest

import irgrid
from irgrid import grid
from irgrid.data.datasets import get as get_dataset
from irgrid.runner.experiment import from_dict
from irgrid.sparse import lucene_pisa

MEASURES = [ir_measures.nDCG @ 10, ir_measures.AP]


def _evaluate(run, dataset) -> dict:
    qrels = dataset.qrels().rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    values = ir_measures.calc_aggregate(MEASURES, qrels, run.rename(columns={"qid": "query_id", "docno": "doc_id"}))
    return {str(m): values[m] for m in MEASURES}


def test_length_norm_is_lucenes_smallfloat():
    from irgrid.sparse.lucene import start_jvm

    start_jvm()
    from jnius import autoclass

    small_float = autoclass("org.apache.lucene.util.SmallFloat")
    lengths = list(range(0, 3000)) + [10_000, 123_456, 2**31 - 1]
    assert [lucene_pisa.int_to_byte4(n) for n in lengths] == [small_float.intToByte4(n) & 0xFF for n in lengths]
    assert [lucene_pisa.byte4_to_int(b) for b in range(256)] == [small_float.byte4ToInt(b - 256 if b > 127 else b)
                                                                 for b in range(256)]
    assert lucene_pisa.lucene_length(23) == 23 and lucene_pisa.lucene_length(1000) < 1000  # lossy from 24 on


def test_analysis_is_anserinis_default():
    # Lucene's English analysis as Anserini applies it: possessives, stopwords, Porter
    assert lucene_pisa.analyze("The cat's running quickly, U.S.A.") == ["cat", "run", "quickli", "u.s.a"]
    assert lucene_pisa.analyze("") == [] and lucene_pisa.analyze("the and of") == []


def test_scores_are_lucenes_up_to_quantisation(shared_store):
    """Per (query, document) the PISA score is Lucene's BM25 score within half a quantum per query term."""
    dataset = get_dataset("vaswani")
    topics = dataset.topics().head(25)
    lucene = irgrid.retriever("bm25").with_options(num_results=20).pipeline(dataset, store=shared_store)
    ours = irgrid.retriever("bm25-lucene-pisa").with_options(num_results=20).pipeline(dataset, store=shared_store)
    a, b = lucene(topics), ours(topics)
    assert set(b.columns) >= {"qid", "query", "docno", "score", "rank"} and "query_toks" not in b.columns
    merged = a.merge(b, on=["qid", "docno"], suffixes=("_lucene", "_pisa"))
    assert len(merged) >= 0.9 * len(a)  # the same top 20, up to ties at the cut-off
    scale = lucene_pisa.DEFAULT_SCALE
    n_terms = {q: len(lucene_pisa.analyze(t)) for q, t in zip(topics["qid"], topics["query"])}
    bound = merged["qid"].map(n_terms) * 0.5 / scale + 1e-4
    assert ((merged["score_lucene"] - merged["score_pisa"]).abs() <= bound).all()


@pytest.mark.parametrize("name", ["vaswani", pytest.param("disastqa/derived", marks=[pytest.mark.slow, pytest.mark.heavy]),
                                  pytest.param("beir/scifact/test", marks=[pytest.mark.slow, pytest.mark.heavy])])
def test_effectiveness_within_0002_of_lucene(name, shared_store):
    dataset = get_dataset(name)
    topics = dataset.topics()
    lucene = _evaluate(irgrid.retriever("bm25").pipeline(dataset, store=shared_store)(topics), dataset)
    ours = _evaluate(irgrid.retriever("bm25-lucene-pisa").pipeline(dataset, store=shared_store)(topics), dataset)
    for m in lucene:
        assert abs(ours[m] - lucene[m]) <= 0.002, (name, m, ours[m], lucene[m])


def test_bm25_parameters_belong_to_the_index(shared_store):
    with pytest.raises(ValueError, match="k1=0.9, b=0.4, not k1=1.2"):
        irgrid.retriever("bm25-lucene-pisa").with_options(k1=1.2).pipeline("vaswani", store=shared_store)


def test_dry_run_projects_hours_per_family(shared_store):
    """A retriever measured in this cache is projected from its measured ms/query (its index is cached); one never
    run here from the bench-scale fits and the per-parameter rate of its encoder. Index builds are counted once
    per corpus."""
    from irgrid.runner import planning

    spec = from_dict({"name": "proj", "datasets": ["vaswani"], "retrievers": ["bm25-pisa"], "measures": ["AP"]})
    grid.run(spec, store=shared_store)
    variant = from_dict({"name": "proj2", "datasets": ["vaswani", {"name": "vaswani", "queries": 5, "seed": 0}],
                         "measures": ["AP"], "retrievers": [{"name": "bm25-pisa", "options": {"k1": 1.1}},
                                                            "splade-tiny"]})
    plan = planning.make_plan(variant, shared_store)
    rows = {(r["dataset"], r["retriever"]): r for r in plan.rows}
    pisa = rows[("vaswani", "bm25-pisa")]
    assert pisa["status"] == "to run" and pisa["index"] == "cached" and pisa["source"] == "cache"
    assert 0 < pisa["cpu_s"] < 60 and pisa["gpu_s"] == 0
    splade = rows[("vaswani", "splade-tiny")]
    assert splade["index"] == "build" and splade["source"] == "per-parameter rate+scale fit"
    assert splade["gpu_s"] > 0 and splade["cpu_s"] > 0 and splade["disk_bytes"] > 0
    assert rows[("vaswani@q5s0", "splade-tiny")]["index"] == "shared (vaswani × splade-tiny)"  # one corpus, one build
    assert len(plan.indexes) == 1 and plan.cached_indexes == 1
    text = planning.format_summary(plan)
    total = next(line for line in text.splitlines() if line.startswith("total: "))
    assert "index builds: 1 to build" in text and "sparse" in text
    assert " GPU-" in total and (" CPU-seconds" in total or " CPU-minutes" in total), total  # finer than 0.1 h
