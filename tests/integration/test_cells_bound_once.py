"""A cell is bound to its dataset in one place (`ExperimentSpec.cells` / `cells_on`): the dry run's plan, the
grid's cache check, the preflight and the cluster graph all look up the keys and folders the grid runs with. Under
`profile: paper`, ColBERTv2 and Jina v3 have per-dataset values on ArguAna (query length 300, no task): the dry
run looked up their unbound keys there (issue 39)."""

from __future__ import annotations

import pytest

from irgrid.runner.experiment import from_dict
from irgrid.store import Store

ENTRIES = ["colbertv2", "jina-embeddings-v3", "bm25-pisa"]
DATASETS = ["beir/arguana", "beir/scifact/test"]


class KeySpy(Store):
    """A store that records every run key and index folder it is asked for, and has nothing cached."""

    def __init__(self, root):
        super().__init__(root)
        self.runs: set[tuple[str, str, str]] = set()
        self.indexes: set[tuple[str, str]] = set()

    def run_key(self, retriever, dataset):
        key = super().run_key(retriever, dataset)
        self.runs.add((dataset.name, retriever.name, key))
        return key

    def index_dir(self, recipe, dataset):
        folder = super().index_dir(recipe, dataset)
        self.indexes.add((dataset.name, folder.name))
        return folder


@pytest.fixture
def spec():
    return from_dict({"name": "bound", "profile": "paper", "datasets": DATASETS, "retrievers": ENTRIES,
                      "measures": ["nDCG@10"]})


def expected(spec, store):
    runs = {(d.name, c.name, Store.run_key(store, c, d)) for d, c in spec.cells()}
    indexes = {(d.name, Store.index_dir(store, c.index, d).name) for d, c in spec.cells() if c.index is not None}
    return runs, indexes


def test_per_dataset_values_change_the_bound_keys(spec, tmp_path):
    """The premise: on ArguAna the bound cells' keys differ from the unbound entries' (else this tests nothing)."""
    store = Store(tmp_path)
    arguana = next(d for d in spec.datasets if d.name == "beir/arguana")
    changed = [r.name for r in spec.retrievers if store.run_key(r, arguana) != store.run_key(r.for_dataset(arguana), arguana)]
    assert sorted(changed) == ["colbertv2", "jina-embeddings-v3"]


def _dry_run(spec, store):
    from irgrid.runner.planning import make_plan

    make_plan(spec, store)


def _cache_check(spec, store):
    from irgrid.grid import plan

    plan(spec, store)


def _cluster_graph(spec, store):
    from irgrid.cluster.config import ExecutorConfig
    from irgrid.cluster.graph import build_graph

    build_graph(spec, store, ExecutorConfig(), None)


@pytest.mark.parametrize("consumer", [_dry_run, _cache_check, _cluster_graph])
def test_every_consumer_looks_up_the_keys_the_grid_runs_with(spec, tmp_path, consumer):
    store = KeySpy(tmp_path / "cache")
    consumer(spec, store)
    runs, indexes = expected(spec, Store(tmp_path / "cache"))
    assert store.runs == runs
    assert store.indexes <= indexes and store.indexes  # every folder looked up is a bound cell's
