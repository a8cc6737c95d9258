"""The job graph of a grid: one index job per (index recipe, corpus) that an uncached cell needs, shared by every
cell using it; a shardable dense index as several shard jobs and one merge job (`irgrid.cluster.sharding`); one
job per uncached cell, after its index. Jobs are in dependency order and carry a picklable `Task`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid.core import settings
from irgrid.core.hashing import config_hash
from irgrid.core.settings import Settings

if TYPE_CHECKING:
    from irgrid.cluster.config import ExecutorConfig
    from irgrid.core.gridcell import GridCell
    from irgrid.core.retrievers import IndexRecipe
    from irgrid.data.datasets import Dataset
    from irgrid.runner.experiment import ExperimentSpec
    from irgrid.store import Store


@dataclass
class Task:
    """What a job needs to run anywhere: picklable (cloudpickle). The dataset carries its corpus entry, so a
    local (bring-your-own) collection needs no catalog in the worker."""

    job_id: str
    kind: str  # index | shard | merge | cell
    store_root: str
    out: str
    settings: Settings  # the submitter's (cache = the store's), with the environment libraries read
    dataset: Dataset
    retriever: GridCell | None = None
    recipe: IndexRecipe | None = None
    model_map: dict[str, str] = field(default_factory=dict)
    latency_sample: int = 50
    span: tuple[int, int] | None = None  # shard: documents [start, stop)
    ranges: list[tuple[int, int]] = field(default_factory=list)  # merge: every shard's span


@dataclass
class Job:
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
    """The experiment a grid state belongs to (`--resume` refuses another)."""
    return config_hash(spec.config())


def build_graph(spec: ExperimentSpec, store: Store, config: ExecutorConfig, out: Path) -> tuple[list[Job], list[dict[str, Any]]]:
    """Jobs for everything not in the cache, in dependency order, and one record per cell of the grid."""
    from irgrid.cluster import sharding

    mine = settings.current()
    job_settings = dataclasses.replace(mine, cache=Path(store.root), ir_datasets_home=mine.irds_home())
    jobs: dict[str, Job] = {}
    cells: list[dict[str, Any]] = []

    def task(job_id: str, kind: str, dataset: Dataset, **kw: Any) -> Task:
        return Task(job_id=job_id, kind=kind, store_root=str(store.root), out=str(out), settings=job_settings,
                    dataset=dataset, model_map=dict(spec.models), latency_sample=spec.latency_sample, **kw)

    for dataset in spec.datasets:
        for retriever in spec.retrievers:
            retriever = retriever.for_dataset(dataset)  # the profile's per-dataset values: the cell's own key
            cid = cell_id(dataset, retriever)
            record = {"dataset": dataset.name, "retriever": retriever.name, "job": cid,
                      "run": str(store.run_path(retriever, dataset)), "meta": str(store.meta_path(retriever, dataset))}
            cells.append(record)
            if store.has_run(retriever, dataset):
                record["cached"] = True
                continue
            deps: list[str] = []
            recipe = retriever.index
            if recipe is not None and not store.index_ready(recipe, dataset):
                index_dir = store.index_dir(recipe, dataset)
                iid = _safe(f"index--{index_dir.parent.name}--{index_dir.name}")
                if iid not in jobs:
                    neural = bool(recipe.all_models())
                    ranges = [(0, 0)]
                    if config.shards > 1 and sharding.shardable(recipe):
                        ranges = sharding.shard_ranges(dataset.corpus_dataset().docs_count(), config.shards,
                                                       sharding.chunk_size())
                    if len(ranges) > 1:
                        shard_ids = []
                        for start, stop in ranges:
                            sid = f"{iid}--docs-{start}-{stop}"
                            shard_ids.append(sid)
                            if sharding.shard_ready(store, recipe, dataset, start, stop):
                                continue
                            jobs[sid] = Job(sid, "shard", f"encode {recipe.name} docs {start}-{stop} of {dataset.corpus}",
                                            [], task(sid, "shard", dataset, recipe=recipe, span=(start, stop)), True)
                        jobs[iid] = Job(iid, "merge", f"merge {len(ranges)} shards of {recipe.name} on {dataset.corpus}",
                                        [s for s in shard_ids if s in jobs],
                                        task(iid, "merge", dataset, recipe=recipe, ranges=ranges), False)
                    else:
                        jobs[iid] = Job(iid, "index", f"index {recipe.name} of {dataset.corpus}", [],
                                        task(iid, "index", dataset, recipe=recipe), neural)
                deps.append(iid)
            jobs[cid] = Job(cid, "cell", f"{retriever.name} on {dataset.name}", deps,
                            task(cid, "cell", dataset, retriever=retriever), bool(retriever.all_models()),
                            cells=[(dataset.name, retriever.name)])
    return list(jobs.values()), cells
