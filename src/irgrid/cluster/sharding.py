"""A dense corpus encoding split into shards (jobs on different GPUs or nodes) and merged into one index.

Shards are contiguous document ranges in corpus order. Every shard starts on a multiple of the engine's chunk
size (`irgrid.dense.engine.default_chunk_size`, `IRGRID_ENCODE_CHUNK`): the engine forms batches within a chunk, so
each shard sees exactly the chunks, batches and padding that one process would, and the merged vectors are
bit-for-bit those of a single-process encode (same model, same dtype, same kind of device).

Each shard writes `vectors.f4` (float32, row-major) and `docnos.json` under a temporary name and publishes the
folder with a marker when complete; the merge streams the shards in corpus order into the same pyterrier-dr
FlexIndex that `irgrid.dense.engine.index_dense` writes, then deletes the shards. Only the engine's public
functions are used (`engine_for`, `Engine.stream`).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from irgrid.core.retrievers import IndexRecipe
from irgrid.data.datasets import Dataset
from irgrid.store import Store
from irgrid.util.errors import Error
from irgrid.util.files import atomic_dir

log = logging.getLogger("irgrid")

SHARD_MARKER = "irgrid-shard.json"


class ShardError(Error, RuntimeError):
    pass


def shardable(recipe: IndexRecipe) -> bool:
    """Recipes that declare a shardable build (the dense engine's FlexIndex build), with no document stage."""
    return recipe.shardable and recipe.stage is None


def chunk_size() -> int:
    from irgrid.dense.engine import default_chunk_size

    return default_chunk_size()


def shard_ranges(n_docs: int, shards: int, chunk: int) -> list[tuple[int, int]]:
    """At most `shards` contiguous (start, stop) ranges covering [0, n_docs), each starting on a multiple of
    `chunk` and holding a balanced number of whole chunks (fewer shards than asked when there are fewer chunks)."""
    if n_docs < 0 or shards < 1 or chunk < 1:
        raise ValueError(f"shard_ranges: need n_docs >= 0, shards >= 1, chunk >= 1 (got {n_docs}, {shards}, {chunk})")
    n_chunks = max(1, math.ceil(n_docs / chunk))
    k = min(shards, n_chunks)
    base, extra = divmod(n_chunks, k)
    ranges, first = [], 0
    for i in range(k):
        count = base + (1 if i < extra else 0)
        ranges.append((first * chunk, min(n_docs, (first + count) * chunk)))
        first += count
    return ranges


def shard_ready(store: Store, recipe: IndexRecipe, dataset: Dataset, start: int, stop: int) -> bool:
    return (store.indexes.shard_dir(recipe, dataset, start, stop) / SHARD_MARKER).exists()


def _engine(recipe: IndexRecipe, model_map: Mapping[str, str] | None, device: str | None) -> Any:
    from irgrid.dense.engine import engine_for
    from irgrid.dense.spec import side_spec
    from irgrid.runner.cell import resolve_models

    spec = side_spec(recipe.params, "d")
    resolved = resolve_models(recipe.models, dict(model_map or {}))
    return engine_for(spec, "d", resolved["doc"], device, int(recipe.params["batch_size"]))


def encode_shard(recipe: IndexRecipe, dataset: Dataset, store: Store, start: int, stop: int,
                 model_map: Mapping[str, str] | None = None, device: str | None = None) -> Path:
    """Encode documents [start, stop) of the corpus into the shard folder (unless it, or the merged index,
    exists). Under the shard's lock: two jobs never encode the same shard."""
    final = store.indexes.shard_dir(recipe, dataset, start, stop)
    if store.indexes.ready(recipe, dataset) or (final / SHARD_MARKER).exists():
        return final
    with store.lock(final, f"shard {start}-{stop} of {recipe.name} on {dataset.corpus}"):
        if store.indexes.ready(recipe, dataset) or (final / SHARD_MARKER).exists():
            return final
        store.remove_leftovers(final)
        engine = _engine(recipe, model_map, device)
        if start % engine.chunk_size:
            raise ShardError(f"shard {start}-{stop}: start is not a multiple of the encoding chunk size "
                             f"{engine.chunk_size}; every job of a grid must see the same IRGRID_ENCODE_CHUNK")
        if engine.spec.flat_documents:
            docs = itertools.islice(dataset.corpus_dataset().docs(), start, stop)
        else:  # the entry reads other document fields than the flat join (same order, same documents)
            from irgrid.data.doc_fields import fielded_docs

            docs = itertools.islice(fielded_docs(dataset), start, stop)
        docs_before, seconds_before, t0 = engine.stats.docs, engine.stats.seconds, time.perf_counter()
        log.info("encoding documents %d-%d of %s with %s -> %s", start, stop, dataset.corpus, recipe.name, final)
        with atomic_dir(final) as tmp:
            docnos: list[str] = []
            dim = None
            with (tmp / "vectors.f4").open("wb") as f:
                for chunk_docnos, vecs in engine.stream(docs):
                    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
                    if vecs.ndim != 2:
                        raise ShardError(f"{recipe.name}: sharding needs one vector per document, got {vecs.shape}")
                    dim = vecs.shape[1]
                    f.write(vecs.tobytes())
                    docnos.extend(chunk_docnos)
            if len(docnos) != stop - start:
                raise ShardError(f"shard {start}-{stop} of {dataset.corpus}: read {len(docnos)} documents, expected "
                                 f"{stop - start} (did the corpus change since the grid was planned?)")
            (tmp / "docnos.json").write_text(json.dumps(docnos))
            meta = {"start": start, "stop": stop, "docs": len(docnos), "dim": dim, "dtype": "float32",
                    "chunk_size": engine.chunk_size, "encoder": engine.spec.name,
                    "encoding": {**engine.stats.record(), "docs": engine.stats.docs - docs_before,
                                 "seconds": round(engine.stats.seconds - seconds_before, 3),
                                 "wall_seconds": round(time.perf_counter() - t0, 3)}}
            (tmp / SHARD_MARKER).write_text(json.dumps(meta, indent=2))
        store.record_build("shard", final, recipe=recipe.name, start=start, stop=stop)
    return final


def _shard_records(folder: Path) -> Iterator[dict[str, Any]]:
    meta = json.loads((folder / SHARD_MARKER).read_text())
    docnos = json.loads((folder / "docnos.json").read_text())
    if not docnos:
        return
    vecs = np.memmap(folder / "vectors.f4", dtype=np.float32, mode="r").reshape(len(docnos), int(meta["dim"]))
    for docno, vec in zip(docnos, vecs):
        yield {"docno": docno, "doc_vec": np.asarray(vec)}


def merge_shards(recipe: IndexRecipe, dataset: Dataset, store: Store, ranges: list[tuple[int, int]],
                 keep_shards: bool = False) -> Path:
    """Write the recipe's index (the FlexIndex `build_dense` writes) from its shards, in corpus order."""
    from pyterrier_dr import FlexIndex

    path = store.indexes.dir(recipe, dataset)
    if store.indexes.ready(recipe, dataset):
        return path
    ranges = sorted(ranges)
    if not ranges or ranges[0][0] != 0 or any(a[1] != b[0] for a, b in zip(ranges, ranges[1:])):
        raise ShardError(f"{recipe.name} on {dataset.corpus}: shard ranges {ranges} do not tile the corpus from 0")
    with store.lock(path, f"index {recipe.name} of {dataset.corpus}"):
        if store.indexes.ready(recipe, dataset):
            return path
        folders = [store.indexes.shard_dir(recipe, dataset, a, b) for a, b in ranges]
        missing = [f.name for f in folders if not (f / SHARD_MARKER).exists()]
        if missing:
            raise ShardError(f"cannot merge {recipe.name} on {dataset.corpus}: shard(s) {missing} not finished")
        n_docs = dataset.corpus_dataset().docs_count()
        if ranges[-1][1] != n_docs:
            raise ShardError(f"{recipe.name} on {dataset.corpus}: shards cover {ranges[-1][1]} documents, the corpus "
                             f"has {n_docs}")
        store.remove_leftovers(path)
        metas = [json.loads((f / SHARD_MARKER).read_text()) for f in folders]
        log.info("merging %d shards of %s on %s -> %s", len(folders), recipe.name, dataset.corpus, path)

        def build(tmp: Path) -> None:
            flex = tmp / "flex"
            FlexIndex(str(flex)).indexer().index(itertools.chain.from_iterable(_shard_records(f) for f in folders))
            record = {"encoder": metas[0]["encoder"], "docs": sum(m["docs"] for m in metas),
                      "seconds": round(sum(m["encoding"]["seconds"] for m in metas), 3),
                      "shards": [{k: m[k] for k in ("start", "stop", "docs")} | {"encoding": m["encoding"]}
                                 for m in metas]}
            (flex / "encoding.json").write_text(json.dumps(record, indent=2))

        store.indexes.build(recipe, dataset, build, docs=n_docs)
        if not keep_shards:
            shutil.rmtree(store.indexes.shard_root(recipe, dataset), ignore_errors=True)
    return path

