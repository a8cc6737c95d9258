"""Our measures equal ir_measures on a run file over the staged TREC-DL 2019 qrels."""

from __future__ import annotations

import random
from pathlib import Path

import ir_measures
import pytest

from irgrid import measures
from irgrid.runner.experiment import parse_measure


# -- staged TREC-DL 2019: our measures = ir_measures -----------------------------------------------------------------
def test_trec_dl_2019_run_file_same_numbers_as_ir_measures(tmp_path):
    import pyterrier as pt

    from irgrid.data import datasets

    ds = datasets.get("msmarco-passage/trec-dl-2019/judged")
    topics, qrels = ds.topics(), ds.qrels()
    assert len(topics) == 43 and len(qrels) == 9260
    rng = random.Random(2019)
    lines = []
    for qid, group in qrels.groupby("qid"):  # a run file: judged documents shuffled among unjudged ones
        docs = list(group["docno"]) + [f"u{qid}-{i}" for i in range(60)]
        rng.shuffle(docs)
        lines += [f"{qid} Q0 {d} {r + 1} {1000 - r} synthetic" for r, d in enumerate(docs[:1000])]
    path = tmp_path / "dl19.run"
    path.write_text("\n".join(lines) + "\n")
    run = pt.io.read_results(str(path))
    names = ["nDCG@10", "R@1000", "RR(rel=2)@10", "AP(rel=2)@1000"]
    ours = measures.experiment([run], topics, qrels, [parse_measure(n, "t") for n in names], names=["run"],
                               verbose=False).iloc[0]
    direct = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], ir_measures.read_trec_qrels(
        str(Path(datasets.ensure_irds_home()) / "msmarco-passage" / "trec-dl-2019" / "qrels")),
        ir_measures.read_trec_run(str(path)))
    for n in names:
        assert ours[n] == pytest.approx(direct[ir_measures.parse_measure(n)], abs=1e-12), n

