"""The job graph of a grid: one index job per (index recipe, corpus) that an uncached cell needs, shared by every
cell using it; a shardable dense index as several shard jobs and one merge job (`irgrid.cluster.sharding`); one
job per uncached cell, after its index. Jobs are in dependency order and carry a picklable task, one class per
kind (`IndexTask`, `ShardTask`, `MergeTask`, `CellTask`), whose `run(store)` does the work wherever it runs."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from irgrid.util import settings
from irgrid.util.hashing import config_hash
from irgrid.util.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

    from irgrid.cluster.config import ExecutorConfig
    from irgrid.core.gridcell import GridCell
    from irgrid.core.retrievers import IndexRecipe
    from irgrid.data.datasets import Dataset
    from irgrid.runner.cell import Cell
    from irgrid.runner.experiment import ExperimentSpec
    from irgrid.store import Store


@dataclass(kw_only=True)
class Task(abc.ABC):
    """What a job needs to run anywhere, and its work (`run`): picklable (cloudpickle), one subclass per kind. The
    dataset carries its corpus entry, so a local (bring-your-own) collection needs no catalog in the worker.
    `settings` are applied where the job runs out of process (`irgrid.cluster.tasks.execute`)."""

    kind: ClassVar[str]
    job_id: str
    store_root: str
    out: str
    settings: Settings  # the submitter's (cache = the store's), with the environment libraries read
    dataset: Dataset
    model_map: dict[str, str] = field(default_factory=dict)

    @abc.abstractmethod
    def run(self, store: Store, topics: Mapping[str, pd.DataFrame] | None = None) -> Any:
        """Do this job's work against `store` (the shared cache, under its locks). `topics`: the queries the grid
        has read already, by dataset name, when the job runs in the grid's own process."""


@dataclass(kw_only=True)
class IndexTask(Task):
    """Build an index recipe on the dataset's corpus (`irgrid.runner.cell.ensure_index`)."""

    kind: ClassVar[str] = "index"
    recipe: IndexRecipe

    def run(self, store: Store, topics: Mapping[str, pd.DataFrame] | None = None) -> Path:
        from irgrid.runner.cell import ensure_index

        return ensure_index(self.recipe, self.dataset, store, self.model_map)


@dataclass(kw_only=True)
class ShardTask(Task):
    """Encode documents [start, stop) of a shardable dense recipe (`irgrid.cluster.sharding`)."""

    kind: ClassVar[str] = "shard"
    recipe: IndexRecipe
    span: tuple[int, int]

    def run(self, store: Store, topics: Mapping[str, pd.DataFrame] | None = None) -> Path:
        from irgrid.cluster import sharding
        from irgrid.util import settings

        return sharding.encode_shard(self.recipe, self.dataset, store, *self.span, self.model_map, settings.device())


@dataclass(kw_only=True)
class MergeTask(Task):
    """Merge every shard of a recipe into its index, in corpus order."""

    kind: ClassVar[str] = "merge"
    recipe: IndexRecipe
    ranges: list[tuple[int, int]]

    def run(self, store: Store, topics: Mapping[str, pd.DataFrame] | None = None) -> Path:
        from irgrid.cluster import sharding

        return sharding.merge_shards(self.recipe, self.dataset, store, self.ranges)


@dataclass(kw_only=True)
class CellTask(Task):
    """Compute (or find) one cell's run (`irgrid.runner.cell.run_cell`); its index was built by a job before."""

    kind: ClassVar[str] = "cell"
    retriever: GridCell
    latency_sample: int = 50

    def run(self, store: Store, topics: Mapping[str, pd.DataFrame] | None = None) -> Cell:
        from irgrid.runner.cell import run_cell

        queries = (topics or {}).get(self.dataset.name)
        queries = self.dataset.topics() if queries is None else queries
        return run_cell(self.retriever, self.dataset, queries, store, self.model_map, self.latency_sample)


@dataclass
class Job:
    """A task in the graph, with what executors need: its dependencies, a label, whether it runs a neural model."""

    id: str
    kind: str
    label: str
    deps: list[str]
    task: Task
    accelerator: bool  # runs a neural model: gets the configured GPUs
    cells: list[tuple[str, str]] = field(default_factory=list)  # (dataset, retriever) of a cell job


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "-" for c in text)


def cell_id(dataset: Dataset, retriever: GridCell) -> str:
    return f"cell--{dataset.slug}--{retriever.name}"


def spec_hash(spec: ExperimentSpec) -> str:
    """The experiment a grid state belongs to (`--resume` refuses another): its configuration and, where a profile
    gives a cell per-dataset values, that cell's key (edited values are another experiment)."""
    unbound = {r.name: r for r in spec.retrievers}
    cells = {f"{d.name} {c.name}": c.key() for d, c in spec.cells() if c is not unbound[c.name]}
    return config_hash({**spec.config(), "per_dataset_cells": cells} if cells else spec.config())


def build_graph(spec: ExperimentSpec, store: Store, config: ExecutorConfig, out: Path | None,
                datasets: Collection[str] | None = None) -> tuple[list[Job], list[dict[str, Any]]]:
    """Jobs for everything not in the cache, in dependency order, and one record per cell of the grid (in the
    spec's order, dataset by dataset). `datasets`: only the cells of these (the grid leaves out a dataset whose
    queries or qrels cannot be read). A stored run counts as cached once its file matches its recorded hash."""
    from irgrid.cluster import sharding
    from irgrid.data.datasets import DatasetError

    mine = settings.current()
    job_settings = dataclasses.replace(mine, cache=Path(store.root), ir_datasets_home=mine.irds_home())
    jobs: dict[str, Job] = {}
    cells: list[dict[str, Any]] = []
    common = {"store_root": str(store.root), "out": str(out or ""), "settings": job_settings,
              "model_map": dict(spec.models)}

    for dataset, retriever in spec.cells(datasets):
        cid = cell_id(dataset, retriever)
        record = {"dataset": dataset.name, "retriever": retriever.name, "job": cid, "run": "", "meta": ""}
        cells.append(record)
        try:  # keys read the staged copy: a full cache disk fails here, and then in its cell job, recorded
            record["run"], record["meta"] = (str(store.runs.path(retriever, dataset)),
                                             str(store.runs.meta_path(retriever, dataset)))
            cached = store.runs.has(retriever, dataset, full=True)
            index_missing = retriever.index is not None and not store.indexes.ready(retriever.index, dataset)
        except (OSError, DatasetError):
            cached, index_missing = False, False
        if cached:
            record["cached"] = True
            continue
        deps: list[str] = []
        recipe = retriever.index
        if recipe is not None and index_missing:
            deps.append(_index_jobs(jobs, recipe, dataset, store, config, common, sharding))
        jobs[cid] = Job(cid, CellTask.kind, f"{retriever.name} on {dataset.name}", deps,
                        CellTask(job_id=cid, dataset=dataset, retriever=retriever,
                                 latency_sample=spec.latency_sample, **common),
                        bool(retriever.all_models()), cells=[(dataset.name, retriever.name)])
    return list(jobs.values()), cells


def _index_jobs(jobs: dict[str, Job], recipe: IndexRecipe, dataset: Dataset, store: Store, config: ExecutorConfig,
                common: dict[str, Any], sharding: Any) -> str:
    """The job that publishes this recipe's index of the dataset's corpus (one per recipe and corpus, shared by
    every cell using it): one index job, or shard jobs and their merge. Returns its id."""
    index_dir = store.indexes.dir(recipe, dataset)
    iid = _safe(f"index--{index_dir.parent.name}--{index_dir.name}")
    if iid in jobs:
        return iid
    ranges = [(0, 0)]
    if config.shards > 1 and sharding.shardable(recipe):
        ranges = sharding.shard_ranges(dataset.corpus_dataset().docs_count(), config.shards, sharding.chunk_size())
    if len(ranges) == 1:
        jobs[iid] = Job(iid, IndexTask.kind, f"index {recipe.name} of {dataset.corpus}", [],
                        IndexTask(job_id=iid, dataset=dataset, recipe=recipe, **common), bool(recipe.all_models()))
        return iid
    shard_ids = []
    for start, stop in ranges:
        sid = f"{iid}--docs-{start}-{stop}"
        shard_ids.append(sid)
        if sharding.shard_ready(store, recipe, dataset, start, stop):
            continue
        jobs[sid] = Job(sid, ShardTask.kind, f"encode {recipe.name} docs {start}-{stop} of {dataset.corpus}", [],
                        ShardTask(job_id=sid, dataset=dataset, recipe=recipe, span=(start, stop), **common), True)
    jobs[iid] = Job(iid, MergeTask.kind, f"merge {len(ranges)} shards of {recipe.name} on {dataset.corpus}",
                    [s for s in shard_ids if s in jobs], MergeTask(job_id=iid, dataset=dataset, recipe=recipe,
                                                                   ranges=ranges, **common), False)
    return iid
