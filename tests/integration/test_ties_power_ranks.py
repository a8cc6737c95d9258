"""Ties, power and rank resolution on a real grid (staged vaswani, 93 queries; PISA BM25, a variant and their RRF,
whose fused scores tie): results.csv carries the tie audit, MDEs and rank intervals; the stored TREC runs score
the same with ir_measures and ranx by rank as results.csv; results.md never calls a system best when its tie group
holds others; `--dry-run` estimates MDEs from the cached runs."""

from __future__ import annotations

import json

import ir_measures
import numpy as np
import pandas as pd
import pytest

from irgrid import grid
from irgrid.cli import main
from irgrid.core import ties
from irgrid.runner import limits
from irgrid.runner.experiment import load

EXPERIMENT = """name: ties-grid
datasets: [vaswani]
retrievers:
  - bm25-pisa
  - {name: bm25-pisa, as: bm25-pisa-b0.1, options: {b: 0.1}}
  - {as: rrf-pisa, pipeline: "rrf(bm25-pisa, bm25-pisa-b0.1, k=60)"}
  - {as: rrf-copy, pipeline: "rrf(bm25-pisa, bm25-pisa-b0.1, k=60) % 1000"}
measures: [nDCG@10, RR@10, P@10, AP]
baseline: bm25-pisa
test: t
correction: holm
"""
MEASURES = ["nDCG@10", "RR@10", "P@10", "AP"]

pytestmark = pytest.mark.slow  # one grid of 4 PISA cells on vaswani (one index), its report, a dry run: ~1 min of CPU


@pytest.fixture(scope="module")
def out(shared_store, tmp_path_factory):
    root = tmp_path_factory.mktemp("ties-grid")
    (root / "ties.yaml").write_text(EXPERIMENT)
    grid.run(load(root / "ties.yaml"), out=root / "out", store=shared_store)
    assert main(["report", str(root / "out")]) == 0
    return root


def _results(out) -> pd.DataFrame:
    r = pd.read_csv(out / "out" / "results.csv")
    return r[r.measure != "ms/query"].set_index(["system", "measure"])


def test_stored_runs_score_like_results_csv_by_score_and_by_rank(out):
    """Every stored TREC file, read back: ir_measures on its scores, ir_measures on -rank and ranx on -rank give
    results.csv's values (1e-9); the file is in trec_eval's order (ties by docno descending, ranks 0..n-1)."""
    from ranx import Qrels, Run, evaluate

    results = _results(out)
    qrels = list(ir_measures.read_trec_qrels(str(out / "out" / "qrels" / "vaswani.qrels")))
    qrels_df = pd.DataFrame(qrels)
    ranx_qrels = Qrels.from_df(qrels_df.astype({"relevance": int, "query_id": object, "doc_id": object}), q_id_col="query_id", doc_id_col="doc_id",
                               score_col="relevance")
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    ranx_names = {"nDCG@10": "ndcg@10", "RR@10": "mrr@10", "P@10": "precision@10", "AP": "map@1000"}
    tied_systems = 0
    for system in ("bm25-pisa", "bm25-pisa-b0.1", "rrf-pisa", "rrf-copy"):
        path = out / "out" / "runs" / "vaswani" / f"{system}.res.gz"
        run = pd.read_csv(path, sep=" ", header=None, names=["query_id", "Q0", "doc_id", "rank", "score", "name"],
                          dtype={"query_id": str, "doc_id": str})
        assert ties.is_canonical(run.rename(columns={"query_id": "qid", "doc_id": "docno"}))
        tied_systems += bool(run.duplicated(["query_id", "score"]).any())
        by_score = ir_measures.calc_aggregate(measures, qrels, run[["query_id", "doc_id", "score"]])
        by_rank = ir_measures.calc_aggregate(measures, qrels, run.assign(score=-run["rank"].astype(float))[
            ["query_id", "doc_id", "score"]])
        ranx_run = Run.from_df(run.assign(score=-run["rank"].astype(float)).astype({"query_id": object, "doc_id": object}), q_id_col="query_id",
                               doc_id_col="doc_id", score_col="score")
        by_ranx = evaluate(ranx_qrels, ranx_run, list(ranx_names.values()))
        for m in measures:
            want = results.at[(system, str(m)), "value"]
            assert by_rank[m] == pytest.approx(want, abs=1e-9), (system, m)
            assert by_ranx[ranx_names[str(m)]] == pytest.approx(want, abs=1e-9), (system, m)
            if str(m) != "RR@10":  # ir_measures' RR@k breaks ties by docno ascending on raw scores
                assert by_score[m] == pytest.approx(want, abs=1e-9), (system, m)
    assert tied_systems >= 2  # the fusions' scores tie: the check above is not vacuous


def test_tie_audit_columns(out):
    """The audit's trec_eval-order value is results.csv's per-query value; min <= value <= max; the fusion has ties
    across the cut-off; the flag is range > 0.5 SE (SE as the report's bootstrap)."""
    results = _results(out)
    perq = pd.read_csv(out / "out" / "perquery.csv", dtype={"qid": str})
    qrels = pd.read_csv(out / "out" / "qrels" / "vaswani.qrels", sep=" ", header=None,
                        names=["qid", "iter", "docno", "label"], dtype={"qid": str, "docno": str})
    run = pd.read_csv(out / "out" / "runs" / "vaswani" / "rrf-pisa.res.gz", sep=" ", header=None,
                      names=["qid", "Q0", "docno", "rank", "score", "name"], dtype={"qid": str, "docno": str})
    audit = ties.audit_run(run, qrels, [ir_measures.parse_measure(m) for m in MEASURES],
                           perq[perq.system == "rrf-pisa"]["qid"].unique())
    mine = perq[perq.system == "rrf-pisa"].merge(audit, on=["qid", "measure"])
    assert len(mine) == 93 * len(MEASURES)
    assert np.allclose(mine["value"], mine["observed"], atol=1e-12)
    assert (results["tie_min"] <= results["value"] + 1e-12).all() and (results["value"] <= results["tie_max"] + 1e-12).all()
    assert results.at[("rrf-pisa", "nDCG@10"), "tie_queries"] > 0
    assert results.at[("rrf-pisa", "nDCG@10"), "tie_expected"] == pytest.approx(
        audit[audit.measure == "nDCG@10"]["expected"].mean(), abs=1e-12)
    from irgrid.report.stats import bootstrap_table

    se = bootstrap_table(perq).set_index(["system", "measure"])["se"]
    for key, row in results.iterrows():
        assert row["tie_flag"] == ties.flagged(row["tie_range"], se[key])
    manifest = json.loads((out / "out" / "manifest.json").read_text())
    assert manifest["statistics"]["tie_policy"] == ties.TIE_POLICY


def test_power_and_rank_columns_and_text(out):
    results = _results(out)
    others = results.drop(index="bm25-pisa", level="system")
    assert (others["mde"] > 0).all() and (others["mde_corrected"] > others["mde"]).all()
    assert (others["underpowered"] == (others["power"] < 0.8)).all()
    assert results.loc["bm25-pisa", "mde"].isna().all()
    assert (results["rank_low"] <= results["rank"]).all() and (results["rank"] <= results["rank_high"]).all()
    for m in MEASURES:  # identical runs: never resolved, same group
        assert set(results.at[("rrf-pisa", m), "tie_group"]) & set(results.at[("rrf-copy", m), "tie_group"])
    manifest = json.loads((out / "out" / "manifest.json").read_text())
    assert set(manifest["mde"]["vaswani"]) == set(MEASURES)
    assert manifest["mde"]["vaswani"]["nDCG@10"]["family"] == 3
    text = (out / "out" / "results.md").read_text()
    assert "MDE" in text and "rank interval" in text
    assert "rrf-pisa is best" not in text and "rrf-copy is best" not in text
    report = (out / "out" / "report" / "report.md").read_text()
    assert "rank interval" in report and "rrf-pisa is best" not in report


def test_dry_run_prints_pilot_mdes(out, shared_store, capsys, monkeypatch):
    monkeypatch.setenv("IRGRID_CACHE", str(shared_store.root))
    assert main(["run", str(out / "ties.yaml"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "minimum detectable effects" in printed
    line = next(line for line in printed.splitlines() if "vaswani" in line and "nDCG@10: MDE" in line)
    assert "pilot: bm25-pisa" in line
    want = _results(out).drop(index="bm25-pisa", level="system").xs("nDCG@10", level="measure")["sd_diff"].median()
    assert f"sd of differences {want:.4f}" in line
    assert limits.mde_summary(want, 93, 3, "holm")["mde"] > 0
