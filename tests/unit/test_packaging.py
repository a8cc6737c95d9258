"""The built distribution holds every package: pyproject.toml discovers the packages (no hand list to forget one,
as the old one forgot irgrid.util and irgrid.generation), and this checks what setuptools will build against the
folders on disk. `.ci/wheel-check` builds the sdist and wheel, installs it into a fresh venv and runs it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _package_folders() -> set[str]:
    """Every folder holding Python modules under src/irgrid, and pipelines/ (installed as irgrid.pipelines)."""
    src = ROOT / "src" / "irgrid"
    found = {".".join(("irgrid", *f.parent.relative_to(src).parts)) for f in src.rglob("*.py")}  # does not
    found = {name for name in found if not name.startswith("irgrid.pipelines")}  # follow the pipelines link
    found |= {".".join(("irgrid.pipelines", *f.parent.relative_to(ROOT / "pipelines").parts))
              for f in (ROOT / "pipelines").rglob("*.py")}
    return found


def _distribution():
    """setuptools' own reading of pyproject.toml: the package list and folders `build_py` puts in the wheel."""
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools' deprecation notes about the license table
        return apply_configuration(Distribution(), ROOT / "pyproject.toml")


def test_every_package_folder_is_in_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # discovery's `where` is relative to the project
    dist = _distribution()
    folders = _package_folders()
    assert {"irgrid.util", "irgrid.generation", "irgrid.pipelines"} <= folders  # the walk sees them
    missing = sorted(folders - set(dist.packages))
    assert not missing, f"pyproject.toml's package discovery leaves out {missing}"
    # the entries come from the top-level folder, every other package from src/
    assert dist.package_dir == {"": "src", "irgrid.pipelines": "pipelines"}


def test_the_sdist_carries_what_discovery_needs() -> None:
    """A wheel built from the sdist discovers packages in the sdist's src/: it must carry the entries there too
    (src/irgrid/pipelines is a link, which an sdist does not keep)."""
    assert (ROOT / "src" / "irgrid" / "pipelines").resolve() == (ROOT / "pipelines").resolve()
    lines = [line.split() for line in (ROOT / "MANIFEST.in").read_text().splitlines()]
    assert ["graft", "src/irgrid/pipelines"] in lines
