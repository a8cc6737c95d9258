"""No module reaches into another irgrid module's private names (issue 33): a name with one leading underscore is
free to change with its module, so `from irgrid.x import _y` and `irgrid.x._y` (or `mod._y` on an imported irgrid
module) are refused everywhere in src/irgrid and pipelines/ (installed as irgrid.pipelines). Dunder names
(`__version__`) are public. A module's own private names, used inside it, are its business."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"irgrid": ROOT / "src" / "irgrid", "irgrid.pipelines": ROOT / "pipelines"}

ALLOWED: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules() -> dict[str, Path]:
    """Every module of the two trees by its dotted name (pipelines/ shadows nothing under src/irgrid)."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a (possibly relative) `from ... import` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"], or None for anything that is not a plain dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def violations(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, irgrid.module._name) for each private name of another irgrid module that `module` uses."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    aliases: dict[str, str] = {}  # local name -> the irgrid module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "irgrid" or a.name.startswith("irgrid."):
                    aliases[a.asname or "irgrid"] = a.name if a.asname else "irgrid"
                    if any(_private(p) for p in a.name.split(".")):
                        found.append((node.lineno, a.name))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            if not (source == "irgrid" or source.startswith("irgrid.")) or source == module:
                continue
            for a in node.names:
                target = f"{source}.{a.name}"
                if _private(a.name) or any(_private(p) for p in source.split(".")):
                    found.append((node.lineno, target))
                elif target in MODULES:
                    aliases[a.asname or a.name] = target
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        parts = _dotted(node.value)
        if not parts or parts[0] not in aliases:
            continue
        owner = ".".join([aliases[parts[0]], *parts[1:]])
        if owner in MODULES and owner != module:
            found.append((node.lineno, f"{owner}.{node.attr}"))
    return sorted(set(found))


def test_walker_sees_both_forms(tmp_path):
    """The check itself: a from-import of a private name, a relative one and `module._name` are each caught, and
    a module's own private names, dunders and non-irgrid privates are not."""
    path = tmp_path / "probe.py"
    path.write_text("import os\nimport irgrid.store\nfrom irgrid.runner import cell as c\n"
                    "from irgrid.util.hashing import _x\nfrom ..core import _y\nfrom irgrid import __version__\n"
                    "c._disk_note()\nirgrid.store._z\nos._exit\n_mine = 1\n")
    assert violations("irgrid.report.probe", path) == [
        (4, "irgrid.util.hashing._x"), (5, "irgrid.core._y"), (7, "irgrid.runner.cell._disk_note"),
        (8, "irgrid.store._z")]


def test_no_private_name_crosses_a_module():
    assert len(MODULES) > 50 and "irgrid.pipelines.expansion" in MODULES
    bad = [f"{MODULES[m].relative_to(ROOT)}:{line}: {name}" for m in MODULES
           for line, name in violations(m, MODULES[m]) if (m, name) not in ALLOWED]
    assert not bad, ("private names used across modules (make the name public at its definition, or move the "
                     "code to the module that uses it):\n" + "\n".join(bad))


def test_allow_list_is_current():
    """Each allowed use still exists, so the list shrinks as the code does."""
    used = {(m, name) for m in MODULES for _, name in violations(m, MODULES[m])}
    assert ALLOWED <= used, f"no longer used, drop from ALLOWED: {sorted(ALLOWED - used)}"
