"""The grid runner: an ExperimentSpec -> cached runs -> `pt.Experiment` per dataset -> reports.

Each (retriever, dataset) cell is computed at most once per configuration: runs are stored in the cache under
a hash of the retriever's full configuration and handed to `pt.Experiment` as result frames, which then does
the evaluation, paired tests and multiple-testing correction.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid import models as models_mod
from irgrid import settings
from irgrid.datasets import Dataset
from irgrid.datasets import get as get_dataset
from irgrid.experiment import ExperimentSpec
from irgrid.experiment import load as load_experiment
from irgrid.retrievers import BuildContext, QueryContext, Retriever
from irgrid.store import Store

log = logging.getLogger("irgrid")


def resolve_models(refs, extra: dict[str, str] | None = None) -> dict[str, models_mod.Resolved]:
    return {role: models_mod.resolve(ref, extra) for role, ref in refs.items()}


def open_index(retriever: Retriever, dataset: Dataset, store: Store, model_map: dict[str, str] | None = None):
    """Build the entry's index for this dataset's corpus unless an identical one exists; return the artifact."""
    recipe = retriever.index
    if recipe is None:
        return None
    path = store.index_dir(recipe, dataset)
    resolved = None
    if not store.index_ready(recipe, dataset):
        resolved = resolve_models(recipe.models, model_map)
        corpus = dataset.corpus_dataset()
        log.info("indexing %s with %s -> %s", corpus.corpus, recipe.name, path)

        def build(tmp: Path) -> None:
            ctx = BuildContext(path=tmp, params=recipe.params, models=resolved, docs=corpus.docs,
                               docs_count=corpus.docs_count(), device=settings.device())
            recipe.build(ctx)

        store.build_index(recipe, dataset, build)
    if resolved is None:
        resolved = resolve_models(recipe.models, model_map)
    return recipe.open(path, recipe.params, resolved)


def build_pipeline(retriever: Retriever, dataset: str | Dataset | None = None, store: Store | None = None,
                   model_map: dict[str, str] | None = None):
    """The entry's full query pipeline on a dataset (index built or reused), dataset policies included."""
    if dataset is None:
        raise ValueError(f"{retriever.name}.pipeline() needs a dataset to index, e.g. 'beir/scifact/test'")
    dataset = get_dataset(dataset) if isinstance(dataset, str) else dataset
    store = store or Store()
    artifact = open_index(retriever, dataset, store, model_map)
    ctx = QueryContext(options=retriever.options, models=resolve_models(retriever.models, model_map),
                       device=settings.device())
    pipeline = retriever.query(artifact, ctx)
    if dataset.drop_self_matches:
        from irgrid.transforms import DropSelfMatches

        pipeline = pipeline >> DropSelfMatches()
    return pipeline


@dataclass
class Cell:
    retriever: Retriever
    dataset: Dataset
    res: pd.DataFrame
    meta: dict[str, Any]
    cached: bool


def run_cell(retriever: Retriever, dataset: Dataset, topics: pd.DataFrame, store: Store,
             model_map: dict[str, str] | None = None) -> Cell:
    loaded = store.load_run(retriever, dataset)
    if loaded is not None:
        return Cell(retriever, dataset, loaded[0], loaded[1], cached=True)
    pipeline = build_pipeline(retriever, dataset, store, model_map)
    pipeline.transform(topics.head(1))  # warm-up (model load, JIT, JVM): not part of the latency
    start = time.perf_counter()
    res = pipeline.transform(topics)
    seconds = time.perf_counter() - start
    models = resolve_models(retriever.all_models(), model_map)
    meta = {
        "retriever": retriever.name,
        "dataset": dataset.name,
        "key": store.run_key(retriever, dataset),
        "queries": int(len(topics)),
        "seconds": round(seconds, 4),
        "ms_per_query": round(1000 * seconds / max(len(topics), 1), 3),
        "models": {role: r.manifest() for role, r in models.items()},
        "config": retriever.config(),
        "pipeline": repr(pipeline),
    }
    store.save_run(retriever, dataset, res, meta)
    loaded = store.load_run(retriever, dataset)  # evaluate exactly what was stored: reruns are identical
    assert loaded is not None
    return Cell(retriever, dataset, loaded[0], loaded[1], cached=False)


def _experiment_rows(spec: ExperimentSpec, dataset: Dataset, cells: list[Cell], topics, qrels):
    import pyterrier as pt

    names = [c.retriever.name for c in cells]
    frames = [c.res for c in cells]
    baseline = names.index(spec.baseline) if spec.baseline in names and len(names) > 1 else None
    agg = pt.Experiment(frames, topics, qrels, spec.measures, names=names, baseline=baseline,
                        test=spec.test, correction=spec.correction, verbose=False)
    perq = pt.Experiment(frames, topics, qrels, spec.measures, names=names, perquery=True, verbose=False)
    rows = []
    for _, row in agg.iterrows():
        cell = cells[names.index(row["name"])]
        for m in spec.measures:
            m_name = str(m)
            p = row.get(f"{m_name} p-value") if baseline is not None else None
            pc = row.get(f"{m_name} p-value corrected") if spec.correction else p
            is_base = row["name"] == spec.baseline
            rows.append({
                "dataset": dataset.name, "system": row["name"], "measure": m_name, "value": float(row[m_name]),
                "p_value": None if is_base or p is None or pd.isna(p) else float(p),
                "p_value_corrected": None if is_base or pc is None or pd.isna(pc) else float(pc),
                "significant": None if is_base or pc is None or pd.isna(pc) else bool(pc < 0.05),
                "baseline": spec.baseline,
            })
        rows.append({"dataset": dataset.name, "system": row["name"], "measure": "ms/query",
                     "value": float(cell.meta["ms_per_query"]), "p_value": None, "p_value_corrected": None,
                     "significant": None, "baseline": spec.baseline})
    perq = perq.rename(columns={"name": "system"})
    perq.insert(0, "dataset", dataset.name)
    return rows, perq


def run(spec: ExperimentSpec | str | Path, out: str | Path | None = None, store: Store | None = None) -> pd.DataFrame:
    """Run a grid; returns the long-form results (one row per dataset, system, measure)."""
    from irgrid import report

    spec = spec if isinstance(spec, ExperimentSpec) else load_experiment(spec)
    store = store or Store()
    preflight(spec, store)
    rows: list[dict[str, Any]] = []
    perquery: list[pd.DataFrame] = []
    cells_by_dataset: dict[str, list[Cell]] = {}
    for dataset in spec.datasets:
        topics, qrels = dataset.topics(), dataset.qrels()
        cells = []
        for retriever in spec.retrievers:
            cell = run_cell(retriever, dataset, topics, store, spec.models)
            log.info("%s on %s: %s", retriever.name, dataset.name, "cached" if cell.cached else "computed")
            cells.append(cell)
        cells_by_dataset[dataset.name] = cells
        dataset_rows, dataset_perq = _experiment_rows(spec, dataset, cells, topics, qrels)
        rows.extend(dataset_rows)
        perquery.append(dataset_perq)
    results = pd.DataFrame(rows)
    if out is not None:
        out = Path(out)
        perq = pd.concat(perquery, ignore_index=True)
        report.write_outputs(spec, results, perq, cells_by_dataset, store, out)
        for dataset in spec.datasets:
            for cell in cells_by_dataset[dataset.name]:
                target = out / "runs" / dataset.slug / f"{cell.retriever.name}.res.gz"
                _copy_atomic(store.run_path(cell.retriever, dataset), target)
    return results


def preflight(spec: ExperimentSpec, store: Store) -> None:
    """Fail before computing anything when a model that an uncached cell needs cannot be resolved."""
    for dataset in spec.datasets:
        for retriever in spec.retrievers:
            if not store.has_run(retriever, dataset):
                resolve_models(retriever.all_models(), spec.models)


def _copy_atomic(src: Path, dst: Path) -> None:
    from irgrid._util import atomic_path

    with atomic_path(dst, suffix=".res.gz") as tmp:
        shutil.copyfile(src, tmp)
