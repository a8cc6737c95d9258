"""The first grid's speed in one run: BM25 ms/query for `bm25` (Lucene) vs `bm25-pisa`, and dense encoding
docs/s for `all-minilm-l6-v2` through irgrid's engine vs pyterrier-dr's encoder on the same texts.
Ratios are against the baseline measured in this same process (machines are noisy: compare ratios).

    python benchmarks/first_grid.py [--dataset beir/scifact/test] [--docs 256] [--repeats 2]
"""

from __future__ import annotations

import argparse
import itertools
import time

import pandas as pd
from bm25_latency import measure_bm25  # same folder: the BM25 timing code is shared

from irgrid.data.datasets import get as get_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="beir/scifact/test")
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    dataset = get_dataset(args.dataset)
    topics = dataset.topics()

    bm25 = measure_bm25(dataset, args.repeats)

    from pyterrier_dr import SBertBiEncoder

    from irgrid.dense.engine import Engine, pick_device
    from irgrid.dense.spec import ENCODERS
    from irgrid.models.resolver import resolve

    device = pick_device(None)
    docs = list(itertools.islice(dataset.docs(), args.docs))
    spec = ENCODERS.get("all-minilm-l6-v2")
    resolved = resolve(spec.document_model)
    engine = Engine(spec, "d", resolved, device=device, batch_size=32)
    sbert = SBertBiEncoder(resolved.location, batch_size=32, device=device)
    engine.encode([d["text"] for d in docs[:32]])  # warm-up both
    sbert.encode_docs([d["text"] for d in docs[:32]])

    def rate(fn) -> float:
        start = time.perf_counter()
        fn()
        return len(docs) / (time.perf_counter() - start)

    dr = rate(lambda: sbert.doc_encoder()(pd.DataFrame(docs)))
    ours = rate(lambda: [v for _, v in engine.stream(docs)])

    print(f"{args.dataset}: {len(topics)} queries, {len(docs)} documents encoded, device {device}")
    print(f"{'BM25':<34} {'ms/query (1 at a time)':>22} {'ratio':>7} {'ms/query (batch)':>17} {'ratio':>7}")
    base = bm25["bm25"]
    for name, (single, batch) in bm25.items():
        print(f"{name:<34} {single:>22.2f} {single / base[0]:>7.3f} {batch:>17.2f} {batch / base[1]:>7.3f}")
    print(f"{'dense encoding (all-minilm-l6-v2)':<34} {'docs/s':>22} {'ratio':>7}")
    print(f"{'pyterrier-dr doc_encoder (baseline)':<34} {dr:>22.1f} {1.0:>7.3f}")
    print(f"{'irgrid engine':<34} {ours:>22.1f} {ours / dr:>7.3f}")


if __name__ == "__main__":
    main()
