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
CPU-seconds the Java process burnt (`wait4`), so the same work's cost on one and on all cores can be compared;
with `--buffers` it compares Lucene RAM buffers too.

`--machine` measures what the cores give to independent processes doing compute-bound work (sha256 of a buffer
that stays in cache) and
memory-bound work (random gathers from a 400 MB array): the range any parallel indexing can land in here.
"""

from __future__ import annotations

import argparse
import itertools
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
    parser.add_argument("--java-options", nargs="*", default=[], metavar="OPT",
                        help="JVM options for --prewritten runs, e.g. -XX:TieredStopAtLevel=1 (C1 JIT only)")
    parser.add_argument("--machine", action="store_true",
                        help="only measure what the cores give to independent compute- and memory-bound processes")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "irgrid-scale")
    args = parser.parse_args()
    from irgrid.sparse.lucene import LuceneIndex, available_cores

    if args.machine:
        return _machine(available_cores(), args.repeats)
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
        ratios: dict[int, list[float]] = {}
        used: dict[int, list[float]] = {}  # cores the one-thread run kept busy (CPU-seconds / wall)
        for _, buffer in itertools.product(range(args.repeats), args.buffers):
            walls = {}
            for threads in (1, cores):
                index = Path(tmp) / f"index{threads}"
                cmd = [str(Path(java_home()) / "bin" / "java"), *args.java_options, "-cp", str(anserini_jar()),
                       "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input", str(folder),
                       "-index", str(index), "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
                       "-memoryBuffer", str(buffer)]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                by_thread = _thread_cpu(proc)
                if proc.wait() != 0:
                    raise SystemExit(f"IndexCollection failed: {' '.join(cmd)}")
                walls[threads] = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                shutil.rmtree(index, ignore_errors=True)
                if threads == 1:
                    used.setdefault(buffer, []).append(cpu / walls[1])
                print(f"{args.docs:,} docs pre-written, IndexCollection alone, buffer {buffer} MB, {threads} "
                      f"thread(s): wall {walls[threads]:.1f} s, Java CPU {cpu:.1f} s ({cpu / walls[threads]:.2f} "
                      f"cores busy)", flush=True)
                print("    CPU-s by JVM thread: " + ", ".join(f"{k} {v:.1f}" for k, v in by_thread[:5]), flush=True)
            ratios.setdefault(buffer, []).append(walls[1] / walls[cores])
            print(f"  speed-up x{ratios[buffer][-1]:.2f}", flush=True)
        for buffer, r in ratios.items():
            busy = statistics.median(used[buffer])
            print(f"IndexCollection alone, buffer {buffer} MB, {cores} threads vs 1: median speed-up "
                  f"x{statistics.median(r):.2f} over {len(r)} run(s) (min x{min(r):.2f}, max x{max(r):.2f}); "
                  f"one thread keeps {busy:.2f} cores busy, so {cores} cores allow at most x{cores / busy:.2f}")


def _thread_cpu(proc: subprocess.Popen) -> list[tuple[str, float]]:
    """CPU-seconds per JVM thread kind (indexing pool, JIT compilers, GC, main), polled from /proc until the
    process exits: where a "one-thread" run spends the cores it keeps busy. Linux only; empty elsewhere."""
    tick, last = os.sysconf("SC_CLK_TCK"), {}
    while proc.poll() is None:
        for task in Path(f"/proc/{proc.pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            last[task.name] = (name.rstrip("0123456789#-").strip() or name, (int(fields[11]) + int(fields[12])) / tick)
        time.sleep(0.2)
    kinds: dict[str, float] = {}
    for name, cpu in last.values():
        kinds[name] = kinds.get(name, 0.0) + cpu
    return sorted(kinds.items(), key=lambda kv: -kv[1])


_LOADS = {
    # what the cores give to work that shares nothing: one process alone, then one per core at once
    "compute (sha256 of one 64 KiB buffer, 8,192 times)": "import hashlib; b = bytes(1 << 16)\n"
                                             "for _ in range(1 << 13): hashlib.sha256(b).digest()",
    "memory (random gathers from 400 MB)": "import numpy as np; a = np.arange(50_000_000)\n"
                                           "i = np.random.default_rng(1).integers(0, len(a), 20_000_000)\n"
                                           "for _ in range(5): a[i].sum()",
}


def _machine(cores: int, repeats: int) -> None:
    """Speed-up of `cores` independent processes over one, for a compute-bound and a memory-bound load: the
    range in which any parallel indexing on this machine can land (Lucene's in-memory inversion is memory-heavy)."""
    import sys

    def timed(n: int, code: str) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", f"import time; t = time.perf_counter()\n{code}\n"
                                   "print(time.perf_counter() - t)"], stdout=subprocess.PIPE, text=True)
                 for _ in range(n)]
        return max(float(p.communicate()[0]) for p in procs)  # each times its whole load, set-up included

    for name, code in _LOADS.items():
        ratios = []
        for _ in range(repeats):
            one, many = timed(1, code), timed(cores, code)
            ratios.append(cores * one / many)
        print(f"{name}: {cores} processes at once do x{statistics.median(ratios):.2f} the work of one "
              f"in the same time (runs: {', '.join(f'x{r:.2f}' for r in ratios)})", flush=True)


if __name__ == "__main__":
    main()
