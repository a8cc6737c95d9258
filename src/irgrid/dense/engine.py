"""The one encoding engine every dense entry uses: texts tokenized ahead by a worker thread, batched by a token
budget after sorting by length, bf16/fp16 as declared on a GPU with one replica per visible device, out-of-memory
halving the batch instead of failing, and document encodings streamed into the index chunk by chunk.

Models too large for one GPU are never quantised: they are sharded over the visible GPUs (`device_map="auto"`),
or loading fails with a clear error when no GPU can hold them."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from irgrid.models.devices import pick_device
from irgrid.util.console import advance

if TYPE_CHECKING:

    from irgrid.core.modelref import Resolved
from irgrid.dense.model import SideModel
from irgrid.dense.spec import EncoderSpec
from irgrid.util import settings
from irgrid.util.errors import Error
from irgrid.util.settings import SettingsError

log = logging.getLogger("irgrid")


class EncodeOOMError(Error, RuntimeError):
    """Out of memory where a smaller batch would change the vectors (the quirk left_pad_last_token)."""


def is_oom(error: BaseException) -> bool:
    import torch

    return isinstance(error, torch.cuda.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


@dataclass
class EncodeStats:
    docs: int = 0
    seconds: float = 0.0
    batch_size: int = 0
    dtype: str = ""
    devices: list[str] = field(default_factory=list)
    oom_backoffs: int = 0

    def record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "docs_per_s": round(self.docs / self.seconds, 2) if self.seconds else None}


def default_chunk_size() -> int:
    """Documents per encoding chunk (IRGRID_ENCODE_CHUNK, default 4096). Batches never cross a chunk, so shards
    that start on a chunk boundary encode exactly as one process would (irgrid.cluster.sharding)."""
    value = int(settings.variable("IRGRID_ENCODE_CHUNK") or 4096)
    if value < 1:
        raise SettingsError(f"IRGRID_ENCODE_CHUNK must be a positive whole number, got {value}")
    return value


class Engine:
    """Encodes texts for one side of a spec on one or more devices (one replica per visible GPU)."""

    def __init__(self, spec: EncoderSpec, side: str, resolved: Resolved, device: str | None = None,
                 batch_size: int = 32, chunk_size: int | None = None):
        import torch

        self.spec, self.side = spec, side
        device = pick_device(device)
        if device == "cuda" and torch.cuda.device_count() > 1 and side == "d":
            devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        else:
            devices = [device]
        self.replicas = [SideModel(spec, side, resolved, d) for d in devices[:1]]
        if len(devices) > 1 and not getattr(self.replicas[0].model, "hf_device_map", None):
            self.replicas += [SideModel(spec, side, resolved, d) for d in devices[1:]]
        self.batch_size = batch_size
        # batches of one length (`_batches`): only asked for (IRGRID_EXACT_BATCHES), as it costs ~20% on CPU
        self.unpadded = settings.exact_batches() and all(str(r.device) == "cpu" for r in self.replicas)
        self.chunk_size = chunk_size or default_chunk_size()
        if spec.left_pad_last_token:  # the release's batches never cross a chunk: chunks hold whole batches
            fixed = spec.left_pad_last_token
            self.chunk_size = max(1, self.chunk_size // fixed) * fixed
        self.stats = EncodeStats(batch_size=batch_size, dtype=self.replicas[0].dtype_name,
                                 devices=[r.device for r in self.replicas])

    @property
    def tokenizer(self) -> Any:
        return self.replicas[0].tokenizer

    def _batches(self, tokenized: list[list[int]]) -> list[list[int]]:
        """Indices sorted by length (longest first), cut into batches of at most batch_size x longest tokens.

        With IRGRID_EXACT_BATCHES on CPU, batches hold texts of one token length each: no text is padded, so its
        vector does not depend on the batch it lands in. Padding a text changes its vector in the last bits (SDPA attention over the padded
        width rounds differently: up to 1.1e-7 after pooling on all-MiniLM-L6-v2, measured; the batch's row count
        changes nothing), which made fp32 vectors, and scores, move with the batch size, the input order and a
        re-ranker's candidate set (issue 43, `irgrid audit --stability`). It costs throughput where lengths vary
        (600 SciFact documents, 99 lengths: 112 batches instead of 18, 1.25x the time, one process, loaded 2-core
        machine), so it is asked for, not the default; the default's bound is stated instead (1.1e-7 on a vector). On GPUs (reduced precision,
        kernels chosen by shape, no bit-exactness to keep) batches mix lengths and pad. Under the quirk
        left_pad_last_token: input order, batches of exactly the release's size (a vector depends on its batch
        there)."""
        if self.spec.left_pad_last_token:
            fixed = self.spec.left_pad_last_token
            return [list(range(i, min(i + fixed, len(tokenized)))) for i in range(0, len(tokenized), fixed)]
        order = sorted(range(len(tokenized)), key=lambda i: -len(tokenized[i]))
        budget = self.batch_size * max((len(t) for t in tokenized), default=1)
        batches, current = [], []
        for i in order:
            width = len(tokenized[i])
            longest = len(tokenized[current[0]]) if current else width  # sorted: the batch's first is its longest
            if current and (self.unpadded and longest != width or (len(current) + 1) * longest > budget
                            or len(current) >= self.batch_size * 4):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _encode_tokenized(self, replica: SideModel, tokenized: list[list[int]]) -> list[Any]:
        import torch

        out: list[Any] = [None] * len(tokenized)
        pending = self._batches(tokenized)
        with torch.inference_mode():
            while pending:
                batch = pending.pop(0)
                try:
                    result = replica.forward([tokenized[i] for i in batch])
                except Exception as e:  # noqa: BLE001  (only out-of-memory is handled; everything else re-raises)
                    if not is_oom(e) or len(batch) == 1:
                        raise
                    if self.spec.left_pad_last_token:
                        raise EncodeOOMError(
                            f"{self.spec.name}: out of memory on a batch of {len(batch)}; the quirk "
                            f"left_pad_last_token needs the release's batches of {self.spec.left_pad_last_token} "
                            f"(a smaller batch changes the vectors). Use a GPU with more memory, or turn the quirk "
                            f"off (options: {{left_pad_last_token: null}}).") from e
                    self.stats.oom_backoffs += 1
                    self.batch_size = max(1, self.batch_size // 2)
                    self.stats.batch_size = self.batch_size
                    log.warning("%s: out of memory on a batch of %d; retrying with batch size %d",
                                self.spec.name, len(batch), self.batch_size)
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    size = min(self.batch_size, max(1, len(batch) // 2))
                    pending = [b[i:i + size] for b in [batch, *pending] for i in range(0, len(b), size)]
                    continue
                if isinstance(result, list):
                    for i, r in zip(batch, result):
                        out[i] = r
                else:
                    arr = result.cpu().numpy()
                    for j, i in enumerate(batch):
                        out[i] = arr[j]
                advance(len(batch))  # an index build's bar moves per batch (nothing at query time)
        return out

    def encode(self, texts: Sequence[str]) -> Any:
        """Vectors for a list of texts, in input order (an (n, dim) array; a list of arrays for ColBERT)."""
        if len(texts) == 0:
            return [] if self.spec.pooling == "colbert" else np.zeros((0, 0), dtype=np.float32)
        start = time.perf_counter()
        parts = [self._encode_tokenized(self.replicas[0], self.replicas[0].tokenize(texts))]
        self.stats.docs += len(texts)
        self.stats.seconds += time.perf_counter() - start
        out = parts[0]
        return out if self.spec.pooling == "colbert" else np.stack(out).astype(np.float32)

    def stream(self, docs: Iterable[Mapping[str, str]]) -> Iterator[tuple[list[str], Any]]:
        """(docnos, vectors) chunk by chunk: the next chunk is tokenized while this one encodes; with several
        GPUs, chunks go round-robin to one replica each. Only a few chunks are ever in memory. A document's text
        is `spec.document(record)`: its declared fields of {'docno', 'title', 'text'} (flat records: 'text')."""
        it = iter(docs)
        _fixed_mmap_threshold()

        def take() -> tuple[list[str], list[str]]:
            docnos, texts = [], []
            for d in it:
                docnos.append(d["docno"])
                texts.append(self.spec.document(d))
                if len(texts) >= self.chunk_size:
                    break
            return docnos, texts

        n = len(self.replicas)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1 + n) as pool:
            def tokenize_next() -> concurrent.futures.Future:
                def job() -> tuple[list[str], list[list[int]]]:
                    docnos, texts = take()
                    return docnos, self.replicas[0].tokenize(texts) if texts else []
                return pool.submit(job)

            ahead = tokenize_next()
            running: list[tuple[list[str], concurrent.futures.Future]] = []
            k = 0
            while True:
                docnos, tokenized = ahead.result()
                if not docnos:
                    break
                ahead = tokenize_next()
                start = time.perf_counter()
                replica = self.replicas[k % n]
                k += 1
                if n == 1:
                    vecs = self._encode_tokenized(replica, tokenized)
                    self.stats.docs += len(docnos)
                    self.stats.seconds += time.perf_counter() - start
                    yield docnos, self._finish(vecs)
                    continue
                running.append((docnos, pool.submit(self._encode_tokenized, replica, tokenized)))
                if len(running) >= n:
                    d, fut = running.pop(0)
                    self.stats.docs += len(d)
                    yield d, self._finish(fut.result())
            for d, fut in running:
                self.stats.docs += len(d)
                yield d, self._finish(fut.result())

    def _finish(self, vecs: list[Any]) -> Any:
        return vecs if self.spec.pooling == "colbert" else np.stack(vecs).astype(np.float32)


MMAP_THRESHOLD = 64 * 1024  # bytes: allocations at least this big are mmapped, so freeing them returns memory


@functools.cache
def _fixed_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold (once per process) so streaming encoding stays flat in memory.

    Why: glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), after which
    the per-batch activation and token buffers (sizes vary with batch length) come from the heap arenas of the
    tokenizer and encoder threads and fragment them: RSS grew ~10 KB per document (722 MB at 2.5k documents,
    1,178 MB at 100k). A fixed threshold keeps big buffers in mmap, returned on free; measured flat (~575 MB
    from the second chunk on). False where the C library is not glibc (nothing to change there)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(-3, MMAP_THRESHOLD))  # M_MMAP_THRESHOLD


def engine_for(spec: EncoderSpec, side: str, resolved: Resolved, device: str | None, batch_size: int) -> Engine:
    """One engine per (spec, side, checkpoint location, device, batch size), held in the bounded model cache."""
    from irgrid.models.cache import MODELS

    key = ("engine", spec.name, side, resolved.location, resolved.source, device, batch_size,
           json.dumps(spec.config(), sort_keys=True))
    return MODELS.get(key, lambda: Engine(spec, side, resolved, device=device, batch_size=batch_size))


def make_query_encoder(engine: Engine) -> Any:
    """A PyTerrier transformer adding `query_vec` (or `query_toks_vecs` for late interaction)."""
    import pandas as pd
    import pyterrier as pt

    column = "query_embs" if engine.spec.pooling == "colbert" else "query_vec"

    class _QueryEncoder(pt.Transformer):
        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if len(inp) == 0:
                return inp.assign(**{column: pd.Series([], dtype=object)})
            uniq, inv = np.unique(inp["query"].astype(str).values, return_inverse=True)
            vecs = engine.encode(list(uniq))
            return inp.assign(**{column: [vecs[i] for i in inv]})

        def __repr__(self) -> str:
            return f"EngineQueryEncoder({engine.spec.name!r})"

    return _QueryEncoder()


def index_dense(engine: Engine, docs: Iterable[Mapping[str, str]], path: Path) -> dict[str, Any]:
    """Stream a corpus through the engine into a pyterrier-dr FlexIndex at `path`; returns the encoding record."""
    from pyterrier_dr import FlexIndex

    def records() -> Iterator[dict[str, Any]]:
        for docnos, vecs in engine.stream(docs):
            for docno, vec in zip(docnos, vecs):
                yield {"docno": docno, "doc_vec": vec}

    FlexIndex(str(path)).indexer().index(records())
    record = {"encoder": engine.spec.name, **engine.stats.record()}
    (path / "encoding.json").write_text(json.dumps(record, indent=2))
    return record
