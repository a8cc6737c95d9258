"""Round trip of the paper's tables: a stored grid built from the published per-dataset values of all 33 retrievers
(Tables A.4-A.7) gives, through `irgrid report`, Table 2's published aggregates for every row and Δσ class
"within" for every cell of its 9 columns.

Per-query values are not published, so perquery.csv is synthesised: per (dataset, system, measure) 40 queries at
μ ± δ (half each), whose mean is exactly the published μ and whose bootstrap SE is δ/√40-ish. The SE then tests
the z-score machinery (nesting, x100 scale), not the paper's SEs. The folder holds only results.csv, perquery.csv
and manifest.json: the analyses that need runs must say they were skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from irgrid import cli, measures, paper

# the paper's tables as shipped with irgrid (tests/integration/test_analysis_grid.py checks they are the shared ones)
REFERENCE = paper.reference_dir()
N_QUERIES = 40


def _published_cells() -> list[tuple[str, str, str, float]]:
    """(paper model, dataset, measure, value on irgrid's 0-1 scale) of every cell of Tables A.4-A.7."""
    a4, a5, a6, a7 = (pd.read_csv(REFERENCE / paper.TABLE_FILES[t]).set_index("model") for t in ("A.4", "A.5", "A.6", "A.7"))
    cells = []
    for model in a5.index:
        for col in paper.TABLE_A4 + paper.TABLE_A5 + paper.TABLE_A6 + paper.TABLE_A7:
            table = {"A.4": a4, "A.5": a5, "A.6": a6, "A.7": a7}[col.table]
            value = float(table.at[model, col.column]) / col.scale
            for part in col.parts:  # CQADupStack: each forum at Table A.5's mean
                cells += [(model, d, part.measure, value) for d in part.members]
    return list(dict.fromkeys(cells))  # A.4 and Table 2 share MS MARCO cells


def _slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper-roundtrip")
    cells = _published_cells()
    rows = [{"dataset": d, "system": _slug(m), "measure": meas, "value": v} for m, d, meas, v in cells]
    results = pd.DataFrame(rows)
    results = pd.concat([results, measures.aggregate(results, paper.PAPER_AGGREGATES)], ignore_index=True)
    results = results.assign(p_value=None, p_value_corrected=None, significant=None, baseline="bm25")
    results.to_csv(out / "results.csv", index=False)
    perq = []
    for m, d, meas, mu in cells:
        lo, hi = (-1.0, 1.0) if meas.startswith("p-MRR") else (0.0, 1.0)
        delta = 0.5 * min(mu - lo, hi - mu)
        perq += [{"dataset": d, "system": _slug(m), "measure": meas, "qid": str(i),
                  "value": mu + (delta if i % 2 else -delta)} for i in range(N_QUERIES)]
    pd.DataFrame(perq).to_csv(out / "perquery.csv", index=False)
    models = pd.read_csv(REFERENCE / "paper_table2.csv")
    manifest = {"experiment": "paper-roundtrip", "retrievers": {
        _slug(r.model): {"family": r.family, "paper_name": r.model} for r in models.itertuples()}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    # B = 100 resamples (default 1000): the standard errors only scale the z-scores of cells equal to the published
    # values, so the classes and aggregates checked here do not depend on B (the default took ~35 s of CPU).
    # --no-figures: the tables are what is checked; the 70 figures took most of this fixture's time (they are drawn
    # by tests/integration/test_report_user_grid.py and the benchmark below)
    assert cli.main(["report", str(out), "--bootstrap", "100", "--no-figures"]) == 0
    return out, results


def test_every_table2_aggregate_and_class(roundtrip):
    out, results = roundtrip
    t2 = pd.read_csv(REFERENCE / "paper_table2.csv").set_index("model")
    assert len(t2) == 33
    z = pd.read_csv(out / "report" / "zscores.csv")
    z2 = z[z.table == "2"]
    assert len(z2) == 33 * 9 and set(z2.column) == {c.column for c in paper.TABLE2}
    assert (z2["class"] == "within").all(), z2[z2["class"] != "within"][["system", "column", "ours", "published"]]
    for r in z2.itertuples():
        assert r.published == t2.at[r.paper_model, r.column]
        col = paper.column("2", r.column)
        if len(col.components) == 1:  # a single published value passes through unchanged
            assert r.ours == pytest.approx(r.published, abs=1e-9)
        else:  # a mean of k values each rounded to 3 decimals, against a rounded mean: |error| <= 0.0005 + 0.0005
            assert abs(r.ours - r.published) <= 0.001 * col.scale + 1e-9, (r.system, r.column, r.ours)
    # Within 0.0005 (the bound) for all but the cells where both roundings add up:
    over = z2[(z2.ours - z2.published).abs() > 0.0005 * z2.column.map(lambda c: paper.column("2", c).scale) + 1e-9]
    assert set(zip(over.paper_model, over.column)) <= {
        ("ColBERTv2", "beir_ndcg@10"), ("RetroMAE", "beir_ndcg@10"), ("BM25", "followir_score"),
        ("mE5 (large)", "followir_score"), ("Jina Embeddings v3", "followir_score"), ("LLM2Vec", "followir_score"),
        ("KaLM-Embedding (v2.5)", "followir_score"), ("SimCSE", "followir_p-mrr"), ("mE5 (large)", "followir_p-mrr")}
    # results.csv's aggregate rows are the same numbers, on the paper's scale
    agg = results[results.dataset.isin(paper.AGGREGATES)].set_index(["dataset", "system"])["value"]
    assert agg["BEIR", "bm25"] == pytest.approx(0.42736, abs=1e-5)
    assert agg["FollowIR-Score", "bm25"] == pytest.approx(16.6793, abs=1e-4)


def test_the_report_says_what_it_skipped(roundtrip):
    out, _ = roundtrip
    md = (out / "report" / "report.md").read_text()
    assert "Skipped (no stored runs" in md and "beir/scifact/test" in md
    assert (out / "report" / "table2.md").exists() and not (out / "report" / "figure1.png").exists()
    table2 = (out / "report" / "table2.md").read_text()
    assert "| bm25 | 0.185 =" in table2 and "16.679 =" in table2


def test_a_cell_without_per_query_values_has_no_delta_sigma():
    from irgrid.report import zscores as zscores_mod

    results = pd.DataFrame({"dataset": ["beir/scifact/test"], "system": ["bm25"], "measure": ["nDCG@10"],
                            "value": [0.679]})
    z = zscores_mod.zscores(results, pd.DataFrame(columns=["dataset", "system", "measure", "se"]), {"bm25": "BM25"})
    row = z[z.column == "scifact"].iloc[0]
    assert row["class"] == "no-se" and pd.isna(row["delta_sigma"]) and row["published"] == 0.679


def test_failed_cells_are_marked_failed_not_absent():
    """A cell that failed (failures.json) reads 'failed' in the paper's tables, with a note; a system that failed
    everywhere still gets its row."""
    from irgrid.report import stored as stored_mod
    from irgrid.report import tables as reports
    from irgrid.report import zscores as zscores_mod

    results = pd.DataFrame({"dataset": ["beir/scifact/test"], "system": ["bm25"], "measure": ["nDCG@10"],
                            "value": [0.679], "baseline": ["bm25"]})
    failures = [{"dataset": "beir/nfcorpus/test", "retriever": "bm25", "error": "boom"},
                {"dataset": "beir/scifact/test", "retriever": "contriever", "error": "no weights"}]
    grid = stored_mod.Grid(Path("."), results, pd.DataFrame(), {"retrievers": {}}, failures)
    z = zscores_mod.zscores(results, pd.DataFrame(columns=["dataset", "system", "measure", "se"]), {"bm25": "BM25"})
    table = reports.paper_table(grid, z, "A.5")
    header = table.columns
    rows = {row[0].text: [c.text for c in row[1:]] for row in table.rows}
    nfcorpus, scifact, fiqa = (header.index(c) - 1 for c in ("nfcorpus", "scifact", "fiqa"))
    assert rows["bm25"][nfcorpus] == "failed" and rows["bm25"][scifact] == "0.679" and rows["bm25"][fiqa] == "–"
    assert rows["contriever"][scifact] == "failed" and rows["contriever"][nfcorpus] == "–"
    assert any("failed: a cell" in n for n in table.notes)
