"""Lock files live beside, never inside, the artifact folders; builds are logged."""

from __future__ import annotations

import json
from pathlib import Path

from irgrid.util import locks


def test_store_lock_files_stay_out_of_the_artifact_folders(tmp_path):
    from irgrid.store import Store

    store = Store(tmp_path)
    artifact = tmp_path / "runs" / "vaswani" / "bm25-abc.res.gz"
    assert store.lock_path(artifact) == tmp_path / "locks" / "runs" / "vaswani" / "bm25-abc.res.gz.lock"
    with store.lock(artifact, "run"):
        assert locks.is_locked(store.lock_path(artifact))
    store.record_build("run", artifact, note="x")
    assert json.loads(Path(tmp_path / "builds.log").read_text())["artifact"] == "runs/vaswani/bm25-abc.res.gz"

