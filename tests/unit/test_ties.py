"""The tie audit (irgrid.core.ties) against exhaustive enumeration of every tie order evaluated by ir_measures
itself, analytic expectations of a constant scorer, a planted tie, and the stored/evaluated order."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import ir_measures
import numpy as np
import pandas as pd
import pytest

from irgrid.core import ties
from irgrid.core.significance import bootstrap_se

MEASURES = [ir_measures.parse_measure(m) for m in
            ("nDCG@5", "nDCG", "P@5", "R@5", "RR", "RR@4", "AP", "AP@5", "Success@3", "P@3", "R@3")]


def _ir(run: pd.DataFrame, qrels: pd.DataFrame, measures) -> dict:
    return ir_measures.calc_aggregate(measures, qrels.rename(columns={"qid": "query_id", "docno": "doc_id",
                                                                      "label": "relevance"}),
                                      run.rename(columns={"qid": "query_id", "docno": "doc_id"}))


def test_audit_matches_every_tie_order_evaluated_by_ir_measures():
    """min / max / mean over all orders of the tie groups (each order scored by ir_measures with distinct scores)
    equal the audit's low / high / expected; its trec_eval-order value equals ir_measures on the tied scores
    (except RR@k, whose ir_measures provider breaks ties the other way: the next test)."""
    rng = random.Random(1)
    checked = 0
    for trial in range(25):
        n = rng.randint(2, 6)
        docs = [f"d{i}" for i in range(n)]
        scores = [rng.choice([1.0, 2.0, 3.0]) for _ in docs]
        labels = {d: rng.choice([0, 0, 1, 2, -1]) for d in docs}
        labels[f"unretrieved{trial}"] = rng.choice([0, 1, 2])
        run = pd.DataFrame({"qid": "q", "docno": docs, "score": scores})
        qrels = pd.DataFrame({"qid": "q", "docno": list(labels), "label": list(labels.values())})
        audit = ties.audit_run(run, qrels, MEASURES).set_index("measure")
        on_scores = _ir(run, qrels, MEASURES)
        order = sorted(range(n), key=lambda i: -scores[i])
        groups = [[i for i in order if scores[i] == v] for v in sorted(set(scores), reverse=True)]
        # every order of the tie groups as its own query (distinct scores in that order), scored in one call
        orders = [[i for g in perm for i in g]
                  for perm in itertools.product(*[itertools.permutations(g) for g in groups])]
        ranked = pd.DataFrame({"qid": [f"o{j}" for j, _ in enumerate(orders) for _ in range(n)],
                               "docno": [docs[i] for seq in orders for i in seq],
                               "score": np.tile(np.arange(n, 0, -1.0), len(orders))})
        copies = pd.concat([qrels.assign(qid=f"o{j}") for j in range(len(orders))], ignore_index=True)
        values: dict[str, list[float]] = {str(m): [] for m in MEASURES}
        for metric in ir_measures.iter_calc(MEASURES, copies.rename(columns={"qid": "query_id", "docno": "doc_id",
                                                                             "label": "relevance"}),
                                            ranked.rename(columns={"qid": "query_id", "docno": "doc_id"})):
            values[str(metric.measure)].append(metric.value)
        for m in MEASURES:
            a, v = audit.loc[str(m)], np.array(values[str(m)])
            assert len(v) == len(orders)
            assert a["expected"] == pytest.approx(v.mean(), abs=1e-12), (trial, m)
            assert a["low"] == pytest.approx(v.min(), abs=1e-12) and a["high"] == pytest.approx(v.max(), abs=1e-12)
            if m.NAME != "RR" or "cutoff" not in m.params:
                assert a["observed"] == pytest.approx(on_scores[m], abs=1e-12), (trial, m)
            checked += 1
    assert checked == 25 * len(MEASURES)


def test_rr_at_k_of_ir_measures_breaks_ties_the_other_way_and_for_evaluation_fixes_it():
    """ir_measures' RR@k (MS MARCO's script) orders ties by docno ascending, nDCG@k (trec_eval) descending; on the
    run `for_evaluation` hands over, both follow trec_eval's order, which the audit's `observed` is."""
    run = pd.DataFrame({"qid": "q", "docno": ["a", "b"], "score": [1.0, 1.0]})
    qrels = pd.DataFrame({"qid": "q", "docno": ["a"], "label": [1]})
    rr10 = ir_measures.parse_measure("RR@10")
    assert _ir(run, qrels, [rr10])[rr10] == 1.0  # "a" first: ascending
    assert _ir(run, qrels, [ir_measures.RR])[ir_measures.RR] == 0.5  # trec_eval: "b" first
    fixed = ties.for_evaluation(run)
    assert list(fixed["docno"]) == ["b", "a"] and list(fixed["rank"]) == [0, 1]
    assert _ir(fixed, qrels, [rr10])[rr10] == 0.5
    assert ties.audit_run(run, qrels, [rr10])["observed"].iloc[0] == 0.5


def _constant_scorer(queries: int = 30, docs: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    runs, qrels, relevant = [], [], {}
    for q in range(queries):
        qid = f"q{q}"
        r = int(rng.integers(1, 8))
        rel_docs = set(rng.choice(docs, size=r, replace=False).tolist())
        relevant[qid] = r
        runs.append(pd.DataFrame({"qid": qid, "docno": [f"doc{i:03d}" for i in range(docs)], "score": 0.0}))
        qrels.append(pd.DataFrame({"qid": qid, "docno": [f"doc{i:03d}" for i in sorted(rel_docs)], "label": 1}))
    return pd.concat(runs, ignore_index=True), pd.concat(qrels, ignore_index=True), relevant


def test_constant_scorer_gives_the_analytic_expectation_and_is_flagged():
    """Every document scores 0: each order of the N documents is equally likely, so E[P@10] = r/N,
    E[nDCG@10] = (r/N) DCG_10(all ones) / IDCG_10, E[RR] = sum_j C(N-j, r-1) / C(N, r) / j (exact fractions),
    E[AP] = (H_N + (r-1)(N-H_N)/(N-1)) / N; all to 1e-9, and the cell's tie range exceeds half its SE."""
    n_docs = 40
    run, qrels, relevant = _constant_scorer(docs=n_docs)
    measures = [ir_measures.parse_measure(m) for m in ("P@10", "nDCG@10", "RR", "AP", "R@10", "Success@5")]
    audit = ties.audit_run(run, qrels, measures)
    w = [1 / math.log2(i + 1) for i in range(1, 11)]
    harmonic = sum(Fraction(1, i) for i in range(1, n_docs + 1))
    for qid, r in relevant.items():
        got = audit[audit["qid"] == qid].set_index("measure")["expected"]
        assert got["P@10"] == pytest.approx(r / n_docs, abs=1e-9)
        assert got["R@10"] == pytest.approx(10 / n_docs, abs=1e-9)
        assert got["nDCG@10"] == pytest.approx(r / n_docs * sum(w) / sum(w[: min(r, 10)]), abs=1e-9)
        rr = sum(Fraction(math.comb(n_docs - j, r - 1), math.comb(n_docs, r) * j) for j in range(1, n_docs + 1))
        assert got["RR"] == pytest.approx(float(rr), abs=1e-9)
        ap = (harmonic + Fraction(r - 1, n_docs - 1) * (n_docs - harmonic)) / n_docs
        assert got["AP"] == pytest.approx(float(ap), abs=1e-9)
        assert got["Success@5"] == pytest.approx(1 - math.comb(n_docs - r, 5) / math.comb(n_docs, 5), abs=1e-9)
    summary = ties.summarise(audit).set_index("measure")
    for m in ("P@10", "nDCG@10", "RR", "AP"):
        observed = audit[audit["measure"] == m]["observed"].to_numpy()
        assert summary.at[m, "tie_queries"] == 1.0
        assert summary.at[m, "tie_min"] <= observed.mean() <= summary.at[m, "tie_max"]
        assert ties.flagged(summary.at[m, "tie_range"], bootstrap_se(observed)), m


def test_planted_tie_moves_trec_eval_order_but_not_the_tie_aware_value():
    """A relevant and a non-relevant document tie across rank 10: renaming them flips trec_eval's (docno) order and
    with it nDCG@10, while the tie-aware value is the same under both names."""
    ndcg = ir_measures.parse_measure("nDCG@10")
    values, expected = [], []
    for relevant_name, other_name in (("a-rel", "z-non"), ("z-rel", "a-non")):
        docs = [f"top{i}" for i in range(9)] + [relevant_name, other_name]
        run = pd.DataFrame({"qid": "q1", "docno": docs, "score": [20.0 - i for i in range(9)] + [5.0, 5.0]})
        qrels = pd.DataFrame({"qid": "q1", "docno": ["top0", "top4", relevant_name], "label": [1, 1, 1]})
        audit = ties.audit_run(run, qrels, [ndcg]).iloc[0]
        values.append(_ir(run, qrels, [ndcg])[ndcg])
        expected.append(audit["expected"])
        assert audit["observed"] == pytest.approx(values[-1], abs=1e-12) and bool(audit["tied"])
        assert audit["low"] < audit["expected"] < audit["high"]
    assert values[0] != pytest.approx(values[1], abs=1e-6)  # trec_eval's order depends on the names
    assert expected[0] == pytest.approx(expected[1], abs=1e-15)
    assert expected[0] == pytest.approx((values[0] + values[1]) / 2, abs=1e-12)


def test_canonical_order_is_trec_evals_and_scoring_by_rank_agrees():
    run = pd.DataFrame({"qid": ["2", "1", "1", "1", "2"], "docno": ["x", "b", "c", "a", "y"],
                        "score": [1.0, 3.0, 3.0, 2.0, 1.0], "rank": [0, 0, 1, 2, 1]})
    out = ties.canonical_order(run)
    assert list(zip(out["qid"], out["docno"], out["rank"])) == [("1", "c", 0), ("1", "b", 1), ("1", "a", 2),
                                                                 ("2", "y", 0), ("2", "x", 1)]
    assert not ties.is_canonical(run) and ties.is_canonical(out)
    assert ties.canonical_order(out).equals(out)


def test_measures_without_a_tie_aware_form_are_left_out():
    assert ties.measure_form(ir_measures.parse_measure("nDCG@10")) == ties.MeasureForm("nDCG", 10, 1)
    assert ties.measure_form(ir_measures.parse_measure("P(rel=2)@5")) == ties.MeasureForm("P", 5, 2)
    assert ties.measure_form(ir_measures.parse_measure("Judged@10")) is None
    assert ties.measure_form(ir_measures.parse_measure("nDCG(dcg='exp-log2')@10")) is None
