"""One cell of a grid: an entry's index built (or reused) for a dataset, its pipeline, and its cached run.

Each (retriever, dataset) cell is computed at most once per configuration: runs are stored in the cache under
a hash of the retriever's full configuration, with the time per query and the index's encoding cost.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import store as store_mod
from irgrid.core import modelref as modelref_mod
from irgrid.core.gridcell import GridCell
from irgrid.core.retrievers import BuildContext, IndexRecipe, Retriever
from irgrid.data.datasets import Dataset, DatasetError
from irgrid.data.datasets import get as get_dataset
from irgrid.data.doc_fields import fielded_docs
from irgrid.models import resolver as models_mod
from irgrid.runner.checks import RunCheckError, check_run, depth_of
from irgrid.store import CacheError, Store
from irgrid.util import settings
from irgrid.util.console import quiet_native, reporting

log = logging.getLogger("irgrid")


def resolve_models(refs, extra: dict[str, str] | None = None, check_only: bool = False,
                   ) -> dict[str, modelref_mod.Resolved]:
    """`check_only`: availability only (plans, `--dry-run`); see `irgrid.models.resolver.resolve`."""
    return {role: models_mod.resolve(ref, extra, check_only) for role, ref in refs.items()}


def open_index(retriever: Retriever, dataset: Dataset, store: Store, model_map: dict[str, str] | None = None):
    """Build the entry's index for this dataset's corpus unless an identical one exists; return the artifact."""
    recipe = retriever.index
    if recipe is None:
        return None
    path = ensure_index(recipe, dataset, store, model_map)
    return recipe.open(path, recipe.params, resolve_models(recipe.models, model_map))


def with_index(entry: Retriever, dataset: Dataset, store: Store, model_map: Mapping[str, str] | None,
               use: Callable[[Any], Any]) -> Any:
    """`use(artifact)` on the entry's opened index (built or reused). Some backends write into the published index
    when first queried with new parameters (PISA's per-parameter `bm25.k1-...` files): opening and building the
    query side happen under the index's lock, leftovers of a killed writer are deleted first and new files recorded
    in its manifest."""
    recipe = entry.index
    assert recipe is not None
    ensure_index(recipe, dataset, store, model_map)
    folder = store.indexes.dir(recipe, dataset)
    with store.lock(folder, f"index {recipe.name} of {dataset.corpus} (query-time files)"):
        store.indexes.clean_lazy(folder)
        artifact = recipe.open(folder, recipe.params, resolve_models(recipe.models, model_map))
        out = use(artifact)
        store.indexes.record_lazy(folder)
    return out


def ensure_index(recipe: IndexRecipe, dataset: Dataset, store: Store, model_map: dict[str, str] | None = None) -> Path:
    """The recipe's index of this dataset's corpus, built unless a verified one exists. Under the index's lock:
    concurrent jobs (a cluster sharing the cache) never build it twice; a job that waited reuses what the holder
    built. A folder that fails verification (missing marker, a truncated or altered file) is moved aside."""
    path = store.indexes.dir(recipe, dataset)
    if store.folder_problem(path) is None:
        return path
    corpus = dataset.corpus_dataset()
    with store.lock(path, f"index {recipe.name} of {corpus.corpus}"):
        problem = store.folder_problem(path)
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
        # the same documents with their fields apart, tracked alike: a builder reads one of the two
        fielded = None if recipe.stage is not None else _TrackedDocs(
            lambda: fielded_docs(corpus), f"{corpus.corpus}", docs_count, f"indexing {corpus.corpus} ({recipe.name})")

        def build(tmp: Path) -> None:
            ctx = BuildContext(path=tmp, params=recipe.params, models=resolved, docs=tracked,
                               docs_count=docs_count, device=settings.device(), fielded=fielded)
            passes = [t for t in (tracked, fielded) if t is not None]
            try:
                with reporting(_OpenPass(passes)):  # encoders report each finished batch: the bar moves per batch
                    recipe.build(ctx)
            finally:
                for t in passes:
                    t.finish()
            # a builder that swallowed a reading error never publishes a partial index
            (fielded if fielded is not None and (fielded.count or fielded.error) else tracked).check()

        what = f"index {recipe.name} of {corpus.corpus}"
        with quiet_native(f"indexing {corpus.corpus} with {recipe.name}"):
            store.indexes.build(recipe, dataset, (lambda tmp: _isolated(build, tmp, what, store.root))
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
    disk = disk_note(cache)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise CacheError(f"{what}: the builder crashed in native code ({name}){disk}; nothing was published, a "
                         f"rerun builds it again (-v shows the builder's own output)")
    if os.WEXITSTATUS(status) != 0:
        kind, _, text = message.partition("\0")
        if kind in ("InputError", "DatasetError", "CollectionError"):
            raise DatasetError(text)
        raise CacheError(f"{what}: {kind}: {text}{disk}")


def disk_note(path: Path) -> str:
    """'; the cache's disk is full' when it (nearly) is: the usual cause of a native builder's abort."""
    if not path.exists():
        return f"; the cache folder {path} is gone (deleted while running?): rerun to rebuild it"
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return ""
    return f"; only {free / 2**20:.1f} MiB free on the disk of the cache {path} (full?): free space or use another --cache" \
        if free < 64 << 20 else ""


_EMPTY_WARNED: set[str] = set()  # corpora whose documents without text were named in this process


class _OpenPass:
    """Where a builder's finished batches go: the pass whose documents it is reading (the flat stream or the
    fielded one; a builder reads one of the two)."""

    def __init__(self, passes: list[_TrackedDocs]):
        self.passes = passes

    def advance(self, n: int) -> None:
        for p in self.passes:
            if p._bar is not None:
                p.advance(n)
                return


class _TrackedDocs:
    """The documents as a builder sees them, remembering whether the last pass ended, failed or saw nothing.

    Some native builders (PISA) read the iterator in another thread and swallow its exceptions, then publish
    an empty or partial index that aborts the process when queried; `check()` re-raises the reading error."""

    def __init__(self, docs, corpus: str, total: int | None = None, desc: str = ""):
        self._docs, self._corpus, self._total, self._desc = docs, corpus, total, desc
        self._bar = None
        self.error: BaseException | None = None
        self.count = 0
        self.finished = False
        self.empty: list[str] = []  # ids of documents without text (warned about once, after a full pass)

    def __call__(self):
        """One progress bar per pass, in documents, with rate and ETA (the builder's own bars are silenced)."""
        from irgrid.util.console import Progress

        self.error, self.count, self.finished, self.empty = None, 0, False, []
        self.finish()  # an earlier pass's bar
        bar = self._bar = Progress(self._total, self._desc) if self._desc else None
        try:
            for doc in self._docs():
                self.count += 1
                if not str(doc.get("text") or "").strip():
                    self.empty.append(str(doc.get("docno")))
                if bar is not None:
                    bar.on_read()
                yield doc
        except BaseException as e:
            self.error = e
            self.finish()
            raise
        self.finished = True  # the bar stays open: encoders still work on what was read (closed by `finish`)
        if self.empty and self._corpus not in _EMPTY_WARNED:  # once per corpus (a stage pass, then the index's)
            _EMPTY_WARNED.add(self._corpus)
            log.warning("%s: %d of %d documents have no text (e.g. %s): they are indexed empty, no query retrieves "
                        "them, and document expansion leaves them empty", self._corpus, len(self.empty), self.count,
                        ", ".join(self.empty[:5]))

    def advance(self, n: int) -> None:
        """A batch of `n` documents finished by the builder (console.advance, per batch): the bar follows it."""
        bar = self._bar
        if bar is not None:
            bar.advance(n)
            if bar.complete:
                self.finish()

    def finish(self) -> None:
        """Close the current pass's bar (its last line in a log file)."""
        bar, self._bar = getattr(self, "_bar", None), None
        if bar is not None:
            bar.close()

    def check(self) -> None:
        if self.error is not None:
            raise self.error
        if self.count == 0:
            raise DatasetError(f"{self._corpus}: the corpus has no documents; nothing to index")


def _stage_docs(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map):
    """Run a document stage once per corpus (cached as JSON lines with a manifest) and return a reader."""
    path = store.stages.path(stage, dataset)
    if store.file_problem(path) is not None:
        with store.lock(path, f"document stage {stage.name} of {dataset.corpus}"):
            problem = store.file_problem(path)  # another job may have written it while we waited
            if problem is not None:
                if problem != "missing":
                    store.quarantine(path, problem)
                _write_stage(stage, dataset, store, docs, docs_count, model_map, path)
    return lambda: store.stages.read(path)


def _write_stage(stage, dataset: Dataset, store: Store, docs, docs_count: int, model_map, path: Path) -> None:
    import more_itertools

    store.remove_leftovers(path)
    log.info("document stage %s on %s -> %s", stage.name, dataset.corpus, path)
    ctx = BuildContext(path=path.parent, params=stage.params, models=resolve_models(stage.models, model_map),
                       docs=docs, docs_count=docs_count, device=settings.device(), store=store)
    transformer = stage.make(ctx)

    tracked = _TrackedDocs(docs, dataset.corpus, docs_count, f"document stage {stage.name} on {dataset.corpus}")

    def records():
        for chunk in more_itertools.chunked(tracked(), 1024):  # streamed: corpora need not fit in memory
            yield from pd.DataFrame(chunk).pipe(transformer.transform).to_dict("records")
        tracked.check()

    with quiet_native(f"document stage {stage.name} on {dataset.corpus}"), reporting(tracked):
        try:
            store.stages.write(stage, dataset, records())
        finally:
            tracked.finish()


def build_pipeline(cell: GridCell, dataset: str | Dataset | None = None, store: Store | None = None,
                   model_map: dict[str, str] | None = None, check_queries: bool = True, live: bool = False):
    """The cell's full query pipeline on a dataset (`GridCell.build`: indexes built or reused, dataset policies
    included). `check_queries` (the Python API's default) puts a check that every query is text in front; a grid's
    own topics are checked when read; `live`: see `GridCell.build`."""
    if not isinstance(cell, GridCell):
        raise TypeError(f"expected a retriever (irgrid.retriever('bm25-pisa')), a pipeline expression or their name, "
                        f"got {cell!r}")
    if dataset is None:
        from irgrid.runner.roles import RoleError

        raise RoleError(f"{cell.name}.pipeline() needs a dataset to index, e.g. 'beir/scifact/test'")
    ds = dataset_of(dataset)
    cell = cell.for_dataset(ds)  # a profile's per-dataset values, as the grid's cell on this dataset runs them
    cell = models_mod.with_mapping(cell, model_map)  # mapped checkpoints keyed by their folders' content
    inner = cell.build(ds, store or store_mod.current(), model_map, live=live)
    if not check_queries:
        return inner
    from irgrid.runner.transforms import CheckQueries, EntryPipeline

    checked = EntryPipeline(CheckQueries(), inner, entry=cell)  # a raw `+` of differently scaled entries warns
    if hasattr(inner, "expression"):  # irgrid.pipeline("EXPR", ds) in extra=/names=: still the YAML item's cell
        checked.expression = inner.expression
    return checked


@dataclass
class Cell:
    retriever: GridCell
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


def _index_encoding(retriever: GridCell, dataset: Dataset, store: Store) -> dict[str, Any] | None:
    if retriever.index is None:
        return None
    folder = store.indexes.dir(retriever.index, dataset)
    for path in [folder / "encoding.json", *sorted(folder.glob("*/encoding.json"))]:  # written by the builder
        if path.exists():
            return json.loads(path.read_text())
    return None


def run_cell(retriever: GridCell, dataset: Dataset, topics: pd.DataFrame, store: Store,
             model_map: dict[str, str] | None = None, latency_sample: int = 50) -> Cell:
    """Compute (or load) one cell's run. Latency follows the paper: L = (t_enc + t_ret) / N over the whole
    query set in one batch; p50/p95 come from `latency_sample` queries issued one at a time after warm-up;
    opening the index and loading models is timed separately. The entry runs with its profile's values for
    this dataset (`GridCell.for_dataset`)."""
    retriever = retriever.for_dataset(dataset)
    loaded = store.runs.load(retriever, dataset)
    if loaded is not None:
        return _checked(Cell(retriever, dataset, loaded[0], loaded[1], cached=True), topics)
    # one job computes a cell at a time (two grids submitted on one shared cache never compute it twice)
    with store.lock(store.runs.path(retriever, dataset), f"run {retriever.name} on {dataset.name}"):
        loaded = store.runs.load(retriever, dataset, repair=True)  # a damaged run is named, moved aside, redone
        if loaded is not None:
            return _checked(Cell(retriever, dataset, loaded[0], loaded[1], cached=True), topics)
        store.remove_leftovers(store.runs.path(retriever, dataset))
        store.remove_leftovers(store.runs.meta_path(retriever, dataset))
        return _compute_cell(retriever, dataset, topics, store, model_map, latency_sample)


def _compute_cell(retriever: GridCell, dataset: Dataset, topics: pd.DataFrame, store: Store,
                  model_map: dict[str, str] | None, latency_sample: int) -> Cell:
    with quiet_native(f"{retriever.name} on {dataset.name}"):  # JVM warnings, PISA's per-parameter percentages
        return _timed_cell(retriever, dataset, topics, store, model_map, latency_sample)


def _timed_cell(retriever: GridCell, dataset: Dataset, topics: pd.DataFrame, store: Store,
                model_map: dict[str, str] | None, latency_sample: int) -> Cell:
    start = time.perf_counter()
    pipeline = build_pipeline(retriever, dataset, store, model_map, check_queries=False)
    load_seconds = time.perf_counter() - start
    pipeline.transform(topics.head(1))  # warm-up (model load, JIT, JVM): not part of the latency
    from irgrid.runner.transforms import latency_accounting  # PyTerrier: not at import (`irgrid list`)

    accounted = latency_accounting(pipeline)
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
    # a malformed run is refused before it is stored (never evaluated, never reused)
    empty = check_run(res, retriever.name, dataset.name, topics, depth_of(retriever))
    if "rank" not in res.columns:  # optional in PyTerrier: ranks from the scores, as pt.model.add_ranks gives them
        import pyterrier as pt

        res = pt.model.add_ranks(res)
    models = resolve_models(retriever.all_models(), model_map)
    meta = {
        "retriever": retriever.name,
        "dataset": dataset.name,
        "key": store.runs.key(retriever, dataset),
        "queries": int(len(topics)),
        "seconds": round(seconds, 4),
        "ms_per_query": round(1000 * seconds / max(len(topics), 1), 3),
        "single_query_ms": {"n": len(single),
                            **({"p50": round(float(np.percentile(single, 50)), 3),
                                "p95": round(float(np.percentile(single, 95)), 3)} if single else {})},
        "load_seconds": round(load_seconds, 3),
        "hardware": hardware(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # when its latency was measured
        # how the documents were encoded (dtype, batch size after any out-of-memory back-off), when recorded
        "encoding": _index_encoding(retriever, dataset, store),
        "device": settings.device(),
        "models": {role: r.manifest() for role, r in models.items()},
        "config": retriever.config(),
        "pipeline": repr(pipeline),
        "empty_queries": empty,  # topic qids without any result (present in the topics, absent from the run)
    }
    store.runs.save(retriever, dataset, res, meta)
    loaded = store.runs.load(retriever, dataset)  # evaluate exactly what was stored: reruns are identical
    assert loaded is not None
    return _checked(Cell(retriever, dataset, loaded[0], loaded[1], cached=False), topics)


def _checked(cell: Cell, topics: pd.DataFrame | None) -> Cell:
    """The cell, its run checked (irgrid.runner.checks): a stored run with duplicate pairs, more rows than the
    system's depth, disordered ranks or foreign queries is refused; the queries without results are recorded."""
    empty = check_run(cell.res, cell.retriever.name, cell.dataset.name, topics, depth_of(cell.retriever))
    recorded = cell.meta.get("empty_queries")
    if recorded is not None and topics is not None and sorted(map(str, recorded)) != empty:
        lost = sorted(set(empty) - set(map(str, recorded)))
        raise RunCheckError(f"run of {cell.retriever.name!r} on {cell.dataset.name!r}: queries {lost[:5]} have no "
                            f"results although its metadata records only {len(recorded)} empty queries")
    cell.meta.setdefault("empty_queries", empty)  # runs stored before this was recorded
    return cell


def load_cell(retriever: GridCell, dataset: Dataset, store: Store, topics: pd.DataFrame | None = None) -> Cell:
    """A stored cell (the grid evaluates these, whichever job computed them): its run, checked against the
    dataset's `topics` (read when not given), or an error saying it is missing."""
    retriever = retriever.for_dataset(dataset)
    loaded = store.runs.load(retriever, dataset)
    if loaded is None:
        raise CacheError(f"{retriever.name} on {dataset.name}: no verified stored run at "
                         f"{store.runs.path(retriever, dataset)} although its job reported success (deleted or "
                         f"changed since?); rerun the grid to compute it again")
    topics = dataset.topics() if topics is None else topics
    return _checked(Cell(retriever, dataset, loaded[0], loaded[1], cached=True), topics)


@dataclass
class Failure:
    dataset: str
    retriever: str
    error: str
    traceback: str


def dataset_of(dataset: str | Dataset) -> Dataset:
    """A Dataset from a name; a `DatasetName` (what the function form of `extra=` receives) carries the grid's own
    Dataset (a query sample, a bring-your-own collection), so `retriever.pipeline(name)` is that very dataset."""
    if isinstance(dataset, str):
        return getattr(dataset, "dataset", None) or get_dataset(dataset)
    if not isinstance(dataset, Dataset):
        from irgrid.data.errors import InputError

        raise InputError(f"dataset {dataset!r} ({type(dataset).__name__}): a dataset is a name ('vaswani', "
                         f"'beir/scifact/test', 'vaswani@q20s1' for a query sample) or what irgrid.dataset(...) "
                         f"returns")
    return dataset


class DatasetName(str):
    """A dataset's name (compares and prints as the name) that still knows its Dataset."""

    dataset: Dataset

    def __new__(cls, dataset: Dataset) -> DatasetName:
        out = super().__new__(cls, dataset.name)
        out.dataset = dataset
        return out
