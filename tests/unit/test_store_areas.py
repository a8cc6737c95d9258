"""The store's model-side areas (QA answers, published folders such as tiny models and dequantised GGUF weights):
built by one job under the artifact's lock, published whole with a manifest, a killed or failed writer leaving
nothing that reads as complete. Real processes and a real SIGKILL; no model weights (the tiny-model and generation
areas with real models: tests/integration/test_model_cache_areas.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from irgrid.store import AREA_MARKER, Store

KEY = "0123456789abcdef"


def _answers(n: int = 3) -> pd.DataFrame:
    return pd.DataFrame({"qid": [str(i) for i in range(n)], "qanswer": [f"answer {i}" for i in range(n)],
                         "evidence_docnos": [[f"d{i}", "d9"] for i in range(n)], "seconds_per_item": 0.5})


def _slow_compute(calls: Path):
    def compute() -> pd.DataFrame:
        with calls.open("a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(1.0)  # long enough for the other process to reach the lock while this one holds it
        return _answers()
    return compute


def _answer_cell(root: str, calls: str, out: str) -> None:
    cell, computed = Store(root).qa.answers(KEY, _slow_compute(Path(calls)))
    Path(out).write_text(json.dumps({"computed": computed, "rows": cell.to_dict(orient="records")}))


def _kinds(root: Path) -> list[str]:
    return [b["kind"] for b in Store(root).builds()]


def test_concurrent_qa_writers_answer_a_cell_once(tmp_path):
    """Two processes answering the same QA cell: one computes and publishes (file, then manifest), the other waits
    on the cell's lock and reads the published answers."""
    fork = multiprocessing.get_context("fork")
    calls = tmp_path / "calls"
    procs = [fork.Process(target=_answer_cell, args=(str(tmp_path / "cache"), str(calls), str(tmp_path / f"out{i}")))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(calls.read_text().split()) == 1  # computed once
    outs = [json.loads((tmp_path / f"out{i}").read_text()) for i in range(2)]
    assert sorted(o["computed"] for o in outs) == [False, True]
    assert outs[0]["rows"] == outs[1]["rows"] == _answers().to_dict(orient="records")
    store = Store(tmp_path / "cache")
    path = store.qa.path(KEY)
    assert path == tmp_path / "cache" / "qa" / f"{KEY}.json"  # the location answers always had
    manifest = json.loads(store.file_manifest(path).read_text())
    assert manifest["rows"] == 3 and manifest["size"] == path.stat().st_size
    assert _kinds(tmp_path / "cache") == ["qa-answers"]
    assert not list(path.parent.glob(".*tmp-*"))


def test_failed_qa_write_leaves_nothing_readable(tmp_path, monkeypatch):
    """An exception between writing the answers and publishing them: nothing under the final name, no temporary
    file, no manifest; the next call computes the cell again."""
    import irgrid.store as store_mod

    store = Store(tmp_path)

    def broken(*a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(store_mod, "file_digest", broken)
    with pytest.raises(OSError, match="simulated"):
        store.qa.answers(KEY, _answers)
    path = store.qa.path(KEY)
    assert not path.exists() and not store.file_manifest(path).exists()
    assert not list(path.parent.glob(".*tmp-*"))
    assert store.qa.load(KEY) is None
    monkeypatch.undo()
    cell, computed = store.qa.answers(KEY, _answers)
    assert computed and len(cell) == 3 and store.qa.load(KEY) is not None


def _killed_while_publishing(root: str) -> None:
    import irgrid.store as store_mod

    store_mod.file_digest = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # after the write, before the rename
    Store(root).qa.answers(KEY, _answers)


def test_killed_qa_writer_leaves_only_a_temporary_file(tmp_path):
    """SIGKILL after the answers were written under their temporary name: the cell reads as absent, its lock is
    free (the kernel released it), and the next writer deletes the leftover and publishes."""
    p = multiprocessing.get_context("fork").Process(target=_killed_while_publishing, args=(str(tmp_path),))
    p.start()
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    store = Store(tmp_path)
    path = store.qa.path(KEY)
    assert not path.exists() and len(list(path.parent.glob(f".{path.name}.tmp-*"))) == 1
    assert store.qa.load(KEY) is None
    cell, computed = store.qa.answers(KEY, _answers)
    assert computed and not list(path.parent.glob(f".{path.name}.tmp-*"))


def test_damaged_qa_answers_are_moved_aside_and_recomputed(tmp_path, caplog):
    store = Store(tmp_path)
    store.qa.answers(KEY, _answers)
    path = store.qa.path(KEY)
    path.write_text(path.read_text()[:-20])  # truncated: its manifest no longer matches
    assert store.qa.load(KEY) is None
    cell, computed = store.qa.answers(KEY, lambda: _answers(2))
    assert computed and len(store.qa.load(KEY)) == 2
    assert len(list(path.parent.glob(f".{path.name}.corrupt-*"))) == 1
    assert "failed verification" in caplog.text


def test_qa_answers_written_before_manifests_are_read(tmp_path):
    """Answers an older irgrid published (by rename, without a manifest) stay valid: not recomputed."""
    store = Store(tmp_path)
    path = store.qa.path(KEY)
    path.parent.mkdir(parents=True)
    path.write_text(_answers().to_json(orient="records"))
    cell, computed = store.qa.answers(KEY, lambda: pytest.fail("recomputed an old cell"))
    assert not computed and list(cell["qid"]) == ["0", "1", "2"]


# -- published folders (tiny models, dequantised GGUF weights) -------------------------------------------------
def _build_folder(calls: Path):
    def build(tmp: Path) -> None:
        with calls.open("a") as f:
            f.write(f"{os.getpid()}\n")
        (tmp / "config.json").write_text("{}")
        time.sleep(1.0)
        (tmp / "model.safetensors").write_bytes(os.urandom(1000))
    return build


def _publish(root: str, calls: str) -> None:
    store = Store(root)
    store.publish_folder(store.models.tiny_dir("org/model", "bert", "abc"), _build_folder(Path(calls)), "tiny-model",
                         model="org/model")


def test_concurrent_builders_publish_a_folder_once(tmp_path):
    fork = multiprocessing.get_context("fork")
    calls = tmp_path / "calls"
    procs = [fork.Process(target=_publish, args=(str(tmp_path), str(calls))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(calls.read_text().split()) == 1
    folder = Store(tmp_path).models.tiny_dir("org/model", "bert", "abc")
    meta = json.loads((folder / AREA_MARKER).read_text())
    assert meta["kind"] == "tiny-model" and sorted(meta["files"]) == ["config.json", "model.safetensors"]
    assert meta["files"]["model.safetensors"]["size"] == 1000
    assert _kinds(tmp_path) == ["tiny-model"]
    assert Store(tmp_path).folder_problem(folder, marker_name=AREA_MARKER) is None


def test_failed_folder_build_publishes_nothing_and_damage_is_rebuilt(tmp_path, caplog):
    store = Store(tmp_path)
    folder = store.models.gguf_dir("org/model", "pkg")

    def failing(tmp: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("killed mid-build (simulated)")

    with pytest.raises(RuntimeError, match="simulated"):
        store.publish_folder(folder, failing, "gguf")
    assert not folder.exists() and not list(folder.parent.glob(".*tmp-*"))
    calls = tmp_path / "calls"
    store.publish_folder(folder, _build_folder(calls), "gguf")
    (folder / "model.safetensors").write_bytes(b"short")  # damaged after publication
    store.publish_folder(folder, _build_folder(calls), "gguf")
    assert len(calls.read_text().split()) == 2 and "failed verification" in caplog.text
    assert (folder / "model.safetensors").stat().st_size == 1000
    assert len(list(folder.parent.glob(f".{folder.name}.corrupt-*"))) == 1


def test_folders_of_older_versions_are_adopted_not_rebuilt(tmp_path):
    """A tiny model an older irgrid published (atomically, complete once tiny.json is there) gets its manifest
    written; a folder without that file is no complete build and is rebuilt."""
    store = Store(tmp_path)
    old = store.models.tiny_dir("org/old", "bert", "abc")
    old.mkdir(parents=True)
    (old / "config.json").write_text("{}")
    (old / "tiny.json").write_text("{}")
    store.publish_folder(old, lambda tmp: pytest.fail("rebuilt an old folder"), "tiny-model", legacy="tiny.json")
    assert sorted(json.loads((old / AREA_MARKER).read_text())["files"]) == ["config.json", "tiny.json"]
    assert _kinds(tmp_path) == []  # adopted, not built


def test_replay_parts_are_a_sub_area_with_full_precision(tmp_path):
    """Replayed answers' scored parts (`qa/replay/`) keep 15 significant digits (pandas' default of 10 would move
    cached means by ~1e-12) and their string columns."""
    store = Store(tmp_path)
    value = 0.123456789012345
    part = pd.DataFrame({"qid": ["007"], "model": ["1"], "setting": ["golden"], "ROUGE-L": [value]})
    dtype = {"qid": str, "model": str, "setting": str}
    store.qa.answers(KEY, lambda: part, area="replay", precision=15, dtype=dtype)
    assert store.qa.path(KEY, "replay") == tmp_path / "qa" / "replay" / f"{KEY}.json"
    cell, computed = store.qa.answers(KEY, lambda: pytest.fail("recomputed"), area="replay", dtype=dtype)
    assert not computed and cell["ROUGE-L"].iloc[0] == pytest.approx(value, rel=1e-15, abs=0)
    assert cell["qid"].iloc[0] == "007"
    assert cell["model"].iloc[0] == "1"
