"""The store's model-side areas with real models: tiny models built once under concurrent builders, generations of
a tiny random-weight generator (the real Qwen2 causal-LM architecture of query2doc's generator) served from the
generations area, and live DisastQA answers (a tiny reader) answered once under concurrent runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading

import pytest

import irgrid
from irgrid.store import AREA_MARKER, Store

PROMPTS = ["what is dna?", "vitamin d and bone density", "a third query"]


def _kinds(store: Store, kind: str) -> list[dict]:
    return [b for b in store.builds() if b["kind"] == kind]


def test_tiny_model_is_built_once_by_concurrent_builders(tmp_path):
    """Two processes asking for the same tiny model: one builds it (one builds.log line), both get the folder,
    published with its manifest; it loads."""
    code = ("from irgrid.models.tiny import tiny_folder; "
            "print(tiny_folder('test/concurrent-bert', 'bert'))")
    env = {**os.environ, "IRGRID_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    folders = {o.strip() for o, _ in outs}
    assert len(folders) == 1
    store = Store(tmp_path)
    builds = _kinds(store, "tiny-model")
    assert len(builds) == 1 and builds[0]["model"] == "test/concurrent-bert"
    from pathlib import Path

    folder = Path(folders.pop())
    assert folder.parent == tmp_path / "tiny-models"
    meta = json.loads((folder / AREA_MARKER).read_text())
    assert {"config.json", "model.safetensors", "tiny.json", "vocab.txt"} <= set(meta["files"])
    assert store.folder_problem(folder, marker_name=AREA_MARKER) is None
    from transformers import AutoModel

    assert AutoModel.from_pretrained(str(folder)).config.hidden_size == 32


@pytest.fixture
def tiny_generator(tmp_path, monkeypatch):
    """A factory of generators over query2doc's generator in tiny-model mode, caching into `tmp_path/cache`."""
    from irgrid.generation.engine import Generator
    from irgrid.generation.spec import Decoding, Prompt
    from irgrid.models.resolver import resolve

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "cache"))
    resolved = resolve(irgrid.retriever("query2doc").all_models()["generator"])
    store = Store(tmp_path / "cache")
    return store, lambda: Generator(resolved, Prompt("Write a passage about: {query}"),
                                    Decoding(max_new_tokens=3, batch_size=2), device="cpu", store=store)


def test_generations_are_served_from_the_store_area(tiny_generator):
    """A second generator (a new connection, as in a later run) makes no model call; one builds.log line per pass
    that called the model; one row per distinct prompt in `generations/<model>.sqlite`."""
    store, make = tiny_generator
    first = make()
    outputs = first.generate(PROMPTS + PROMPTS[:1])
    assert first.stats.calls == 3 and first.stats.hits == 0
    again = make()
    assert again.generate(PROMPTS) == outputs[:3]
    assert again.stats.calls == 0 and again.stats.hits == 3 and again.stats.cached_seconds > 0
    builds = _kinds(store, "generations")
    assert len(builds) == 1 and builds[0]["outputs"] == 3 and builds[0]["key"] == first.key()
    db = store.generations.db(first.resolved.ref.id)
    assert db == store.root / "generations" / "Qwen--Qwen2.5-7B-Instruct.sqlite"  # the location it always had
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM gen").fetchone()[0] == 3


def test_a_failed_generation_pass_keeps_the_batches_it_committed(tiny_generator, monkeypatch):
    """Each batch is one transaction: a pass that dies in its second batch keeps the first; the rerun generates
    only what is missing."""
    _, make = tiny_generator
    gen = make()
    real, seen = gen._generate_batch, []

    def dies_on_second_batch(texts):
        seen.append(texts)
        if len(seen) == 2:
            raise RuntimeError("killed mid-pass (simulated)")
        return real(texts)

    monkeypatch.setattr(gen, "_generate_batch", dies_on_second_batch)
    with pytest.raises(RuntimeError, match="simulated"):
        gen.generate(PROMPTS)
    rerun = make()
    rerun.generate(PROMPTS)
    assert rerun.stats.hits == 2 and rerun.stats.calls == 1


def test_concurrent_generators_generate_a_pass_once(tiny_generator):
    """Two generators (two connections, two threads, as two jobs) missing the same prompts: one generates them
    under the pass's lock, the other waits and reads its rows; one row per prompt."""
    store, make = tiny_generator
    gens, results = [make(), make()], {}

    def run(i):
        results[i] = gens[i].generate(PROMPTS)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results[0] == results[1] and len(results[0]) == 3
    assert sorted(g.stats.calls for g in gens) == [0, 3] and sorted(g.stats.hits for g in gens) == [0, 3]
    assert len(_kinds(store, "generations")) == 1
    with sqlite3.connect(store.generations.db(gens[0].resolved.ref.id)) as con:
        assert con.execute("SELECT COUNT(*) FROM gen").fetchone()[0] == 3


def test_live_qa_cells_are_answered_once_under_concurrent_runs(tmp_path, monkeypatch):
    """Two QA runs at once (threads) over one cache, with a tiny reader of a real decoder architecture: the cell
    is answered once (the other run waits on its lock and reads it), published with a manifest, and a third run
    calls no model at all."""
    from irgrid.core.modelref import ModelRef
    from irgrid.qa import grid as qa_grid
    from irgrid.qa import readers

    irgrid.retriever("query2doc")  # loads the entries, which declare the tiny causal-LM architecture
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "cache"))
    reader = readers.Reader("tiny-test-reader", ModelRef("test/tiny-reader", arch="qwen2-causal", stand_in=True),
                            dtype="float32")
    monkeypatch.setitem(readers.READERS._items, reader.name, reader)
    spec = qa_grid.from_dict({"readers": [reader.name], "settings": ["base"], "tasks": {"mcq": {"n": 2, "seed": 0}},
                             "collection": {"scope": "subset", "distractors": 3},
                             "generation": {"mcq_max_new_tokens": 2}})
    store, results = Store(tmp_path / "cache"), {}

    def run(i):
        results[i] = qa_grid.run(spec, store=store)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(results) == {0, 1}
    assert results[0]["value"].tolist() == results[1]["value"].tolist()
    builds = _kinds(store, "qa-answers")
    assert len(builds) == 1 and builds[0]["rows"] == 2
    path = store.root / builds[0]["artifact"]
    assert path.parent == store.root / "qa" and store.file_manifest(path).exists()

    def refuse(*args, **kwargs):
        raise AssertionError("a cached cell was regenerated")

    monkeypatch.setattr(readers, "build_backend", refuse)
    assert qa_grid.run(spec, store=store)["value"].tolist() == results[0]["value"].tolist()


def test_judge_embeddings_are_served_from_the_store_area(tmp_path, monkeypatch):
    """The coverage judges' sentence embeddings (all-MiniLM-L6-v2, shipped): a second cache over the same file
    never loads the encoder."""
    import numpy as np

    from irgrid.models.resolver import resolve
    from irgrid.qa.judges import EmbeddingCache

    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path))
    location = resolve("sentence-transformers/all-MiniLM-L6-v2").location
    texts = ["Shelters open at local schools.", "Evacuate before landfall."]
    first = EmbeddingCache(location, "minilm-test", device="cpu")
    assert first.path == Store(tmp_path).qa.embeddings_db("minilm-test") == tmp_path / "qa" / "embeddings" / "minilm-test.sqlite"
    vectors = first.encode(texts)
    again = EmbeddingCache(location, "minilm-test", device="cpu")
    assert np.array_equal(again.encode(texts), vectors) and again._model is None
