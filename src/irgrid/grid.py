"""The grid runner: an ExperimentSpec -> cached runs -> `pt.Experiment` per dataset -> reports.

Each (retriever, dataset) cell is computed at most once per configuration: runs are stored in the cache under
a hash of the retriever's full configuration and handed to `pt.Experiment` as result frames, which then does
the evaluation, paired tests and multiple-testing correction.
"""

from __future__ import annotations

import contextlib
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
from irgrid._util import progress_stream, quiet_native, write_text_atomic
from irgrid.datasets import Dataset, DatasetError
from irgrid.datasets import get as get_dataset
from irgrid.doc_fields import fielded_docs
from irgrid.experiment import ExperimentSpec
from irgrid.experiment import load as load_experiment
from irgrid.retrievers import BuildContext, IndexRecipe, QueryContext, Retriever
from irgrid.store import CacheError, Store

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
    """The recipe's index of this dataset's corpus, built unless a verified one exists. Under the index's lock:
    concurrent jobs (a cluster sharing the cache) never build it twice; a job that waited reuses what the holder
    built. A folder that fails verification (missing marker, a truncated or altered file) is moved aside."""
    path = store.index_dir(recipe, dataset)
    if store.index_problem(path) is None:
        return path
    corpus = dataset.corpus_dataset()
    with store.lock(path, f"index {recipe.name} of {corpus.corpus}"):
        problem = store.index_problem(path)
        if problem is None:  # built by another job while we waited
            return path
        if problem != "missing":
            store.quarantine(path, problem)
        store.remove_leftovers(path)
        resolved = resolve_models(recipe.models, model_map)
        log.info("indexing %s with %s -> %s", corpus.corpus, recipe.name, path)

        docs_count = corpus.docs_count()
        if docs_count == 0:
            raise DatasetError(f"{corpus.corpus}: the corpus has no documents; nothing to index")
        docs = corpus.docs
        if recipe.stage is not None:
            docs = _stage_docs(recipe.stage, dataset, store, docs, docs_count, model_map)

        tracked = _TrackedDocs(docs, f"{corpus.corpus}", docs_count, f"indexing {corpus.corpus} ({recipe.name})")

        def build(tmp: Path) -> None:
            ctx = BuildContext(path=tmp, params=recipe.params, models=resolved, docs=tracked,
                               docs_count=docs_count, device=settings.device(),
                               fielded=None if recipe.stage is not None else lambda: fielded_docs(corpus))
            recipe.build(ctx)
            tracked.check()  # a builder that swallowed a reading error never publishes a partial index

        what = f"index {recipe.name} of {corpus.corpus}"
        with quiet_native(f"indexing {corpus.corpus} with {recipe.name}"):
            store.build_index(recipe, dataset, (lambda tmp: _isolated(build, tmp, what, store.root))
                              if recipe.isolate else build, docs=docs_count)
    return path


def _isolated(build, tmp: Path, what: str, cache: Path) -> None:
    """Run `build(tmp)` in a forked child: a native abort or segfault fails this artifact with its name (and
    the disk's state) instead of killing the grid; nothing is published, the next run builds it again."""
    import signal

    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # child: build, report an error as text, never return into the grid
        code = 0
        try:
            os.close(read)
            build(tmp)
        except BaseException as e:
            os.write(write, f"{type(e).__name__}\0{e}".encode("utf-8", "replace")[:60000])
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        message = f.read().decode("utf-8", "replace")
    _, status = os.waitpid(pid, 0)
    disk = _disk_note(cache)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise CacheError(f"{what}: the builder crashed in native code ({name}){disk}; nothing was published, a "
                         f"rerun builds it again (-v shows the builder's own output)")
    if os.WEXITSTATUS(status) != 0:
        kind, _, text = message.partition("\0")
        if kind in ("InputError", "DatasetError", "CollectionError"):
            raise DatasetError(text)
        raise CacheError(f"{what}: {kind}: {text}{disk}")


def _disk_note(path: Path) -> str:
    """'; the cache's disk is full' when it (nearly) is: the usual cause of a native builder's abort."""
    if not path.exists():
        return f"; the cache folder {path} is gone (deleted while running?): rerun to rebuild it"
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return ""
    return f"; only {free / 2**20:.1f} MiB free on the disk of the cache {path} (full?): free space or use another --cache" \
        if free < 64 << 20 else ""


class _TrackedDocs:
    """The documents as a builder sees them, remembering whether the last pass ended, failed or saw nothing.

    Some native builders (PISA) read the iterator in another thread and swallow its exceptions, then publish
    an empty or partial index that aborts the process when queried; `check()` re-raises the reading error."""

    def __init__(self, docs, corpus: str, total: int | None = None, desc: str = ""):
        self._docs, self._corpus, self._total, self._desc = docs, corpus, total, desc
        self.error: BaseException | None = None
        self.count = 0
        self.finished = False

    def __call__(self):
        """One progress bar per pass, in documents, with rate and ETA (the builder's own bars are silenced)."""
        from tqdm.auto import tqdm

        self.error, self.count, self.finished = None, 0, False
        stream = progress_stream()
        bar = tqdm(total=self._total or None, desc=self._desc or self._corpus, unit="doc", unit_scale=True,
                   file=stream, mininterval=0.5 if stream.isatty() else 30, disable=not self._desc, leave=False)
        try:
            for doc in self._docs():
                self.count += 1
                bar.update()
                yield doc
        except BaseException as e:
            self.error = e
            raise
        finally:
            bar.close()
        self.finished = True

    def check(self) -> None:
        if self.error is not None:
            raise self.error
        if self.count == 0:
            raise DatasetError(f"{self._corpus}: the corpus has no documents; nothing to index")


def _stage_docs(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map):
    """Run a document stage once per corpus (cached as JSON lines with a manifest) and return a reader."""
    path = store.stage_path(stage, dataset)
    if store.stage_problem(path) is not None:
        with store.lock(path, f"document stage {stage.name} of {dataset.corpus}"):
            problem = store.stage_problem(path)  # another job may have written it while we waited
            if problem is not None:
                if problem != "missing":
                    store.quarantine(path, problem)
                _write_stage(stage, dataset, store, docs, docs_count, model_map, path)
    return lambda: store.read_stage(path)


def _write_stage(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map, path: Path) -> None:
    import more_itertools

    store.remove_leftovers(path)
    log.info("document stage %s on %s -> %s", stage.name, dataset.corpus, path)
    ctx = BuildContext(path=path.parent, params=stage.params, models=resolve_models(stage.models, model_map),
                       docs=docs, docs_count=docs_count, device=settings.device())
    transformer = stage.make(ctx)

    tracked = _TrackedDocs(docs, dataset.corpus, docs_count, f"document stage {stage.name} on {dataset.corpus}")

    def records():
        for chunk in more_itertools.chunked(tracked(), 1024):  # streamed: corpora need not fit in memory
            yield from pd.DataFrame(chunk).pipe(transformer.transform).to_dict("records")
        tracked.check()

    with quiet_native(f"document stage {stage.name} on {dataset.corpus}"):
        store.write_stage(stage, dataset, records())


def build_pipeline(retriever: Retriever, dataset: str | Dataset | None = None, store: Store | None = None,
                   model_map: dict[str, str] | None = None):
    """The entry's full query pipeline on a dataset (index built or reused), dataset policies included."""
    if dataset is None:
        raise ValueError(f"{retriever.name}.pipeline() needs a dataset to index, e.g. 'beir/scifact/test'")
    dataset = get_dataset(dataset) if isinstance(dataset, str) else dataset
    store = store or Store()
    compose = getattr(retriever, "compose", None)
    if compose is not None:  # a pipeline expression (irgrid.expressions): built from its parts' stored cells
        return compose(dataset, store, model_map)
    ctx = QueryContext(options=retriever.options, models=resolve_models(retriever.models, model_map),
                       device=settings.device())
    if retriever.index is None:
        pipeline = retriever.query(None, ctx)
    else:
        ensure_index(retriever.index, dataset, store, model_map)
        folder = store.index_dir(retriever.index, dataset)
        # Some backends write into the published index when first queried with new parameters (PISA's
        # per-parameter `bm25.k1-...` files): opening and building the query side happen under the index's
        # lock, leftovers of a killed writer are deleted first and new files recorded in its manifest.
        with store.lock(folder, f"index {retriever.index.name} of {dataset.corpus} (query-time files)"):
            store.clean_lazy(folder)
            recipe = retriever.index
            artifact = recipe.open(folder, recipe.params, resolve_models(recipe.models, model_map))
            pipeline = retriever.query(artifact, ctx)
            store.record_lazy(folder)
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
        loaded = store.load_run(retriever, dataset, repair=True)  # a damaged run is named, moved aside, redone
        if loaded is not None:
            return Cell(retriever, dataset, loaded[0], loaded[1], cached=True)
        store.remove_leftovers(store.run_path(retriever, dataset))
        store.remove_leftovers(store.meta_path(retriever, dataset))
        return _compute_cell(retriever, dataset, topics, store, model_map, latency_sample)


def _compute_cell(retriever: Retriever, dataset: Dataset, topics: pd.DataFrame, store: Store,
                  model_map: dict[str, str] | None, latency_sample: int) -> Cell:
    with quiet_native(f"{retriever.name} on {dataset.name}"):  # JVM warnings, PISA's per-parameter percentages
        return _timed_cell(retriever, dataset, topics, store, model_map, latency_sample)


def _timed_cell(retriever: Retriever, dataset: Dataset, topics: pd.DataFrame, store: Store,
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
    if spec.self_matches == "paper":
        from irgrid.transforms import drop_unjudged_self_matches

        frames = [drop_unjudged_self_matches(f, qrels) for f in frames]
    baseline = names.index(spec.baseline) if spec.baseline in names and len(names) > 1 else None
    # pt.Experiment, split by query unit (per query / per base query) so our grouped measures mix with
    # standard ones; a baseline excludes perquery output in pt.Experiment, hence a second (evaluation-only) call
    measures = spec.measures_for(dataset)
    # without its baseline (a failed cell) a dataset gets no tests: the failure is recorded by the caller
    agg = measures_mod.experiment(frames, topics, qrels, measures, names=names, baseline=baseline,
                                  test=spec.test, correction=spec.correction if baseline is not None else None,
                                  verbose=False)
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
    spec = spec if isinstance(spec, ExperimentSpec) else load_experiment(spec)
    store = store or Store()
    if out is None:
        preflight(spec, store)
        return _run(spec, None, store, fail_fast, executor, resume)
    out = Path(out)
    check_out(out)
    preflight(spec, store)
    with _out_lock(out):
        return _run(spec, out, store, fail_fast, executor, resume)


OUT_LOCK = ".irgrid-out.lock"


def check_out(out: Path) -> None:
    """--out must be a writable folder (or creatable): found before any cell runs, not after the last."""
    from irgrid.report import OutputError

    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file, not a folder; give a folder path")
    probe_dir = out if out.exists() else next((p for p in out.parents if p.exists()), Path("/"))
    # a real write, not os.access: root passes os.access on a read-only mount or a chattr +i folder
    try:
        import tempfile

        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".irgrid-probe-"):
            pass
    except OSError as e:
        raise OutputError(f"--out {out}: {probe_dir} is not writable ({e.strerror or e}); choose a folder you "
                          f"can write to") from None


@contextlib.contextmanager
def _out_lock(out: Path):
    """One grid writes an output folder at a time (a second one is refused at once, naming the holder)."""
    from irgrid import locks
    from irgrid.report import OutputError

    out.mkdir(parents=True, exist_ok=True)
    try:
        with locks.hold(out / OUT_LOCK, f"output folder {out}", timeout=0):
            yield
    except locks.LockTimeout:
        holder = locks._holder(out / OUT_LOCK) or "another process"
        raise OutputError(f"--out {out} is being written by another irgrid run ({holder}); wait for it or choose "
                          f"another --out") from None


def _run(spec: ExperimentSpec, out: Path | None, store: Store, fail_fast: bool, executor: Any,
         resume: bool) -> pd.DataFrame:
    from irgrid import executors as executors_mod
    from irgrid import report

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
        try:
            topics, qrels = dataset.topics(), dataset.qrels()
        except Exception as e:  # data not staged (a download attempt offline), unreadable files: every cell fails
            if fail_fast:
                raise
            error = _data_error(dataset, e)
            log.error("%s: %s; its %d cell(s) are skipped", dataset.name, error, len(spec.retrievers))
            failures.extend(Failure(dataset.name, r.name, error, traceback.format_exc()) for r in spec.retrievers)
            done += len(spec.retrievers)
            cells_by_dataset[dataset.name] = []
            continue
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
        failed_here = {f.retriever for f in failures if f.dataset == dataset.name}
        if spec.baseline in failed_here and cells:
            failures.append(Failure(dataset.name, spec.baseline, f"baseline {spec.baseline} failed on {dataset.name}: "
                                    f"significance tests skipped for this dataset (values are still reported)", ""))
        if cells:
            dataset_rows, dataset_perq = _experiment_rows(spec, dataset, cells, topics, qrels)
            rows.extend(dataset_rows)
            perquery.append(dataset_perq)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    cells_only = results[results["measure"] != "ms/query"]  # every aggregate reads the cells, never another's rows
    for name in spec.aggregates if len(results) else []:
        try:
            extra = measures_mod.aggregate(cells_only, name)
        except Exception as e:  # a failed or missing cell: report it, keep every result computed so far
            failures.append(Failure(f"aggregate:{name}", "*", f"{type(e).__name__}: {e}", traceback.format_exc()))
            continue
        results = pd.concat([results, extra.assign(baseline=spec.baseline)], ignore_index=True)[RESULT_COLUMNS]
    if out is not None:
        out = Path(out)
        perq = pd.concat(perquery, ignore_index=True) if perquery else pd.DataFrame()
        with report.writing(out):  # one unit: a kill part-way leaves a folder `irgrid report` refuses
            report.write_outputs(spec, results, perq, cells_by_dataset, store, out)
            write_text_atomic(out / "failures.json", json.dumps([f.__dict__ for f in failures], indent=2))
            wanted = set()
            for dataset in spec.datasets:
                for cell in cells_by_dataset[dataset.name]:
                    target = out / "runs" / dataset.slug / f"{cell.retriever.name}.res.gz"
                    _copy_atomic(store.run_path(cell.retriever, dataset), target)
                    wanted.add(target)
            for stale in (out / "runs").glob("*/*.res.gz"):  # runs of an earlier experiment in this folder
                if stale not in wanted:
                    stale.unlink()
    results.attrs["failures"] = failures
    return results


def _data_error(dataset: Dataset, e: Exception) -> str:
    """In words: an offline download attempt becomes irgrid's staging hint instead of ir_datasets' traceback."""
    if isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, PermissionError)):
        return (f"the queries/qrels of {dataset.name!r} are not staged and could not be downloaded "
                f"({type(e).__name__}). Stage the collection on a connected machine with ir_datasets and copy its "
                f"folder under IR_DATASETS_HOME ({settings.irds_home()}), or set IRGRID_IRDS_STAGED to a staged home; "
                f"`irgrid run ... --dry-run` lists what is staged")
    return f"{type(e).__name__}: {e}"


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
        meta = _read_json(marker)
        if meta and meta.get("docs") and meta.get("seconds"):
            index_rate[meta["recipe"]["name"]] = meta["docs"] / max(meta["seconds"], 1e-6)
    query_ms: dict[str, float] = {}
    for meta_path in (store.root / "runs").glob("*/*.json"):
        meta = _read_json(meta_path)
        if meta and "retriever" in meta:
            query_ms[meta["retriever"]] = meta.get("ms_per_query", 0.0)
    return index_rate, query_ms


def _read_json(path: Path) -> dict[str, Any] | None:
    """A cache metadata file for estimates only: an unreadable one is named and skipped (the cell that owns it
    verifies, moves aside and recomputes it when it runs)."""
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError) as e:
        log.warning("cache: %s is unreadable (%s); ignored for estimates, its cell recomputes it", path, e)
        return None


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
    """Fail before computing anything when a model that an uncached cell needs cannot be resolved, or a
    dataset's own measures do not parse."""
    for dataset in spec.datasets:
        spec.measures_for(dataset)
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
