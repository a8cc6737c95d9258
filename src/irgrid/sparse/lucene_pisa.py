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
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt

from irgrid.core.artifacts import KINDS, Packaged, write_meta
from irgrid.core.retrievers import EntryError
from irgrid.util.console import quiet_native

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

    with quiet_native("starting Anserini's analyzer (JVM)"):  # JVM warnings: silenced as in the CLI
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


# A number no text is allowed to contain: StandardTokenizer always makes it one token, and neither lower-casing,
# stopwords nor Porter change digits, so in a joined text it can only come from the separators we put there.
_SEP = "9173645283917"


def analyze_many(texts: list[str]) -> list[list[str]]:
    """`[analyze(t) for t in texts]` in one JNI call: the texts are joined with a separator token and the
    analysed list is cut at it (half the cost per document). Texts that contain the separator's digits, or a
    join whose separator count comes back different, are analysed one by one, so the result is always exact."""
    alone = {i for i, t in enumerate(texts) if _SEP in t}
    joined_texts = [t for i, t in enumerate(texts) if i not in alone] if alone else texts
    parts: list[list[str]] = []
    if joined_texts:
        utils, analyzer = _analyzer()
        sep = f" \n{_SEP}\n "
        toks = utils.analyze(analyzer, sep.join(["", *joined_texts, ""])).toString()[1:-1].split(", ")
        cuts = [i for i, t in enumerate(toks) if t == _SEP]
        if len(cuts) == len(joined_texts) + 1:  # otherwise a separator merged with a neighbour: never seen
            parts = [toks[a + 1:b] for a, b in zip(cuts, cuts[1:])]
        else:
            parts = [analyze(t) for t in joined_texts]
    if not alone:
        return parts
    it = iter(parts)
    return [analyze(t) if i in alone else next(it) for i, t in enumerate(texts)]


def analyzed_postings(texts: list[str]) -> tuple:
    """One chunk of texts as columnar term frequencies: (token counts per text, distinct terms per text,
    the chunk's distinct terms, a term code per posting, tf per posting). Worker-side, so that counting and
    factorising run beside the analysis and only arrays and the chunk's vocabulary travel back."""
    import pandas as pd

    analysed = analyze_many(texts)
    lengths = np.fromiter(map(len, analysed), dtype=np.int64, count=len(analysed))
    tfs = [Counter(tokens) for tokens in analysed]
    counts = np.fromiter(map(len, tfs), dtype=np.int64, count=len(tfs))
    total = int(counts.sum())
    codes, terms = pd.factorize(np.fromiter(chain.from_iterable(tfs), dtype=object, count=total))
    tf = np.fromiter(chain.from_iterable(c.values() for c in tfs), dtype=np.uint32, count=total)
    return lengths, counts, terms.tolist(), codes.astype(np.uint32), tf


def postings_stream(texts: Iterable[str], workers: int = 0, chunk: int = 2048) -> Iterator[tuple]:
    """`analyzed_postings` of consecutive chunks, in input order. With workers > 1, chunks go to that many
    processes, each with its own JVM (pyjnius holds the GIL in Java calls, so threads would serialize)."""
    import more_itertools

    chunks = (list(c) for c in more_itertools.chunked(texts, chunk))
    if workers <= 1:
        yield from map(analyzed_postings, chunks)
        return
    import multiprocessing as mp
    import os

    from irgrid.util.workers import exit_with_parent

    with mp.get_context("spawn").Pool(workers, initializer=exit_with_parent, initargs=(os.getpid(),)) as pool:
        yield from pool.imap(analyzed_postings, chunks, chunksize=1)


def default_workers(docs_count: int | None) -> int:
    """All cores for corpora where a worker's JVM start (~1 s) pays off; inline analysis otherwise."""
    from irgrid.sparse.lucene import available_cores

    cores = available_cores()
    return cores if docs_count is None or docs_count >= 20_000 else 1


# -- the index -----------------------------------------------------------------------------------------------------
def build(path: str | os.PathLike, docs: Iterable[dict[str, str]], k1: float = 0.9, b: float = 0.4,
          scale: float = DEFAULT_SCALE, threads: int | None = None, docs_count: int | None = None,
          batch_size: int = 100_000) -> dict:
    """Two passes: analysed term frequencies are inverted (and spilled to disk) while the statistics (N, df,
    avgdl) accumulate, then Lucene's BM25 weights replace the frequencies, vectorised in float32 as Lucene
    computes them, and the PISA index is written (`PisaImpactWriter`). Memory follows the batch size and the
    vocabulary, not the corpus; returns the collection statistics (also written to `lucene-bm25.json`)."""
    import json

    from irgrid.sparse.pisa_writer import PisaImpactWriter

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    workers = default_workers(docs_count) if threads is None else threads
    writer = PisaImpactWriter(path / "pisa", spill_docs=batch_size)
    lengths: list[np.ndarray] = []
    try:
        docnos: deque[str] = deque()  # filled as the analysis stream reads ahead, emptied in the same order

        def texts() -> Iterator[str]:
            for d in docs:
                docnos.append(d["docno"])
                yield d["text"]

        for length, counts, terms, codes, tf in postings_stream(texts(), workers):
            lengths.append(length)
            writer.add_postings([docnos.popleft() for _ in length], counts, terms, codes, tf)
    except BaseException:
        writer.abort()
        raise
    length = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    n_docs, n_nonempty, total = len(length), int(np.count_nonzero(length)), int(length.sum())
    # BM25Similarity, in float32 as Lucene computes it; idf in double, then cast (Lucene's `(float) Math.log`)
    avgdl = np.float32(total / max(n_nonempty, 1))
    df = writer.postings_per_term()
    idf_of = {int(c): np.float32(math.log(1 + (n_nonempty - c + 0.5) / (c + 0.5))) for c in np.unique(df)}
    idf = np.fromiter((idf_of[int(c)] for c in df), dtype=np.float32, count=len(df))
    inv_norm = (np.float32(1) / (np.float32(k1) * ((np.float32(1) - np.float32(b))
                                                    + np.float32(b) * LENGTH_TABLE / avgdl))).astype(np.float32)
    uniq, where = np.unique(length, return_inverse=True)
    doc_norm = inv_norm[np.array([int_to_byte4(int(x)) for x in uniq], dtype=np.int64)][where]

    def impact(term: np.ndarray, doc: np.ndarray, tf: np.ndarray) -> np.ndarray:
        w = idf[term]
        weight = w - w / (np.float32(1) + tf.astype(np.float32) * doc_norm[doc])  # float32 throughout
        return np.rint(weight.astype(np.float64) * scale).astype(np.int64)  # Python's round(): half to even

    writer.finish(impact)
    stats = {"docs": n_docs, "docCount": n_nonempty, "sumTotalTermFreq": total, "avgdl": float(avgdl),
             "k1": k1, "b": b, "scale": scale}
    (path / "lucene-bm25.json").write_text(json.dumps(stats, indent=1))
    write_meta(path, "lucene-pisa")
    return stats


class LuceneAnalyzedQuery(pt.Transformer):
    """query -> query_toks: Anserini's analysis, each distinct term weighted by its count (BagOfWords boosts)."""

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        return topics.assign(query_toks=[dict(Counter(analyze(q))) for q in topics["query"]]) if len(topics) \
            else topics.assign(query_toks=pd.Series(dtype=object))


class LucenePisaIndex(Packaged, pt.Artifact):
    """A Lucene-BM25 impact index, a PyTerrier artifact (`pt.Artifact.load(path)`); `bm25()` gives the retrieval
    transformer (k1/b are the index's)."""

    ARTIFACT_TYPE, ARTIFACT_FORMAT = KINDS["lucene-pisa"]
    ARTIFACT_PACKAGE_HINT = "irgrid"

    def __init__(self, path: str | os.PathLike):
        import json

        super().__init__(path)
        self.path = Path(path)
        self.stats = json.loads((self.path / "lucene-bm25.json").read_text())

    def __repr__(self) -> str:
        return f"LucenePisaIndex({str(self.path)!r})"

    def retriever(self, num_results: int = 1000) -> pt.Transformer:
        """The index's only retriever: BM25 with the k1/b its weights were computed for."""
        return self.bm25(k1=self.stats["k1"], b=self.stats["b"], num_results=num_results)

    def bm25(self, k1: float = 0.9, b: float = 0.4, num_results: int = 1000,
             threads: int | None = None) -> pt.Transformer:
        if (k1, b) != (self.stats["k1"], self.stats["b"]):
            raise EntryError(
                f"{self.path}: this index holds BM25 weights for k1={self.stats['k1']}, b={self.stats['b']}, "
                f"not k1={k1}, b={b}; BM25 parameters of this entry belong to its index recipe (k1/b in params)")
        from pyterrier_pisa import PisaIndex

        pisa = PisaIndex(str(self.path / "pisa"), stemmer="none", stops="none")
        from irgrid.sparse.lucene import available_cores

        with quiet_native(f"opening the PISA index {self.path / 'pisa'}"):  # PISA's [info] lines, as in the CLI
            retr = pisa.quantized(num_results=num_results, threads=threads or available_cores(),
                                  query_weighted=True, toks_scale=1.0)
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
