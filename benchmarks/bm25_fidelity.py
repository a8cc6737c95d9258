"""`bm25-lucene-pisa` vs the paper's Lucene `bm25` (and `bm25-pisa`), one process: nDCG@10 and AP per dataset,
and ms/query batched and one at a time, with ratios against `bm25` measured in the same run.

    python benchmarks/bm25_fidelity.py [--datasets vaswani beir/scifact/test disastqa/derived] [--scales 1000]

`--scales 100 1000 10000` also builds the Lucene-weight PISA index at other quantisation scales (the scale is an
index parameter) to show how the integer impacts move effectiveness.
"""

from __future__ import annotations

import argparse

import ir_measures
from bm25_latency import batch_ms, per_query_ms  # same folder: shared timing loop

import irgrid
from irgrid.data.datasets import get as get_dataset

MEASURES = [ir_measures.nDCG @ 10, ir_measures.AP]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["vaswani", "beir/scifact/test", "disastqa/derived"])
    parser.add_argument("--scales", nargs="+", type=float, default=[1000.0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'dataset':<20} {'retriever':<26} {'nDCG@10':>8} {'Δ':>8} {'AP':>8} {'Δ':>8} "
          f"{'ms/q batch':>10} {'ratio':>6} {'ms/q single':>11} {'ratio':>6}")
    for name in args.datasets:
        dataset = get_dataset(name)
        topics = dataset.topics()
        qrels = dataset.qrels().rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
        systems = [("bm25", irgrid.retriever("bm25")), ("bm25-pisa", irgrid.retriever("bm25-pisa"))]
        base = irgrid.retriever("bm25-lucene-pisa")
        for scale in args.scales:
            entry = base if scale == base.index.params["scale"] else _with_scale(base, scale)
            systems.append((f"bm25-lucene-pisa x{scale:g}", entry))
        ref = None
        for label, retriever in systems:
            pipeline = retriever.pipeline(dataset)
            run = pipeline.transform(topics)
            pipeline.transform(topics.head(5))  # warm
            values = ir_measures.calc_aggregate(MEASURES, qrels, run.rename(columns={"qid": "query_id",
                                                                                   "docno": "doc_id"}))
            nd, ap = values[MEASURES[0]], values[MEASURES[1]]
            batch = batch_ms(pipeline, topics, args.repeats)
            single = per_query_ms(pipeline, topics, 1)
            ref = ref or (nd, ap, batch, single)
            print(f"{name:<20} {label:<26} {nd:>8.4f} {nd - ref[0]:>+8.4f} {ap:>8.4f} {ap - ref[1]:>+8.4f} "
                  f"{batch:>10.3f} {batch / ref[2]:>6.3f} {single:>11.3f} {single / ref[3]:>6.3f}", flush=True)


def _with_scale(retriever, scale: float):
    import dataclasses

    recipe = dataclasses.replace(retriever.index, params={**retriever.index.params, "scale": scale})
    return dataclasses.replace(retriever, index=recipe)


if __name__ == "__main__":
    main()
