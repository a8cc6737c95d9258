"""Dataset policies declared in the catalog (self matches, duplicate query ids) and name suggestions: no data read."""

from __future__ import annotations

import pandas as pd
import pytest

from irgrid.data import datasets
from irgrid.runner.transforms import DropSelfMatches


def test_self_match_policy_is_declared_per_dataset():
    policies = {d.name: d.drop_self_matches for d in datasets.catalog()}
    assert policies["beir/arguana/test"] and policies["beir/quora/test"]
    assert not policies["beir/scifact/test"] and not policies["vaswani"]


def test_drop_self_matches_reranks():
    res = pd.DataFrame({"qid": ["1", "1", "1", "2"], "query": ["q"] * 4, "docno": ["1", "7", "9", "1"],
                        "score": [3.0, 2.0, 1.0, 5.0], "rank": [0, 1, 2, 0]})
    out = DropSelfMatches()(res)
    assert out[["qid", "docno", "rank"]].values.tolist() == [["1", "7", 0], ["1", "9", 1], ["2", "1", 0]]
    assert len(DropSelfMatches()(res.head(0))) == 0


def test_duplicate_query_ids_in_catalog_topics_are_refused_unless_declared():
    """pt.Experiment would merge the rankings of two queries sharing an id: refuse, naming the dataset and ids."""
    import pandas as pd

    from irgrid.data.datasets import Dataset, DatasetError

    topics = pd.DataFrame({"qid": ["1", "2", "1"], "query": ["a", "b", "a again"]})
    with pytest.raises(DatasetError, match=r"'dup-test': 1 query id\(s\) occur more than once .*'1'.*declare duplicate_qids"):
        Dataset(name="dup-test", corpus="dup-test")._sampled(topics)
    declared = Dataset(name="dup-test", corpus="dup-test", duplicate_qids="the benchmark repeats ids")
    assert list(declared._sampled(topics)["query"]) == ["a", "b"]
    assert declared.config()["duplicate_qids"] == "first" and "duplicate_qids" not in Dataset("d", "d").config()
