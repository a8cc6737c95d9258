"""`LuceneIndex.index`: Anserini's IndexCollection in a Java process fed through named pipes by Python writer
threads. The index must not depend on the thread count, one thread must keep the input order, and any failure
(bad documents, a dying indexer) must raise one clear error and leave neither an index nor a live process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from irgrid.data.datasets import get as get_dataset
from irgrid.sparse import lucene


@pytest.fixture(scope="module")
def vaswani():
    dataset = get_dataset("vaswani")
    return list(dataset.docs()), dataset.topics().head(30)


def _searcher(path: Path):
    return lucene.LuceneBM25(path, k1=0.9, b=0.4, num_results=10, threads=1).searcher()  # pyserini's LuceneSearcher


def test_one_thread_and_all_cores_build_the_same_index(tmp_path, vaswani):
    docs, topics = vaswani
    runs = {}
    for threads in (1, 2):
        index = lucene.LuceneIndex(tmp_path / f"t{threads}" / "lucene")
        index.index(iter(docs), threads=threads, docs_count=len(docs))
        searcher = _searcher(index.path)
        assert searcher.num_docs == len(docs) == 11429
        if threads == 1:  # one pipe, one Java thread: Lucene's docids follow the input order
            assert [searcher.doc(i).docid() for i in (0, 1, len(docs) - 1)] == [
                docs[0]["docno"], docs[1]["docno"], docs[-1]["docno"]]
        runs[threads] = index.bm25(num_results=50).transform(topics)
        assert not list(index.path.parent.glob("jsonl.*"))  # the pipes' folder is gone
    one, many = runs[1], runs[2]
    assert len(one) == len(many) == 50 * len(topics)
    assert one[["qid", "docno", "rank"]].values.tolist() == many[["qid", "docno", "rank"]].values.tolist()
    assert (one["score"] - many["score"]).abs().max() == 0.0


def _stray_indexers(path: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if "IndexCollection" in line and str(path) in line]


def test_a_failing_document_stream_leaves_nothing(tmp_path, vaswani):
    docs, _ = vaswani

    def stream():
        yield from docs[:2500]
        raise OSError("disk read failed at document 2500")

    index = lucene.LuceneIndex(tmp_path / "lucene")
    with pytest.raises(OSError, match="document 2500"):
        index.index(stream(), threads=2)
    assert not index.path.exists() and not list(tmp_path.glob("jsonl.*"))
    assert not _stray_indexers(index.path)


def test_a_document_without_text_is_named(tmp_path, vaswani):
    docs, _ = vaswani
    bad = docs[:1200] + [{"docno": "x1", "body": "no text field"}] + docs[1200:1300]
    index = lucene.LuceneIndex(tmp_path / "lucene")
    with pytest.raises(ValueError, match=r"needs string 'docno' and 'text'.*'body': 'str'"):
        index.index(iter(bad), threads=2)
    assert not index.path.exists()


def test_no_documents_is_an_error_before_java_starts(tmp_path):
    index = lucene.LuceneIndex(tmp_path / "lucene")
    with pytest.raises(ValueError, match="no documents to index"):
        index.index(iter([]))
    assert not index.path.exists()


def test_an_indexer_that_dies_is_reported_with_its_log(tmp_path, vaswani):
    docs, _ = vaswani
    index = lucene.LuceneIndex(tmp_path / "lucene")
    with pytest.raises(RuntimeError, match=r"IndexCollection failed \(exit \d+.*\); its log ends:\n(.|\n)*memoryBuffer"):
        index.index(iter(docs[:100]), threads=2, memory_buffer_mb="lots")  # type: ignore[arg-type]
    assert not index.path.exists() and not _stray_indexers(index.path)
