"""irgrid's own measures (Robustness@k, p-MRR, og:<measure>) and the paper's aggregate columns, on hand-computed
examples, FollowIR's published definition, the paper's tables, and staged TREC-DL 2019 qrels."""

from __future__ import annotations

import math
import random

import ir_measures
import pandas as pd
import pytest

from irgrid import measures, paper
from irgrid.runner.experiment import ExperimentError, parse_measure

# the paper's tables as shipped with irgrid (tests/integration/test_analysis_grid.py checks they are the shared ones)
REFERENCE = paper.reference_dir()


def _qrels(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])


def _run(ranked: dict[str, list[str]]) -> pd.DataFrame:
    rows = [(q, d, float(len(docs) - i)) for q, docs in ranked.items() for i, d in enumerate(docs)]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


def _perq(measure, qrels, run) -> dict[str, float]:
    return {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}


# -- Robustness@k --------------------------------------------------------------------------------------------------
def test_robustness_is_the_mean_of_per_query_minima():
    qrels = _qrels([("7_1", "a", 1), ("7_2", "b", 1), ("7_3", "c", 1), ("8_1", "d", 1)])
    run = _run({"7_1": ["a", "x"], "7_2": ["x", "b"], "7_3": ["c"], "8_1": ["x", "y"]})
    # nDCG@10 by hand: 7_1 = 1, 7_2 = 1/log2(3) = 0.6309, 7_3 = 1, 8_1 = 0
    per = _perq(measures.parse("Robustness@10"), qrels, run)
    assert per == pytest.approx({"7": 1 / math.log2(3), "8": 0.0})
    agg = ir_measures.calc_aggregate([measures.parse("Robustness@10")], qrels, run)
    assert agg[measures.parse("Robustness@10")] == pytest.approx((1 / math.log2(3) + 0) / 2)


def test_robustness_cutoff_and_unretrieved_variant():
    qrels = _qrels([("7_1", "a", 1), ("7_2", "b", 1)])
    run = _run({"7_1": ["x", "a"]})  # 7_2 retrieved nothing: nDCG 0, so the group's minimum is 0
    assert _perq(measures.parse("Robustness@10"), qrels, run) == {"7": 0.0}
    run = _run({"7_1": ["x", "a"], "7_2": ["b"]})
    assert _perq(measures.parse("Robustness@1"), qrels, run) == {"7": 0.0}  # a is at rank 2 > cutoff 1
    assert _perq(measures.parse("Robustness@2"), qrels, run) == pytest.approx({"7": 1 / math.log2(3)})


# -- p-MRR ---------------------------------------------------------------------------------------------------------
def test_pmrr_pair_is_paper_equation_5():
    assert measures.pmrr_pair(3, 3) == 0
    assert measures.pmrr_pair(1, 2) == pytest.approx(0.5)  # moved down: 1 - RR_new/RR_og = 1 - (1/2)/1
    assert measures.pmrr_pair(4, 2) == pytest.approx(-0.5)  # moved up: RR_og/RR_new - 1 = (1/4)/(1/2) - 1


def test_pmrr_hand_computed():
    qrels = _qrels([
        ("q-og", "d1", 1), ("q-og", "d2", 1), ("q-og", "d3", 1), ("q-changed", "d1", 0), ("q-changed", "d2", 1),
        ("r-og", "e1", 2), ("r-changed", "e1", 0),
        ("s-og", "f1", 1), ("s-changed", "f1", 1),  # nothing changed: no p-MRR value for s
    ])
    run = _run({
        "q-og": ["d1", "d2", "d3"], "q-changed": ["d2", "d1", "d4"],  # d1: 1 -> 2; d3: 3 -> 4 (not retrieved: 3+1)
        "r-og": ["x", "y", "z", "e1"], "r-changed": ["x", "e1"],  # e1: 4 -> 2
        "s-og": ["f1"], "s-changed": ["f1"],
    })
    per = _perq(measures.parse("p-MRR"), qrels, run)
    assert per == pytest.approx({"q": (0.5 + 0.25) / 2, "r": -0.5})
    agg = ir_measures.calc_aggregate([measures.parse("p-MRR")], qrels, run)[measures.parse("p-MRR")]
    assert agg == pytest.approx((0.375 - 0.5) / 2)


def test_pmrr_matches_followir_published_definition():
    """FollowIR's evaluation (mteb `calculate_pmrr` / `rank_score`, read in orionw/FollowIR's mteb fork): ranks are
    1-based positions by descending score, a document missing from a ranking gets len(ranking) + 1, scores are
    averaged per query, then over queries; query ids are `<id>-og` / `<id>-changed`. Its own test case: one
    changed document at the bottom of the original ranking and on top of the new one gives 1/4 / 1 - 1 = -0.75;
    unchanged rankings give 0."""
    qrels = _qrels([("a-og", "0", 1), ("a-changed", "0", 0)])
    original = {"0": 1.0, "1": 2.0, "2": 3.0, "3": 4.0}
    same = pd.DataFrame([("a-og", d, s) for d, s in original.items()] + [("a-changed", d, s) for d, s in original.items()],
                        columns=["query_id", "doc_id", "score"])
    assert _perq(measures.parse("p-MRR"), qrels, same) == {"a": 0.0}
    changed = {"0": 4.0, "1": 1.0, "2": 2.0, "3": 3.0}
    moved = pd.DataFrame([("a-og", d, s) for d, s in original.items()] + [("a-changed", d, s) for d, s in changed.items()],
                         columns=["query_id", "doc_id", "score"])
    assert _perq(measures.parse("p-MRR"), qrels, moved) == pytest.approx({"a": -0.75})


def test_og_measure_uses_original_instruction_only():
    qrels = _qrels([("q-og", "d1", 1), ("q-changed", "d2", 1), ("r-og", "e1", 1)])
    run = _run({"q-og": ["x", "d1"], "q-changed": ["d2"], "r-changed": ["e1"]})  # r-og retrieved nothing
    assert str(measures.parse("og:AP@1000")) == "og:AP@1000"
    assert _perq(measures.parse("og:AP@1000"), qrels, run) == pytest.approx({"q": 0.5, "r": 0.0})


# -- names ---------------------------------------------------------------------------------------------------------
def test_experiment_files_accept_our_names():
    for name in ("Robustness@10", "p-MRR", "og:nDCG@5", "og:AP@1000", "nDCG@10", "Success@5", "RR@10"):
        assert str(parse_measure(name, "t")) == name
    assert measures.unit(parse_measure("p-MRR", "t")) == "base" and measures.unit(parse_measure("R@1000", "t")) == "query"
    with pytest.raises(ExperimentError, match="'Robustnes@10' is not a measure.*Robustness@k"):
        parse_measure("Robustnes@10", "exp.yaml: measures[0]")


# -- pt.Experiment: mixed units, paired tests ----------------------------------------------------------------------
def test_experiment_mixes_query_and_base_measures_with_paired_tests():
    rng = random.Random(7)
    qrels = pd.DataFrame([(f"{b}_{v}", f"d{b}{v}", 1) for b in range(30) for v in range(3)],
                         columns=["qid", "docno", "label"])
    topics = pd.DataFrame({"qid": qrels["qid"], "query": "q"})

    def system(quality: float) -> pd.DataFrame:
        rows = []
        for qid, doc in zip(qrels["qid"], qrels["docno"]):
            docs = [f"n{i}" for i in range(20)]
            if rng.random() < quality:
                docs.insert(rng.randrange(10), doc)
            rows += [(qid, d, float(100 - i), i) for i, d in enumerate(docs)]
        return pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])

    frames = [system(0.5), system(0.9)]
    ms = [parse_measure("nDCG@10", "t"), parse_measure("Robustness@10", "t")]
    agg = measures.experiment(frames, topics, qrels, ms, names=["a", "b"], baseline=0, test="t", verbose=False)
    assert list(agg["name"]) == ["a", "b"]
    assert 0 < agg.loc[1, "Robustness@10 p-value"] < 0.05 and 0 < agg.loc[1, "nDCG@10 p-value"] < 0.05
    perq = measures.experiment(frames, topics, qrels, ms, names=["a", "b"], perquery=True, verbose=False)
    counts = perq.groupby(["name", "measure"]).size().to_dict()
    assert counts == {("a", "Robustness@10"): 30, ("a", "nDCG@10"): 90, ("b", "Robustness@10"): 30,
                      ("b", "nDCG@10"): 90}
    for name in ("a", "b"):  # the aggregate is the mean of the per-(base-)query values
        sel = perq[(perq.name == name) & (perq.measure == "Robustness@10")]
        assert agg.set_index("name").loc[name, "Robustness@10"] == pytest.approx(sel["value"].mean())
        by_hand = perq[(perq.name == name) & (perq.measure == "nDCG@10")].assign(
            base=lambda d: d["qid"].map(measures.instructir_base)).groupby("base")["value"].min()
        assert sorted(sel["value"]) == pytest.approx(sorted(by_hand))


# -- aggregates ----------------------------------------------------------------------------------------------------
def _long(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "value"])


def test_followir_score_and_pmrr_reproduce_table2_bm25_from_table_a7():
    a7 = pd.read_csv(REFERENCE / "paper_tableA7_instructir_followir.csv").set_index("model")
    t2 = pd.read_csv(REFERENCE / "paper_table2.csv").set_index("model")
    bm25 = a7.loc["BM25"]
    results = _long([
        # Table A.7 prints x100 what irgrid measures on 0-1; the paper's Score uses the changed instructions
        ("followir/robust04", "BM25", "changed:AP@1000", bm25["robust04_map"] / 100),
        ("followir/news21", "BM25", "changed:nDCG@5", bm25["news21_ndcg@5"] / 100),
        ("followir/core17", "BM25", "changed:AP@1000", bm25["core17_map"] / 100),
        ("followir/robust04", "BM25", "p-MRR-paper", bm25["robust04_p-mrr"] / 100),
        ("followir/news21", "BM25", "p-MRR-paper", bm25["news21_p-mrr"] / 100),
        ("followir/core17", "BM25", "p-MRR-paper", bm25["core17_p-mrr"] / 100),
    ])
    out = measures.aggregate(results, ["FollowIR-Score", "FollowIR-p-MRR"]).set_index("dataset")["value"]
    assert t2.loc["BM25", "followir_score"] == 16.680 and t2.loc["BM25", "followir_p-mrr"] == -2.324
    # Table A.7's inputs are rounded to 3 decimals, so their mean is within 0.0005 of the unrounded mean
    assert out["FollowIR-Score"] == pytest.approx(16.680, abs=0.001)  # (17.898 + 17.471 + 14.669) / 3 = 16.6793
    assert round(out["FollowIR-p-MRR"], 3) == -2.324  # (0.265 - 4.198 - 3.040) / 3


def test_beir_mean_over_14_with_cqadupstack_macro_mean():
    a5 = pd.read_csv(REFERENCE / "paper_tableA5_beir_ndcg@10.csv").set_index("model").loc["BM25"]
    from irgrid.data.datasets import BEIR_PAPER

    rows = []
    for column, members in BEIR_PAPER.items():
        if column == "cqadupstack":  # 12 forums whose macro mean is Table A.5's value
            offsets = [(-1) ** i * 0.01 * (i // 2) for i in range(12)]  # symmetric: mean offset 0
            rows += [(m, "BM25", "nDCG@10", a5[column] + o) for m, o in zip(members, offsets)]
        else:
            rows += [(members[0], "BM25", "nDCG@10", a5[column])]
    results = _long(rows + [("beir/scifact/test", "BM25", "R@1000", 0.9)])
    cqa = measures.aggregate(results, "CQADupStack")
    assert cqa["value"].iloc[0] == pytest.approx(a5["cqadupstack"])
    beir = measures.aggregate(results, "BEIR").iloc[0]
    assert beir["value"] == pytest.approx(0.4273571, abs=1e-6) and round(beir["value"], 3) == 0.427  # Table 2
    assert beir["measure"] == "nDCG@10"
    alias = results.replace({"beir/arguana/test": "beir/arguana"})  # the ir_datasets id names the same set
    assert measures.aggregate(alias, "BEIR")["value"].iloc[0] == pytest.approx(beir["value"])
    with pytest.raises(measures.AggregateError, match="BEIR for 'BM25' needs results on 1 more.*beir/nq"):
        measures.aggregate(results[results.dataset != "beir/nq/test"], "BEIR")


def test_lotte_mean():
    a6 = pd.read_csv(REFERENCE / "paper_tableA6_lotte_success@5.csv").set_index("model").loc["BM25"]
    results = _long([("lotte/pooled/test/search", "BM25", "Success@5", a6["search"]),
                     ("lotte/pooled/test/forum", "BM25", "Success@5", a6["forum"])])
    assert measures.aggregate(results, "LoTTE")["value"].iloc[0] == pytest.approx(0.4775)  # Table 2: 0.477
    with pytest.raises(KeyError, match="unknown aggregate 'Lotte'.*Did you mean 'LoTTE'"):
        measures.aggregate(results, "Lotte")
