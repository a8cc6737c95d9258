"""A model mapping enters the cache keys (issue 40, item 5): two different checkpoints mapped under one model id
never share an index or a run; without a mapping keys are as before (tests/unit/test_golden_keys.py).

Two tiny random-weight BERT folders (irgrid.models.tiny, seeded apart) mapped in turn as Contriever's checkpoint,
on a 40-document SciFact slice."""

from __future__ import annotations

import pytest

from irgrid.core.retrievers import get
from irgrid.models import resolver
from irgrid.runner.cell import build_pipeline
from irgrid.runner.experiment import from_dict

pytestmark = pytest.mark.slow  # two tiny models built, two dense indexes of 40 documents

MODEL = "facebook/contriever-msmarco"


@pytest.fixture(scope="module")
def two_models():
    from irgrid.models.tiny import tiny_folder

    return tiny_folder("test/mapped-a", "bert"), tiny_folder("test/mapped-b", "bert")


@pytest.fixture(scope="module")
def slice40(tmp_path_factory):
    from support import write_scifact_slice

    from irgrid.data import byo
    from irgrid.store import Store

    root = tmp_path_factory.mktemp("mapping-slice")
    files = write_scifact_slice(root, n_queries=5, n_docs=40)
    return byo.build({"name": "mapping-slice-40", **files}, root, "test"), Store(root / "cache")


def test_two_models_mapped_under_one_id_share_no_index_and_no_run(two_models, slice40):
    """Before: the second mapping reused the index (and so the run) built with the first model."""
    (a, b), (ds, store) = two_models, slice40
    entry = get("contriever")
    run_a = build_pipeline(entry, ds, store, {MODEL: str(a)}, check_queries=False).transform(ds.topics())
    run_b = build_pipeline(entry, ds, store, {MODEL: str(b)}, check_queries=False).transform(ds.topics())
    mapped_a, mapped_b = resolver.with_mapping(entry, {MODEL: str(a)}), resolver.with_mapping(entry, {MODEL: str(b)})
    assert store.indexes.dir(mapped_a.index, ds) != store.indexes.dir(mapped_b.index, ds)
    assert store.indexes.dir(mapped_a.index, ds).exists() and store.indexes.dir(mapped_b.index, ds).exists()
    assert store.runs.key(mapped_a, ds) != store.runs.key(mapped_b, ds)
    assert not run_a[["qid", "docno", "score"]].equals(run_b[["qid", "docno", "score"]])  # two models' rankings
    assert len([b for b in store.builds() if b["kind"] == "index"]) == 2


def test_the_experiment_mapping_enters_each_cells_key(two_models, tmp_path, monkeypatch):
    (a, b) = two_models
    spec = {"name": "m", "datasets": ["vaswani"], "retrievers": ["contriever", "bm25-pisa"]}
    plain = from_dict(spec)
    with_a, with_b = from_dict({**spec, "models": {MODEL: str(a)}}), from_dict({**spec, "models": {MODEL: str(b)}})
    keys = [s.retrievers[0].key() for s in (plain, with_a, with_b)]
    assert len(set(keys)) == 3 and keys[0] == get("contriever").key()  # unmapped: the golden key
    assert plain.retrievers[1].key() == with_a.retrievers[1].key()  # no model: unchanged
    assert from_dict({**spec, "models": {MODEL: str(a)}}).retrievers[0].key() == keys[1]  # stable
    mapping = tmp_path / "models.yaml"  # IRGRID_MODELS maps the same way
    mapping.write_text(f"{MODEL}: {b}\n")
    monkeypatch.setenv("IRGRID_MODELS", str(mapping))
    assert from_dict(spec).retrievers[0].key() == keys[2]
    resolver.register_local(MODEL, a)  # and register_local, which wins, as in resolve
    assert from_dict(spec).retrievers[0].key() == keys[1]
