"""Issue 40 item 9: a collection whose documents are all empty is refused naming the cause (PISA's builder aborted
on it); a 5 MB document reads from TSV as from JSON lines (csv's 131,072-character field limit refused it); a
query left without any result is warned about in `irgrid run`'s output (results.md, manifest.json).

Cheap: bring-your-own collections of a few dozen short documents, BM25 by PISA."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from irgrid.runner.experiment import ExperimentError, from_dict

TEXTS = ["flood warning issued for the river valley", "bridge collapse after the earthquake",
         "wildfire smoke over the city", "storm surge floods the harbour"] * 5


def _collection(root, name, docs_file, topics):
    (root / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (root / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in topics))
    return {"name": name, "docs": str(root / docs_file), "topics": str(root / "topics.tsv"),
            "qrels": str(root / "qrels.txt")}


def test_all_empty_documents_are_refused_naming_the_cause(tmp_path):
    (tmp_path / "docs.tsv").write_text("".join(f"d{i}\t \n" for i in range(30)))
    col = _collection(tmp_path, "blank", "docs.tsv", [("q1", "flood"), ("q2", "bridge")])
    with pytest.raises(ExperimentError, match=r"docs.tsv: all 30 documents are empty \(no title or text in any of "
                                              r"them\), so there is nothing to index; give each document its text"):
        from_dict({"collections": [col], "datasets": ["blank"], "retrievers": ["bm25-pisa"], "measures": ["AP"]})
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": ""}) + "\n"
                                                 for i in range(30)))
    col = _collection(tmp_path, "blank2", "docs.jsonl", [("q1", "flood"), ("q2", "bridge")])
    with pytest.raises(ExperimentError, match=r"docs.jsonl: all 30 documents are empty"):
        from_dict({"collections": [col], "datasets": ["blank2"], "retrievers": ["bm25-pisa"], "measures": ["AP"]})


def test_a_5mb_document_reads_from_tsv_as_from_jsonl(tmp_path, shared_store, monkeypatch):
    import irgrid

    monkeypatch.setenv("IRGRID_CACHE", str(shared_store.root))
    big = " ".join(["volcano"] + ["ash"] * 1_300_000)  # 5.2 MB in one field
    texts = [big, *TEXTS]
    (tmp_path / "docs.tsv").write_text("".join(f"d{i}\t{t}\n" for i, t in enumerate(texts)))
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n"
                                                 for i, t in enumerate(texts)))
    topics = [("q1", "volcano ash"), ("q2", "bridge earthquake")]
    runs = {}
    for fmt in ("tsv", "jsonl"):
        col = _collection(tmp_path, f"big-{fmt}", f"docs.{fmt}", topics)
        ds = irgrid.dataset(col)
        assert len(max((d.text for d in ds.irds().docs_iter()), key=len)) == len(big)
        runs[fmt] = irgrid.retriever("bm25-pisa").pipeline(ds).search("volcano ash")[["docno", "score"]]
    assert runs["tsv"].iloc[0]["docno"] == "d0"
    pd.testing.assert_frame_equal(runs["tsv"].reset_index(drop=True), runs["jsonl"].reset_index(drop=True))


def test_queries_without_results_are_warned_about_in_the_runs_output(tmp_path, shared_store, monkeypatch):
    from irgrid.cli import main

    monkeypatch.setenv("IRGRID_CACHE", str(shared_store.root))
    (tmp_path / "docs.tsv").write_text("".join(f"d{i}\t{t}\n" for i, t in enumerate(TEXTS)))
    col = _collection(tmp_path, "mixed", "docs.tsv", [("q1", "flood warning"), ("q2", "שיטפון גשר")])
    exp = tmp_path / "exp.yaml"
    exp.write_text(json.dumps({"collections": [col], "datasets": ["mixed"], "retrievers": ["bm25-pisa"],
                               "measures": ["AP"], "latency_sample": 0}))
    assert main(["run", str(exp), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "results.md").read_text()
    assert "**Warning: queries without any result**" in md and "mixed: bm25-pisa 1 of 2 (q2)" in md
    run = json.loads((tmp_path / "out" / "manifest.json").read_text())["retrievers"]["bm25-pisa"]["runs"]["mixed"]
    assert run["queries_without_results"] == 1 and run["empty_queries"] == ["q2"]
