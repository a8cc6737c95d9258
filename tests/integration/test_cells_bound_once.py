"""A cell is bound to its dataset in one place (`ExperimentSpec.cells` / `cells_on`): the dry run's plan, the
grid's cache check, the preflight and the cluster graph all look up the keys and folders the grid runs with. Under
`profile: paper`, ColBERTv2 and Jina v3 have per-dataset values on ArguAna (query length 300, no task): the dry
run looked up their unbound keys there (issue 39)."""

from __future__ import annotations

import pytest

from irgrid.runner.experiment import from_dict
from irgrid.store import Indexes, Runs, Store

ENTRIES = ["colbertv2", "jina-embeddings-v3", "bm25-pisa"]
DATASETS = ["beir/arguana", "beir/scifact/test"]


class _RunSpy(Runs):
    def __init__(self, store):
        super().__init__(store)
        self.asked: set[tuple[str, str, str]] = set()

    def key(self, retriever, dataset):
        key = super().key(retriever, dataset)
        self.asked.add((dataset.name, retriever.name, key))
        return key


class _IndexSpy(Indexes):
    def __init__(self, store):
        super().__init__(store)
        self.asked: set[tuple[str, str]] = set()

    def dir(self, recipe, dataset):
        folder = super().dir(recipe, dataset)
        self.asked.add((dataset.name, folder.name))
        return folder


class KeySpy(Store):
    """A store that records every run key and index folder it is asked for, and has nothing cached."""

    def __init__(self, root):
        super().__init__(root)
        self.runs, self.indexes = _RunSpy(self), _IndexSpy(self)


@pytest.fixture
def spec():
    return from_dict({"name": "bound", "profile": "paper", "datasets": DATASETS, "retrievers": ENTRIES,
                      "measures": ["nDCG@10"]})


def expected(spec, store):
    plain = Store(store.root)
    runs = {(d.name, c.name, plain.runs.key(c, d)) for d, c in spec.cells()}
    indexes = {(d.name, plain.indexes.dir(c.index, d).name) for d, c in spec.cells() if c.index is not None}
    return runs, indexes


def test_per_dataset_values_change_the_bound_keys(spec, tmp_path):
    """The premise: on ArguAna the bound cells' keys differ from the unbound entries' (else this tests nothing)."""
    store = Store(tmp_path)
    arguana = next(d for d in spec.datasets if d.name == "beir/arguana")
    changed = [r.name for r in spec.retrievers if store.runs.key(r, arguana) != store.runs.key(r.for_dataset(arguana), arguana)]
    assert sorted(changed) == ["colbertv2", "jina-embeddings-v3"]


def _dry_run(spec, store):
    from irgrid.runner.planning import make_plan

    make_plan(spec, store)


def _cache_check(spec, store):  # the grid's progress reads the same plan (one planner)
    from irgrid.grid import _Progress
    from irgrid.runner.planning import make_plan

    _Progress(make_plan(spec, store).rows)


def _cluster_graph(spec, store):
    from irgrid.cluster.config import ExecutorConfig
    from irgrid.cluster.graph import build_graph

    build_graph(spec, store, ExecutorConfig(), None)


@pytest.mark.parametrize("consumer", [_dry_run, _cache_check, _cluster_graph])
def test_every_consumer_looks_up_the_keys_the_grid_runs_with(spec, tmp_path, consumer):
    store = KeySpy(tmp_path / "cache")
    consumer(spec, store)
    runs, indexes = expected(spec, Store(tmp_path / "cache"))
    assert store.runs.asked == runs
    assert store.indexes.asked <= indexes and store.indexes.asked  # every folder looked up is a bound cell's
