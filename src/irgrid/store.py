"""The on-disk cache: indexes keyed by (corpus, recipe hash), runs keyed by (dataset, retriever hash).

Keys hash the full configuration, never just a name, so a changed option can never reuse a stale artifact
(the trap of `pt.Experiment(save_mode='reuse')`, which matches runs by system name). Everything is written
under a temporary name and renamed into place when complete.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from irgrid import settings
from irgrid._util import atomic_dir, atomic_path, config_hash, write_text_atomic
from irgrid.datasets import Dataset
from irgrid.retrievers import IndexRecipe, Retriever

RUN_FORMAT = 1  # bump when the stored run format or evaluation inputs change
MARKER = "irgrid-index.json"


class Store:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else settings.cache_root()

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
        return path

    @staticmethod
    def read_stage(path: Path):
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

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
