"""Cost at scale: index build time, peak RSS, index size and query latency of each retriever backend on
deterministic synthetic corpora of growing size, with fitted growth exponents and extrapolations.

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--backends ...] [--out benchmarks/results]

Corpora: documents drawn from the staged collections (vaswani, BEIR SciFact, the DisastQA-derived collection):
their word unigram distribution and their document lengths, seeded per chunk of documents, so every size is a
prefix of the next and every run sees the same text. A small Zipf tail of synthetic rare words (3% of tokens)
lets the vocabulary keep growing with the corpus, as real vocabularies do (Heaps); without it the term
dictionary would stop at the staged collections' ~60k words. Queries are the staged collections' real queries.

Every (backend, size) runs in its own child process, so its peak RSS (`wait4`'s ru_maxrss) is its own; sizes run
from small to large and a backend that exceeds `--budget-s` at one size is not run at the next. Each cost is
fitted as cost = a * n^k on log-log axes (k is the growth exponent) and extrapolated to MS MARCO (8.8M documents)
and to the paper grid's total (~37M documents indexed per retriever). Writes `scale.csv`, `scale_fit.csv` and
`scale.png` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
CHUNK = 10_000  # documents per seeded chunk
TAIL = 0.03  # share of tokens drawn from the Zipf tail of rare synthetic words
SOURCES = ("vaswani", "beir/scifact/test", "disastqa/derived")
MSMARCO, PAPER_GRID = 8_841_823, 37_000_000
N_SINGLE, N_BATCH, K = 100, 1000, 1000  # queries timed one at a time, queries per batch, results per query

# backend -> (what it measures, the largest size it runs at by default: None = every size)
BACKENDS: dict[str, tuple[str, int | None]] = {  # in the order they run at each size
    "lucene-1t": ("Lucene BM25, one indexing thread (build only)", None),
    "lucene": ("Lucene BM25 (Anserini via pyserini), indexing threads = cores", None),
    "pisa": ("PISA BM25, Porter2 (`bm25-pisa`), threads = cores", None),
    "lucene-pisa": ("Lucene-analysed BM25 impacts in PISA (`bm25-lucene-pisa`)", None),
    "impact": ("learned-sparse PISA impact index, random impacts (SPLADE-like shape)", None),
    "dense-384": ("exact dense search, 384-d random unit vectors: faiss flat and torch matmul", None),
    "dense-768": ("exact dense search, 768-d random unit vectors: faiss flat and torch matmul", None),
    "plaid": ("PLAID-structured late-interaction index (random 128-d token vectors)", 2_000),
    "encode": ("streaming encoding into a FlexIndex, tiny random-weight MiniLM (engine)", 100_000),
}


# -- the synthetic corpus ------------------------------------------------------------------------------------------
def corpus_model(work: Path) -> dict[str, np.ndarray]:
    """Word distribution, document lengths (words) and queries of the staged collections, cached in `work`."""
    path = work / "corpus_model.npz"
    if path.exists():
        z = np.load(path, allow_pickle=True)
        return {k: z[k] for k in z.files}
    from irgrid.data.datasets import get

    counts: Counter[str] = Counter()
    lengths: list[int] = []
    queries: list[str] = []
    for name in SOURCES:
        ds = get(name)
        for d in ds.docs():
            words = d["text"].split()
            counts.update(words)
            lengths.append(len(words))
        queries.extend(ds.topics()["query"].astype(str).tolist())
    words = np.array([w for w, _ in counts.most_common()], dtype=object)
    freq = np.array([c for _, c in counts.most_common()], dtype=np.float64)
    model = {"words": words, "cdf": np.cumsum(freq / freq.sum()), "lengths": np.array(lengths, dtype=np.int32),
             "queries": np.array(sorted(set(queries)), dtype=object)}
    np.savez(path, **model)
    return model


def _chunk_text(model: dict[str, np.ndarray], chunk: int, n: int) -> list[str]:
    rng = np.random.default_rng([20261201, chunk])
    lengths = np.maximum(rng.choice(model["lengths"], n), 1)
    total = int(lengths.sum())
    ids = np.searchsorted(model["cdf"], rng.random(total), side="right").clip(0, len(model["words"]) - 1)
    tokens = model["words"][ids]
    tail = rng.random(total) < TAIL
    tokens[tail] = [f"zq{z:x}" for z in rng.zipf(1.3, int(tail.sum()))]
    bounds = np.cumsum(lengths)[:-1]
    tokens = np.insert(tokens, bounds, "\n")  # one C-level join per chunk, split at the sentinels
    return [t.strip() for t in " ".join(tokens.tolist()).split("\n")]


def write_corpus(model: dict[str, np.ndarray], n: int, path: Path) -> float:
    """docno<TAB>text lines (tokens never hold tabs or newlines); the size-n corpus is the first n lines."""
    start = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for c in range(math.ceil(n / CHUNK)):
            m = min(CHUNK, n - c * CHUNK)
            for i, text in enumerate(_chunk_text(model, c, m)):
                f.write(f"d{c * CHUNK + i}\t{text}\n")
    tmp.rename(path)
    return time.perf_counter() - start


def read_docs(path: Path, n: int) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= n:
                return
            docno, text = line.rstrip("\n").split("\t", 1)
            yield {"docno": docno, "text": text}


# -- measuring -----------------------------------------------------------------------------------------------------
_BUILD_RSS: list[float] = []


def _built() -> float:
    """Peak RSS (MB) so far of this process and its reaped children (e.g. analysis workers): the build's."""
    import resource

    mb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    _BUILD_RSS.append(mb / 1024)
    return time.perf_counter()


def _du(path: Path) -> int:
    """Bytes under a folder, or of one file."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _latency(one, batch, queries: list) -> dict[str, float]:
    """p50/p95 ms of single queries (after 5 warm-up queries) and batched queries/s."""
    for q in queries[:5]:
        one(q)
    times = []
    for q in queries[:N_SINGLE]:
        t = time.perf_counter()
        one(q)
        times.append(1000 * (time.perf_counter() - t))
    t = time.perf_counter()
    batch(queries[:N_BATCH])
    qps = min(N_BATCH, len(queries)) / (time.perf_counter() - t)
    return {"p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)), "qps": qps}


def _topics(queries: list[str]):
    import pandas as pd

    return pd.DataFrame({"qid": [str(i) for i in range(len(queries))], "query": queries})


def child(backend: str, n: int, corpus: Path, work: Path) -> list[dict]:
    model = corpus_model(work)
    queries = [str(q) for q in model["queries"]]
    out = work / f"{backend}-{n}"
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rows = []
    _BUILD_RSS.clear()
    if backend in ("lucene", "lucene-1t"):
        from irgrid.sparse.lucene import LuceneIndex

        threads = 1 if backend == "lucene-1t" else CORES
        index = LuceneIndex(out / "lucene")
        t = time.perf_counter()
        index.index(read_docs(corpus, n), threads=threads, docs_count=n)
        build = _built() - t
        row = {"build_s": build, "threads": threads}
        if backend == "lucene":
            retr = index.bm25(num_results=K, threads=CORES)
            topics = _topics(queries)
            row.update(_latency(lambda q: retr.transform(topics.iloc[[q]]), lambda qs: retr.transform(topics.iloc[qs]),
                                list(range(len(queries)))))
        rows.append(row)
    elif backend == "pisa":
        from pyterrier_pisa import PisaIndex

        index = PisaIndex(str(out / "pisa"), stemmer="porter2", stops="terrier", threads=CORES)
        t = time.perf_counter()
        index.indexer(text_field="text").index(read_docs(corpus, n))
        build = _built() - t
        retr = index.bm25(k1=0.9, b=0.4, num_results=K, threads=CORES)
        topics = _topics(queries)
        rows.append({"build_s": build, "threads": CORES,
                     **_latency(lambda q: retr.transform(topics.iloc[[q]]), lambda qs: retr.transform(topics.iloc[qs]),
                                list(range(len(queries))))})
    elif backend == "lucene-pisa":
        from irgrid.sparse.lucene_pisa import LucenePisaIndex, build, default_workers

        t = time.perf_counter()
        build(out / "lp", read_docs(corpus, n), docs_count=n)
        b = _built() - t
        retr = LucenePisaIndex(out / "lp").bm25(num_results=K, threads=CORES)
        topics = _topics(queries)
        rows.append({"build_s": b, "threads": default_workers(n),
                     **_latency(lambda q: retr.transform(topics.iloc[[q]]), lambda qs: retr.transform(topics.iloc[qs]),
                                list(range(len(queries))))})
    elif backend == "impact":
        rows.append(_impact(n, out))
    elif backend.startswith("dense-"):
        rows.extend(_dense(n, int(backend.split("-")[1]), out))
    elif backend == "plaid":
        rows.append(_plaid(model, n, out))
    elif backend == "encode":
        rows.append(_encode(corpus, n, out))
    else:
        raise SystemExit(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    for r in rows:
        r["build_rss_mb"] = _BUILD_RSS[0] if _BUILD_RSS else float("nan")
        r.setdefault("backend", backend)
        r["index_bytes"] = r.get("index_bytes") or _du(out)
    if not os.environ.get("IRGRID_SCALE_KEEP"):
        shutil.rmtree(out, ignore_errors=True)
    return rows


def _impact(n: int, out: Path) -> dict:
    """SPLADE-like documents: ~130 terms (log-normal, 8..512) of a 30,522-term vocabulary with Zipfian popularity,
    integer impacts (x100 weights, log-normal around 60); queries of ~25 weighted terms."""
    from pyterrier_pisa import PisaIndex

    vocab = 30522
    pop = 1.0 / (np.arange(vocab) + 20.0)
    cdf = np.cumsum(pop / pop.sum())
    names = np.array([f"t{i}" for i in range(vocab)], dtype=object)

    def docs() -> Iterator[dict]:
        for c in range(math.ceil(n / CHUNK)):
            rng = np.random.default_rng([7, c])
            m = min(CHUNK, n - c * CHUNK)
            nt = np.clip(rng.lognormal(math.log(130), 0.5, m), 8, 512).astype(int)
            terms = np.searchsorted(cdf, rng.random(int(nt.sum())), side="right").clip(0, vocab - 1)
            imp = np.clip(rng.lognormal(math.log(60), 0.8, len(terms)), 1, 1000).astype(int)
            ends = np.cumsum(nt)
            for i in range(m):
                s = ends[i] - nt[i]
                yield {"docno": f"d{c * CHUNK + i}",
                       "toks": dict(zip(names[terms[s:ends[i]]].tolist(), imp[s:ends[i]].tolist()))}

    from irgrid.sparse.pisa_writer import write_impact_index

    t = time.perf_counter()
    write_impact_index(out / "pisa", docs(), scale=1.0)
    index = PisaIndex(str(out / "pisa"), stemmer="none", stops="none", threads=CORES)
    build = _built() - t
    rng = np.random.default_rng(99)
    qs = []
    for _ in range(N_BATCH):
        terms = np.searchsorted(cdf, rng.random(25), side="right").clip(0, vocab - 1)
        qs.append({names[x]: float(w) for x, w in zip(terms, rng.lognormal(0, 0.6, 25))})
    import pandas as pd

    topics = pd.DataFrame({"qid": [str(i) for i in range(len(qs))], "query_toks": qs})
    retr = index.quantized(num_results=K, threads=CORES)
    return {"build_s": build, "threads": 1,  # the inversion is numpy on one core; retrieval uses every core
            **_latency(lambda q: retr.transform(topics.iloc[[q]]), lambda q: retr.transform(topics.iloc[q]),
                       list(range(len(qs))))}


def _unit(rng, m: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((m, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _dense(n: int, dim: int, out: Path) -> list[dict]:
    """FlexIndex of random unit vectors; irgrid's ExactRetriever (faiss flat on CPU) and the torch matmul path."""
    import torch
    from pyterrier_dr import FlexIndex

    from irgrid.dense.search import ExactRetriever

    def records() -> Iterator[dict]:
        for c in range(math.ceil(n / CHUNK)):
            vecs = _unit(np.random.default_rng([11, dim, c]), min(CHUNK, n - c * CHUNK), dim)
            for i, v in enumerate(vecs):
                yield {"docno": f"d{c * CHUNK + i}", "doc_vec": v}

    t = time.perf_counter()
    FlexIndex(str(out / "flex")).indexer().index(records())
    build = _built() - t
    size = _du(out)
    flex = FlexIndex(str(out / "flex"))
    qv = _unit(np.random.default_rng(5), N_BATCH, dim)
    exact = ExactRetriever(flex, num_results=K, device="cpu")
    faiss_row = {"backend": f"dense-{dim}-faiss", "build_s": build, "threads": CORES, "index_bytes": size,
                 **_latency(lambda i: exact.search_one(qv[i]), lambda ids: exact.search(qv[ids]),
                            list(range(N_BATCH)))}
    # the torch path: one matrix, matmul + top-k (GPU when present, as ExactRetriever does; fp32 on CPU)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t = time.perf_counter()
    _, vecs, _ = flex.payload()
    mat = torch.from_numpy(np.ascontiguousarray(vecs)).to(device, torch.float16 if device == "cuda" else torch.float32)
    load = time.perf_counter() - t

    def search(q: np.ndarray) -> None:
        with torch.inference_mode():
            qt = torch.from_numpy(np.atleast_2d(q)).to(device, mat.dtype)
            for s in range(0, len(qt), 256):
                torch.topk(qt[s:s + 256] @ mat.T, K, dim=1)
            if device == "cuda":
                torch.cuda.synchronize()

    torch_row = {"backend": f"dense-{dim}-torch", "build_s": build, "threads": torch.get_num_threads(),
                 "index_bytes": size, "load_s": load, "device": device,
                 **_latency(lambda i: search(qv[i]), lambda ids: search(qv[ids]), list(range(N_BATCH)))}
    return [faiss_row, torch_row]


def _plaid(model: dict[str, np.ndarray], n: int, out: Path) -> dict:
    """Token vectors per document as many as its WordPiece tokens (~1.3 per word, at most 180, ColBERTv2's doc
    maximum), random unit 128-d; irgrid's LateInteractionIndex (k-means, 4 iterations) and its search."""
    from irgrid.dense.search import LateInteractionIndex

    def chunks() -> Iterator[tuple[list[str], list[np.ndarray]]]:
        for c in range(math.ceil(n / CHUNK)):
            rng = np.random.default_rng([13, c])
            m = min(CHUNK, n - c * CHUNK)
            lens = np.clip((rng.choice(model["lengths"], m) * 1.3).astype(int), 4, 180)
            for s in range(0, m, 1000):
                part = lens[s:s + 1000]
                vecs = _unit(rng, int(part.sum()), 128)
                ends = np.cumsum(part)
                yield ([f"d{c * CHUNK + s + i}" for i in range(len(part))],
                       [vecs[e - k:e] for e, k in zip(ends, part)])

    index = LateInteractionIndex(out / "late")
    t = time.perf_counter()
    meta = index.build(chunks())
    build = _built() - t
    retr = index.retriever(num_results=K)
    rng = np.random.default_rng(17)
    qs = [_unit(rng, 32, 128) for _ in range(200)]
    import pandas as pd

    topics = pd.DataFrame({"qid": [str(i) for i in range(len(qs))], "query_embs": qs})
    return {"build_s": build, "threads": CORES, "tokens": meta["tokens"], "centroids": meta["centroids"],
            **_latency(lambda i: retr.transform(topics.iloc[[i]]), lambda ids: retr.transform(topics.iloc[ids]),
                       list(range(len(qs))))}


def _encode(corpus: Path, n: int, out: Path) -> dict:
    """The real dense indexing path (engine.stream -> FlexIndex) with a tiny random-weight model of the
    all-MiniLM-L6-v2 architecture: what must stay flat in memory however large the corpus."""
    os.environ["IRGRID_TINY_MODELS"] = "1"
    from irgrid.dense.engine import engine_for, index_dense, pick_device
    from irgrid.dense.spec import ENCODERS
    from irgrid.models.resolver import resolve

    spec = ENCODERS.get("all-minilm-l6-v2")
    engine = engine_for(spec, "d", resolve(spec.document_model.as_tiny()), pick_device(None), 64)
    t = time.perf_counter()
    record = index_dense(engine, read_docs(corpus, n), out / "flex")
    build = _built() - t
    return {"build_s": build, "threads": CORES, "device": record.get("device", "")}


# -- the parent: run children, fit, plot ---------------------------------------------------------------------------
def run_child(backend: str, n: int, corpus: Path, work: Path, timeout: float) -> list[dict]:
    """One (backend, size) in a child process; its peak RSS comes from wait4 (the child and what it reaped)."""
    import threading

    cmd = [sys.executable, __file__, "--child", backend, str(n), str(corpus), str(work)]
    log = work / f"{backend}-{n}.log"
    start = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
    wall = time.perf_counter() - start
    lines = [ln for ln in stdout.splitlines() if ln.startswith("[{")]
    if proc.returncode != 0 or not lines:
        why = f"over {timeout:.0f} s, stopped" if wall >= timeout else f"failed (exit {proc.returncode}), see {log}"
        print(f"  {backend} at {n:,}: {why}", flush=True)
        return []
    rows = json.loads(lines[-1])
    for r in rows:
        r.update({"docs": n, "peak_rss_mb": usage.ru_maxrss / 1024, "wall_s": wall})
        r["docs_per_s"] = n / r["build_s"]
    return rows


def fit(rows: list[dict]) -> list[dict]:
    """cost = a * n^k by least squares on log-log axes, per backend and cost, with extrapolations."""
    out = []
    costs = {"build_s": "build seconds", "build_rss_mb": "build peak RSS MB", "peak_rss_mb": "peak RSS MB", "index_bytes": "index bytes",
             "p50_ms": "p50 ms", "p95_ms": "p95 ms", "qps": "queries/s (batch)"}
    for backend in sorted({r["backend"] for r in rows}):
        pts = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["docs"])
        for key, label in costs.items():
            xs = [(r["docs"], r[key]) for r in pts if r.get(key) and r[key] > 0 and not math.isnan(r[key])]
            if len(xs) < 2:
                continue
            lx, ly = np.log([x for x, _ in xs]), np.log([y for _, y in xs])
            k, loga = np.polyfit(lx, ly, 1)
            out.append({"backend": backend, "cost": key, "what": label, "exponent": float(k), "points": len(xs),
                        "min_docs": xs[0][0], "max_docs": xs[-1][0],
                        "at_msmarco": float(math.exp(loga) * MSMARCO ** k),
                        "at_paper_grid": float(math.exp(loga) * PAPER_GRID ** k)})
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("build_s", "index build (s)"), ("build_rss_mb", "peak RSS while building (MB)"), ("index_bytes", "index size (bytes)"),
              ("p50_ms", "single query p50 (ms)"), ("p95_ms", "single query p95 (ms)"), ("qps", "batched queries/s")]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    backends = sorted({r["backend"] for r in rows})
    colours = {b: plt.get_cmap("tab20")(i % 20) for i, b in enumerate(backends)}  # one colour per backend
    for ax, (key, title) in zip(axes.flat, panels):
        for backend in backends:
            pts = sorted(((r["docs"], r[key]) for r in rows if r["backend"] == backend and r.get(key)
                          and r[key] > 0), key=lambda p: p[0])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=backend, color=colours[backend])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    handles = [plt.Line2D([], [], color=colours[b], marker="o", label=b) for b in backends]
    fig.legend(handles=handles, loc="lower center", ncol=len(backends), fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)


def write_csv(rows: list[dict], path: Path) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_csv(path, index=False, float_format="%.6g")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS))
    parser.add_argument("--max-size", nargs="*", default=[], metavar="BACKEND=N",
                        help="override a backend's largest size, e.g. encode=1000000 plaid=10000")
    parser.add_argument("--extra-sizes", nargs="*", default=["plaid=500,1000,2000", "encode=2500"], metavar="BACKEND=N,N",
                        help="smaller sizes for backends capped below the second size, so they get a fit too")
    parser.add_argument("--budget-s", type=float, default=900.0, help="per (backend, size) time limit")
    parser.add_argument("--total-min", type=float, default=29.0,
                        help="whole-run budget: a backend whose projected next size would overrun it stops there")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "irgrid-scale")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--tag", default="scale")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--replot", action="store_true", help="redraw the PNG from the stored CSV")
    parser.add_argument("--markdown", action="store_true", help="print the stored results as Markdown tables")
    args = parser.parse_args()
    if args.replot:  # the figure again from the stored CSV, without measuring
        import pandas as pd

        plot(pd.read_csv(args.out / f"{args.tag}.csv").to_dict("records"), args.out / f"{args.tag}.png")
        return
    if args.markdown:
        print(markdown(args.out / f"{args.tag}.csv", args.out / f"{args.tag}_fit.csv"))
        return
    if args.child:
        backend, n, corpus, work = args.child
        print(json.dumps(child(backend, int(n), Path(corpus), Path(work))), flush=True)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    caps = {b: m for b, (_, m) in BACKENDS.items()}
    caps.update({k: int(v) for k, v in (s.split("=") for s in args.max_size)})
    extra = {k: [int(x) for x in v.split(",")] for k, v in (s.split("=") for s in args.extra_sizes)}
    started = time.perf_counter()  # the whole-run budget includes building the corpus on a fresh machine
    model = corpus_model(args.work)
    top = max(args.sizes)
    corpus = args.work / f"corpus-{top}.tsv"
    if not corpus.exists():  # reused by later runs (deterministic); not part of any backend's cost
        gen = write_corpus(model, top, corpus)
        print(f"corpus: {top:,} documents in {gen:.0f} s ({_du(corpus) / 2**20:.0f} MiB), "
              f"{len(model['words']):,} staged words, mean {model['lengths'].mean():.0f} words/doc", flush=True)
    rows: list[dict] = []
    stopped: set[str] = set()
    history: dict[str, list[tuple[int, float]]] = {}  # backend -> (size, wall seconds) of its runs so far
    order = list(BACKENDS)
    plan = sorted({(n, b) for b in args.backends for n in args.sizes + extra.get(b, [])
                   if caps.get(b) is None or n <= caps[b]}, key=lambda p: (p[0], order.index(p[1])))
    total = 60 * args.total_min

    def project(backend: str, n: int) -> float:
        """Wall seconds at n from the backend's last run, grown as its own last two runs grew (exponent clipped to
        0.9..1.5: start-up costs flatten small sizes), linearly after one run. An underestimate cannot break the
        budget: each child's time limit is what the budget has left."""
        runs = history.get(backend, [])
        if not runs:
            return 0.0
        (n1, w1), k = runs[-1], 1.0
        if len(runs) >= 2 and runs[-2][1] > 0:
            n0, w0 = runs[-2]
            k = min(max(math.log(w1 / w0) / math.log(n1 / n0), 0.9), 1.5)
        return w1 * (n / n1) ** k

    def scheduled():
        """Sizes from small to large; within a size the Lucene pair first (its 1-thread vs all-cores ratio needs
        both in one run), then the cheapest projected first, so a tight budget drops the costliest backends at the
        largest size rather than whatever happens to run last."""
        for n in sorted({size for size, _ in plan}):
            group = [b for size, b in plan if size == n]
            projected = {b: project(b, n) for b in group}
            for b in sorted(group, key=lambda b: (b not in ("lucene-1t", "lucene"), projected[b], order.index(b))):
                yield n, b

    for n, backend in scheduled():
        if backend in stopped:
            continue
        elapsed = time.perf_counter() - started
        if backend in history:  # projected from its previous sizes; skipped if it would overrun the budget
            size = history[backend][-1][0]
            projected = project(backend, n)
            if elapsed + projected > total:
                print(f"  {backend} at {n:,}: skipped, projected {projected:.0f} s from {size:,} docs exceeds the "
                      f"remaining {max(total - elapsed, 0):.0f} s of --total-min {args.total_min:g}", flush=True)
                stopped.add(backend)
                continue
        got = run_child(backend, n, corpus, args.work, min(args.budget_s, max(total - elapsed, 30)))
        if not got:
            stopped.add(backend)
            continue
        history.setdefault(backend, []).append((n, got[0]["wall_s"]))
        for r in got:
            print(f"  {r['backend']:<16} {n:>9,} docs: build {r['build_s']:8.1f} s ({r['docs_per_s']:8.0f} docs/s) "
                  f"RSS {r['build_rss_mb']:6.0f}/{r['peak_rss_mb']:6.0f} MB  size {r['index_bytes'] / 2**20:8.1f} MiB  "
                  f"p50 {r.get('p50_ms', float('nan')):7.2f} ms  p95 {r.get('p95_ms', float('nan')):7.2f} ms  "
                  f"{r.get('qps', float('nan')):8.1f} q/s", flush=True)
        rows.extend(got)
        write_csv(rows, args.out / f"{args.tag}.csv")
    fits = fit(rows)
    write_csv(fits, args.out / f"{args.tag}_fit.csv")
    plot(rows, args.out / f"{args.tag}.png")
    summary(rows, fits, time.perf_counter() - started)


def markdown(csv: Path, fit_csv: Path) -> str:
    """The README's tables: measurements per backend and size, then exponents and extrapolations."""
    import pandas as pd

    df, fits = pd.read_csv(csv), pd.read_csv(fit_csv)
    from irgrid.util.markdown import markdown_table

    f = lambda v, fmt: "–" if pd.isna(v) else format(v, fmt)  # noqa: E731
    measured = [[r.backend, f"{r.docs:,}", f(r.build_s, ".1f"), f(r.docs_per_s, ",.0f"),
                 f"{f(r.build_rss_mb, '.0f')} / {f(r.peak_rss_mb, '.0f')}", f"{r.index_bytes / 2**20:.1f}",
                 f(getattr(r, "p50_ms", float("nan")), ".2f"), f(getattr(r, "p95_ms", float("nan")), ".2f"),
                 f(getattr(r, "qps", float("nan")), ",.0f")] for r in df.sort_values(["backend", "docs"]).itertuples()]
    grown = []
    for backend, g in fits.groupby("backend"):
        c = {row.cost: row for row in g.itertuples()}
        cell = lambda key, fmt, scale=1.0, c=c: (f"{c[key].exponent:.2f}, {c[key].at_msmarco / scale:{fmt}}"  # noqa: E731
                                                 if key in c else "–")
        build = (f"{c['build_s'].exponent:.2f}, {c['build_s'].at_msmarco / 3600:.2f} h, "
                 f"{c['build_s'].at_paper_grid / 3600:.2f} h") if "build_s" in c else "–"
        rss = f"{c['build_rss_mb'].exponent:.2f}" if "build_rss_mb" in c else "–"
        grown.append([backend, build, rss, cell("index_bytes", ".1f", 2**30), cell("p50_ms", ".1f")])
    return "\n".join([
        markdown_table(["backend", "docs", "build s", "docs/s", "RSS build / peak MB", "index MiB", "p50 ms", "p95 ms",
                        "q/s batch"], measured, "l" + "r" * 8, spaced=True), "",
        markdown_table(["backend", "build s: k, at 8.8M, at 37M", "build RSS: k", "index size: k, GiB at 8.8M",
                        "p50: k, ms at 8.8M"], grown, spaced=True)])


def summary(rows: list[dict], fits: list[dict], wall: float) -> None:
    print(f"\ngrowth exponents (cost ~ n^k) and extrapolations; wall time {wall / 60:.1f} min on {CORES} cores")
    for f in fits:
        if f["cost"] in ("build_s", "build_rss_mb", "p50_ms", "qps"):
            print(f"  {f['backend']:<18} {f['what']:<18} k={f['exponent']:5.2f}  ({f['min_docs']:,}..{f['max_docs']:,})"
                  f"  8.8M: {f['at_msmarco']:12.4g}  37M: {f['at_paper_grid']:12.4g}")
    by = {(r["backend"], r["docs"]): r for r in rows}
    sizes = sorted({n for b, n in by if b == "lucene-1t" and (("lucene", n) in by)})
    for n in sizes:
        one, many = by[("lucene-1t", n)], by[("lucene", n)]
        print(f"Lucene indexing at {n:,}: {one['build_s']:.1f} s on 1 thread, {many['build_s']:.1f} s on "
              f"{many['threads']} -> speed-up x{one['build_s'] / many['build_s']:.2f}")
    enc = sorted((r for r in rows if r["backend"] == "encode"), key=lambda r: r["docs"])
    if len(enc) >= 2:
        first, most = enc[0]["peak_rss_mb"], enc[-1]["peak_rss_mb"]
        print(f"streaming encoding peak RSS: {first:.0f} MB at {enc[0]['docs']:,}, {most:.0f} MB at "
              f"{enc[-1]['docs']:,} -> x{most / first:.3f}")


if __name__ == "__main__":
    main()
