"""Run checks (irgrid.runner.checks): one error per kind of malformed run, naming system, dataset and a row; the
depth an expression declares; which measures look deeper than a system returns; sampled dataset names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid.runner.checks import RunCheckError, beyond_depth, check_run

TOPICS = pd.DataFrame({"qid": ["1", "2", "3"], "query": ["a", "b", "c"]})


def _run(rows):
    return pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])


GOOD = [("1", "d1", 3.0, 0), ("1", "d2", 2.0, 1), ("1", "d3", 2.0, 2), ("2", "d1", 1.0, 0)]


def test_a_good_run_passes_and_its_empty_queries_are_returned():
    assert check_run(_run(GOOD), "sys", "ds", TOPICS, depth=3) == ["3"]
    assert check_run(_run([]), "sys", "ds", None, depth=3) == []  # no topics to say what is missing


# -- issue 40 items 7 and 9: what a pipeline of the Python door may return ----------------------------------------
@pytest.mark.parametrize("res, message", [
    (_run([]), r"run of 'sys' on 'ds': no result for any of its 3 queries, so there is nothing to evaluate "
               r"\(the run is not stored\)"),
    (pd.DataFrame(columns=["qid", "docno", "score"]), "no result for any of its 3 queries"),
    (_run([("1", "d1", float("nan"), 0), ("1", "d2", 1.0, 1)]),
     r"1 of 2 result\(s\) have a score that is not a number \(NaN or text\), e\.g\. qid=1 docno=d1 rank=0 score=nan"),
    (_run([("1", "d1", "bm25", 0)]), r"1 of 1 result\(s\) have a score that is not a number .*score=bm25"),
    (None, r"the pipeline returned NoneType None, not a result frame; its transform\(\) must return a DataFrame"),
    ([("1", "d1", 1.0)], r"returned list \[\('1', 'd1', 1\.0\)\], not a result frame"),
])
def test_empty_runs_nan_scores_and_non_frames_are_refused(res, message):
    """Was: an empty run was stored, then pt.Experiment raised; NaN scores were evaluated in arbitrary order."""
    with pytest.raises(RunCheckError, match=message):
        check_run(res, "sys", "ds", TOPICS, depth=None)


def test_a_run_without_rank_is_valid():
    assert check_run(_run(GOOD).drop(columns=["rank"]), "sys", "ds", TOPICS, depth=3) == ["3"]


BAD = [
    (GOOD + [("1", "d2", 0.5, 3)], None, r"run of 'sys' on 'ds': 1 duplicate \(qid, docno\) pair\(s\), e\.g\. "
                                         r"qid=1 docno=d2 rank=3 score=0\.5; .*\.scorer\(ds\)"),
    (GOOD, 2, r"query 1 has 3 results, more than the system's depth 2 .*e\.g\. qid=1 docno=d3 rank=2"),
    ([("1", "d1", 1.0, 0), ("1", "d2", 2.0, 1)], None, r"rank and score disagree: qid=1 docno=d2 rank=1 score=2\.0 "
                                                       r"comes after qid=1 docno=d1"),
    ([("1", "d1", 1.0, 0), ("1", "d2", 1.0, 0)], None, r"rank and score disagree.*ranks must be distinct"),
    (GOOD + [("9", "d1", 1.0, 0)], None, r"1 query id\(s\) that are not queries of 'ds', e\.g\. qid=9"),
]


@pytest.mark.parametrize("rows,depth,message", BAD, ids=["duplicate", "too-deep", "order", "rank-tie", "foreign"])
def test_malformed_runs_get_one_error_naming_system_dataset_and_row(rows, depth, message):
    with pytest.raises(RunCheckError, match=message):
        check_run(_run(rows), "sys", "ds", TOPICS, depth=depth)


def test_measures_deeper_than_the_system_are_flagged():
    import irgrid.measures as m

    r100, ndcg10, ap = m.parse("R@100"), m.parse("nDCG@10"), m.parse("AP")
    assert beyond_depth(r100, depth=50, reach=1000)  # R@100 of a 50-deep cascade
    assert not beyond_depth(ndcg10, depth=50, reach=1000)
    assert beyond_depth(ap, depth=50, reach=1000)  # AP of a truncated run
    assert not beyond_depth(ap, depth=1000, reach=2000)  # 1000 deep: TREC's usual depth, not truncated
    assert not beyond_depth(r100, depth=50, reach=50)  # the collection has no more: nothing was cut


def test_an_expression_declares_its_depth():
    from irgrid.runner.experiment import from_dict

    items = {"casc": "bm25 % 50 >> all-minilm-l6-v2", "top": "casc % 10", "fuse": "rrf(bm25, bm25-pisa, k=60)",
             "lin": "0.5 * bm25 + bm25-pisa", "union": "(bm25 % 10 | bm25-pisa % 20) >> all-minilm-l6-v2",
             "inter": "(bm25 % 10 & bm25-pisa % 20) >> all-minilm-l6-v2"}
    spec = from_dict({"datasets": ["vaswani"], "retrievers": [{"as": k, "pipeline": v} for k, v in items.items()]})
    depth = {r.name: r.depth() for r in spec.retrievers}
    assert depth == {"casc": 50, "top": 10, "fuse": 1000, "lin": 2000, "union": 30, "inter": 10}


def test_an_intersection_is_flagged_at_the_depth_its_run_really_has():
    """Issue 41: `(a % 100 & b % 100) >> c` declares 100 but held at most 41 documents per query; its R@100 (and
    AP) look deeper than it returns, while a run as deep as it declares keeps its nominal depth."""
    import irgrid.measures as m
    from irgrid.runner.checks import run_depth
    from irgrid.runner.experiment import from_dict

    spec = from_dict({"datasets": ["vaswani"], "retrievers": [
        "bm25", {"as": "inter", "pipeline": "(bm25 % 100 & bm25-pisa % 100) >> all-minilm-l6-v2"}]})
    bm25, inter = spec.retrievers
    assert inter.depth() == 100
    shallow = pd.DataFrame({"qid": ["1"] * 41 + ["2"] * 7, "docno": [f"d{i}" for i in range(48)],
                            "score": np.arange(48, 0, -1, dtype=float)})
    full = pd.DataFrame({"qid": ["1"] * 1000, "docno": [f"d{i}" for i in range(1000)],
                         "score": np.arange(1000, 0, -1, dtype=float)})
    reach = 1000  # bm25's run
    assert run_depth(inter, shallow, reach) == 41  # the run's own depth, not the nominal 100
    assert run_depth(bm25, full, reach) == 1000 and run_depth(inter, full.head(100), reach) == 100
    r100, ndcg10, ap = m.parse("R@100"), m.parse("nDCG@10"), m.parse("AP")
    assert beyond_depth(r100, run_depth(inter, shallow, reach), reach)
    assert not beyond_depth(ndcg10, run_depth(inter, shallow, reach), reach)
    assert not beyond_depth(r100, run_depth(inter, full.head(100), reach), reach)  # 100 held: R@100 is not cut
    # BM25 (declared 1,000) holding 140 of a 150-document collection is not cut: that is its matching
    assert run_depth(bm25, full.head(140), 150) == 1000 and not beyond_depth(ap, run_depth(bm25, full.head(140), 150), 150)


def test_sampled_dataset_names_resolve_to_the_sample():
    from irgrid.data import datasets

    sample = datasets.get("vaswani@q5s3")
    assert sample == datasets.get("vaswani").with_sample(5, 3) and sample.name == "vaswani@q5s3"
