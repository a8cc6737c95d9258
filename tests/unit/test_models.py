"""The model resolver, offline: mapping > shipped package > HF cache > hub, and one clear error otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from irgrid.core.modelref import ModelRef
from irgrid.models import resolver as models
from irgrid.models.resolver import ModelUnavailableError, register_local, resolve

MINILM = ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a")


def test_explicit_mapping_wins(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a model folder (an empty one is refused, below)
    register_local(MINILM.id, tmp_path)
    r = resolve(MINILM)
    assert (r.source, r.location) == ("mapping", str(tmp_path))


def test_mapping_file_by_revision(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
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


# -- the bounded model cache (irgrid.models.cache) -----------------------------------------------------------------
class _Model:
    """Stands for a loaded model: only its lifetime matters here."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_model_cache_evicts_the_least_recently_used_before_loading_and_drops_it():
    import gc
    import weakref

    from irgrid.models.cache import ModelCache

    cache = ModelCache(capacity=2)
    loads: list[str] = []

    def load(name):
        def make():
            loads.append(name)
            assert len(cache) < 2, "the bound is made room for before the next model loads"
            return _Model(name)
        return make

    a = weakref.ref(cache.get("a", load("a")))
    cache.get("b", load("b"))
    assert cache.get("a", load("a")) is a()  # a hit: not loaded again, now the most recently used
    cache.get("c", load("c"))  # evicts b, the least recently used
    gc.collect()
    assert loads == ["a", "b", "c"] and cache.keys() == ["a", "c"] and "b" not in cache
    assert a() is not None
    assert cache.release("a") and not cache.release("a")
    gc.collect()
    assert a() is None  # no reference left anywhere: the model's memory is gone
    assert cache.release_all() == 1 and len(cache) == 0


def test_model_cache_bound_is_a_setting(monkeypatch):
    from irgrid.models.cache import ModelCache
    from irgrid.util import settings

    monkeypatch.delenv("IRGRID_MAX_MODELS", raising=False)
    assert settings.max_models() == 3
    monkeypatch.setenv("IRGRID_MAX_MODELS", "1")
    cache = ModelCache()
    cache.get("a", lambda: _Model("a"))
    cache.get("b", lambda: _Model("b"))
    assert cache.keys() == ["b"]
    monkeypatch.setenv("IRGRID_MAX_MODELS", "0")
    with pytest.raises(settings.SettingsError, match="IRGRID_MAX_MODELS='0'"):
        cache.get("c", lambda: _Model("c"))


def test_cached_loader_keys_by_arguments_and_a_failed_load_is_not_kept():
    from irgrid.models.cache import MODELS, cached_model

    calls: list[tuple] = []

    @cached_model
    def loader(location: str, device: str | None, fail: bool = False) -> _Model:
        calls.append((location, device))
        if fail:
            raise RuntimeError("no weights")
        return _Model(location)

    try:
        first = loader("x", "cpu")
        assert loader("x", "cpu") is first and loader("x", None) is not first and len(calls) == 2
        with pytest.raises(RuntimeError):
            loader("y", "cpu", fail=True)
        assert not any("y" in key for key in MODELS.keys())
    finally:
        MODELS.release_all()


def test_pick_device_follows_the_argument_then_the_setting(monkeypatch):
    from irgrid.models.devices import pick_device
    from irgrid.util.settings import SettingsError

    monkeypatch.setenv("IRGRID_DEVICE", "cpu")
    assert pick_device(None) == "cpu" and pick_device("cuda:1") == "cuda:1"
    monkeypatch.setenv("IRGRID_DEVICE", "gpu0")
    with pytest.raises(SettingsError, match="IRGRID_DEVICE='gpu0'"):
        pick_device(None)


def test_mapping_to_an_empty_or_non_model_folder_is_refused_before_any_cell(tmp_path):
    """`--dry-run` (check_only) says so, instead of "to run" and a tokenizer error later (issue 32)."""
    register_local("org/empty", tmp_path)
    with pytest.raises(ModelUnavailableError, match=rf"mapped to {tmp_path}, an empty folder .*--local-dir"):
        resolve("org/empty", check_only=True)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ModelUnavailableError, match="a folder without config.json"):
        resolve("org/empty", check_only=True)


def test_cuda_asked_for_where_there_is_none_names_the_setting(monkeypatch):
    import torch

    from irgrid.util import settings
    from irgrid.util.settings import SettingsError

    monkeypatch.setattr(settings, "_DEVICES", {})
    monkeypatch.setenv("IRGRID_DEVICE", "cuda:7" if torch.cuda.is_available() else "cuda")
    if torch.cuda.is_available() and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a GPU 7")
    with pytest.raises(SettingsError, match=r"IRGRID_DEVICE=cuda.*(CUDA is not available|no GPU 7).*IRGRID_DEVICE=cpu"):
        settings.device()


# -- issue 40 item 10: a wrong mapping is named as such, at validation and --dry-run ------------------------------
def test_a_missing_irgrid_models_file_is_named_at_validation(tmp_path, monkeypatch):
    """Before: `--dry-run` listed an installed model (MiniLM, shipped by a package) as a missing checkpoint."""
    from irgrid.runner.experiment import ExperimentError, from_dict

    monkeypatch.setenv("IRGRID_MODELS", str(tmp_path / "absent.yaml"))
    spec = {"name": "m", "datasets": ["vaswani"], "retrievers": ["all-minilm-l6-v2"]}
    with pytest.raises(ExperimentError, match=r"IRGRID_MODELS points to .*absent.yaml, which does not exist: the "
                                              r"model mapping file is missing"):
        from_dict(spec)
    with pytest.raises(models.ModelMappingError, match="mapping file is missing"):
        resolve(MINILM)
    from_dict({**spec, "retrievers": ["bm25-pisa"]})  # no model: no mapping read


def test_a_mapping_to_a_pickle_is_refused_at_validation(tmp_path):
    """Before: accepted until the run tried to load it."""
    from irgrid.runner.experiment import ExperimentError, from_dict

    pickle = tmp_path / "model.pkl"
    pickle.write_bytes(b"\x80\x04\x95\x00")
    spec = {"name": "m", "datasets": ["vaswani"], "retrievers": ["all-minilm-l6-v2"], "models": {MINILM.id: str(pickle)}}
    with pytest.raises(ExperimentError, match=r"models: 'sentence-transformers/all-MiniLM-L6-v2' is mapped to .*"
                                              r"model.pkl, a file \(.pkl\), not a model folder"):
        from_dict(spec)
    register_local(MINILM.id, pickle)
    with pytest.raises(models.ModelMappingError, match=r"a file \(.pkl\), not a model folder"):
        resolve(MINILM, check_only=True)


def test_without_a_mapping_for_its_checkpoints_every_entry_keeps_its_key(tmp_path):
    """Issue 40 item 5: only a mapped checkpoint changes a key (the golden keys pin the unmapped ones)."""
    from irgrid.core.retrievers import RETRIEVERS, get

    (tmp_path / "config.json").write_text("{}")
    for name in RETRIEVERS.names():
        entry = get(name)
        assert models.with_mapping(entry, {}) is entry
        assert models.with_mapping(entry, {"org/unrelated": str(tmp_path)}) is entry
