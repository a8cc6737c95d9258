"""Issue 40 item 1 on a real grid: a one-query sample gets no p-value (not ▼ at p = 0.000999 under the bootstrap),
with a note in results.csv and results.md; identical systems get p = 1 under t and wilcoxon (was NaN).

Cheap: BM25 by PISA on vaswani (11k short documents), query samples of 1 and 5."""

from __future__ import annotations

import math

import pandas as pd
import pytest


def _grid(tmp_path, name, queries, test, store, monkeypatch):
    import irgrid

    monkeypatch.setenv("IRGRID_CACHE", str(store.root))  # the session's cache: vaswani's index built once

    exp = {"name": name, "datasets": [{"name": "vaswani", "queries": queries}], "retrievers": ["bm25-pisa"],
           "measures": ["AP", "nDCG@10"], "latency_sample": 0, "baseline": "bm25-pisa", "test": test}
    same = irgrid.retriever("bm25-pisa").pipeline("vaswani", store=store)
    top1 = same % 1  # one document per query: AP differs from the baseline's
    res = irgrid.run(exp, tmp_path / name, extra={"same": same, "top1": top1},
                     keys={"same": "bm25-pisa-same-v1", "top1": "bm25-pisa-top1-v1"})
    return res.results.set_index(["system", "measure"]), (tmp_path / name / "results.md").read_text()


def test_one_query_bootstrap_is_not_computable_with_a_note(tmp_path, shared_store, monkeypatch):
    rows, md = _grid(tmp_path, "one", 1, {"name": "bootstrap", "resamples": 1000}, shared_store, monkeypatch)
    top1 = rows.loc[("top1", "AP")]
    assert top1["n"] == 1 and top1["value"] != rows.loc[("bm25-pisa", "AP")]["value"]
    assert pd.isna(top1["p_value"]) and pd.isna(top1["significant"])  # was p = 0.000999, significant
    assert "not computable: 1 paired query" in top1["p_note"]
    assert "▼" not in md.split("▲/▼")[0] and "§: no p-value against the baseline" in md
    assert rows.loc[("same", "AP")]["p_value"] == 1.0  # identical: p = 1 even on one query
    stored = pd.read_csv(tmp_path / "one" / "results.csv")
    assert stored["p_note"].fillna("").str.contains("not computable").sum() == 2  # top1's AP and nDCG@10


@pytest.mark.parametrize("test", ["t", "wilcoxon"])
def test_identical_systems_get_p_one(tmp_path, shared_store, monkeypatch, test):
    rows, _ = _grid(tmp_path, f"same-{test}", 5, test, shared_store, monkeypatch)
    for m in ("AP", "nDCG@10"):
        same = rows.loc[("same", m)]
        assert same["p_value"] == 1.0 and same["p_value_corrected"] == 1.0 and not same["significant"]
        assert not isinstance(same["p_note"], str)
        p = rows.loc[("top1", m)]["p_value"]
        assert 0.0 < p <= 1.0 and not math.isnan(p)


def test_report_of_a_one_query_grid_notes_the_untested_comparisons(tmp_path, shared_store, monkeypatch):
    """`irgrid report` on the one-query bootstrap grid: no ▼, no bold, and the main table says why."""
    from irgrid.cli import main

    _grid(tmp_path, "one", 1, {"name": "bootstrap", "resamples": 1000}, shared_store, monkeypatch)
    assert main(["report", str(tmp_path / "one"), "--to", str(tmp_path / "report"), "--bootstrap", "200"]) == 0
    text = "\n".join(p.read_text() for p in sorted((tmp_path / "report").rglob("*.md")))
    assert "No p-value (no ▲/▼, no bold) where the test is not computable on the sample" in text
    assert "top1 vs bm25-pisa (not computable: 1 paired query, a paired test needs at least 2)" in text
    assert "▼" not in text.replace("▲/▼", "")
