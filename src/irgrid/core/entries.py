"""Entry discovery: the packages whose modules register retriever, encoder and scorer entries when imported.

Entries sit above every engine layer (they wire backends together), so registries below them load them by
name, as plugins, on first lookup. Where entries live is declared as Python entry points, as PyTerrier declares
its artifacts (`pyterrier.artifact`): the group `irgrid.entries` maps a name to a module that registers entries
on import. irgrid declares its own (`irgrid = "irgrid.pipelines"`, the top-level pipelines/ folder); another
distribution adds entries by declaring its module in the same group, e.g. in its pyproject.toml:

    [project.entry-points."irgrid.entries"]
    my-entries = "my_package.entries"

irgrid's own entries load first, then the others sorted by distribution and entry-point name, so the registry's
order (and `irgrid list`) is the same on every machine. A third-party module that fails to import, or registers a
name irgrid already has, stops with an `EntryPackageError` naming the distribution and the module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from irgrid.util.errors import Error

GROUP = "irgrid.entries"
# irgrid's own entries: imported first, even where the installed metadata predates the entry point (a source
# checkout that was not reinstalled)
ENTRY_PACKAGES: tuple[str, ...] = ("irgrid.pipelines",)
_loaded = False


class EntryPackageError(Error, RuntimeError):
    """A package declared in the `irgrid.entries` entry-point group that cannot be loaded."""


@dataclass(frozen=True)
class EntryPackage:
    """One module that registers entries, and who declared it (the distribution and its entry-point name)."""

    module: str
    distribution: str
    name: str
    entry_point: Any = None  # importlib.metadata.EntryPoint (None: irgrid's own, imported by module name)

    def where(self) -> str:
        return f"{self.module!r} (distribution {self.distribution!r}, entry point {GROUP}: {self.name})"


def packages() -> list[EntryPackage]:
    """Every entry package, in load order: irgrid's own, then the entry points of other distributions sorted by
    (distribution, name); a module declared twice (two copies of one distribution's metadata) loads once."""
    from importlib.metadata import entry_points

    own = [EntryPackage(m, "irgrid", "irgrid") for m in ENTRY_PACKAGES]
    found = []
    for ep in entry_points(group=GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "(unknown distribution)"
        found.append(EntryPackage(ep.value, dist, ep.name, ep))
    seen = set(ENTRY_PACKAGES)
    out = list(own)
    for pkg in sorted(found, key=lambda p: (p.distribution.lower(), p.name, p.module)):
        if pkg.module not in seen:
            seen.add(pkg.module)
            out.append(pkg)
    return out


def load() -> None:
    """Import every entry package once per process (a failure is raised again on the next call)."""
    global _loaded
    if _loaded:
        return
    for pkg in packages():
        if pkg.entry_point is None:
            importlib.import_module(pkg.module)  # irgrid's own: an error here is a bug, raised as is
        else:
            _load_third_party(pkg)
    _loaded = True


def _load_third_party(pkg: EntryPackage) -> None:
    from irgrid.util.registry import DuplicateNameError

    try:
        pkg.entry_point.load()
    except DuplicateNameError as e:
        raise EntryPackageError(f"entry package {pkg.where()} registers a name that is taken: {e}. Rename the "
                                f"entry in {pkg.module}, or uninstall {pkg.distribution}") from e
    except Exception as e:  # any failure of someone else's module: say whose it is
        raise EntryPackageError(f"entry package {pkg.where()} failed to import: {type(e).__name__}: {e}. Fix "
                                f"that package, or uninstall it (pip uninstall {pkg.distribution})") from e
