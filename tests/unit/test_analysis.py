"""Analyses (paper Sections 4.1.2, 4.3): hand-computed examples, the paper's own z-scores, and a real grid."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SPARSE_GRID

from irgrid import analysis as an
from irgrid import grid
from irgrid.experiment import from_dict

ROOT = Path(__file__).resolve().parent.parent
GRID = {"name": "analysis-grid", **SPARSE_GRID}


@pytest.fixture(scope="module")
def real_grid(shared_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "out"
    results = grid.run(from_dict(GRID), out=out, store=shared_store)
    return out, results


# -- bootstrap ----------------------------------------------------------------------------------------------

def test_bootstrap_se_matches_the_ideal_bootstrap():
    # x = [0, 0, 1, 1]: the ideal bootstrap SE of the mean is the plug-in sd / sqrt(n) = 0.5 / 2 = 0.25
    se = an.bootstrap_se([0, 0, 1, 1], n_resamples=20000, seed=1)
    assert se == pytest.approx(0.25, abs=0.005)
    # x = [0, 1]: resampled means are 0, .5, .5, 1 with equal probability: var = 1/8, SE = 0.35355
    assert an.bootstrap_se([0, 1], n_resamples=20000, seed=2) == pytest.approx(math.sqrt(1 / 8), abs=0.006)


def test_bootstrap_se_is_seeded_and_degenerate_cases_are_exact():
    x = np.linspace(0, 1, 50) ** 2
    assert an.bootstrap_se(x, seed=7) == an.bootstrap_se(x, seed=7)
    assert an.bootstrap_se(x, seed=7) != an.bootstrap_se(x, seed=8)
    assert an.bootstrap_se([0.4] * 10) == 0.0
    assert math.isnan(an.bootstrap_se([]))
    # B = 1000 is within Monte-Carlo error (~1/sqrt(2B) relative) of the plug-in value
    assert an.bootstrap_se(x, n_resamples=1000, seed=0) == pytest.approx(x.std(ddof=0) / math.sqrt(len(x)), rel=0.08)


def test_bootstrap_table_on_a_real_grid(real_grid):
    out, results = real_grid
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    table = an.bootstrap_table(perq)
    assert len(table) == 2 * 2 * 3 and (table["B"] == 1000).all()
    assert table.equals(an.bootstrap_table(perq))  # seeded: identical on a rerun
    value = results.set_index(["dataset", "system", "measure"])["value"]
    for _, r in table.iterrows():
        assert r["mean"] == pytest.approx(value[(r["dataset"], r["system"], r["measure"])], abs=1e-9)
        block = perq[(perq.dataset == r["dataset"]) & (perq.system == r["system"]) & (perq.measure == r["measure"])]
        plug_in = block["value"].std(ddof=0) / math.sqrt(len(block))
        assert r["se"] == pytest.approx(plug_in, rel=0.1)


# -- Δσ and the paper ---------------------------------------------------------------------------------------

def test_delta_sigma_and_class_boundaries():
    assert an.delta_sigma(0.70, 0.65, 0.02) == pytest.approx(2.5)
    assert an.delta_sigma(0.5, 0.5, 0.0) == 0.0 and an.delta_sigma(0.6, 0.5, 0.0) == math.inf
    cases = {0.0: "within", 2.0: "within", -2.0: "within", 2.5: "above", 3.0: "far-above", 10: "far-above",
             -2.01: "below", -3.0: "far-below", -21.475: "far-below", None: "new", math.nan: "new"}
    for z, cls in cases.items():
        assert an.classify(z) == cls, z


def test_classes_of_table_a3_are_the_colours_of_table_2():
    z = an.load_paper_table("A.3")
    classes = z.apply(lambda col: col.map(lambda v: an.classify(None if pd.isna(v) else float(v))))
    flat = classes.stack()
    published = flat[flat != "new"]
    # Section 4.1.2: 109 published results, 76 within 2 SE, 20 at least 3 SE below, 5 at least 3 SE above
    assert len(published) == 109
    counts = published.value_counts()
    assert (counts["within"], counts["far-below"], counts["far-above"]) == (76, 20, 5)
    assert (classes.loc["BM25", ["msmarco_dev_mrr@10", "dl19_ndcg@10", "dl20_ndcg@10", "beir_ndcg@10",
                                 "lotte_success@5", "instructir_robustness@10", "instructir_ndcg@10",
                                 "followir_score", "followir_p-mrr"]] == "within").all()
    assert classes.at["DeepCT", "msmarco_dev_mrr@10"] == "far-below"
    assert classes.at["HyDE", "dl19_ndcg@10"] == "far-above" and classes.at["HyDE", "dl20_ndcg@10"] == "far-above"
    assert classes.at["InstructOR (large)", "beir_ndcg@10"] == "below"  # -2.302: purple in the text
    assert classes.at["LLM2Vec", "beir_ndcg@10"] == "new"


def test_shipped_reference_tables_are_the_shared_ones():
    shared = ROOT.parent / "shared" / "reference"
    if not shared.is_dir():
        pytest.skip("no ../shared/reference on this machine")
    for name in an.TABLE_FILES.values():
        assert (an.reference_dir() / name).read_bytes() == (shared / name).read_bytes()


def test_paper_columns_map_our_datasets():
    cols = {(c.table, c.column): c for c in an.paper_columns()}
    scifact = cols["A.5", "scifact"]
    assert an.column_cells(scifact, {("beir/scifact/test", "nDCG@10"): 0.6}) == [("beir/scifact/test", "nDCG@10")]
    assert an.column_cells(scifact, {("beir/scifact/test", "AP"): 0.6}) is None
    beir = cols["2", "beir_ndcg@10"]
    assert len(beir.parts) == 14  # Table 2: the 14-part mean, CQADupStack's 12 forums averaged first
    assert [len(p.members) for p in beir.parts].count(12) == 1 and len(beir.components) == 13 + 12
    weights = {d: w for d, _, w in beir.weights()}
    assert weights["beir/scifact/test"] == pytest.approx(1 / 14) and weights["beir/cqadupstack/tex"] == pytest.approx(1 / 168)
    assert an.column_cells(beir, {("beir/scifact/test", "nDCG@10"): 0.6}) is None  # incomplete: not compared
    assert cols["2", "msmarco_dev_mrr@10"].components == ((("msmarco-passage/dev/small",), "RR@10"),)


def test_zscores_on_a_real_grid(real_grid):
    out, results = real_grid
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    se = an.bootstrap_table(perq)
    z = an.zscores(results, se, {"bm25": "BM25", "bm25-pisa": None})
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
    for name in an.TABLE_FILES.values():
        (ref / name).write_bytes((an.reference_dir() / name).read_bytes())
    a5 = pd.read_csv(ref / an.TABLE_FILES["A.5"])
    a5.loc[a5.model == "BM25", "scifact"] = 0.80  # 0.12 above ours: about 5 SE
    a5.to_csv(ref / an.TABLE_FILES["A.5"], index=False)
    se = an.bootstrap_table(pd.read_csv(out / "perquery.csv", dtype={"qid": str}))
    z = an.zscores(results, se, {"bm25": "BM25"}, reference=ref)
    assert z[(z.system == "bm25") & (z.column == "scifact")]["class"].iloc[0] == "far-below"


# -- failure points, Jaccard, fusion ------------------------------------------------------------------------

def test_failure_ranks_by_hand():
    qrels = pd.DataFrame({"qid": ["1", "1", "2", "3", "4"], "docno": ["a", "b", "c", "d", "e"],
                          "label": [0, 1, 1, 1, 0]})
    run = pd.DataFrame({"qid": ["1", "1", "1", "2", "2"], "docno": ["x", "a", "b", "z", "c"],
                        "score": [3.0, 2.0, 1.0, 5.0, 4.0]})
    ranks = an.failure_ranks(run, qrels)
    # q1: first relevant 'b' at rank 3 ('a' is judged non-relevant); q2: 'c' at 2; q3 not retrieved: 1001;
    # q4 has no relevant document, so it has no failure rank
    assert ranks.to_dict() == {"1": 3, "2": 2, "3": 1001}
    assert an.failure_ranks(run, qrels, depth=2).to_dict() == {"1": 3, "2": 2, "3": 3}  # capped at depth + 1


def test_hard_queries_and_jaccard_by_hand():
    ranks = pd.Series({"q1": 1, "q2": 1001, "q3": 5, "q4": 1001, "q5": 2, "q6": 40, "q7": 1, "q8": 3, "q9": 1,
                       "q10": 7, "q11": 1, "q12": 2})
    assert an.hard_queries(ranks, 0.1) == ["q2", "q4"]  # ceil(0.1 * 12) = 2 queries: the two at 1001
    assert an.hard_queries(ranks, 0.25) == ["q2", "q4", "q6"]  # ceil(3.0) = 3
    # ties at the cut are broken by qid: q10 (7) is in, then q3 (5)
    assert an.hard_queries(ranks, 0.4) == ["q2", "q4", "q6", "q10", "q3"]
    assert an.jaccard({"a", "b", "c"}, {"b", "c", "d"}) == pytest.approx(2 / 4)
    assert an.jaccard({"a"}, {"b"}) == 0.0 and an.jaccard(set(), set()) == 1.0
    m = an.jaccard_matrix({"x": ["1", "2"], "y": ["2", "3"], "z": ["1", "2"]})
    assert m.loc["x", "y"] == pytest.approx(1 / 3) and m.loc["x", "z"] == 1.0 and m.loc["y", "x"] == m.loc["x", "y"]
    assert np.diag(m.to_numpy()).tolist() == [1.0, 1.0, 1.0]


def test_fusion_suggestions_prefer_other_families_and_skip_weak_systems():
    jac = pd.DataFrame({"dataset": "d", "a": ["bm25", "bm25", "dense", "bm25"], "b": ["splade", "dense", "weak", "weak"],
                        "jaccard": [0.1, 0.3, 0.05, 0.02]})
    families = {"bm25": "sparse", "splade": "sparse", "dense": "dense", "weak": "dense"}
    eff = pd.DataFrame({"dataset": "d", "system": ["bm25", "splade", "dense", "weak"], "value": [0.6, 0.7, 0.68, 0.2]})
    s = an.fusion_suggestions(jac, families, eff, top=2)
    assert list(zip(s.a, s.b)) == [("bm25", "dense"), ("bm25", "splade")]  # cross-family first; 'weak' left out
    assert s.cross_family.tolist() == [True, False]


def test_rrf_of_stored_runs_equals_pyterrier_alpha(real_grid):
    from pyterrier_alpha.fusion import rr_fusion

    from irgrid.reports import load

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
    # by hand: a document first in both runs scores 2/60
    top = ours[(ours.qid == "1") & (ours["rank"] == 0)]
    both_first = set(a[a.qid == "1"].nlargest(1, "score").docno) & set(b[b.qid == "1"].nlargest(1, "score").docno)
    if both_first:
        assert top["score"].iloc[0] == pytest.approx(2 / 60)


def test_rrf_pipeline_composes_registry_entries(real_grid, shared_store):
    import pyterrier as pt
    from ir_measures import AP

    import irgrid
    from irgrid.datasets import get

    ds = get("vaswani")
    variant = irgrid.retriever("bm25-pisa").with_options(name="bm25-pisa-k1.2", k1=1.2)
    fused = an.rrf_pipeline(["bm25-pisa", variant], "vaswani", store=shared_store)
    topics = ds.topics().head(20)
    res = pt.Experiment([fused], topics, ds.qrels(), [AP], names=["rrf"])
    assert 0.1 < res["AP"].iloc[0] < 0.6


# -- cross-dataset view -------------------------------------------------------------------------------------

def test_dersimonian_laird_by_hand():
    # homogeneous: Q = 1.3846 < k - 1, so tau² = 0 and the pooled effect is the fixed effect
    r = an.dersimonian_laird([0.1, 0.3, 0.2], [0.01, 0.02, 0.015])
    assert r.tau2 == 0.0 and r.q == pytest.approx(1.384615, abs=1e-6)
    assert r.effect == pytest.approx(38.3333 / 216.6667, abs=1e-5) and r.se == pytest.approx(math.sqrt(1 / 216.6667))
    # heterogeneous: w = 100, 100; Q = 50; C = 200 - 20000/200 = 100; tau² = (50 - 1)/100 = 0.49
    r = an.dersimonian_laird([0.0, 1.0], [0.01, 0.01])
    assert r.tau2 == pytest.approx(0.49) and r.effect == pytest.approx(0.5)
    assert r.se == pytest.approx(0.5) and r.i2 == pytest.approx(49 / 50)  # w* = 1/0.5 each: SE = sqrt(1/4)
    assert r.ci_low == pytest.approx(0.5 - 1.959964 * 0.5, abs=1e-5)
    single = an.dersimonian_laird([0.2], [0.04])
    assert (single.k, single.tau2, single.effect, single.se) == (1, 0.0, 0.2, 0.2)


def test_win_tie_loss_and_meta_analysis_on_a_real_grid(real_grid):
    out, results = real_grid
    wtl = an.win_tie_loss(pd.read_csv(out / "results.csv"))
    assert set(wtl.system) == {"bm25-pisa"} and (wtl.datasets == 2).all()
    assert ((wtl.win + wtl.tie + wtl.loss) == 2).all()
    row = results[(results.system == "bm25-pisa") & (results.measure == "AP")]
    expected_wins = sum(bool(r.significant) and r.value > results[(results.dataset == r.dataset) & (results.system == "bm25")
                                                                   & (results.measure == "AP")].value.iloc[0]
                        for r in row.itertuples())
    assert wtl.set_index("measure").at["AP", "win"] == expected_wins
    perq = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    effects = an.paired_effects(perq, "bm25")
    meta = an.meta_analysis(perq, "bm25").set_index("measure")
    assert (meta.k == 2).all()
    ap = effects[effects.measure == "AP"]
    direct = an.dersimonian_laird(ap.effect, ap.variance)
    assert meta.at["AP", "effect"] == pytest.approx(direct.effect)
    diff = results.set_index(["dataset", "system", "measure"])["value"]
    for d in ("vaswani", "beir/scifact/test"):
        e = ap[ap.dataset == d]["effect"].iloc[0]
        assert e == pytest.approx(diff[(d, "bm25-pisa", "AP")] - diff[(d, "bm25", "AP")], abs=1e-9)
