"""Lucene's BM25 at PISA speed: Anserini's analysis and Lucene's BM25 weights precomputed into a PISA impact index.

Why our own: pyterrier-pisa scores BM25 over its own analysis (Porter2, Terrier stopwords, its tokenizer), which
moves nDCG@10 by 0.03-0.04 on collections nobody tuned on. Here every document and query goes through the
analyzer Anserini indexes and searches with by default (pyserini's `get_lucene_analyzer()`: Lucene's
StandardTokenizer, English possessives, lower case, Lucene's English stopwords, Porter), and each posting
stores Lucene's BM25 term weight (Lucene >= 8, as `BM25Similarity` computes it in float32):

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))                 N = documents with at least one token
    w(t, d)  = idf - idf / (1 + tf / (k1 * (1 - b + b * L(d) / avgdl)))   = idf * tf / (tf + k1 (...))
    L(d)     = byte4ToInt(intToByte4(|d|))                         Lucene's one-byte length norm (lossy >= 24)

quantised as round(w * scale). Queries are bags of analysed terms whose counts weight the terms, like Anserini's
BagOfWordsQueryGenerator (BoostQuery by count); PISA's `quantized` scorer then sums count * impact, the same
sum Lucene computes, up to the quantisation. Scores are divided by `scale` again, so they read as Lucene's.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt

DEFAULT_SCALE = 1000.0  # impacts are integers: 1/1000 of a score unit keeps rankings within 0.002 (benchmarks)


# -- Lucene's SmallFloat length norm (org.apache.lucene.util.SmallFloat, written from its documented algorithm) --
def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i  # subnormal: exact
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)  # 3 explicit mantissa bits, implicit leading one


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)  # 24: lengths below it are stored exactly


def int_to_byte4(i: int) -> int:
    if i < 0:
        raise ValueError(f"a document length cannot be negative: {i}")
    return i if i < NUM_FREE_VALUES else NUM_FREE_VALUES + _long_to_int4(i - NUM_FREE_VALUES)


def byte4_to_int(b: int) -> int:
    return b if b < NUM_FREE_VALUES else min(NUM_FREE_VALUES + _int4_to_long(b - NUM_FREE_VALUES), 2**31 - 1)


LENGTH_TABLE = np.array([byte4_to_int(b) for b in range(256)], dtype=np.float32)


def lucene_length(n_tokens: int) -> int:
    """The document length BM25 sees in Lucene: the token count after the one-byte norm round trip."""
    return byte4_to_int(int_to_byte4(n_tokens))


# -- analysis ------------------------------------------------------------------------------------------------------
@functools.cache
def _analyzer():
    from irgrid.sparse.lucene import start_jvm

    start_jvm()
    from jnius import autoclass
    from pyserini.analysis import get_lucene_analyzer

    # the analyzer Anserini's indexer and LuceneSearcher use when none is named (porter, English stopwords)
    return autoclass("io.anserini.analysis.AnalyzerUtils"), get_lucene_analyzer()


def analyze(text: str) -> list[str]:
    """Anserini's default English analysis of one text (one JNI call; tokens never contain ', ')."""
    utils, analyzer = _analyzer()
    joined = utils.analyze(analyzer, text).toString()[1:-1]
    return joined.split(", ") if joined else []


def _analyze_chunk(texts: list[str]) -> list[list[str]]:
    return [analyze(t) for t in texts]


def analyze_stream(texts: Iterable[str], workers: int = 0, chunk: int = 512) -> Iterator[list[str]]:
    """Analysed token lists in input order. With workers > 1, chunks go to that many processes, each with its
    own JVM (pyjnius holds the GIL in Java calls, so threads would serialize)."""
    import more_itertools

    if workers <= 1:
        for t in texts:
            yield analyze(t)
        return
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers) as pool:
        for out in pool.imap(_analyze_chunk, more_itertools.chunked(texts, chunk), chunksize=1):
            yield from out


def default_workers(docs_count: int | None) -> int:
    """All cores for corpora where a worker's JVM start (~1 s) pays off; inline analysis otherwise."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores if docs_count is None or docs_count >= 20_000 else 1


# -- the index -----------------------------------------------------------------------------------------------------
def build(path: str | os.PathLike, docs: Iterable[dict[str, str]], k1: float = 0.9, b: float = 0.4,
          scale: float = DEFAULT_SCALE, threads: int | None = None, docs_count: int | None = None) -> dict:
    """Two passes over the analysed documents: statistics (N, df, avgdl), then Lucene BM25 impacts into PISA.

    The analysed documents are spooled as term-count lines in a temporary file beside the index, so memory
    stays flat in the corpus size; returns the collection statistics (also written to `lucene-bm25.json`)."""
    import json

    from pyterrier_pisa import PisaIndex

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    workers = default_workers(docs_count) if threads is None else threads
    df: Counter[str] = Counter()
    n_docs = n_nonempty = total = 0
    fd, spool_name = tempfile.mkstemp(prefix="analysed.", suffix=".tsv", dir=path)
    spool = Path(spool_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            docnos: list[str] = []

            def texts() -> Iterator[str]:
                for d in docs:
                    docnos.append(d["docno"])
                    yield d["text"]

            for i, tokens in enumerate(analyze_stream(texts(), workers)):
                tf = Counter(tokens)
                df.update(tf.keys())
                n_docs += 1
                if tokens:
                    n_nonempty += 1
                    total += len(tokens)
                out.write(docnos[i] + "\t" + str(len(tokens)) + "\t"
                          + " ".join(f"{t}:{c}" for t, c in tf.items()) + "\n")
                docnos[i] = ""  # keep the list's memory bounded by its pointers, not the strings
        # BM25Similarity, in float32 as Lucene computes it
        avgdl = np.float32(total / max(n_nonempty, 1))
        n = n_nonempty
        idf = {t: np.float32(math.log(1 + (n - c + 0.5) / (c + 0.5))) for t, c in df.items()}
        inv_norm = (np.float32(1) / (np.float32(k1) * ((np.float32(1) - np.float32(b))
                                                        + np.float32(b) * LENGTH_TABLE / avgdl))).astype(np.float32)
        del df

        def impacts() -> Iterator[dict]:
            with spool.open(encoding="utf-8") as f:
                for line in f:
                    docno, length, terms = line.rstrip("\n").split("\t")
                    toks: dict[str, int] = {}
                    if terms:
                        ni = inv_norm[int_to_byte4(int(length))]
                        for item in terms.split(" "):
                            t, c = item.rsplit(":", 1)
                            w = idf[t]
                            score = w - w / (np.float32(1) + np.float32(int(c)) * ni)
                            q = int(round(float(score) * scale))
                            if q > 0:
                                toks[t] = q
                    yield {"docno": docno, "toks": toks}

        index = PisaIndex(str(path / "pisa"), stemmer="none", stops="none", threads=max(workers, 1))
        index.toks_indexer(scale=1.0).index(impacts())
    finally:
        spool.unlink(missing_ok=True)
    stats = {"docs": n_docs, "docCount": n_nonempty, "sumTotalTermFreq": total, "avgdl": float(avgdl),
             "k1": k1, "b": b, "scale": scale}
    (path / "lucene-bm25.json").write_text(json.dumps(stats, indent=1))
    return stats


class LuceneAnalyzedQuery(pt.Transformer):
    """query -> query_toks: Anserini's analysis, each distinct term weighted by its count (BagOfWords boosts)."""

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        return topics.assign(query_toks=[dict(Counter(analyze(q))) for q in topics["query"]]) if len(topics) \
            else topics.assign(query_toks=pd.Series(dtype=object))


class LucenePisaIndex:
    """An opened Lucene-BM25 impact index; `bm25()` gives the retrieval transformer (k1/b are the index's)."""

    def __init__(self, path: str | os.PathLike):
        import json

        self.path = Path(path)
        self.stats = json.loads((self.path / "lucene-bm25.json").read_text())

    def bm25(self, k1: float = 0.9, b: float = 0.4, num_results: int = 1000,
             threads: int | None = None) -> pt.Transformer:
        if (k1, b) != (self.stats["k1"], self.stats["b"]):
            raise ValueError(
                f"{self.path}: this index holds BM25 weights for k1={self.stats['k1']}, b={self.stats['b']}, "
                f"not k1={k1}, b={b}; BM25 parameters of this entry belong to its index recipe (k1/b in params)")
        from pyterrier_pisa import PisaIndex

        pisa = PisaIndex(str(self.path / "pisa"), stemmer="none", stops="none")
        from irgrid.sparse.lucene import available_cores

        retr = pisa.quantized(num_results=num_results, threads=threads or available_cores(), query_weighted=True,
                              toks_scale=1.0)
        return LucenePisaRetrieve(retr, float(self.stats["scale"]))


class LucenePisaRetrieve(pt.Transformer):
    """Anserini's query analysis, then PISA's quantized retrieval, with scores divided back into Lucene's units.

    Why not `LuceneAnalyzedQuery() >> pisa` (as before): PISA copies every input column once per result row, and
    with pandas' Arrow strings copying the query text 1,000 times per query cost more than the retrieval itself
    on long questions (DisastQA: ~0.5 ms of ~1.8 ms per query). PISA gets only positions and term weights here;
    the topics' own columns are attached by a numpy take on object arrays (pointers, not text)."""

    def __init__(self, retr: pt.Transformer, scale: float):
        self.retr, self.scale = retr, scale

    def __repr__(self) -> str:
        return f"LucenePisaRetrieve({self.retr!r}, scale={self.scale})"

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(topics, extra_columns=["query"])
        own = [c for c in topics.columns if c != "query_toks"]
        if len(topics) == 0:
            return pd.DataFrame(columns=own + ["docno", "score", "rank"])
        toks = [dict(Counter(analyze(q))) for q in topics["query"]]
        narrow = pd.DataFrame({"qid": np.arange(len(topics), dtype=np.int64), "query_toks": toks})
        res = self.retr.transform(narrow)
        pos = res["qid"].to_numpy(dtype=np.int64)
        out = {c: pd.Series(topics[c].to_numpy(dtype=object)[pos], dtype=object, copy=False) for c in own}
        out["docno"] = res["docno"].reset_index(drop=True)
        out["score"] = (res["score"] / self.scale).reset_index(drop=True)
        out["rank"] = res["rank"].reset_index(drop=True)
        return pd.DataFrame(out)
