"""DisastQA loaders and the derived collection on the staged release: counts, alignment, documented quirks."""

from __future__ import annotations

import pytest

from irgrid.data import disastqa as data
from irgrid.data import disastqa_ir as collection


def test_mcq_counts_and_quirks():
    df = data.mcq()
    assert len(df) == 2000 and df["qid"].is_unique
    assert df["question"].nunique() == 1998  # two questions occur twice
    assert df["answer"].value_counts().to_dict() == {"A": 500, "B": 500, "C": 500, "D": 500}
    assert all(len(o) == 4 and not o[0].startswith("A.") for o in df["options"])  # letters stripped once
    assert (df["mix"] == df["golden"]).sum() == 1417  # the Mix file: one passage, the golden one for 1,417
    differs = df[df["mix"] != df["golden"]]
    assert not any(g in m for g, m in zip(differs["golden"], differs["mix"]))
    first = df.iloc[0]
    assert first["question"].startswith("What is one important precaution to follow when handling the Proflow")
    assert first["answer"] == "B" and first["original_query"] == "How to raise awareness about POPs?"


def test_oe_alignment_and_key_points():
    df = data.oe()
    assert len(df) == 1000 and df["question"].is_unique
    assert df["key_points"].map(len).between(1, 14).all()  # key points exist for all 1,000 items
    assert df["difficulty"].value_counts().to_dict() == {"medium": 684, "hard": 181, "easy": 109,
                                                          "extremely_complex": 26}
    bins = {"easy": (1, 2), "medium": (3, 5), "hard": (6, 7), "extremely_complex": (8, 14)}
    for level, (lo, hi) in bins.items():  # difficulty bins the key-point count
        assert df[df.difficulty == level]["key_points"].map(len).between(lo, hi).all()
    # the Golden file is in another order: aligned by question, every golden passage is the item's own
    raw_golden = data._read("oe", "golden")
    by_q = {data._oe_content(g)["question"]: g["passage"] for g in raw_golden}
    assert sum(data._oe_content(g)["question"] == q for g, q in zip(raw_golden, df["question"])) == 3
    assert all(by_q[q] == p for q, p in zip(df["question"], df["golden"]))
    assert (df["mix"] == df["golden"]).sum() == 700
    assert not df["reference"].str.startswith("Corrected Answer").any()
    # the text as released (what the authors' ROUGE-L / BLEU-4 compared against) keeps the one label
    labelled = df[df["reference_released"] != df["reference"]]
    assert len(labelled) == 1 and labelled["reference_released"].str.startswith("Corrected Answer: ").all()
    first = df.iloc[0]
    assert first["question"].startswith("In what ways can improving emergency medical response times")
    assert first["difficulty"] == "medium"


def test_stratified_sample_is_fixed_and_proportional():
    oe = data.oe()
    a = data.stratified_sample(oe, 20, 42, "difficulty")
    b = data.stratified_sample(oe, 20, 42, "difficulty")
    assert list(a["qid"]) == list(b["qid"]) and len(a) == 20
    # one per stratum, then 16 * (size - 1) / 996 = 10.97, 2.89, 1.73, 0.40 by largest remainders -> 11+1, 3+1, 2+1, 1
    assert a["difficulty"].value_counts().to_dict() == {"medium": 12, "hard": 4, "easy": 3, "extremely_complex": 1}
    assert list(data.stratified_sample(oe, 20, 7, "difficulty")["qid"]) != list(a["qid"])
    assert len(data.stratified_sample(oe, None, 0, None)) == 1000
    with pytest.raises(data.DisastQAError):
        data.stratified_sample(oe, 0, 0, None)


def test_derived_collection_through_the_catalog():
    from irgrid.data.datasets import get

    ds = get("disastqa/derived/oe")
    assert ds.corpus == "disastqa/derived" and "DERIVED" in ds.notes
    assert ds.docs_count() == 3675 == len(collection.passages())
    topics, qrels = ds.topics(), ds.qrels()
    assert len(topics) == 1000 and len(qrels) == 1000 and set(qrels["label"]) == {1}
    oe = data.oe()
    assert qrels.set_index("qid").loc["oe-0000", "docno"] == collection.docno(oe.iloc[0]["golden"])
    docs = list(ds.docs())
    assert len(docs) == 3675 and docs[0]["docno"].startswith("dq-")
    from irgrid.qa.grid import subset

    sub = subset(["mcq-0000", "oe-0000"], distractors=10, seed=1)
    assert sub.docs_count() == 12 and len(sub.topics()) == 2  # 2 golden passages (mix = golden here) + 10
    assert subset(["oe-0000", "mcq-0000"], 10, 1) is sub  # order-free, registered once
    assert get("disastir").name == "disastir"
