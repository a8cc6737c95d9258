"""Lucene indexing on every core against one thread, in one run: the speed-up `LuceneIndex.index` gets from
Anserini's threads while Python streams the documents to them (and the effect of Lucene's RAM buffer).

    python benchmarks/lucene_threads.py [--docs 1000000] [--buffers 512 4096] [--repeats 1]

Documents: the scale benchmark's deterministic synthetic corpus (benchmarks/scale.py), read from its TSV as an
iterator of dicts, as a collection's docs() would be. Runs alternate (one thread, all cores, ...) so drifts in a
noisy machine's speed hit both; prints each time and the ratio per buffer size.

`--ceiling` also measures what the machine itself allows: one one-thread index per core, each over its share of
the corpus, all at once (independent Java processes sharing nothing but the hardware). Their speed-up over one
thread on the whole corpus bounds what any threading of a single index can reach here.

`--prewritten` times Anserini's IndexCollection alone, without Python: the documents written once as JsonCollection
files (one per core), then indexed from them on one thread and on all cores, each run's wall time next to the
CPU-seconds the Java process burnt (`wait4`), so the same work's cost on one and on all cores can be compared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--buffers", type=int, nargs="+", default=[4096], help="Lucene RAM buffers (MB) to compare")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ceiling", action="store_true", help="also time one independent index per core at once")
    parser.add_argument("--prewritten", action="store_true",
                        help="only time IndexCollection alone on pre-written JSONL files (no Python feeding)")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "irgrid-scale")
    args = parser.parse_args()
    from irgrid.sparse.lucene import LuceneIndex, available_cores

    args.work.mkdir(parents=True, exist_ok=True)
    corpus = next((c for c in sorted(args.work.glob("corpus-*.tsv"), key=lambda c: int(c.stem.split("-")[1]))
                   if int(c.stem.split("-")[1]) >= args.docs), None)
    if corpus is None:
        corpus = args.work / f"corpus-{args.docs}.tsv"
        scale.write_corpus(scale.corpus_model(args.work), args.docs, corpus)
    cores = available_cores()
    if args.prewritten:
        return _prewritten(corpus, args, cores)
    times: dict[tuple[int, int], list[float]] = {}
    for _ in range(args.repeats):
        for buffer in args.buffers:
            for threads in (1, cores):
                with tempfile.TemporaryDirectory(dir=args.work) as tmp:
                    start = time.perf_counter()
                    LuceneIndex(Path(tmp) / "lucene").index(scale.read_docs(corpus, args.docs), threads=threads,
                                                            docs_count=args.docs, memory_buffer_mb=buffer)
                    took = time.perf_counter() - start
                    shutil.rmtree(tmp, ignore_errors=True)
                times.setdefault((buffer, threads), []).append(took)
                print(f"{args.docs:,} docs, buffer {buffer} MB, {threads} thread(s): {took:.1f} s "
                      f"({args.docs / took:,.0f} docs/s)", flush=True)
        if args.ceiling:
            times.setdefault(("ceiling", cores), []).append(_ceiling(corpus, args, cores, args.buffers[0]))
    for buffer in args.buffers:
        one, many = statistics.median(times[(buffer, 1)]), statistics.median(times[(buffer, cores)])
        print(f"buffer {buffer} MB: 1 thread {one:.1f} s, {cores} threads {many:.1f} s -> speed-up x{one / many:.2f}")
    if args.ceiling:
        one, most = statistics.median(times[(args.buffers[0], 1)]), statistics.median(times[("ceiling", cores)])
        print(f"ceiling: {cores} independent one-thread indexes of 1/{cores} each at once {most:.1f} s -> "
              f"speed-up x{one / most:.2f} over 1 thread on all (what {cores} cores give here)")


def _ceiling(corpus: Path, args, cores: int, buffer: int) -> float:
    """`cores` one-thread indexes at once, each over a contiguous share of the documents (its feeder is a thread
    that skips the shares before its own, so the ceiling is, if anything, pessimistic)."""
    import itertools
    import threading

    from irgrid.sparse.lucene import LuceneIndex

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        share = -(-args.docs // cores)

        def one(i: int) -> None:
            docs = itertools.islice(scale.read_docs(corpus, args.docs), i * share, (i + 1) * share)
            LuceneIndex(Path(tmp) / f"lucene{i}").index(docs, threads=1, docs_count=share, memory_buffer_mb=buffer)

        workers = [threading.Thread(target=one, args=(i,)) for i in range(cores)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        took = time.perf_counter() - start
    print(f"{args.docs:,} docs as {cores} independent one-thread indexes at once: {took:.1f} s", flush=True)
    return took


def _prewritten(corpus: Path, args, cores: int) -> None:
    import json
    import resource

    from irgrid.sparse.lucene import anserini_jar, java_home

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        folder = Path(tmp) / "jsonl"
        folder.mkdir()
        outs = [(folder / f"part{i}.jsonl").open("w", encoding="utf-8") for i in range(cores)]
        share = -(-args.docs // cores)
        for i, d in enumerate(scale.read_docs(corpus, args.docs)):
            outs[i // share].write(json.dumps({"id": d["docno"], "contents": d["text"]}) + "\n")
        for f in outs:
            f.close()
        ratios = []
        for _ in range(args.repeats):
            walls = {}
            for threads in (1, cores):
                index = Path(tmp) / f"index{threads}"
                cmd = [str(Path(java_home()) / "bin" / "java"), "-cp", str(anserini_jar()),
                       "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input", str(folder),
                       "-index", str(index), "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads)]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                walls[threads] = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                shutil.rmtree(index, ignore_errors=True)
                print(f"{args.docs:,} docs pre-written, IndexCollection alone, {threads} thread(s): wall "
                      f"{walls[threads]:.1f} s, Java CPU {cpu:.1f} s", flush=True)
            ratios.append(walls[1] / walls[cores])
            print(f"  speed-up x{ratios[-1]:.2f}", flush=True)
        print(f"IndexCollection alone, {cores} threads vs 1: median speed-up x{statistics.median(ratios):.2f} "
              f"over {len(ratios)} run(s) (min x{min(ratios):.2f}, max x{max(ratios):.2f})")


if __name__ == "__main__":
    main()
