"""The grid runner: an ExperimentSpec -> cached runs -> `pt.Experiment` per dataset -> reports.

Each (retriever, dataset) cell is computed at most once per configuration: runs are stored in the cache under
a hash of the retriever's full configuration and handed to `pt.Experiment` as result frames, which then does
the evaluation, paired tests and multiple-testing correction.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import measures as measures_mod
from irgrid import models as models_mod
from irgrid import settings
from irgrid._util import write_text_atomic
from irgrid.datasets import Dataset
from irgrid.datasets import get as get_dataset
from irgrid.experiment import ExperimentSpec
from irgrid.experiment import load as load_experiment
from irgrid.retrievers import BuildContext, IndexRecipe, QueryContext, Retriever
from irgrid.store import Store

log = logging.getLogger("irgrid")


def resolve_models(refs, extra: dict[str, str] | None = None) -> dict[str, models_mod.Resolved]:
    return {role: models_mod.resolve(ref, extra) for role, ref in refs.items()}


def open_index(retriever: Retriever, dataset: Dataset, store: Store, model_map: dict[str, str] | None = None):
    """Build the entry's index for this dataset's corpus unless an identical one exists; return the artifact."""
    recipe = retriever.index
    if recipe is None:
        return None
    path = ensure_index(recipe, dataset, store, model_map)
    return recipe.open(path, recipe.params, resolve_models(recipe.models, model_map))


def ensure_index(recipe: IndexRecipe, dataset: Dataset, store: Store, model_map: dict[str, str] | None = None) -> Path:
    """The recipe's index of this dataset's corpus, built unless it exists. Under the index's lock: concurrent
    jobs (a cluster sharing the cache) never build it twice; a job that waited reuses what the holder built."""
    path = store.index_dir(recipe, dataset)
    if store.index_ready(recipe, dataset):
        return path
    corpus = dataset.corpus_dataset()
    with store.lock(path, f"index {recipe.name} of {corpus.corpus}"):
        if store.index_ready(recipe, dataset):  # built by another job while we waited
            return path
        store.remove_leftovers(path)
        resolved = resolve_models(recipe.models, model_map)
        log.info("indexing %s with %s -> %s", corpus.corpus, recipe.name, path)

        docs_count = corpus.docs_count()
        docs = corpus.docs
        if recipe.stage is not None:
            docs = _stage_docs(recipe.stage, dataset, store, docs, docs_count, model_map)

        def build(tmp: Path) -> None:
            ctx = BuildContext(path=tmp, params=recipe.params, models=resolved, docs=docs,
                               docs_count=docs_count, device=settings.device())
            recipe.build(ctx)

        store.build_index(recipe, dataset, build, docs=docs_count)
    return path


def _stage_docs(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map):
    """Run a document stage once per corpus (cached as JSON lines) and return a reader of its output."""
    path = store.stage_path(stage, dataset)
    if not path.exists():
        with store.lock(path, f"document stage {stage.name} of {dataset.corpus}"):
            if not path.exists():  # another job may have written it while we waited
                _write_stage(stage, dataset, store, docs, docs_count, model_map, path)
    return lambda: store.read_stage(path)


def _write_stage(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map, path: Path) -> None:
    import more_itertools

    store.remove_leftovers(path)
    log.info("document stage %s on %s -> %s", stage.name, dataset.corpus, path)
    ctx = BuildContext(path=path.parent, params=stage.params, models=resolve_models(stage.models, model_map),
                       docs=docs, docs_count=docs_count, device=settings.device())
    transformer = stage.make(ctx)

    def records():
        for chunk in more_itertools.chunked(docs(), 1024):  # streamed: corpora need not fit in memory
            yield from pd.DataFrame(chunk).pipe(transformer.transform).to_dict("records")

    store.write_stage(stage, dataset, records())


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


def hardware() -> dict[str, Any]:
    """Where a run was measured (latency is meaningless without it). Never imports torch itself."""
    info: dict[str, Any] = {"machine": platform.machine(), "cpus": os.cpu_count(), "processor": _cpu_model()}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _index_encoding(retriever: Retriever, dataset: Dataset, store: Store) -> dict[str, Any] | None:
    if retriever.index is None:
        return None
    folder = store.index_dir(retriever.index, dataset)
    for path in [folder / "encoding.json", *sorted(folder.glob("*/encoding.json"))]:  # written by the builder
        if path.exists():
            return json.loads(path.read_text())
    return None


def _latency_accounting(pipeline):
    """Sum of `latency_seconds()` over the pipeline's parts: time a stage really costs but that a cache served
    in this process (e.g. cached query generations). Duck-typed, so any transformer can declare it."""
    parts, stack = [], [pipeline]
    while stack:
        t = stack.pop()
        if hasattr(t, "latency_seconds"):
            parts.append(t)
        stack.extend(getattr(t, "_transformers", None) or [])
        inner = getattr(t, "transformer", None)
        if inner is not None and inner is not t:
            stack.append(inner)
    return lambda: sum(p.latency_seconds() for p in parts)


def run_cell(retriever: Retriever, dataset: Dataset, topics: pd.DataFrame, store: Store,
             model_map: dict[str, str] | None = None, latency_sample: int = 50) -> Cell:
    """Compute (or load) one cell's run. Latency follows the paper: L = (t_enc + t_ret) / N over the whole
    query set in one batch; p50/p95 come from `latency_sample` queries issued one at a time after warm-up;
    opening the index and loading models is timed separately."""
    loaded = store.load_run(retriever, dataset)
    if loaded is not None:
        return Cell(retriever, dataset, loaded[0], loaded[1], cached=True)
    # one job computes a cell at a time (two grids submitted on one shared cache never compute it twice)
    with store.lock(store.run_path(retriever, dataset), f"run {retriever.name} on {dataset.name}"):
        loaded = store.load_run(retriever, dataset)
        if loaded is not None:
            return Cell(retriever, dataset, loaded[0], loaded[1], cached=True)
        store.remove_leftovers(store.run_path(retriever, dataset))
        store.remove_leftovers(store.meta_path(retriever, dataset))
        return _compute_cell(retriever, dataset, topics, store, model_map, latency_sample)


def _compute_cell(retriever: Retriever, dataset: Dataset, topics: pd.DataFrame, store: Store,
                  model_map: dict[str, str] | None, latency_sample: int) -> Cell:
    start = time.perf_counter()
    pipeline = build_pipeline(retriever, dataset, store, model_map)
    load_seconds = time.perf_counter() - start
    pipeline.transform(topics.head(1))  # warm-up (model load, JIT, JVM): not part of the latency
    accounted = _latency_accounting(pipeline)
    before = accounted()
    start = time.perf_counter()
    res = pipeline.transform(topics)
    seconds = time.perf_counter() - start + (accounted() - before)
    single = []
    for i in range(min(latency_sample, len(topics))):
        before = accounted()
        t0 = time.perf_counter()
        pipeline.transform(topics.iloc[[i]])
        single.append(1000 * (time.perf_counter() - t0 + accounted() - before))
    models = resolve_models(retriever.all_models(), model_map)
    meta = {
        "retriever": retriever.name,
        "dataset": dataset.name,
        "key": store.run_key(retriever, dataset),
        "queries": int(len(topics)),
        "seconds": round(seconds, 4),
        "ms_per_query": round(1000 * seconds / max(len(topics), 1), 3),
        "single_query_ms": {"n": len(single),
                            **({"p50": round(float(np.percentile(single, 50)), 3),
                                "p95": round(float(np.percentile(single, 95)), 3)} if single else {})},
        "load_seconds": round(load_seconds, 3),
        "hardware": hardware(),
        # how the documents were encoded (dtype, batch size after any out-of-memory back-off), when recorded
        "encoding": _index_encoding(retriever, dataset, store),
        "device": settings.device(),
        "models": {role: r.manifest() for role, r in models.items()},
        "config": retriever.config(),
        "pipeline": repr(pipeline),
    }
    store.save_run(retriever, dataset, res, meta)
    loaded = store.load_run(retriever, dataset)  # evaluate exactly what was stored: reruns are identical
    assert loaded is not None
    return Cell(retriever, dataset, loaded[0], loaded[1], cached=False)


def load_cell(retriever: Retriever, dataset: Dataset, store: Store) -> Cell:
    """A cell computed elsewhere (a cluster job): its stored run, or an error saying it is missing."""
    loaded = store.load_run(retriever, dataset)
    if loaded is None:
        raise FileNotFoundError(f"{retriever.name} on {dataset.name}: no stored run at {store.run_path(retriever, dataset)} "
                                f"although its job reported success")
    return Cell(retriever, dataset, loaded[0], loaded[1], cached=True)


def _experiment_rows(spec: ExperimentSpec, dataset: Dataset, cells: list[Cell], topics, qrels):
    names = [c.retriever.name for c in cells]
    frames = [c.res for c in cells]
    baseline = names.index(spec.baseline) if spec.baseline in names and len(names) > 1 else None
    # pt.Experiment, split by query unit (per query / per base query) so our grouped measures mix with
    # standard ones; a baseline excludes perquery output in pt.Experiment, hence a second (evaluation-only) call
    measures = spec.measures_for(dataset)
    agg = measures_mod.experiment(frames, topics, qrels, measures, names=names, baseline=baseline,
                                  test=spec.test, correction=spec.correction, verbose=False)
    perq = measures_mod.experiment(frames, topics, qrels, measures, names=names, perquery=True, verbose=False)
    rows = []
    for _, row in agg.iterrows():
        cell = cells[names.index(row["name"])]
        for m in measures:
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


@dataclass
class Failure:
    dataset: str
    retriever: str
    error: str
    traceback: str


def run(spec: ExperimentSpec | str | Path, out: str | Path | None = None, store: Store | None = None,
        fail_fast: bool = False, executor: Any = None, resume: bool = False) -> pd.DataFrame:
    """Run a grid; returns the long-form results (one row per dataset, system, measure).

    A cell that fails at run time (out of memory, a crash in a library) is recorded with its error in
    `failures.json` and the grid goes on, unless `fail_fast`. Bad configuration fails before any work.

    `executor` (an `irgrid.executors.ExecutorConfig`, an `Executor` or a name: local, ray, slurm) decides where
    cells run; with ray or slurm every missing index, encoding shard and cell is a job of that engine (state and
    logs in `out`), and this process evaluates the stored runs once all jobs finished. `resume` resubmits only
    what is missing from an earlier submission to `out` (finished cells are never recomputed in any case).
    """
    from irgrid import executors as executors_mod
    from irgrid import report

    spec = spec if isinstance(spec, ExperimentSpec) else load_experiment(spec)
    store = store or Store()
    preflight(spec, store)
    ex = executor if isinstance(executor, executors_mod.Executor) else executors_mod.make(executor)
    remote: dict[tuple[str, str], Failure] | None = None
    if not ex.in_process:
        if out is None:
            raise executors_mod.ExecutorError(f"the {ex.name} executor needs an output folder (out=...): the grid's "
                                              f"state and job logs are kept there")
        remote = executors_mod.dispatch(spec, store, Path(out), ex, resume=resume)
    rows: list[dict[str, Any]] = []
    perquery: list[pd.DataFrame] = []
    cells_by_dataset: dict[str, list[Cell]] = {}
    failures: list[Failure] = []
    plan_rows = {(p["dataset"], p["retriever"]): p for p in plan(spec, store)}
    remaining = sum(p["est_seconds"] or 0 for p in plan_rows.values() if not p["run_cached"])
    unknown = {k for k, p in plan_rows.items() if not p["run_cached"] and p["est_seconds"] is None}
    total_cells, done = len(plan_rows), 0
    for dataset in spec.datasets:
        topics, qrels = dataset.topics(), dataset.qrels()
        cells = []
        for retriever in spec.retrievers:
            done += 1
            est = plan_rows[(dataset.name, retriever.name)]
            started = time.perf_counter()
            if remote is not None and (dataset.name, retriever.name) in remote:  # its job failed: reported
                failure = remote[(dataset.name, retriever.name)]
                if fail_fast:
                    raise RuntimeError(f"{retriever.name} on {dataset.name}: {failure.error}\n{failure.traceback}")
                failures.append(failure)
                continue
            try:
                if remote is not None:  # computed by the jobs: only load, never compute here
                    cell = load_cell(retriever, dataset, store)
                else:
                    cell = run_cell(retriever, dataset, topics, store, spec.models, spec.latency_sample)
            except Exception as e:  # recorded and reported; the other cells still run
                if fail_fast:
                    raise
                log.error("[%d/%d] %s on %s FAILED: %s", done, total_cells, retriever.name, dataset.name, e)
                failures.append(Failure(dataset.name, retriever.name, f"{type(e).__name__}: {e}",
                                        traceback.format_exc()))
                continue
            took = time.perf_counter() - started
            if not cell.cached:
                remaining = max(0.0, remaining - (est["est_seconds"] or 0))
            unknown.discard((dataset.name, retriever.name))
            eta = _fmt_seconds(remaining) + (f" + {len(unknown)} cell(s) never measured in this cache" if unknown else "")
            log.info("[%d/%d] %s on %s: %s in %.1fs; remaining ≈ %s", done, total_cells, retriever.name,
                     dataset.name, "cached" if cell.cached else "computed", took, eta)
            cells.append(cell)
        cells_by_dataset[dataset.name] = cells
        if cells:
            dataset_rows, dataset_perq = _experiment_rows(spec, dataset, cells, topics, qrels)
            rows.extend(dataset_rows)
            perquery.append(dataset_perq)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    for name in spec.aggregates if len(results) else []:
        try:
            extra = measures_mod.aggregate(results[results["measure"] != "ms/query"], name)
        except measures_mod.AggregateError as e:  # a failed or missing cell: report, keep the other results
            failures.append(Failure(f"aggregate:{name}", "*", str(e), ""))
            continue
        results = pd.concat([results, extra.assign(baseline=spec.baseline)], ignore_index=True)[RESULT_COLUMNS]
    if out is not None:
        out = Path(out)
        perq = pd.concat(perquery, ignore_index=True) if perquery else pd.DataFrame()
        report.write_outputs(spec, results, perq, cells_by_dataset, store, out)
        write_text_atomic(out / "failures.json", json.dumps([f.__dict__ for f in failures], indent=2))
        for dataset in spec.datasets:
            for cell in cells_by_dataset[dataset.name]:
                target = out / "runs" / dataset.slug / f"{cell.retriever.name}.res.gz"
                _copy_atomic(store.run_path(cell.retriever, dataset), target)
    results.attrs["failures"] = failures
    return results


RESULT_COLUMNS = ["dataset", "system", "measure", "value", "p_value", "p_value_corrected", "significant", "baseline"]


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def plan(spec: ExperimentSpec, store: Store) -> list[dict[str, Any]]:
    """Every cell of the grid: cached or not, index cached or not, whether its models resolve, and an
    estimated time from throughputs measured earlier in this cache (indexing docs/s, ms/query)."""
    index_rate, query_ms = _measured_throughputs(store)
    docs_ok: dict[str, tuple[bool, str]] = {}
    rows = []
    for dataset in spec.datasets:
        for retriever in spec.retrievers:
            row: dict[str, Any] = {"dataset": dataset.name, "retriever": retriever.name,
                                   "run_cached": store.has_run(retriever, dataset),
                                   "index_cached": retriever.index is None or store.index_ready(retriever.index, dataset),
                                   "status": "cached", "reason": "", "est_seconds": 0.0}
            if not row["run_cached"]:
                row["status"] = "to run"
                try:
                    resolve_models(retriever.all_models(), spec.models)
                except models_mod.ModelUnavailableError as e:
                    row["status"], row["reason"] = "unresolvable", str(e)
                if not row["index_cached"] and row["status"] == "to run":
                    ok, why = docs_ok.setdefault(dataset.corpus, dataset.docs_available())
                    if not ok:
                        row["status"], row["reason"] = "unresolvable", f"data: {why}"
                row["est_seconds"] = _estimate(retriever, dataset, row["index_cached"], index_rate, query_ms)
            rows.append(row)
    return rows


def _measured_throughputs(store: Store) -> tuple[dict[str, float], dict[str, float]]:
    index_rate: dict[str, float] = {}
    for marker in (store.root / "indexes").glob("*/*/irgrid-index.json"):
        meta = json.loads(marker.read_text())
        if meta.get("docs") and meta.get("seconds"):
            index_rate[meta["recipe"]["name"]] = meta["docs"] / max(meta["seconds"], 1e-6)
    query_ms: dict[str, float] = {}
    for meta_path in (store.root / "runs").glob("*/*.json"):
        meta = json.loads(meta_path.read_text())
        query_ms[meta["retriever"]] = meta.get("ms_per_query", 0.0)
    return index_rate, query_ms


def _estimate(retriever: Retriever, dataset: Dataset, index_cached: bool, index_rate, query_ms) -> float | None:
    try:
        n_queries = dataset.irds().queries_count()
        seconds = n_queries * query_ms[retriever.name] / 1000 if retriever.name in query_ms else None
        if not index_cached and retriever.index is not None:
            rate = index_rate.get(retriever.index.name)
            docs = dataset.corpus_dataset().docs_count()
            seconds = None if rate is None or seconds is None else seconds + docs / rate
        return seconds
    except Exception:  # counts unknown offline (no metadata, nothing staged): no estimate
        return None


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


def family_projection(spec: ExperimentSpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Projected hours per retriever family for the cells still to run (from `plan`'s estimates, i.e. indexing
    docs/s and ms/query measured earlier in this cache), with the retrievers that have no measured throughput."""
    families = {r.name: r.family for r in spec.retrievers}
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["status"] != "to run":
            continue
        fam = out.setdefault(families.get(row["retriever"], "?"), {"cells": 0, "measured": 0, "seconds": 0.0,
                                                                     "unmeasured": []})
        fam["cells"] += 1
        if row["est_seconds"] is None:
            if row["retriever"] not in fam["unmeasured"]:
                fam["unmeasured"].append(row["retriever"])
        else:
            fam["measured"] += 1
            fam["seconds"] += row["est_seconds"]
    return [{"family": f, "cells": v["cells"], "measured_cells": v["measured"], "hours": v["seconds"] / 3600,
             "unmeasured": v["unmeasured"]} for f, v in sorted(out.items())]


def format_family_projection(projection: list[dict[str, Any]]) -> str:
    if not projection:
        return "projected time: nothing to run\n"
    lines = ["projected time per retriever family (throughputs measured in this cache):"]
    for p in projection:
        line = (f"  {p['family']:<17} {p['hours']:8.2f} h for {p['measured_cells']}/{p['cells']} cells to run")
        if p["unmeasured"]:
            line += f"; unmeasured (no indexing docs/s or ms/query cached): {', '.join(p['unmeasured'])}"
        lines.append(line)
    return "\n".join(lines) + "\n"
