"""docT5query on a collection with empty documents (issue 40, item 11): an empty document is expanded to nothing
(before: `cannot reshape tensor of 0 elements` after the whole generation), the collection checks warn about it,
and the generated expansions are kept as they are made, so a killed stage resumes from what was kept.

The tiny random-weight T5 of the doct5query entry (`IRGRID_TINY_MODELS=1`) on 12 SciFact abstracts, 3 of them
emptied; the documents' BM25 index is Lucene's (a JVM)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # a JVM for Lucene, a tiny T5 generating for 9 documents, twice, in two processes

EMPTY = 3  # documents emptied (title and text)
OPTIONS = {"max_length": 12, "batch_size": 2, "num_samples": 2}


@pytest.fixture
def collection(tmp_path, monkeypatch, caplog):
    """A 12-document collection whose first 3 documents have no text, checked at load."""
    from support import write_scifact_slice

    from irgrid.data import byo

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    files = write_scifact_slice(tmp_path, n_queries=3, n_docs=12)
    docs = tmp_path / files["docs"]
    lines = docs.read_text().splitlines()
    lines = [f"{line.split(chr(9))[0]}\t\t" if i < EMPTY else line for i, line in enumerate(lines)]
    docs.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="irgrid"):
        ds = byo.build({"name": "d2q-empty-12", **files}, tmp_path, "collections[0]")
    return ds, tmp_path, files, caplog.text


def _rows(db) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM gen").fetchone()[0]


def test_empty_documents_are_warned_about_and_expanded_to_nothing(collection, caplog):
    from irgrid.core.retrievers import get
    from irgrid.runner.cell import build_pipeline
    from irgrid.store import Store

    ds, root, _, warned = collection
    assert f"{EMPTY} of 12 documents in docs.tsv have no text" in warned  # the collection checks
    entry = get("doct5query").with_options(**OPTIONS)
    store = Store(root / "cache")
    with caplog.at_level(logging.WARNING, logger="irgrid"):
        run = build_pipeline(entry, ds, store, check_queries=False).transform(ds.topics())
    assert run["qid"].nunique() == 3
    assert f"{EMPTY} of 12 documents have no text" in caplog.text  # the indexing pass says it too
    stage = store.stages.path(entry.index.stage, ds)
    records = list(store.stages.read(stage))
    texts = {r["docno"]: r["text"] for r in records}
    empty = [d for d, t in texts.items() if not t.strip()]
    assert len(empty) == EMPTY and len(texts) == 12  # expanded to nothing, nothing dropped
    assert all(len(t.split()) > 0 for d, t in texts.items() if d not in empty)
    db = store.generations.db(entry.index.stage.models["generator"].id)
    assert _rows(db) == 12 - EMPTY  # every non-empty document's queries kept in the generations area


SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from irgrid.core.retrievers import get
    from irgrid.data import byo
    from irgrid.generation import doc2query
    from irgrid.runner.cell import build_pipeline
    from irgrid.store import Store

    calls = []
    real = doc2query.DocT5Query.queries

    def dying(self, texts):
        if len(calls) == {kill_after}:
            os.kill(os.getpid(), signal.SIGKILL)  # killed mid-stage, as by a scheduler or the OOM killer
        calls.append(len(texts))
        return real(self, texts)

    doc2query.DocT5Query.queries = dying
    ds = byo.build({{"name": "d2q-empty-12", **{files!r}}}, {root!r}, "collections[0]")
    build_pipeline(get("doct5query").with_options(**{options!r}), ds, Store({cache!r}), check_queries=False)
""")


def test_a_killed_stage_resumes_from_the_kept_expansions(collection):
    from irgrid.core.retrievers import get
    from irgrid.generation import doc2query
    from irgrid.runner.cell import build_pipeline
    from irgrid.store import Store

    ds, root, files, _ = collection
    cache = root / "cache"
    script = SCRIPT.format(tests=os.path.dirname(__file__) + "/..", kill_after=2, files=files, root=str(root),
                           options=OPTIONS, cache=str(cache))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "IRGRID_TINY_MODELS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    entry = get("doct5query").with_options(**OPTIONS)
    store = Store(cache)
    stage = store.stages.path(entry.index.stage, ds)
    assert store.file_problem(stage) is not None  # the stage itself was not published
    db = store.generations.db(entry.index.stage.models["generator"].id)
    assert _rows(db) == 2 * OPTIONS["batch_size"]  # the two finished batches were kept
    with sqlite3.connect(db) as conn:
        kept = {k: json.loads(o) for k, o in conn.execute("SELECT k, output FROM gen")}

    made = []
    real = doc2query.DocT5Query.queries

    def counting(self, texts):
        made.append(len(texts))
        return real(self, texts)

    doc2query.DocT5Query.queries = counting
    try:
        build_pipeline(entry, ds, store, check_queries=False)
    finally:
        doc2query.DocT5Query.queries = real
    assert sum(made) == 12 - EMPTY - 2 * OPTIONS["batch_size"]  # only what the killed pass had not kept
    texts = {r["docno"]: r["text"] for r in store.stages.read(stage)}
    resumed = sum(1 for t in texts.values() if any(" ".join(q) in t for q in kept.values()))
    assert resumed == 2 * OPTIONS["batch_size"]  # the kept expansions are in the published stage
