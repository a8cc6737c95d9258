"""The model resolver, offline: mapping > shipped package > HF cache > hub, and one clear error otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from irgrid.core.modelref import ModelRef
from irgrid.models import resolver as models
from irgrid.models.resolver import ModelUnavailableError, register_local, resolve

MINILM = ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a")


def test_explicit_mapping_wins(tmp_path):
    register_local(MINILM.id, tmp_path)
    r = resolve(MINILM)
    assert (r.source, r.location) == ("mapping", str(tmp_path))


def test_mapping_file_by_revision(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    mapping = tmp_path / "models.yaml"
    mapping.write_text(f"'org/model@abc123': {folder}\n")
    monkeypatch.setenv("IRGRID_MODELS", str(mapping))
    assert resolve(ModelRef("org/model", "abc123")).location == str(folder)
    with pytest.raises(ModelUnavailableError):  # another revision is not the mapped one
        resolve(ModelRef("org/model", "def456"))


def test_mapping_to_missing_folder_is_an_error(tmp_path):
    register_local("org/model", tmp_path / "absent")
    with pytest.raises(ModelUnavailableError, match="mapped to .*absent, which does not exist"):
        resolve("org/model")


def test_unresolvable_offline_names_the_model_and_how_to_stage_it():
    with pytest.raises(ModelUnavailableError) as e:
        resolve(ModelRef("facebook/contriever-msmarco", "abc"))
    msg = str(e.value)
    assert "facebook/contriever-msmarco@abc is not available offline" in msg
    assert "huggingface-cli download facebook/contriever-msmarco --revision abc" in msg
    assert "IRGRID_MODELS" in msg


def test_online_falls_back_to_the_hub_with_its_revision(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("IRGRID_OFFLINE", raising=False)

    monkeypatch.setattr(models, "hub_unreachable", lambda: None)  # a machine that reaches the hub
    r = resolve(ModelRef("facebook/contriever-msmarco", "abc"))
    assert (r.source, r.location, r.kwargs()) == ("hub", "facebook/contriever-msmarco", {"revision": "abc"})


def test_hf_cache_is_used_offline(tmp_path, monkeypatch):
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "hub" / "models--org--cached-model" / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    r = resolve(ModelRef("org/cached-model", rev))
    assert (r.source, Path(r.location)) == ("hf-cache", snap)


def test_unreachable_hub_without_offline_mode_fails_at_once_with_the_staging_hint(monkeypatch):
    """Without HF_HUB_OFFLINE an uncached model used to spend ~50 s in hub retries and end in a network
    traceback: one short probe gives the staging message instead (an endpoint that refuses connections)."""

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("IRGRID_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    models.hub_unreachable.cache_clear()
    try:
        with pytest.raises(models.ModelUnavailableError, match=r"hub is unreachable \(http://127\.0\.0\.1:9.*Stage it"):
            models.resolve("some-org/not-staged-anywhere")
    finally:
        models.hub_unreachable.cache_clear()
