"""The latency pass: every system of a grid re-timed in one process, warm, in interleaved rounds, expressions as
run; Figure 1 says where its latencies come from (this pass, or the runs' stored ms/query)."""

from __future__ import annotations

import numpy as np
import pytest

from irgrid import grid
from irgrid.runner.experiment import from_dict

ROUNDS = 3
LATENCY_GRID = {
    "datasets": [{"name": "vaswani", "queries": 20, "seed": 3}],
    "retrievers": ["bm25-pisa", {"name": "bm25-pisa", "as": "k12", "options": {"k1": 1.2}},
                   {"as": "fuse", "pipeline": "rrf(bm25-pisa, k12, k=60)"}],
    "measures": ["AP", "nDCG@10"],
    "baseline": "bm25-pisa",
    "latency_sample": 2,
}


@pytest.fixture(scope="module")
def measured(shared_store, tmp_path_factory):
    from irgrid.runner import latency

    spec = from_dict(LATENCY_GRID)
    out = tmp_path_factory.mktemp("latency") / "out"
    grid.run(spec, out=out, store=shared_store, fail_fast=True)
    timings, summary = latency.measure(spec, shared_store, rounds=ROUNDS)
    return spec, out, timings, summary


def test_rounds_are_interleaved_and_summarised(measured):
    spec, _, timings, summary = measured
    names = [r.name for r in spec.retrievers]
    assert len(timings) == ROUNDS * len(names)
    for k, rnd in timings.groupby("round"):
        assert sorted(rnd["system"]) == sorted(names)  # every system once per round
        assert list(rnd.sort_values("position")["system"]) == names[k:] + names[:k]  # rotated order
    assert (timings["ms_per_query"] > 0).all() and (timings["queries"] == 20).all()
    assert list(summary["system"]) == names and (summary["rounds"] == ROUNDS).all()
    assert (summary["min_ms"] <= summary["median_ms"]).all() and (summary["median_ms"] <= summary["max_ms"]).all()
    for r in summary.itertuples():
        assert r.median_ms == pytest.approx(np.median(timings[timings.system == r.system]["ms_per_query"]))
    assert summary["source"].str.contains("interleaved").all() and summary["measured_at"].str.endswith("Z").all()


def test_expressions_are_timed_as_run_not_as_stored_stages(measured, shared_store):
    """The fusion's first stages retrieve live in the latency pass (a grid's run reads their stored runs)."""
    from irgrid.runner import latency

    spec = measured[0]
    fuse = next(r for r in spec.retrievers if r.name == "fuse")
    live = latency._pipeline(fuse, spec.datasets[0], shared_store, {})
    stored = fuse.compose(spec.datasets[0], shared_store, {})
    topics = spec.datasets[0].topics()
    a, b = live.transform(topics), stored.transform(topics)
    # the stored composition declares its stages' stored ms/query as latency; the live one has none to declare
    assert stored.latency_seconds() > 0 and live.latency_seconds() == 0
    merged = a.merge(b, on=["qid", "docno"], suffixes=("_live", "_stored"))
    assert len(merged) == len(a) == len(b)  # the same ranking either way: only the timing differs
    np.testing.assert_allclose(merged["score_live"], merged["score_stored"], rtol=1e-6)


def test_figure1_says_where_its_latency_comes_from(measured, shared_store):
    from irgrid.report import figures, stored
    from irgrid.runner import latency
    from irgrid.util.files import write_text_atomic

    _, out, timings, summary = measured
    again = out.parent / "again"  # the same grid again: every run now comes from the cache
    grid.run(measured[0], out=again, store=shared_store, fail_fast=True)
    before, source = figures.latencies(stored.load(again))
    assert before["lo"].isna().all() and "stored ms/query" in source and "no spread" in source
    assert "3 of 3 taken from cached runs computed before this grid" in source and "not comparable" in source
    assert "(measured 20" in source  # when: the runs record it
    write_text_atomic(out / figures.LATENCY_FILE, summary.to_csv(index=False))  # not tied to this grid
    assert "did not time this folder's grid" in figures.latencies(stored.load(out))[1]
    latency.write(out, timings, summary)
    grid_ = stored.load(out)
    after, source = figures.latencies(grid_)
    assert "measured by this grid's latency pass" in source and summary["measured_at"].iloc[0] in source
    assert (after["lo"] <= after["ms"]).all() and (after["ms"] <= after["hi"]).all()
    png = figures.figure1(grid_, out / "figure1.png")
    assert png.stat().st_size > 10_000
    (out / "results.csv").write_text((out / "results.csv").read_text() + "\n")  # another grid in this folder
    assert "did not time this folder's grid" in figures.latencies(stored.load(out))[1]
