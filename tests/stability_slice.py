"""A SciFact slice as a bring-your-own collection (the stability audit's test data): the first queries of BEIR
SciFact (test), their relevant documents and the first corpus documents, written as local files with an
experiment that runs all-MiniLM-L6-v2 and a BM25 >> MiniLM cascade over them."""

from __future__ import annotations

import json
from pathlib import Path


def write_slice(folder: Path, n_queries: int = 30, n_docs: int = 200) -> Path:
    """Write docs.jsonl, topics.tsv, qrels.txt and stability.yaml into `folder`; returns the experiment file."""
    from dense_helpers import scifact_slice

    from irgrid.data.datasets import get

    folder.mkdir(parents=True, exist_ok=True)
    _, topics, qrels = scifact_slice(n_queries=n_queries, n_docs=0)
    wanted = set(qrels["docno"])
    docs = []
    irds = get("beir/scifact").irds()
    for d in irds.docs_iter():
        if d.doc_id in wanted or len(docs) < n_docs:
            docs.append({"_id": d.doc_id, "title": d.title, "text": d.text})
        if len(docs) >= n_docs and wanted <= {x["_id"] for x in docs}:
            break
    (folder / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in zip(topics["qid"], topics["query"])))
    (folder / "qrels.txt").write_text("".join(f"{r.qid} 0 {r.docno} {int(r.label)}\n" for r in qrels.itertuples()))
    experiment = folder / "stability.yaml"
    experiment.write_text(
        "name: scifact-slice-stability\n"
        "collections:\n"
        "  - {name: scifact-slice, docs: docs.jsonl, topics: topics.tsv, qrels: qrels.txt}\n"
        "datasets: [scifact-slice]\n"
        "retrievers:\n"
        "  - bm25\n"
        "  - all-minilm-l6-v2\n"
        "  - {as: bm25-minilm, pipeline: \"bm25 % 100 >> all-minilm-l6-v2\"}\n"
        "measures: [nDCG@10, R@100]\n")
    return experiment
