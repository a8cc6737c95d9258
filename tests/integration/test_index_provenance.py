"""Provenance of artifacts (issue 41 item 8): manifest.json names the index folder each run used (corpus, recipe,
cache key, path), the folders the cache holds; and `pt.Artifact.load` on such a cache folder opens a sparse index
without importing torch, giving the runs irgrid gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from irgrid import grid
from irgrid.runner.experiment import from_dict

GRID = {
    "name": "provenance",
    "datasets": [{"name": "vaswani", "queries": 8, "seed": 1}],
    "retrievers": ["bm25-pisa", {"name": "bm25-pisa", "as": "k12", "options": {"k1": 1.2}},
                   {"as": "cut", "pipeline": "bm25-pisa % 10"}],
    "measures": ["AP"],
    "latency_sample": 0,
}


@pytest.fixture(scope="module")
def provenance_grid(tmp_path_factory):
    from irgrid.store import Store

    root = tmp_path_factory.mktemp("provenance")
    store = Store(root / "cache")
    spec = from_dict(GRID)
    grid.run(spec, out=root / "out", store=store, fail_fast=True)
    return spec, store, root / "out"


def test_the_manifest_names_the_index_folder_each_run_used(provenance_grid):
    from irgrid.store import MARKER

    spec, store, out = provenance_grid
    ds = spec.datasets[0]
    entries = json.loads((out / "manifest.json").read_text())["retrievers"]
    entry = {r.name: r for r in spec.retrievers}["bm25-pisa"]
    folder = store.indexes.dir(entry.index, ds)
    assert folder.is_dir() and sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # the one index
    marker = json.loads((folder / MARKER).read_text())
    recorded = entries["bm25-pisa"]["runs"][ds.name]["indexes"]
    assert recorded == [{"entry": "bm25-pisa", "role": "first", "recipe": entry.index.name,
                         "recipe_key": entry.index.key(), "corpus": "vaswani", "key": store.indexes.key(entry.index, ds),
                         "path": str(folder), "in_cache": True}]
    assert folder.name == f"{recorded[0]['recipe']}-{recorded[0]['key']}" and folder.parent.parent == store.root / "indexes"
    assert marker["corpus"] == recorded[0]["corpus"] and marker["recipe"] == entry.index.config()
    # k1 is a query-time option: the variant reads the same folder; the expression lists its part's
    assert entries["k12"]["runs"][ds.name]["indexes"] == [{**recorded[0], "entry": "k12"}]
    assert entries["cut"]["runs"][ds.name]["indexes"] == recorded
    # the cache records that folder's build once, under the same path
    built = [b for b in store.builds() if b["kind"] == "index"]
    assert [store.root / b["artifact"] for b in built] == [folder]


def test_index_provenance_of_a_cascade_names_its_rerankers_index_and_not_a_python_pipeline(provenance_grid):
    from irgrid.runner.expressions import expression
    from irgrid.runner.outputs import index_provenance
    from irgrid.runner.python_pipeline import extra_pipeline

    spec, store, _ = provenance_grid
    ds = spec.datasets[0]
    cascade = expression("bm25-pisa % 10 >> all-minilm-l6-v2", "casc")
    rows = index_provenance(cascade, ds, store)
    assert [(r["entry"], r["role"], r["in_cache"]) for r in rows] == [("bm25-pisa", "first", True),
                                                                     ("all-minilm-l6-v2", "rerank", False)]
    assert rows[1]["path"] == str(store.indexes.dir(cascade.parts["all-minilm-l6-v2"].index, ds))
    import pyterrier as pt

    assert index_provenance(extra_pipeline("mine", pt.Transformer.identity(), "mine-v1"), ds, store) is None


PROBE = """
import json, sys
import pyterrier as pt
import pyterrier._artifact as art

asked = []
adapter = art._metadata_adapter
art._metadata_adapter = lambda path: asked.append(path) or adapter(path)
index = pt.Artifact.load(sys.argv[1])
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "irgrid")))
import pandas as pd
topics = pd.read_json(sys.argv[2], dtype={"qid": str})
res = index.bm25(k1=0.9, b=0.4, num_results=1000).transform(topics)
print(json.dumps({"class": type(index).__name__, "path": str(index.path), "asked": asked, "loaded": loaded,
                  "torch_after_retrieval": "torch" in sys.modules,
                  "run": res[["qid", "docno", "score"]].astype({"qid": str, "docno": str}).values.tolist()}))
"""


def test_loading_a_sparse_cache_folder_imports_only_its_backend_class(provenance_grid, tmp_path):
    """`pt.Artifact.load(<cache folder>)` in a fresh interpreter: the folder's pt_meta.json sends PyTerrier straight to
    irgrid's entry point (no other package's metadata adapter is asked), which opens pyterrier-pisa's PisaIndex;
    torch is never imported, and the index gives the grid's run of bm25-pisa."""
    from irgrid.core.ties import canonical_order

    spec, store, _ = provenance_grid
    ds = spec.datasets[0]
    entry = {r.name: r for r in spec.retrievers}["bm25-pisa"]
    folder = store.indexes.dir(entry.index, ds)
    assert json.loads((folder / "pt_meta.json").read_text())["type"] == "irgrid_index"
    topics = ds.topics()
    topics.to_json(tmp_path / "topics.json")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this checkout's irgrid
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(tmp_path / "topics.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["class"] == "PisaIndex" and got["path"] == str(folder / "pisa")
    assert got["asked"] == []  # no metadata adapter ran: the folder says what it is
    assert "torch" not in got["loaded"] and not got["torch_after_retrieval"]
    # of irgrid, only the artifact hooks and the manifest check they use (no registry, no runner, no models)
    assert {m for m in got["loaded"] if m.startswith("irgrid")} <= {
        "irgrid", "irgrid.core", "irgrid.core.artifacts", "irgrid.util", "irgrid.util.errors", "irgrid.util.settings",
        "irgrid.util.hashing", "irgrid.util.manifest"}
    stored, _ = store.runs.load(entry.for_dataset(ds), ds)
    run = canonical_order(pd.DataFrame(got["run"], columns=["qid", "docno", "score"]))
    ours = canonical_order(stored)[["qid", "docno", "score"]].astype({"qid": str, "docno": str})
    assert len(run) == len(ours) and run["docno"].tolist() == ours["docno"].tolist()
    assert run["score"].tolist() == pytest.approx(ours["score"].tolist(), rel=1e-6)
