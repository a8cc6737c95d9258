"""Exact dense search over a pyterrier-dr FlexIndex, and a late-interaction (ColBERT) index.

`ExactRetriever` picks its backend when it opens: an exact GPU matmul + top-k when a GPU is present and the vectors
fit in its free memory (with room to spare), faiss-cpu flat search (as in the paper) otherwise, streamed over the
memory-mapped vectors in blocks so no copy of the corpus is made. Queries are searched in batches for throughput;
`search_one` is the single-query path for latency. Approximate search is never implicit: `faiss_hnsw` and the like
live on FlexIndex (`index.faiss_hnsw_retriever()`), to be chosen by name.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyterrier as pt

from irgrid.core.artifacts import KINDS, Packaged, write_meta
from irgrid.data.errors import InputError

log = logging.getLogger("irgrid")
BLOCK = 1 << 17  # documents per scoring block on CPU (the paper's 2^17)
SCORE_DTYPES = {"fp16": 2, "fp32": 4}  # GPU scoring precision -> bytes per vector component


def _merge_topk(scores: np.ndarray, ids: np.ndarray, new_scores: np.ndarray, new_ids: np.ndarray,
                k: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.concatenate([scores, new_scores], axis=1)
    i = np.concatenate([ids, new_ids], axis=1)
    if s.shape[1] > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s, i = np.take_along_axis(s, part, 1), np.take_along_axis(i, part, 1)
    return s, i


class ExactRetriever(pt.Transformer):
    """Exact inner-product top-k over a FlexIndex: GPU matmul when the vectors fit, faiss-cpu flat otherwise.

    `score_dtype`: the GPU matrix's precision, 'fp16' (half the memory, irgrid's default) or 'fp32' (the scores of
    the paper's faiss IndexFlatIP; the quirk `score_dtype`). The CPU path always scores in fp32."""

    def __init__(self, flex: Any, num_results: int = 1000, query_batch_size: int = 1024, device: str | None = None,
                 score_dtype: str = "fp16"):
        if score_dtype not in SCORE_DTYPES:
            raise InputError(f"score_dtype must be one of {', '.join(SCORE_DTYPES)}, got {score_dtype!r}")
        self.score_dtype = score_dtype
        self.flex = flex
        self.num_results = num_results
        self.query_batch_size = query_batch_size
        self.docnos, self.vecs, meta = flex.payload()
        self.n, self.dim = self.vecs.shape
        self.backend, self.device = self._choose(device)
        self._gpu_matrix = None

    def _choose(self, device: str | None) -> tuple[str, str]:
        import torch

        from irgrid.models.devices import pick_device

        want = pick_device(device)
        if want.startswith("cuda") and torch.cuda.is_available():
            free, _ = torch.cuda.mem_get_info(torch.device(want))
            need = self.n * self.dim * SCORE_DTYPES[self.score_dtype]
            if need < 0.6 * free:
                return "torch-gpu", want
            log.info("vectors (%.1f GiB %s) do not fit the GPU (%.1f GiB free): faiss-cpu flat",
                     need / 2**30, self.score_dtype, free / 2**30)
        return "faiss-cpu-flat", "cpu"

    def search(self, queries: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, doc indices), best first, for a batch of query vectors."""
        k = min(k or self.num_results, self.n)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.backend == "torch-gpu":
            return self._search_gpu(queries, k)
        return self._search_faiss(queries, k)

    def search_one(self, query: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        s, i = self.search(query.reshape(1, -1), k)
        return s[0], i[0]

    def _search_gpu(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        dtype = torch.float16 if self.score_dtype == "fp16" else torch.float32
        if self._gpu_matrix is None:
            mat = torch.empty((self.n, self.dim), dtype=dtype, device=self.device)
            for start in range(0, self.n, BLOCK):
                block = torch.from_numpy(np.ascontiguousarray(self.vecs[start:start + BLOCK], dtype=np.float32))
                mat[start:start + BLOCK] = block.to(self.device, non_blocking=True).to(dtype)
            self._gpu_matrix = mat
        q = torch.from_numpy(queries).to(self.device).to(dtype)
        scores, ids = torch.topk(q @ self._gpu_matrix.T, k, dim=1)
        return scores.float().cpu().numpy(), ids.cpu().numpy()

    def _search_faiss(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(queries), 0), dtype=np.int64)
        for start in range(0, self.n, BLOCK):
            block = np.ascontiguousarray(self.vecs[start:start + BLOCK], dtype=np.float32)
            s, i = faiss.knn(queries, block, min(k, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
            best_s, best_i = _merge_topk(best_s, best_i, s, i + start, k)
        order = np.lexsort((best_i, -best_s), axis=-1)  # by score, then by document position
        return np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        cols = [c for c in inp.columns if c != "query_vec"]
        if len(inp) == 0:
            return pd.DataFrame(columns=cols + ["docno", "docid", "score", "rank"])
        inp = inp.reset_index(drop=True)
        frames = []
        for start in range(0, len(inp), self.query_batch_size):
            part = inp.iloc[start:start + self.query_batch_size]
            scores, ids = self.search(np.stack(part["query_vec"].values))
            k = scores.shape[1]
            rows = part[cols].loc[part.index.repeat(k)].reset_index(drop=True)
            flat_ids = ids.reshape(-1)
            rows["docid"] = flat_ids
            rows["docno"] = self.docnos.fwd[flat_ids] if hasattr(self.docnos, "fwd") else [
                self.docnos[int(i)] for i in flat_ids]
            rows["score"] = scores.reshape(-1)
            rows["rank"] = np.tile(np.arange(k), len(part))
            frames.append(rows)
        return pd.concat(frames, ignore_index=True)

    def __repr__(self) -> str:
        return f"ExactRetriever({self.backend}, num_results={self.num_results}, score_dtype={self.score_dtype})"


# -------------------------------------------------------------------------------------------------------------
# late interaction


KMEANS_DOCLEN = 120  # ColBERTv2's typical document length in its sample-size formula


def kmeans_sample_docs(n_docs: int, seed: int = 123) -> np.ndarray:
    """Sorted ids of the documents whose token vectors train the k-means, as ColBERTv2 samples them:
    min(n, 1 + 16 * sqrt(120 * n)) documents at random. Why: training on every token vector costs
    T x 16 sqrt(T) per iteration (~T^1.5); the sample grows as sqrt(n), so training grows ~linearly beyond
    ~31k documents (below that the sample is the whole corpus, as in ColBERT)."""
    k = min(n_docs, 1 + int(16 * math.sqrt(KMEANS_DOCLEN * n_docs)))
    return np.sort(np.random.default_rng(seed).choice(n_docs, k, replace=False)) if k < n_docs \
        else np.arange(n_docs)


class LateInteractionIndex(Packaged, pt.Artifact):
    """A PyTerrier artifact (`pt.Artifact.load(path)`; `retriever()` searches it). Token vectors of every document (fp16, one flat file), their offsets, docnos, and k-means centroids.

    Search follows ColBERTv2/PLAID's structure: candidate generation from the centroids nearest to each query
    token (an IVF over token vectors, k-means with the paper's 4 iterations), then exact MaxSim over the
    candidates' full token vectors. Residual compression is not applied: token vectors are kept at fp16, so the
    final scores are exact MaxSim (PLAID approximates them)."""

    ARTIFACT_TYPE, ARTIFACT_FORMAT = KINDS["late"]
    ARTIFACT_PACKAGE_HINT = "irgrid"

    def __init__(self, path: str | Path):
        super().__init__(path)
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"LateInteractionIndex({str(self.path)!r})"

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_text())

    def build(self, chunks: Iterable[tuple[list[str], list[np.ndarray]]], kmeans_niter: int = 4,
              seed: int = 123) -> dict[str, Any]:
        import faiss

        self.path.mkdir(parents=True, exist_ok=True)
        lengths: list[int] = []
        dim = None
        with open(self.path / "docnos.txt", "w") as fd, open(self.path / "tokens.f16", "wb") as ft:
            for docnos, vecs in chunks:
                for docno, v in zip(docnos, vecs):
                    if dim is None:
                        dim = v.shape[1]
                    fd.write(docno.replace("\n", " ") + "\n")
                    ft.write(np.asarray(v, dtype=np.float16).tobytes())
                    lengths.append(len(v))
        if dim is None:
            raise InputError("late-interaction index: no documents to index")
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        np.save(self.path / "offsets.npy", offsets)
        total = int(offsets[-1])
        # ColBERTv2's number of partitions: 2^floor(log2(16 * sqrt(#embeddings)))
        n_centroids = max(1, min(total, 2 ** int(math.floor(math.log2(16 * math.sqrt(max(total, 1)))))))
        tokens = np.memmap(self.path / "tokens.f16", dtype=np.float16, mode="r", shape=(total, dim))
        docs = kmeans_sample_docs(len(lengths), seed)
        starts = offsets[docs]
        rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, offsets[docs + 1])]) if len(docs) else docs
        sample = np.ascontiguousarray(tokens[rows], dtype=np.float32)
        t_train = time.perf_counter()
        km = faiss.Kmeans(dim, n_centroids, niter=kmeans_niter, seed=seed, spherical=True, min_points_per_centroid=1,
                          max_points_per_centroid=1 << 30)
        km.train(sample)
        centroids = km.centroids.astype(np.float32)
        t_train = time.perf_counter() - t_train
        t_assign = time.perf_counter()
        assign = np.empty(total, dtype=np.int32)
        index = faiss.IndexFlatIP(dim)
        index.add(centroids)
        for start in range(0, total, BLOCK):
            _, a = index.search(np.ascontiguousarray(tokens[start:start + BLOCK], dtype=np.float32), 1)
            assign[start:start + BLOCK] = a[:, 0]
        t_assign = time.perf_counter() - t_assign
        np.save(self.path / "centroids.npy", centroids)
        np.save(self.path / "assign.npy", assign)
        meta = {"docs": len(lengths), "tokens": total, "dim": dim, "centroids": n_centroids,
                "kmeans_niter": kmeans_niter, "storage_dtype": "fp16", "kmeans_sample_docs": int(len(docs)),
                "kmeans_sample_tokens": int(len(sample)), "kmeans_train_s": round(t_train, 3),
                "assign_s": round(t_assign, 3)}
        (self.path / "meta.json").write_text(json.dumps(meta, indent=2))
        write_meta(self.path, "late")
        return meta

    def retriever(self, num_results: int = 1000, ncells: int = 4) -> LateInteractionRetriever:
        """Candidates: every document with a token in the `ncells` cells nearest each query token, all scored by
        exact MaxSim (no PLAID `ndocs` cap: nothing is pruned before exact scoring)."""
        return LateInteractionRetriever(self, num_results=num_results, ncells=ncells)


class LateInteractionRetriever(pt.Transformer):
    def __init__(self, index: LateInteractionIndex, num_results: int, ncells: int):
        meta = index.meta
        self.num_results, self.ncells = num_results, ncells
        self.docnos = np.array((index.path / "docnos.txt").read_text().split("\n")[:-1], dtype=object)
        self.offsets = np.load(index.path / "offsets.npy")
        self.tokens = np.memmap(index.path / "tokens.f16", dtype=np.float16, mode="r",
                                shape=(meta["tokens"], meta["dim"]))
        self.centroids = np.load(index.path / "centroids.npy")
        assign = np.load(index.path / "assign.npy")
        order = np.argsort(assign, kind="stable")  # inverted lists: centroid -> token ids -> doc ids
        self.ivf_tokens = order
        self.ivf_bounds = np.searchsorted(assign[order], np.arange(len(self.centroids) + 1))
        self.token_doc = np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))

    def candidates(self, q: np.ndarray) -> np.ndarray:
        cells = np.argsort(-(q @ self.centroids.T), axis=1)[:, : self.ncells]
        toks = [self.ivf_tokens[self.ivf_bounds[c]:self.ivf_bounds[c + 1]] for c in np.unique(cells)]
        docs = np.unique(self.token_doc[np.concatenate(toks)]) if toks else np.zeros(0, dtype=np.int64)
        return docs

    def maxsim(self, q: np.ndarray, docs: np.ndarray, block: int = 2048) -> np.ndarray:
        """Exact MaxSim of query tokens `q` against each candidate document, vectorised per block of documents."""
        scores = np.zeros(len(docs), dtype=np.float32)
        for b in range(0, len(docs), block):
            part = docs[b:b + block]
            starts, ends = self.offsets[part], self.offsets[part + 1]
            lengths = ends - starts
            nonempty = lengths > 0
            if not nonempty.any():
                continue
            idx = np.concatenate([np.arange(s, e) for s, e in zip(starts[nonempty], ends[nonempty])])
            sims = q @ np.asarray(self.tokens[idx], dtype=np.float32).T  # (query tokens, candidate tokens)
            bounds = np.concatenate([[0], np.cumsum(lengths[nonempty])[:-1]])
            per_doc = np.maximum.reduceat(sims, bounds, axis=1)  # max over each document's tokens
            scores[b:b + block][nonempty] = per_doc.sum(axis=0)
        return scores

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        cols = [c for c in inp.columns if c != "query_embs"]
        rows = []
        for _, row in inp.iterrows():
            q = np.asarray(row["query_embs"], dtype=np.float32)
            docs = self.candidates(q)
            scores = self.maxsim(q, docs)
            top = np.argsort(-scores, kind="stable")[: self.num_results]
            base = {c: row[c] for c in cols}
            for rank, j in enumerate(top):
                rows.append({**base, "docno": self.docnos[docs[j]], "docid": int(docs[j]),
                             "score": float(scores[j]), "rank": rank})
        return pd.DataFrame(rows, columns=cols + ["docno", "docid", "score", "rank"])

    def __repr__(self) -> str:
        return f"LateInteractionRetriever(ncells={self.ncells}, num_results={self.num_results})"
