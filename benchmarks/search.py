"""Exact dense search latency and throughput: p50/p95 single-query latency and batched queries/s of irgrid's
`ExactRetriever` (GPU matmul when the vectors fit, faiss-cpu flat otherwise) over random unit vectors.

    python benchmarks/search.py [--docs 1000000] [--dim 768] [--queries 1024] [--k 1000] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()

    from pyterrier_dr import FlexIndex

    from irgrid.dense.search import ExactRetriever

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        def vectors():
            for start in range(0, args.docs, 65536):
                block = rng.standard_normal((min(65536, args.docs - start), args.dim)).astype(np.float32)
                block /= np.linalg.norm(block, axis=1, keepdims=True)
                for i, v in enumerate(block):
                    yield {"docno": str(start + i), "doc_vec": v}

        FlexIndex(f"{tmp}/f").index(vectors())
        retr = ExactRetriever(FlexIndex(f"{tmp}/f"), num_results=args.k, query_batch_size=args.batch,
                              device=args.device)
        q = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
        retr.search_one(q[0])  # warm-up (GPU: loads the matrix)
        lat = []
        for i in range(min(args.queries, 100)):
            start = time.perf_counter()
            retr.search_one(q[i])
            lat.append(1000 * (time.perf_counter() - start))
        start = time.perf_counter()
        for s in range(0, args.queries, args.batch):
            retr.search(q[s:s + args.batch])
        qps = args.queries / (time.perf_counter() - start)
    out = {"backend": retr.backend, "docs": args.docs, "dim": args.dim, "k": args.k,
           "single_p50_ms": round(float(np.percentile(lat, 50)), 3), "single_p95_ms": round(float(np.percentile(lat, 95)), 3),
           "batched_queries_per_s": round(qps, 1), "batched_ms_per_query": round(1000 / qps, 4)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
