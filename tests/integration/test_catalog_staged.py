"""The paper catalog against ir_datasets' own metadata and what is staged: BEIR topics/qrels, MS MARCO / TREC-DL,
InstructIR, FollowIR, Core17."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from support import PAPER_DATASETS, irds_count, irds_metadata

from irgrid.data import datasets
from irgrid.data.datasets import BEIR_PAPER, CQADUPSTACK_FORUMS


@pytest.fixture(scope="module")
def topics_qrels(shared_path) -> Path:
    """Anserini's topics and qrels staged under the shared folder (a skip naming the folder when absent)."""
    return shared_path("datasets/topics-qrels")


@pytest.fixture(scope="module")
def metadata() -> dict:
    return irds_metadata()


def _staged_topics(folder: Path, name: str) -> list[str]:
    with gzip.open(folder / "topics" / f"topics.beir-v1.0.0-{name}.test.tsv.gz", "rt") as f:
        return [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row]


def _staged_qrels(folder: Path, name: str) -> list[list[str]]:
    lines = (folder / "qrels" / f"qrels.beir-v1.0.0-{name}.test.txt").read_text().splitlines()
    return [line.split() for line in lines if line.strip()]


def test_beir_counts_match_staged_topics_and_qrels(metadata, topics_qrels):
    """All 14 BEIR sets (CQADupStack's 12 forums each): the staged Anserini topics and qrels."""
    for column, members in BEIR_PAPER.items():
        for name in members:
            ds = datasets.get(name)
            staged = column if column != "cqadupstack" else "cqadupstack-" + name.rsplit("/", 1)[1]
            topics, qrels = _staged_topics(topics_qrels, staged), _staged_qrels(topics_qrels, staged)
            assert len(topics) == len(set(topics)) == irds_count(metadata, ds.irds_id, "queries"), name
            if ds.counts.queries is not None:
                assert len(topics) == ds.counts.queries, name
            assert {q[0] for q in qrels} == set(topics), name  # every query judged
            expected = irds_count(metadata, ds.irds_id, "qrels")
            if column == "webis-touche2020":  # Anserini keeps the 932 positive judgments of v2's 2,214
                labels = metadata[ds.irds_id]["qrels"]["fields"]["relevance"]["counts_by_value"]
                expected = labels["1"] + labels["2"]
            elif column == "trec-covid":  # Anserini drops v1's two judgments labelled -1
                expected -= metadata[ds.irds_id]["qrels"]["fields"]["relevance"]["counts_by_value"]["-1"]
            assert len(qrels) == expected, name


def test_msmarco_and_trec_dl_staged_counts():
    for name, queries, qrels in (("msmarco-passage/dev/small", 6_980, 7_437),
                                 ("msmarco-passage/trec-dl-2019/judged", 43, 9_260),
                                 ("msmarco-passage/trec-dl-2020/judged", 54, 11_386)):
        ds = datasets.get(name)
        topics, judged = ds.topics(), ds.qrels()
        assert len(judged) == qrels, name
        assert topics["qid"].nunique() == len(topics) == queries == ds.counts.queries, name
        assert set(judged["qid"]) >= set(topics["qid"]), name


def test_instructir_through_ir_datasets_and_pyterrier():
    import ir_datasets
    import pyterrier as pt

    ds = datasets.get("instructir")
    topics, qrels = ds.topics(), ds.qrels()
    assert len(topics) == 9_906 == ds.counts.queries and len(qrels) == 9_906 == ds.counts.qrels
    assert topics["qid"].map(lambda q: q.rsplit("_", 1)[0]).nunique() == 1_267  # base MS MARCO queries
    first = topics.iloc[0]
    assert first["qid"] == "1078446_1" and first["query"].startswith("I am an interior")  # '<instr> [SEP] <query>'
    assert first["query"].endswith(" [SEP] wine cabinets definition")
    assert set(qrels["qid"]) == set(topics["qid"])
    assert "instructir" in ir_datasets.registry  # registered: the same interface as any other dataset
    assert len(pt.get_dataset("irds:instructir").get_qrels()) == 9_906
    with pytest.raises(datasets.DatasetError, match="InstructIR corpus is not staged.*corpus.jsonl"):
        next(ds.docs())


def test_followir_is_declared_but_not_staged():
    ds = datasets.get("followir/core17")
    with pytest.raises(datasets.DatasetError, match="FollowIR's core17 split is not staged.*queries.jsonl"):
        ds.topics()
    with pytest.raises(datasets.DatasetError, match="not staged.*corpus.jsonl"):
        next(ds.docs())


def test_core17_staged_qrels_match_ir_datasets(metadata, topics_qrels):
    """FollowIR's Core17 is built on TREC Core 2017 (ir_datasets: nyt/trec-core-2017), whose qrels are staged."""
    lines = [line.split() for line in (topics_qrels / "qrels" / "qrels.core17.txt").read_text().splitlines() if line]
    assert len(lines) == irds_count(metadata, "nyt/trec-core-2017", "qrels") == 30_030
    topics = {line[0] for line in lines}
    assert len(topics) == irds_count(metadata, "nyt/trec-core-2017", "queries") == 50
    assert datasets.get("followir/core17").counts.queries <= len(topics)


def test_counts_match_ir_datasets_metadata(metadata):
    checked = 0
    for name in PAPER_DATASETS:
        ds = datasets.get(name)
        if ds.group in ("instructir", "followir"):
            continue  # not in ir_datasets
        assert ds.counts.queries is not None or ds.name.startswith("beir/cqadupstack/"), name
        if ds.counts.queries is not None:
            assert irds_count(metadata, ds.irds_id, "queries") == ds.counts.queries, name
            assert irds_count(metadata, ds.corpus_dataset().irds_id, "docs") == ds.counts.docs, name
            checked += 1
    assert checked == 3 + 13 + 2
    forums = [f"beir/cqadupstack/{f}" for f in CQADUPSTACK_FORUMS]  # Table A.2: totals over the 12 forums
    assert sum(irds_count(metadata, f, "queries") for f in forums) == 13_145
    assert sum(irds_count(metadata, f, "docs") for f in forums) == 457_199
