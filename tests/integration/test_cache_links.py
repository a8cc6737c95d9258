"""Cache artifacts replaced behind irgrid's back (issue 40, item 10): named, moved aside and recomputed, never a
cell that fails on every rerun."""

from __future__ import annotations

import pandas as pd

from irgrid.store import Store


def test_a_cached_run_replaced_by_a_link_is_named_and_recomputed(tmp_path, caplog):
    """Issue 40 item 10: before, its lock path followed the link out of the cache and the cell failed on every
    rerun with "... is not in the subpath of ..."; now the link is a damaged run: named, moved aside, recomputed."""
    import logging

    from irgrid.core.retrievers import get
    from irgrid.data.datasets import get as get_dataset

    store, entry, ds = Store(tmp_path / "cache"), get("bm25-pisa"), get_dataset("vaswani")
    run = pd.DataFrame({"qid": ["1", "1", "2"], "docno": ["d1", "d2", "d1"], "score": [2.0, 1.0, 3.0],
                        "rank": [0, 1, 0]})
    store.runs.save(entry, ds, run, {})
    path = store.runs.path(entry, ds)
    elsewhere = tmp_path / "elsewhere.res.gz"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)  # the same bytes, behind a link out of the cache
    with store.lock(path, "the run"), caplog.at_level(logging.WARNING, logger="irgrid"):
        assert store.runs.load(entry, ds, repair=True) is None
    assert f"{path.name} is not a plain file" in caplog.text and "moved aside" in caplog.text
    assert not path.exists() and not path.is_symlink()
    store.runs.save(entry, ds, run, {})
    res, _ = store.runs.load(entry, ds)
    assert res[["qid", "docno"]].values.tolist() == run[["qid", "docno"]].values.tolist()
