"""Analyses on a real grid (vaswani + SciFact, Lucene and PISA BM25): bootstrap SEs, z-scores, RRF, meta-analysis."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from support import SPARSE_GRID

from irgrid import grid
from irgrid.report import failures as an
from irgrid.report import stats as stats_mod
from irgrid.report import zscores as zscores_mod
from irgrid.runner.experiment import from_dict

GRID = {"name": "analysis-grid", **SPARSE_GRID}


@pytest.fixture(scope="module")
def real_grid(shared_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "out"
    results = grid.run(from_dict(GRID), out=out, store=shared_store).results
    return out, results


def test_bootstrap_table_on_a_real_grid(real_grid):
    out, results = real_grid
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    table = stats_mod.bootstrap_table(perq)
    assert len(table) == 2 * 2 * 3 and (table["B"] == 1000).all()
    assert table.equals(stats_mod.bootstrap_table(perq))  # seeded: identical on a rerun
    value = results.set_index(["dataset", "system", "measure"])["value"]
    for _, r in table.iterrows():
        assert r["mean"] == pytest.approx(value[(r["dataset"], r["system"], r["measure"])], abs=1e-9)
        block = perq[(perq.dataset == r["dataset"]) & (perq.system == r["system"]) & (perq.measure == r["measure"])]
        plug_in = block["value"].std(ddof=0) / math.sqrt(len(block))
        assert r["se"] == pytest.approx(plug_in, rel=0.1)


def test_shipped_reference_tables_are_the_shared_ones(shared_path):
    shared = shared_path("reference")
    for name in zscores_mod.TABLE_FILES.values():
        assert (an.reference_dir() / name).read_bytes() == (shared / name).read_bytes()


def test_zscores_on_a_real_grid(real_grid):
    out, results = real_grid
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    se = stats_mod.bootstrap_table(perq)
    z = zscores_mod.zscores(results, se, {"bm25": "BM25", "bm25-pisa": None})
    row = z[(z.system == "bm25") & (z.column == "scifact")].iloc[0]
    assert row["published"] == 0.679 and row["class"] == "within"  # Pyserini's 0.6789 vs the paper's 0.679
    cell_se = se[(se.system == "bm25") & (se.dataset == "beir/scifact/test") & (se.measure == "nDCG@10")]["se"].iloc[0]
    assert row["delta_sigma"] == pytest.approx((row["ours"] - 0.679) / cell_se)
    assert z[z.system == "bm25-pisa"]["class"].eq("new").all()
    assert not (z.table == "2").any()  # BEIR's Table 2 column needs all 14 datasets


def test_a_wrong_published_value_is_classed_far_below(tmp_path, real_grid):
    out, results = real_grid
    ref = tmp_path / "ref"
    ref.mkdir()
    for name in zscores_mod.TABLE_FILES.values():
        (ref / name).write_bytes((an.reference_dir() / name).read_bytes())
    a5 = pd.read_csv(ref / zscores_mod.TABLE_FILES["A.5"])
    a5.loc[a5.model == "BM25", "scifact"] = 0.80  # 0.12 above ours: about 5 SE
    a5.to_csv(ref / zscores_mod.TABLE_FILES["A.5"], index=False)
    se = stats_mod.bootstrap_table(pd.read_csv(out / "perquery.csv", dtype={"qid": str}))
    z = zscores_mod.zscores(results, se, {"bm25": "BM25"}, reference=ref)
    assert z[(z.system == "bm25") & (z.column == "scifact")]["class"].iloc[0] == "far-below"


def test_rrf_of_stored_runs_equals_pyterrier_alpha(real_grid):
    import pyterrier as pt
    from pyterrier_alpha.fusion import rr_fusion

    from irgrid.report.stored import load

    g = load(real_grid[0])
    a, b = g.run("vaswani", "bm25-pisa"), g.run("vaswani", "bm25")
    ours = an.rrf_runs(a, b)
    theirs = rr_fusion(*(r[["qid", "docno", "score"]].assign(query="") for r in (a, b)))
    assert len(ours) == len(theirs)
    for qid, block in ours.groupby("qid"):
        other = theirs[theirs.qid == qid]
        assert np.allclose(np.sort(block["score"].to_numpy()), np.sort(other["score"].to_numpy()))
        # the same documents, except which of several tied at the 1000 cut-off are kept
        cut = block["score"].min()
        assert set(block[block.score > cut + 1e-12].docno) == set(other[other.score > cut + 1e-12].docno)
    assert ours.groupby("qid").size().max() <= 1000
    # by hand, for query 1's fused top document: the sum of 1 / (60 + its 0-based rank) in each run it is in
    top = ours[(ours.qid == "1") & (ours["rank"] == 0)].iloc[0]
    expected = 0.0
    for run in (a, b):
        ranks = pt.model.add_ranks(run[run.qid == "1"][["qid", "docno", "score"]].copy()).set_index("docno")["rank"]
        if top["docno"] in ranks.index:
            expected += 1 / (60 + ranks[top["docno"]])
    assert expected > 1 / 60 and top["score"] == pytest.approx(expected)  # in both runs, above any single-run score


def test_rrf_pipeline_composes_registry_entries(real_grid, shared_store):
    import pyterrier as pt
    from ir_measures import AP

    import irgrid
    from irgrid.data.datasets import get

    ds = get("vaswani")
    variant = irgrid.retriever("bm25-pisa").with_options(name="bm25-pisa-k1.2", k1=1.2)
    fused = an.rrf_pipeline(["bm25-pisa", variant], "vaswani", store=shared_store)
    topics = ds.topics().head(20)
    res = pt.Experiment([fused], topics, ds.qrels(), [AP], names=["rrf"])
    assert 0.1 < res["AP"].iloc[0] < 0.6


def test_win_tie_loss_and_meta_analysis_on_a_real_grid(real_grid):
    out, results = real_grid
    wtl = stats_mod.win_tie_loss(pd.read_csv(out / "results.csv"))
    assert set(wtl.system) == {"bm25-pisa"} and (wtl.datasets == 2).all()
    assert ((wtl.win + wtl.tie + wtl.loss) == 2).all()
    row = results[(results.system == "bm25-pisa") & (results.measure == "AP")]
    expected_wins = sum(bool(r.significant) and r.value > results[(results.dataset == r.dataset) & (results.system == "bm25")
                                                                   & (results.measure == "AP")].value.iloc[0]
                        for r in row.itertuples())
    assert wtl.set_index("measure").at["AP", "win"] == expected_wins
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    effects = stats_mod.paired_effects(perq, "bm25")
    meta = stats_mod.meta_analysis(perq, "bm25").set_index("measure")
    assert (meta.k == 2).all()
    ap = effects[effects.measure == "AP"]
    direct = stats_mod.dersimonian_laird(ap.effect, ap.variance)
    assert meta.at["AP", "effect"] == pytest.approx(direct.effect)
    diff = results.set_index(["dataset", "system", "measure"])["value"]
    for d in ("vaswani", "beir/scifact/test"):
        e = ap[ap.dataset == d]["effect"].iloc[0]
        assert e == pytest.approx(diff[(d, "bm25-pisa", "AP")] - diff[(d, "bm25", "AP")], abs=1e-9)

