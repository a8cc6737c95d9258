"""Golden tests on the staged collections (counts, first and last records), as ir_datasets pins its own."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from irgrid import datasets
from irgrid.registry import UnknownNameError
from irgrid.transforms import DropSelfMatches


def test_scifact_test_golden():
    ds = datasets.get("beir/scifact/test")
    docs = list(ds.docs())
    assert len(docs) == 5183 == ds.docs_count()
    assert docs[0]["docno"] == "4983"
    # flat: title, a space, then the abstract
    assert docs[0]["text"].startswith("Microstructural development of human newborn cerebral white matter assessed in vivo")
    assert docs[-1]["docno"] == "198309074" and docs[-1]["text"].endswith("cell adhesion molecules and chemokines.")
    topics, qrels = ds.topics(), ds.qrels()
    assert len(topics) == 300 and list(topics.columns) == ["qid", "query"]
    assert topics.iloc[0].tolist() == ["1", "0-dimensional biomaterials show inductive properties."]
    assert topics.iloc[-1]["qid"] == "1395"
    assert len(qrels) == 339 and qrels["qid"].nunique() == 300


def test_splits_share_one_corpus():
    assert datasets.get("beir/scifact/train").corpus == datasets.get("beir/scifact/test").corpus == "beir/scifact"
    assert len(datasets.get("beir/scifact/train").topics()) == 809


def test_vaswani_golden():
    ds = datasets.get("vaswani")
    docs = list(ds.docs())
    assert len(docs) == 11429 and docs[0]["docno"] == "1" and docs[-1]["docno"] == "11429"
    assert docs[0]["text"].startswith("compact memories have flexible capacities")
    assert len(ds.topics()) == 93 and len(ds.qrels()) == 2083


def test_queries_only_collection_explains_missing_documents():
    ds = datasets.get("msmarco-passage/trec-dl-2019/judged")
    assert len(ds.topics()) == 43
    with pytest.raises(datasets.DatasetError, match="documents of 'msmarco-passage' are not staged.*IRGRID_IRDS_STAGED"):
        next(ds.docs())


def test_staged_home_is_copied_not_written(staged):
    home = datasets.ensure_irds_home()
    assert home.resolve() != staged.resolve()
    assert (home / "vaswani" / "docs.txt").exists()
    assert not os.access(staged, os.W_OK) or not (staged / "vaswani" / "docs.pklz4").exists()


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


def test_unknown_dataset_suggests():
    with pytest.raises(UnknownNameError, match="unknown dataset 'beir/scifakt/test'.*Did you mean 'beir/scifact/test'"):
        datasets.get("beir/scifakt/test")


def test_any_ir_datasets_id_is_accepted_with_default_policies():
    ds = datasets.get("cranfield")
    assert ds.corpus == "cranfield" and not ds.drop_self_matches


def test_duplicate_query_ids_in_catalog_topics_are_refused_unless_declared():
    """pt.Experiment would merge the rankings of two queries sharing an id: refuse, naming the dataset and ids."""
    import pandas as pd

    from irgrid.datasets import Dataset, DatasetError

    topics = pd.DataFrame({"qid": ["1", "2", "1"], "query": ["a", "b", "a again"]})
    with pytest.raises(DatasetError, match=r"'dup-test': 1 query id\(s\) occur more than once .*'1'.*declare duplicate_qids"):
        Dataset(name="dup-test", corpus="dup-test")._sampled(topics)
    declared = Dataset(name="dup-test", corpus="dup-test", duplicate_qids="the benchmark repeats ids")
    assert list(declared._sampled(topics)["query"]) == ["a", "b"]
    assert declared.config()["duplicate_qids"] == "first" and "duplicate_qids" not in Dataset("d", "d").config()
