"""Sustained load through the Python API: bm25-pisa on vaswani, its 93 queries repeated to 4,650 (50 copies, each
with its own qid), answered in rounds of (a) one batched call and (b) one `.search()` call per query; queries/s
and the process's resident memory (VmRSS) after each round. What a notebook or a service wrapping irgrid sees:
throughput holds and memory returns to its level after every loop (no growth per call).

    .venv/bin/python benchmarks/load.py [--rounds 3] [--copies 50] [--csv benchmarks/results/load.csv]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path


def rss_mb() -> float:
    """Resident memory of this process now (Linux /proc), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--copies", type=int, default=50)
    p.add_argument("--csv", default=None, help="also write the rounds as CSV")
    args = p.parse_args()

    import pandas as pd

    import irgrid
    from irgrid.data import datasets

    topics = datasets.get("vaswani").topics()
    queries = pd.concat([topics.assign(qid=topics["qid"] + f"-{c}") for c in range(args.copies)], ignore_index=True)
    pipe = irgrid.retriever("bm25-pisa").pipeline("vaswani")  # index built or reused from IRGRID_CACHE
    pipe(queries.head(10))  # warm-up: index opened, libraries loaded
    print(f"{len(queries)} queries, RSS after warm-up {rss_mb():.0f} MB")
    rows = []
    for r in range(1, args.rounds + 1):
        start = time.perf_counter()
        res = pipe(queries)
        batched = len(queries) / (time.perf_counter() - start)
        rss_batch = rss_mb()
        assert res["qid"].nunique() == len(queries)
        del res
        start = time.perf_counter()
        for text in queries["query"]:
            pipe.search(text)
        single = len(queries) / (time.perf_counter() - start)
        rss_single = rss_mb()
        rows.append({"round": r, "queries": len(queries), "batched_qps": round(batched, 1),
                     "rss_after_batch_mb": round(rss_batch), "single_qps": round(single, 1),
                     "rss_after_single_mb": round(rss_single)})
        print(f"round {r}: batched {batched:.0f} q/s (RSS {rss_batch:.0f} MB), single {single:.0f} q/s "
              f"(RSS {rss_single:.0f} MB)", flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
