"""Learned-sparse and expansion entries end to end (index + retrieve + evaluate) on a real collection, with tiny
random-weight models of each checkpoint's real architecture (no real weights of these are reachable offline)."""

from __future__ import annotations

import json

import ir_measures
import pandas as pd
import pytest
from support import write_scifact_slice

from irgrid import grid
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import from_dict

ENTRIES = ["splade-v3", "unicoil", "sparta", "deepct", "doct5query", "query2doc", "hyde"]
# random tiny weights make every vocabulary entry non-zero: SPLADE runs with the paper profile's pruning (top 256),
# not the card's none; generations are kept short (CPU time, not wiring, grows with them)
OPTIONS = {"splade-v3": {"top_k": 256, "rounding": "round"}, "query2doc": {"max_new_tokens": 24},
           "hyde": {"max_new_tokens": 24}, "doct5query": {"max_length": 16}}


@pytest.fixture(scope="module")
def tiny_grid(tmp_path_factory):
    from irgrid.store import Store

    root = tmp_path_factory.mktemp("tiny-sparse")
    files = write_scifact_slice(root, n_queries=8, n_docs=60)
    mp = pytest.MonkeyPatch()
    mp.setenv("IRGRID_TINY_MODELS", "1")
    spec = from_dict({
        "collections": [{"name": "scifact-slice-60", **files}],
        "datasets": ["scifact-slice-60"],
        "retrievers": ["bm25-pisa", *({"name": n, "options": OPTIONS[n]} if n in OPTIONS else n for n in ENTRIES)],
        "measures": ["nDCG@10", "R@100"], "latency_sample": 2,
    }, source=str(root / "exp.yaml"))
    store = Store(root / "cache")
    results = grid.run(spec, out=root / "out", store=store, fail_fast=True).results
    yield results, root, store, spec
    mp.undo()


@pytest.mark.parametrize("name", ENTRIES)
def test_entry_runs_end_to_end(tiny_grid, name):
    results, root, _, _ = tiny_grid
    value = results.set_index(["system", "measure"])["value"]
    run = pd.read_csv(root / "out" / "runs" / "scifact-slice-60" / f"{name}.res.gz", sep=" ", header=None)
    # the reported values are those of the stored run against the slice's qrels, recomputed here with ir_measures
    qrels = list(ir_measures.read_trec_qrels(str(root / "data" / "qrels.txt")))
    stored = [ir_measures.ScoredDoc(str(q), str(d), float(s)) for q, d, s in zip(run[0], run[2], run[4])]
    direct = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.R @ 100], qrels, stored)
    assert value[name, "nDCG@10"] == pytest.approx(direct[ir_measures.nDCG @ 10], abs=1e-9)
    assert value[name, "R@100"] == pytest.approx(direct[ir_measures.R @ 100], abs=1e-9)
    assert run[0].nunique() == 8  # every query got a ranking
    manifest = json.loads((root / "out" / "manifest.json").read_text())
    sources = {m["source"] for m in manifest["retrievers"][name]["models"].values()}
    assert sources == {"tiny"}  # never mistaken for real checkpoints


def test_expansions_keep_the_original_query_and_share_indexes(tiny_grid):
    import irgrid
    from irgrid.store import Store

    _, root, store, spec = tiny_grid
    dataset = spec.datasets[0]
    q2d = irgrid.retriever("query2doc")
    assert q2d.index == irgrid.retriever("bm25").index  # query2doc searches the very bm25 index
    assert store.indexes.dir(q2d.index, dataset) == store.indexes.dir(irgrid.retriever("bm25").index, dataset)
    assert irgrid.retriever("hyde").index == irgrid.retriever("contriever").index
    pipeline = cell_mod.build_pipeline(q2d, dataset, store=Store(store.root))
    out = pipeline.search("vitamin D deficiency and bone density")
    assert (out["query_0"] == "vitamin D deficiency and bone density").all()
    assert out["query"].iloc[0].startswith("vitamin D deficiency and bone density " * 4)


def test_document_stages_are_cached_once(tiny_grid):
    _, _, store, _ = tiny_grid
    stages = sorted(p.name.split("-")[0] for p in (store.root / "stages").rglob("*.jsonl.gz"))
    assert stages == ["deepct", "doct5query", "sparta", "splade", "unicoil"]
    first = next((store.root / "stages").rglob("splade-v3-weights-*.jsonl.gz"))
    records = list(store.stages.read(first))
    assert len(records) == 60 and set(records[0]) == {"docno", "toks"}
    assert all(len(r["toks"]) <= 256 and all(isinstance(w, int) and w > 0 for w in r["toks"].values())
               for r in records)  # ×100, rounded, pruned to the top 256 terms (the test's options)
    assert max(len(r["toks"]) for r in records) == 256


def test_generator_and_encoder_are_options(tiny_grid):
    import irgrid

    hyde = irgrid.retriever("hyde").with_options(generator="HuggingFaceTB/SmolLM2-135M-Instruct",
                                                 encoder="all-minilm-l6-v2")
    assert hyde.models["generator"].id == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert hyde.index == irgrid.retriever("all-minilm-l6-v2").index and hyde.options["encoder"] == "all-minilm-l6-v2"
    assert hyde.key() != irgrid.retriever("hyde").key()
    with pytest.raises(ValueError, match="takes 'org/name"):
        irgrid.retriever("query2doc").with_options(generator="smollm")


def test_tiny_runs_are_flagged_in_reports(tiny_grid):
    _, root, _, _ = tiny_grid
    manifest = json.loads((root / "out" / "manifest.json").read_text())
    assert set(manifest["tiny_models"]) == set(ENTRIES)
    assert "TINY MODELS — not results" in (root / "out" / "results.md").read_text()


def test_dense_runs_record_how_documents_were_encoded(tiny_grid):
    _, _, store, _ = tiny_grid
    metas = [json.loads(p.read_text()) for p in (store.root / "runs").rglob("hyde-*.json")]
    assert metas and metas[0]["encoding"]["dtype"] == "fp32" and metas[0]["encoding"]["batch_size"] > 0
    assert metas[0]["single_query_ms"]["n"] == 2 and metas[0]["hardware"]["cpus"] >= 1
