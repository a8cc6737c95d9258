"""Issue 40 item 7 on a real grid: what a function of `extra=` may return. An empty run, NaN scores and a function
returning None each fail their own cell with one error naming the system and what to fix (the grid goes on, and
nothing of them is stored); a frame without `rank` is a valid run (ranks from the scores).

Cheap: BM25 by PISA on 5 vaswani queries."""

from __future__ import annotations

import pandas as pd
import pyterrier as pt


def test_extra_functions_returning_bad_frames(tmp_path, shared_store, monkeypatch):
    import irgrid
    from irgrid.data.datasets import get
    from irgrid.runner.experiment import with_extra

    monkeypatch.setenv("IRGRID_CACHE", str(shared_store.root))
    exp = {"name": "door", "datasets": [{"name": "vaswani", "queries": 5}], "retrievers": ["bm25-pisa"],
           "measures": ["AP"], "latency_sample": 0, "baseline": "bm25-pisa"}

    def bm25(ds):
        return irgrid.retriever("bm25-pisa").pipeline(ds)

    extra = {
        "empty": lambda ds: pt.apply.generic(lambda df: pd.DataFrame(columns=["qid", "docno", "score", "rank"])),
        "nan": lambda ds: bm25(ds) >> pt.apply.score(lambda r: float("nan")),
        "norank": lambda ds: bm25(ds) >> pt.apply.generic(lambda df: df.drop(columns=["rank"])),
        "none": lambda ds: None,
    }
    result = irgrid.run(exp, tmp_path / "out", extra=extra, keys={n: f"{n}-v1" for n in extra})
    errors = {f.retriever: f.error for f in result.failures}
    assert set(errors) == {"empty", "nan", "none"}, errors
    assert "run of 'empty' on 'vaswani@q5s0': no result for any of its 5 queries" in errors["empty"]
    assert "run of 'nan' on 'vaswani@q5s0': 5000 of 5000 result(s) have a score that is not a number" in errors["nan"]
    assert "extra pipeline 'none': its function returned NoneType for dataset 'vaswani@q5s0'" in errors["none"]
    spec = with_extra(exp, extra, {n: f"{n}-v1" for n in extra})
    cells = {r.name: r for r in spec.retrievers}
    sample = get("vaswani").with_sample(5, 0)
    assert not any(shared_store.runs.has(cells[n], sample) for n in ("empty", "nan", "none"))  # nothing stored
    rows = result.results.set_index(["system", "measure"])
    # without rank: ranks from the scores, the very run of BM25 (p = 1 against it)
    assert rows.loc[("norank", "AP"), "value"] == rows.loc[("bm25-pisa", "AP"), "value"]
    assert rows.loc[("norank", "AP"), "p_value"] == 1.0
    assert not (tmp_path / "out" / "runs" / "vaswani@q5s0" / "empty.res.gz").exists()
