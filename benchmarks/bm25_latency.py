"""BM25 latency: the paper's Lucene BM25 (`bm25`) vs the same model on PISA (`bm25-pisa`), one process.

Prints ms/query for each, one query at a time (the paper's latency setting) and batched, and the ratio
against `bm25` measured in the same run (machines are noisy; compare ratios, not absolute times).

    python benchmarks/bm25_latency.py [--dataset beir/scifact/test] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import irgrid
from irgrid.data.datasets import get as get_dataset


def per_query_ms(pipeline, topics, repeats: int) -> float:
    rows = [topics.iloc[[i]] for i in range(len(topics))]
    best = []
    for _ in range(repeats):
        start = time.perf_counter()
        for row in rows:
            pipeline.transform(row)
        best.append(1000 * (time.perf_counter() - start) / len(rows))
    return min(best)


def batch_ms(pipeline, topics, repeats: int) -> float:
    return min(_timed(lambda: pipeline.transform(topics)) for _ in range(repeats)) * 1000 / len(topics)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_bm25(dataset, repeats: int) -> dict[str, tuple[float, float]]:
    """(single-query ms, batch ms/query) for `bm25` and `bm25-pisa`, after a warm-up."""
    topics = dataset.topics()
    results = {}
    for name in ("bm25", "bm25-pisa"):
        pipeline = irgrid.retriever(name).pipeline(dataset)
        pipeline.transform(topics.head(5))  # warm-up: JVM, index files, caches
        results[name] = (per_query_ms(pipeline, topics, repeats), batch_ms(pipeline, topics, repeats))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="beir/scifact/test")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dataset = get_dataset(args.dataset)
    results = measure_bm25(dataset, args.repeats)
    base_single, base_batch = results["bm25"]
    print(f"dataset {args.dataset}, {len(dataset.topics())} queries, best of {args.repeats}")
    print(f"{'retriever':<12} {'ms/query (1 at a time)':>24} {'ratio':>7} {'ms/query (batch)':>18} {'ratio':>7}")
    for name, (single, batch) in results.items():
        print(f"{name:<12} {single:>24.2f} {single / base_single:>7.3f} {batch:>18.2f} {batch / base_batch:>7.3f}")
    print(f"median of the two single-query figures: {statistics.median(r[0] for r in results.values()):.2f} ms")

if __name__ == "__main__":
    main()
