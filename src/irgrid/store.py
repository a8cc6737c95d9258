"""The on-disk cache: indexes keyed by (corpus, recipe hash), runs keyed by (dataset, retriever hash).

Keys hash the full configuration, never just a name, so a changed option can never reuse a stale artifact
(the trap of `pt.Experiment(save_mode='reuse')`, which matches runs by system name). Everything is written
under a temporary name and renamed into place when complete.

The cache may be shared by many concurrent jobs (a cluster on a shared filesystem): each artifact has a file
lock (`irgrid.locks`) that its builder holds, so two jobs never build the same artifact at once, and every
artifact actually built is recorded as one line of `builds.log` (which job built what, and when).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from irgrid import locks, settings
from irgrid._util import atomic_dir, atomic_path, config_hash, write_text_atomic
from irgrid.datasets import Dataset
from irgrid.retrievers import IndexRecipe, Retriever

RUN_FORMAT = 1  # bump when the stored run format or evaluation inputs change
MARKER = "irgrid-index.json"
BUILDS_LOG = "builds.log"


class Store:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else settings.cache_root()

    # -- concurrency: locks and the build log -------------------------------------------------------------
    def lock_path(self, artifact: Path) -> Path:
        """The lock file of an artifact of this cache (kept apart, under `locks/`, so no glob ever sees it)."""
        rel = Path(artifact).resolve().relative_to(self.root.resolve())
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

    # -- indexes ---------------------------------------------------------------------------------------
    def index_dir(self, recipe: IndexRecipe, dataset: Dataset) -> Path:
        corpus = dataset.corpus_dataset()
        key = config_hash({"recipe": recipe.config(), "corpus": corpus.corpus, "fields": list(corpus.fields)})
        return self.root / "indexes" / corpus.corpus.replace("/", "--") / f"{recipe.name}-{key}"

    def index_ready(self, recipe: IndexRecipe, dataset: Dataset) -> bool:
        return (self.index_dir(recipe, dataset) / MARKER).exists()

    def build_index(self, recipe: IndexRecipe, dataset: Dataset, build, docs: int | None = None) -> Path:
        """Run `build(tmp_dir)` and publish the folder only once it finished (with its marker)."""
        final = self.index_dir(recipe, dataset)
        start = time.perf_counter()
        with atomic_dir(final) as tmp:
            build(tmp)
            meta = {"recipe": recipe.config(), "corpus": dataset.corpus_dataset().corpus,
                    "seconds": round(time.perf_counter() - start, 3), "docs": docs}
            (tmp / MARKER).write_text(json.dumps(meta, indent=2))
        self.record_build("index", final, recipe=recipe.name)
        return final

    # -- document stages (expansions, impact vectors), shared by every index built from them -------------
    def stage_path(self, stage, dataset: Dataset) -> Path:
        corpus = dataset.corpus_dataset()
        key = config_hash({"stage": stage.config(), "corpus": corpus.corpus, "fields": list(corpus.fields)})
        return self.root / "stages" / corpus.corpus.replace("/", "--") / f"{stage.name}-{key}.jsonl.gz"

    def write_stage(self, stage, dataset: Dataset, records) -> Path:
        """Stream records into the stage file; it appears under its final name only when complete."""
        import gzip

        path = self.stage_path(stage, dataset)
        with atomic_path(path, suffix=".jsonl.gz") as tmp:
            with gzip.open(tmp, "wt", encoding="utf-8") as f:
                for record in records:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.record_build("stage", path, stage=stage.name)
        return path

    @staticmethod
    def read_stage(path: Path):
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

    # -- encoding shards (a corpus encoded by several jobs, merged into one index) ----------------------
    def shard_root(self, recipe: IndexRecipe, dataset: Dataset) -> Path:
        index = self.index_dir(recipe, dataset)
        return self.root / "shards" / index.parent.name / index.name

    def shard_dir(self, recipe: IndexRecipe, dataset: Dataset, start: int, stop: int) -> Path:
        return self.shard_root(recipe, dataset) / f"docs-{start:010d}-{stop:010d}"

    # -- runs ------------------------------------------------------------------------------------------
    def run_key(self, retriever: Retriever, dataset: Dataset) -> str:
        return config_hash({"retriever": retriever.config(), "dataset": dataset.config(), "format": RUN_FORMAT})

    def run_path(self, retriever: Retriever, dataset: Dataset) -> Path:
        return self.root / "runs" / dataset.slug / f"{retriever.name}-{self.run_key(retriever, dataset)}.res.gz"

    def meta_path(self, retriever: Retriever, dataset: Dataset) -> Path:
        path = self.run_path(retriever, dataset)
        return path.with_name(path.name[: -len(".res.gz")] + ".json")

    def has_run(self, retriever: Retriever, dataset: Dataset) -> bool:
        return self.run_path(retriever, dataset).exists() and self.meta_path(retriever, dataset).exists()

    def load_run(self, retriever: Retriever, dataset: Dataset):
        import pyterrier as pt

        path, meta_path = self.run_path(retriever, dataset), self.meta_path(retriever, dataset)
        if not (path.exists() and meta_path.exists()):  # the meta file is written last: both or nothing
            return None
        res = pt.io.read_results(str(path))
        return res.astype({"qid": str, "docno": str}), json.loads(meta_path.read_text())

    def save_run(self, retriever: Retriever, dataset: Dataset, res, meta: dict[str, Any]) -> None:
        import pyterrier as pt

        path = self.run_path(retriever, dataset)
        with atomic_path(path, suffix=".res.gz") as tmp:
            pt.io.write_results(res, str(tmp), format="trec", run_name=retriever.name)
        write_text_atomic(self.meta_path(retriever, dataset), json.dumps(meta, indent=2))
        self.record_build("run", path, retriever=retriever.name, dataset=dataset.name)
