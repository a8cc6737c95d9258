"""Golden tests on the staged collections (counts, first and last records), as ir_datasets pins its own."""

from __future__ import annotations

import pytest

from irgrid.data import datasets
from irgrid.util.registry import UnknownNameError


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
    """Reading a collection writes ir_datasets' files into the session's home, never into the staged folder."""
    def listing(folder):
        return {(str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}

    before = listing(staged / "vaswani")
    home = datasets.ensure_irds_home()
    assert home.resolve() != staged.resolve()
    assert len(list(datasets.get("vaswani").docs())) == 11429 and len(datasets.get("vaswani").topics()) == 93
    assert (home / "vaswani" / "docs.txt").read_bytes() == (staged / "vaswani" / "docs.txt").read_bytes()
    assert listing(staged / "vaswani") == before


def test_any_ir_datasets_id_is_accepted_with_default_policies():
    ds = datasets.get("cranfield")
    assert ds.corpus == "cranfield" and not ds.drop_self_matches


def test_unknown_dataset_suggests():
    with pytest.raises(UnknownNameError, match="unknown dataset 'beir/scifakt/test'.*Did you mean 'beir/scifact/test'"):
        datasets.get("beir/scifakt/test")
