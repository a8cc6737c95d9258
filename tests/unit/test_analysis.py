"""Analyses (paper Sections 4.1.2, 4.3): hand-computed examples, the paper's own z-scores, and a real grid."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from irgrid.core import significance
from irgrid.report import failures as an
from irgrid.report import stats as stats_mod
from irgrid.report import zscores as zscores_mod

# -- bootstrap ----------------------------------------------------------------------------------------------

def test_bootstrap_se_matches_the_ideal_bootstrap():
    # x = [0, 0, 1, 1]: the ideal bootstrap SE of the mean is the plug-in sd / sqrt(n) = 0.5 / 2 = 0.25
    se = significance.bootstrap_se([0, 0, 1, 1], n_resamples=20000, seed=1)
    assert se == pytest.approx(0.25, abs=0.005)
    # x = [0, 1]: resampled means are 0, .5, .5, 1 with equal probability: var = 1/8, SE = 0.35355
    assert significance.bootstrap_se([0, 1], n_resamples=20000, seed=2) == pytest.approx(math.sqrt(1 / 8), abs=0.006)


def test_bootstrap_se_is_seeded_and_degenerate_cases_are_exact():
    x = np.linspace(0, 1, 50) ** 2
    assert significance.bootstrap_se(x, seed=7) == significance.bootstrap_se(x, seed=7)
    assert significance.bootstrap_se(x, seed=7) != significance.bootstrap_se(x, seed=8)
    assert significance.bootstrap_se([0.4] * 10) == 0.0
    assert math.isnan(significance.bootstrap_se([]))
    # B = 1000 is within Monte-Carlo error (~1/sqrt(2B) relative) of the plug-in value
    assert significance.bootstrap_se(x, n_resamples=1000, seed=0) == pytest.approx(x.std(ddof=0) / math.sqrt(len(x)), rel=0.08)


# -- Δσ and the paper ---------------------------------------------------------------------------------------

def test_delta_sigma_and_class_boundaries():
    assert zscores_mod.delta_sigma(0.70, 0.65, 0.02) == pytest.approx(2.5)
    assert zscores_mod.delta_sigma(0.5, 0.5, 0.0) == 0.0 and zscores_mod.delta_sigma(0.6, 0.5, 0.0) == math.inf
    cases = {0.0: "within", 2.0: "within", -2.0: "within", 2.5: "above", 3.0: "far-above", 10: "far-above",
             -2.01: "below", -3.0: "far-below", -21.475: "far-below", None: "new", math.nan: "new"}
    for z, cls in cases.items():
        assert zscores_mod.classify(z) == cls, z


def test_classes_of_table_a3_are_the_colours_of_table_2():
    z = zscores_mod.load_paper_table("A.3")
    classes = z.apply(lambda col: col.map(lambda v: zscores_mod.classify(None if pd.isna(v) else float(v))))
    flat = classes.stack()
    published = flat[flat != "new"]
    # Section 4.1.2: 109 published results, 76 within 2 SE, 20 at least 3 SE below, 5 at least 3 SE above
    assert len(published) == 109
    counts = published.value_counts()
    assert (counts["within"], counts["far-below"], counts["far-above"]) == (76, 20, 5)
    assert (classes.loc["BM25", ["msmarco_dev_mrr@10", "dl19_ndcg@10", "dl20_ndcg@10", "beir_ndcg@10",
                                 "lotte_success@5", "instructir_robustness@10", "instructir_ndcg@10",
                                 "followir_score", "followir_p-mrr"]] == "within").all()
    assert classes.at["DeepCT", "msmarco_dev_mrr@10"] == "far-below"
    assert classes.at["HyDE", "dl19_ndcg@10"] == "far-above" and classes.at["HyDE", "dl20_ndcg@10"] == "far-above"
    assert classes.at["InstructOR (large)", "beir_ndcg@10"] == "below"  # -2.302: purple in the text
    assert classes.at["LLM2Vec", "beir_ndcg@10"] == "new"


def test_paper_columns_map_our_datasets():
    cols = {(c.table, c.column): c for c in zscores_mod.paper_columns()}
    scifact = cols["A.5", "scifact"]
    assert zscores_mod.column_cells(scifact, {("beir/scifact/test", "nDCG@10"): 0.6}) == [("beir/scifact/test", "nDCG@10")]
    assert zscores_mod.column_cells(scifact, {("beir/scifact/test", "AP"): 0.6}) is None
    beir = cols["2", "beir_ndcg@10"]
    assert len(beir.parts) == 14  # Table 2: the 14-part mean, CQADupStack's 12 forums averaged first
    assert [len(p.members) for p in beir.parts].count(12) == 1 and len(beir.components) == 13 + 12
    weights = {d: w for d, _, w in beir.weights()}
    assert weights["beir/scifact/test"] == pytest.approx(1 / 14) and weights["beir/cqadupstack/tex"] == pytest.approx(1 / 168)
    assert zscores_mod.column_cells(beir, {("beir/scifact/test", "nDCG@10"): 0.6}) is None  # incomplete: not compared
    assert cols["2", "msmarco_dev_mrr@10"].components == ((("msmarco-passage/dev/small",), "RR@10"),)


# -- failure points, Jaccard, fusion ------------------------------------------------------------------------

def test_failure_ranks_by_hand():
    qrels = pd.DataFrame({"qid": ["1", "1", "2", "3", "4"], "docno": ["a", "b", "c", "d", "e"],
                          "label": [0, 1, 1, 1, 0]})
    run = pd.DataFrame({"qid": ["1", "1", "1", "2", "2"], "docno": ["x", "a", "b", "z", "c"],
                        "score": [3.0, 2.0, 1.0, 5.0, 4.0]})
    ranks = an.failure_ranks(run, qrels)
    # q1: first relevant 'b' at rank 3 ('a' is judged non-relevant); q2: 'c' at 2; q3 not retrieved: 1001;
    # q4 has no relevant document, so it has no failure rank
    assert ranks.to_dict() == {"1": 3, "2": 2, "3": 1001}
    assert an.failure_ranks(run, qrels, depth=2).to_dict() == {"1": 3, "2": 2, "3": 3}  # capped at depth + 1


def test_hard_queries_and_jaccard_by_hand():
    ranks = pd.Series({"q1": 1, "q2": 1001, "q3": 5, "q4": 1001, "q5": 2, "q6": 40, "q7": 1, "q8": 3, "q9": 1,
                       "q10": 7, "q11": 1, "q12": 2})
    assert an.hard_queries(ranks, 0.1) == ["q2", "q4"]  # ceil(0.1 * 12) = 2 queries: the two at 1001
    assert an.hard_queries(ranks, 0.25) == ["q2", "q4", "q6"]  # ceil(3.0) = 3
    # ties at the cut are broken by qid: q10 (7) is in, then q3 (5)
    assert an.hard_queries(ranks, 0.4) == ["q2", "q4", "q6", "q10", "q3"]
    assert an.jaccard({"a", "b", "c"}, {"b", "c", "d"}) == pytest.approx(2 / 4)
    assert an.jaccard({"a"}, {"b"}) == 0.0 and an.jaccard(set(), set()) == 1.0
    m = an.jaccard_matrix({"x": ["1", "2"], "y": ["2", "3"], "z": ["1", "2"]})
    assert m.loc["x", "y"] == pytest.approx(1 / 3) and m.loc["x", "z"] == 1.0 and m.loc["y", "x"] == m.loc["x", "y"]
    assert np.diag(m.to_numpy()).tolist() == [1.0, 1.0, 1.0]


def test_fusion_suggestions_prefer_other_families_and_skip_weak_systems():
    jac = pd.DataFrame({"dataset": "d", "a": ["bm25", "bm25", "dense", "bm25"], "b": ["splade", "dense", "weak", "weak"],
                        "jaccard": [0.1, 0.3, 0.05, 0.02]})
    families = {"bm25": "sparse", "splade": "sparse", "dense": "dense", "weak": "dense"}
    eff = pd.DataFrame({"dataset": "d", "system": ["bm25", "splade", "dense", "weak"], "value": [0.6, 0.7, 0.68, 0.2]})
    s = an.fusion_suggestions(jac, families, eff, top=2)
    assert list(zip(s.a, s.b)) == [("bm25", "dense"), ("bm25", "splade")]  # cross-family first; 'weak' left out
    assert s.cross_family.tolist() == [True, False]



def test_rrf_runs_by_hand():
    a = pd.DataFrame({"qid": "1", "docno": ["d1", "d2", "d3"], "score": [3.0, 2.0, 1.0]})
    b = pd.DataFrame({"qid": "1", "docno": ["d2", "d4", "d1"], "score": [5.0, 4.0, 3.0]})
    fused = an.rrf_runs(a, b)  # score = sum over runs of 1 / (60 + 0-based rank)
    expected = {"d2": 1 / 61 + 1 / 60, "d1": 1 / 60 + 1 / 62, "d4": 1 / 61, "d3": 1 / 62}
    assert fused["docno"].tolist() == ["d2", "d1", "d4", "d3"] and fused["rank"].tolist() == [0, 1, 2, 3]
    assert fused.set_index("docno")["score"].to_dict() == pytest.approx(expected)
    assert an.rrf_runs(a, b, num_results=2)["docno"].tolist() == ["d2", "d1"]
    assert an.rrf_runs(a, b, k=0, num_results=None).set_index("docno").at["d3", "score"] == pytest.approx(1 / 2)

# -- cross-dataset view -------------------------------------------------------------------------------------

def test_dersimonian_laird_by_hand():
    # homogeneous: Q = 1.3846 < k - 1, so tau² = 0 and the pooled effect is the fixed effect
    r = stats_mod.dersimonian_laird([0.1, 0.3, 0.2], [0.01, 0.02, 0.015])
    assert r.tau2 == 0.0 and r.q == pytest.approx(1.384615, abs=1e-6)
    assert r.effect == pytest.approx(38.3333 / 216.6667, abs=1e-5) and r.se == pytest.approx(math.sqrt(1 / 216.6667))
    # heterogeneous: w = 100, 100; Q = 50; C = 200 - 20000/200 = 100; tau² = (50 - 1)/100 = 0.49
    r = stats_mod.dersimonian_laird([0.0, 1.0], [0.01, 0.01])
    assert r.tau2 == pytest.approx(0.49) and r.effect == pytest.approx(0.5)
    assert r.se == pytest.approx(0.5) and r.i2 == pytest.approx(49 / 50)  # w* = 1/0.5 each: SE = sqrt(1/4)
    assert r.ci_low == pytest.approx(0.5 - 1.959964 * 0.5, abs=1e-5)
    single = stats_mod.dersimonian_laird([0.2], [0.04])
    assert (single.k, single.effect, single.se) == (1, 0.2, 0.2)
    assert math.isnan(single.tau2) and math.isnan(single.i2)  # one dataset: no heterogeneity to report
