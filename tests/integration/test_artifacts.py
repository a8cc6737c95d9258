"""Every index kind irgrid builds is a PyTerrier artifact: `pt.Artifact.load(path)` opens it through the entry
points irgrid and pyterrier-pisa / pyterrier-dr declare, its transformers give the runs irgrid's own pipelines
give, and `to_url` -> `pt.Artifact.from_url` round-trips it through a local `file:` URL.

Sparse kinds on Vaswani (the cache's indexes, built with the entries' recipes); the neural kinds (a learned-sparse
impact index, a FlexIndex, the late-interaction index) on a 40-document SciFact slice with tiny random-weight
models of the entries' architectures (`IRGRID_TINY_MODELS=1`), so only the wiring, not effectiveness, is real."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pyterrier as pt
import pytest

from irgrid.core.artifacts import INDEX_MARKER, LAZY_MARKER, to_url
from irgrid.core.retrievers import get
from irgrid.data.datasets import get as get_dataset
from irgrid.runner.cell import build_pipeline

pytestmark = pytest.mark.slow  # a JVM, Lucene and PISA indexes of Vaswani, three tiny-model indexes


@pytest.fixture(autouse=True)
def _pyterrier_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTERRIER_HOME", str(tmp_path / "pyterrier-home"))  # from_url unpacks packages here


def same_run(a: pd.DataFrame, b: pd.DataFrame, exact: bool = True) -> None:
    """Row for row: the same (qid, docno) pairs with the same scores (and ranks when `exact`). Both in trec_eval's
    tie order first (irgrid hands runs on in that order; a backend's own transformer keeps its engine's order of
    equal scores)."""
    from irgrid.core.ties import canonical_order

    key = ["qid", "docno"]
    a, b = canonical_order(a), canonical_order(b)
    a = a[key + ["score", "rank"]].astype({"qid": str, "docno": str}).sort_values(key).reset_index(drop=True)
    b = b[key + ["score", "rank"]].astype({"qid": str, "docno": str}).sort_values(key).reset_index(drop=True)
    assert len(a) and a[key].equals(b[key])
    if exact:
        assert a["score"].tolist() == b["score"].tolist() and a["rank"].tolist() == b["rank"].tolist()
    else:  # another exact-search implementation over the same vectors: float summation order differs
        assert (a["score"] - b["score"]).abs().max() < 1e-4


def round_trip(artifact, tmp_path, name: str):
    url = to_url(artifact, f"file://{tmp_path}/shared/{name}.tar.lz4")
    meta = json.loads((tmp_path / "shared" / f"{name}.tar.lz4.json").read_text())
    assert meta["expected_sha256"] and meta["total_size"] > 0
    back = pt.Artifact.from_url(url)
    assert type(back) is type(artifact) and back.path != artifact.path
    return back


def test_the_store_and_the_artifacts_agree_on_the_marker():
    from irgrid.store import LAZY, MARKER

    assert INDEX_MARKER == MARKER and LAZY_MARKER == LAZY


SPARSE = {  # entry -> (backend folder, artifact class)
    "bm25": ("lucene", "LuceneIndex"),
    "bm25-pisa": ("pisa", "PisaIndex"),
    "bm25-lucene-pisa": ("lucene-pisa", "LucenePisaIndex"),
}


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_sparse_index_is_an_artifact(name, shared_store, tmp_path):
    entry, ds = get(name), get_dataset("vaswani")
    topics = ds.topics().head(8)
    ours = build_pipeline(entry, ds, shared_store).transform(topics)
    folder = shared_store.indexes.dir(entry.index, ds)
    backend, cls = SPARSE[name]
    meta = json.loads((folder / backend / "pt_meta.json").read_text())  # written at build
    assert (meta["type"], meta["format"]) == pt.inspect.artifact_type_format(pt.Artifact.load(str(folder / backend)))
    for path in (folder, folder / backend):  # the cache's index folder, or its backend folder
        index = pt.Artifact.load(str(path))
        assert type(index).__name__ == cls and index.path == folder / backend
        same_run(index.bm25(k1=0.9, b=0.4, num_results=1000).transform(topics), ours)
    back = round_trip(index, tmp_path, name)
    same_run(back.bm25(k1=0.9, b=0.4, num_results=1000).transform(topics), ours)
    # `file:` naming a folder loads it in place
    assert pt.Artifact.from_url(f"file://{folder}").path == folder / backend


def test_a_folder_built_before_pt_meta_json_still_loads(shared_store, tmp_path):
    """Indexes built before irgrid wrote pt_meta.json keep their cache keys and are reused: PyTerrier's metadata
    adapter hook recognises them by the cache's marker beside them."""
    entry, ds = get("bm25"), get_dataset("vaswani")
    build_pipeline(entry, ds, shared_store)
    folder = shared_store.indexes.dir(entry.index, ds)
    old = tmp_path / "lucene-flat-old"
    shutil.copytree(folder, old)
    (old / "lucene" / "pt_meta.json").unlink()  # as built then: neither the file nor its line in the manifest
    marker = json.loads((old / INDEX_MARKER).read_text())
    del marker["files"]["lucene/pt_meta.json"]
    (old / INDEX_MARKER).write_text(json.dumps(marker))
    index = pt.Artifact.load(str(old / "lucene"))
    assert type(index).__name__ == "LuceneIndex"
    topics = ds.topics().head(3)
    same_run(index.retriever().transform(topics), pt.Artifact.load(str(folder)).retriever().transform(topics))
    (old / INDEX_MARKER).unlink()  # outside irgrid's cache nothing says what it is: PyTerrier's own error
    with pytest.raises(ValueError, match="No implementation found"):
        pt.Artifact.load(str(old / "lucene"))


def test_a_damaged_package_is_refused(shared_store, tmp_path):
    entry, ds = get("bm25-pisa"), get_dataset("vaswani")
    build_pipeline(entry, ds, shared_store)
    index = pt.Artifact.load(str(shared_store.indexes.dir(entry.index, ds)))
    url = to_url(index, f"file://{tmp_path}/p.tar.lz4")
    with pytest.raises(FileExistsError, match="choose a new name"):
        to_url(index, url)
    with pytest.raises(ValueError, match="only file: URLs"):
        to_url(index, "https://example.org/p.tar.lz4")
    with (tmp_path / "p.tar.lz4").open("r+b") as f:
        f.seek(100)
        f.write(b"\0garbage\0")
    with pytest.raises(ValueError, match="sha256"):
        pt.Artifact.from_url(url)


# -- neural kinds: tiny models on a SciFact slice -----------------------------------------------------------------
NEURAL = {  # entry (options) -> backend folder, artifact class, the artifact's retriever given the entry's options
    "unicoil": ("pisa", "PisaIndex", {}),
    "contriever": ("flex", "FlexIndex", {}),
    "colbertv2": ("late", "LateInteractionIndex", {}),
}


@pytest.fixture(scope="module")
def tiny_slice(tmp_path_factory):
    from support import write_scifact_slice

    from irgrid.data import byo
    from irgrid.store import Store

    root = tmp_path_factory.mktemp("artifact-slice")
    files = write_scifact_slice(root, n_queries=5, n_docs=40)
    ds = byo.build({"name": "artifact-slice-40", **files}, root, "test")
    mp = pytest.MonkeyPatch()
    mp.setenv("IRGRID_TINY_MODELS", "1")
    yield ds, Store(root / "cache")
    mp.undo()


def _artifact_retriever(index, name: str, entry):
    o = entry.options
    if name == "unicoil":  # PISA's stopword list applies to text queries only: the default PisaIndex is irgrid's
        return index.quantized(num_results=o["num_results"])
    if name == "contriever":
        return index.np_retriever(num_results=o["num_results"])
    return index.retriever(num_results=o["num_results"], ncells=o["ncells"])


@pytest.mark.parametrize("name", sorted(NEURAL))
def test_neural_index_is_an_artifact(name, tiny_slice, tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    ds, store = tiny_slice
    backend, cls, options = NEURAL[name]
    entry = get(name).with_options(**options) if options else get(name)
    pipeline = build_pipeline(entry, ds, store, check_queries=False)
    topics = ds.topics()
    ours = pipeline.transform(topics)
    folder = store.indexes.dir(entry.index, ds)
    index = pt.Artifact.load(str(folder))
    assert type(index).__name__ == cls and index.path == folder / backend
    assert type(pt.Artifact.load(str(folder / backend))) is type(index)
    encoder = pipeline.transformer[0]  # inside the FirstStage role: the entry's query encoder, then the artifact's retriever
    exact = name != "contriever"
    same_run((encoder >> _artifact_retriever(index, name, entry)).transform(topics), ours, exact)
    back = round_trip(index, tmp_path, name)
    same_run((encoder >> _artifact_retriever(back, name, entry)).transform(topics), ours, exact)
