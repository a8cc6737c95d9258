"""Every dense and late-interaction entry, end to end (index -> retrieve -> evaluate), on a real staged collection:
a slice of BEIR SciFact test (the relevant documents of 10 queries plus the first corpus documents), with a tiny
random-weight model of each entry's real architecture (`IRGRID_TINY_MODELS=1`). The entry's own recipe, loader,
prompts, pooling, normalisation and search run; only the weights are random, so effectiveness is not asserted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from irgrid.core.retrievers import RETRIEVERS, get
from irgrid.dense.spec import ENCODERS

DENSE = sorted(r.name for r in RETRIEVERS if r.family in ("dense", "late-interaction"))
ISSUE_3 = {
    "dpr", "tas-b", "ance", "simcse", "retromae", "cocondenser", "contriever", "coco-dr-large", "simlm",
    "dragon-plus", "me5-large", "gte-large-v1.5", "bge-large-v1.5", "jina-embeddings-v3", "nomic-embed-v1.5",
    "gtr-large", "instructor-large", "llm2vec", "repllama", "gritlm", "qwen3-embedding-0.6b", "nv-embed-v2",
    "embeddinggemma", "kalm-embedding-v2.5", "colbertv2",
}


@pytest.fixture(scope="module")
def collection():
    from dense_helpers import scifact_slice

    return scifact_slice(n_queries=10, n_docs=60)


@pytest.fixture(autouse=True)
def _tiny(monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")


def test_all_25_entries_are_registered_with_family_architecture_and_checkpoint():
    assert ISSUE_3 <= set(DENSE)
    table = {
        "encoder-only": {"dpr", "tas-b", "ance", "simcse", "retromae", "cocondenser", "contriever", "coco-dr-large",
                         "simlm", "dragon-plus", "me5-large", "gte-large-v1.5", "bge-large-v1.5",
                         "jina-embeddings-v3", "nomic-embed-v1.5", "colbertv2"},
        "encoder-decoder": {"gtr-large", "instructor-large"},
        "decoder-only": {"llm2vec", "repllama", "gritlm", "qwen3-embedding-0.6b", "nv-embed-v2", "embeddinggemma",
                         "kalm-embedding-v2.5"},
    }
    for arch, names in table.items():
        for name in names:
            entry = RETRIEVERS.get(name)
            assert entry.architecture == arch, name
            assert entry.family == ("late-interaction" if name == "colbertv2" else "dense")
            assert entry.paper_name, name
            spec = ENCODERS.get(name)
            assert spec.citation and spec.query_model.arch, name
            if spec.query_model.revision is None:  # unpinned only when said so
                assert "unverified" in spec.notes, name
    assert ENCODERS.get("dpr").doc_model != ENCODERS.get("dpr").query_model
    assert ENCODERS.get("dragon-plus").doc_model != ENCODERS.get("dragon-plus").query_model


def test_tiny_mode_changes_every_cache_key(monkeypatch):
    entry = get("contriever")  # looked up in tiny-model mode: its checkpoints are stand-ins
    assert all(ref.stand_in for ref in entry.all_models().values())
    real = get("contriever", tiny=False)
    assert entry.key() != real.key() and entry.index.key() != real.index.key()
    assert get("contriever", tiny=True).key() == entry.key()


def test_a_key_is_a_function_of_the_entry_not_of_the_environment(monkeypatch):
    """The mode is read once, at lookup: the same object keeps its key whatever the variable says later, and a
    real reference resolved in tiny-model mode is an error, never tiny weights under a real key."""
    from irgrid.models.resolver import ModelUnavailableError, resolve

    tiny, real = get("contriever"), get("contriever", tiny=False)
    keys = {"tiny": (tiny.key(), tiny.index.key()), "real": (real.key(), real.index.key())}
    for value in ("0", "1", ""):
        monkeypatch.setenv("IRGRID_TINY_MODELS", value)
        assert (tiny.key(), tiny.index.key()) == keys["tiny"] and (real.key(), real.index.key()) == keys["real"]
    assert resolve(tiny.models["query"]).source == "tiny"
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    with pytest.raises(ModelUnavailableError, match="not marked as a tiny stand-in"):
        resolve(real.models["query"])


def test_cache_keys_are_pinned_in_both_modes():
    """Golden keys: a change to any of these invalidates every cached index and run of the entry (resumability
    depends on them), so it must be a visible diff here, made on purpose."""
    # the keys of 134274d, before the package had layers: the restructure kept them (util.hashing.cache_name)
    golden = {("contriever", False): ("181b4edec733", "d180e8a3cd2f"), ("contriever", True): ("c62f5d6d9737", "10f81af3f4c6")}
    for (name, tiny), keys in golden.items():
        entry = get(name, tiny=tiny)
        assert (entry.key(), entry.index.key()) == keys, (name, tiny)


@pytest.mark.parametrize("name", DENSE)
def test_entry_end_to_end_on_staged_scifact(name, collection, tmp_path):
    from dense_helpers import ndcg10, run_entry

    from irgrid.runner.cell import resolve_models

    docs, topics, qrels = collection
    entry = get(name)
    assert {r.source for r in resolve_models(entry.all_models()).values()} == {"tiny"}
    res, pipeline = run_entry(name, docs, topics, tmp_path)
    assert set(res["qid"]) == set(topics["qid"])
    per_query = res.groupby("qid")
    assert (per_query.size() == len(docs)).all()  # num_results 1000 > collection: every document ranked
    for _, group in per_query:
        assert np.all(np.diff(group.sort_values("rank")["score"].values) <= 1e-6)
        assert set(group["docno"]) == {d["docno"] for d in docs}
    # the reported nDCG@10 is that of this result frame as trec_eval orders it (score descending, ties by docno
    # descending: tiny random weights do tie), computed by hand from the qrels
    assert ndcg10(res, qrels) == pytest.approx(_ndcg10_by_hand(res, qrels), abs=1e-12)
    record = json.loads((tmp_path / "encoding.json" if name == "colbertv2" else tmp_path / "flex" / "encoding.json")
                        .read_text())
    assert record["docs"] == len(docs) and record["dtype"] == "fp32" and record["batch_size"] >= 1
    spec = ENCODERS.get(name)
    if spec.pooling != "colbert":
        vecs = np.memmap(tmp_path / "flex" / "vecs.f4", dtype=np.float32, mode="r").reshape(len(docs), -1)
        if spec.normalize:
            assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
        assert np.isfinite(vecs).all() and np.abs(vecs).sum() > 0


def _ndcg10_by_hand(res, qrels) -> float:
    gains = {(q, d): int(g) for q, d, g in zip(qrels["qid"], qrels["docno"], qrels["label"])}
    values = []
    for qid, group in res.groupby("qid"):
        order = group.sort_values(["score", "docno"], ascending=[False, False])["docno"].head(10)
        dcg = sum((2 ** gains.get((qid, d), 0) - 1) / np.log2(i + 2) for i, d in enumerate(order))
        ideal = sorted((g for (q, _), g in gains.items() if q == qid and g > 0), reverse=True)[:10]
        idcg = sum((2 ** g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
        values.append(dcg / idcg if idcg else 0.0)
    return float(np.mean(values))
