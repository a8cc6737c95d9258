"""Claims on a real CPU grid of the runnable retrievers (BEIR SciFact, the paper's Lucene BM25 and BM25 on PISA):
the experiment's own claims are decided from its per-query values, and the paper's 28 claims
(experiments/paper.yaml), none of which this grid can decide, each name the cells they need. And `irgrid diff`
of the grid against itself reports nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irgrid import cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
EXPERIMENT = """\
name: cpu-claims
datasets: [beir/scifact/test]
retrievers: [bm25, bm25-pisa]
measures: [nDCG@10, R@100]
baseline: bm25
test: t
correction: holm
claims:
  - id: pisa-equals-lucene
    text: BM25 on PISA is equivalent to the paper's Lucene BM25 within 0.02 nDCG@10
    source: docs/fidelity.md (checked numbers)
    equivalent: {a: bm25-pisa, b: bm25, dataset: beir/scifact/test, measure: nDCG@10, delta: 0.02}
  - id: pisa-within-half-a-point
    text: BM25 on PISA is equivalent to Lucene BM25 within 0.005 nDCG@10
    source: docs/fidelity.md (checked numbers)
    equivalent: {a: bm25-pisa, b: bm25, dataset: beir/scifact/test, measure: nDCG@10, delta: 0.005}
  - id: pisa-beats-lucene
    text: BM25 on PISA beats Lucene BM25 on SciFact
    source: none (no difference expected)
    beats: {a: bm25-pisa, b: bm25, dataset: beir/scifact/test}
  - id: pisa-faster
    text: BM25 on PISA answers queries faster than Lucene BM25 from Python
    source: docs/fidelity.md (0.69 vs 39.7 ms/query)
    latency: {a: bm25, b: bm25-pisa, at_least: 1}
"""


@pytest.fixture(scope="module")
def grid(shared_store, tmp_path_factory):
    root = tmp_path_factory.mktemp("cpu-claims")
    (root / "cpu.yaml").write_text(EXPERIMENT)
    assert cli.main(["run", str(root / "cpu.yaml"), "--out", str(root / "out"), "--cache", str(shared_store.root)]) == 0
    return root / "out"


def test_the_grids_own_claims_are_decided(grid, capsys):
    assert cli.main(["claims", str(grid), "--format", "json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["pisa-equals-lucene"]["verdict"] == "supported" and rows["pisa-equals-lucene"]["n"] == 300
    assert rows["pisa-beats-lucene"]["verdict"] == "inconclusive" and rows["pisa-beats-lucene"]["p"] > 0.05
    assert rows["pisa-within-half-a-point"]["verdict"] == "inconclusive"  # 300 queries cannot show +-0.005
    assert rows["pisa-faster"]["verdict"] == "supported" and rows["pisa-faster"]["basis"] == "point"


def test_the_papers_claims_name_the_cells_they_need(grid, capsys):
    assert cli.main(["claims", str(grid), "--claims", str(ROOT / "experiments" / "paper.yaml"),
                     "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 20 and all(r["verdict"] == "inconclusive" and r["lacking"] for r in rows)
    bm25 = next(r for r in rows if r["id"] == "bm25-beats-deepct")
    assert "beir/scifact/test deepct nDCG@10" in bm25["lacking"]


def test_diff_of_a_grid_with_itself_is_empty(grid, capsys):
    assert cli.main(["diff", str(grid), str(grid), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not (out["claims"] or out["significance"] or out["ranks"] or out["best"] or out["cells"])
