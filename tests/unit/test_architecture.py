"""The package's structure as tests: no import cycle between modules (function-level imports included), a stated
concern per module, and the docs' generated Layout page listing every module."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "irgrid"


def _modules() -> dict[str, Path]:
    """Every module of src/irgrid, and the entries of the top-level pipelines/ folder (`irgrid.pipelines`)."""
    out = {}
    for f in SRC.rglob("*.py"):  # src/irgrid/pipelines is a link to pipelines/: rglob does not follow it
        parts = ["irgrid", *f.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    for f in (ROOT / "pipelines").glob("*.py"):
        out["irgrid.pipelines" + ("" if f.stem == "__init__" else f".{f.stem}")] = f
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every irgrid module `name` imports, anywhere in the file (a function-level import is still a dependency)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):  # a package's own __init__ is not a partner
                found.add(t)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path, or None (depth-first search with colours)."""
    colour = dict.fromkeys(graph, 0)
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        colour[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if colour[w] == 1:
                return [*stack[stack.index(w):], w]
            if colour[w] == 0 and (found := visit(w)):
                return found
        stack.pop()
        colour[v] = 2
        return None

    for v in sorted(graph):
        if colour[v] == 0 and (found := visit(v)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _declared_edges() -> set[tuple[str, str]]:
    """The upward imports the import contract declares (pyproject.toml, `ignore_imports`)."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {tuple(x.strip() for x in line.split("->"))  # type: ignore[misc]
            for contract in data["tool"]["importlinter"]["contracts"] for line in contract.get("ignore_imports", [])}


def test_declared_upward_imports_are_lazy_and_few():
    """Each declared edge is an import inside a function (never at module load, so never a load-time cycle)."""
    mods = _modules()
    edges = _declared_edges()
    assert len(edges) <= 1, f"one declared upward import at most, got {sorted(edges)}"
    for source, target in edges:
        tree = ast.parse(mods[source].read_text())
        top = {n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        found = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                 and target in _imports(source, mods[source], set(mods)) and target in _node_targets(n)]
        assert found and not top & set(found), f"{source} -> {target}: declared, so it must be a function-level import"


def _node_targets(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = node.module or ""
    return {base, *(f"{base}.{a.name}" for a in node.names)}


def test_no_import_cycle_between_modules():
    """Function-level imports count; the contract's declared lazy edges (above) are the only ones left out."""
    mods = _modules()
    declared = _declared_edges()
    graph = {m: {t for t in _imports(m, p, set(mods)) if (m, t) not in declared} for m, p in mods.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", sorted(_modules()))
def test_every_module_states_its_concern(module):
    doc = ast.get_docstring(ast.parse(_modules()[module].read_text()))
    assert doc and len(doc.split("\n\n")[0]) >= 20, f"{module}: a module docstring that says what it is for"


def test_docs_layout_lists_every_module():
    """The docs' Layout page (generated from the module docstrings and the layer contract) places every module."""
    from support import docs_render

    listed = set(re.findall(r"\[`(irgrid(?:\.\w+)*)`\]", docs_render().layout_page()))
    missing = sorted(set(_modules()) - listed)
    assert not missing, f"the docs' Layout page misses {missing}"


def _defines(tree: ast.AST, name: str) -> ast.AST | None:
    """The node that binds `name` at the top of `tree`'s body (a def, class, assignment or import), else None."""
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(n.id == name for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                return node
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return node
        if isinstance(node, (ast.If, ast.Try)):  # `if TYPE_CHECKING:`, `try: import ...`
            found = _defines(node, name)
            if found is not None:
                return found
    return None


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _resolves(dotted: str, mods: dict[str, Path]) -> bool:
    """Statically (no import: a module may need torch): the longest module prefix, then names bound in it, a
    class's attributes after a class."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in mods:
            break
    else:
        return False
    node: ast.AST | None = _parsed(mods[module])
    for name in parts[cut:]:
        if node is None or not isinstance(node, (ast.Module, ast.ClassDef)):
            return False
        found = _defines(node, name)
        if found is None and isinstance(node, ast.Module) and f"{module}.{name}" in mods:
            return True
        node = found
    return node is not None


def test_every_dotted_name_in_a_module_docstring_resolves():
    """`irgrid.x.y` in a module's docstring names a module, or something defined in one (or an entry-point group):
    a renamed or moved module leaves no stale pointer in the docs (the API pages are built from these docstrings)."""
    import tomllib

    mods = _modules()
    # an entry-point group (`irgrid.entries`) is a name in pyproject.toml, not a module
    groups = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"])
    stale = []
    for module, path in sorted(mods.items()):
        doc = ast.get_docstring(_parsed(path)) or ""
        for dotted in re.findall(r"`?(irgrid(?:\.[A-Za-z_]\w*)+)", doc):
            if dotted not in groups and not _resolves(dotted, mods):
                stale.append(f"{module}: {dotted}")
    assert not stale, "module docstrings name what does not exist:\n" + "\n".join(stale)


def test_a_stale_dotted_name_is_caught():
    mods = _modules()
    assert _resolves("irgrid.util.settings.Settings.from_env", mods) and _resolves("irgrid.pipelines.sparse", mods)
    assert not _resolves("irgrid.util.settings.NoSuchThing", mods) and not _resolves("irgrid.nowhere", mods)


# backends' scorers: the entries declare them (`Retriever.make_scorer`); the runner only reads what is declared
BACKEND_SCORERS = {"irgrid.dense.scorers", "irgrid.cross_encoders"}


def test_expressions_module_is_small_and_runner_imports_no_backend_scorer():
    """Issue 39: runner/expressions.py holds one concern (the Expression cell), and no runner module imports a
    backend's scorer (anywhere in the file, function-level imports included)."""
    lines = len((SRC / "runner" / "expressions.py").read_text().splitlines())
    assert lines <= 400, f"src/irgrid/runner/expressions.py has {lines} lines (at most 400)"
    mods = _modules()
    runner = {m: p for m, p in mods.items() if m == "irgrid.runner" or m.startswith("irgrid.runner.")}
    assert "irgrid.runner.expressions" in runner and len(runner) > 5  # the walk sees the package
    found = {m: sorted(_imports(m, p, set(mods)) & BACKEND_SCORERS) for m, p in runner.items()}
    assert not {m: t for m, t in found.items() if t}, f"runner modules import a backend's scorer: {found}"


def test_the_import_check_sees_a_function_level_scorer_import(tmp_path):
    mods = _modules()
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from irgrid.dense.scorers import dense_scorer\n    return dense_scorer\n")
    assert _imports("irgrid.runner.probe", probe, set(mods)) & BACKEND_SCORERS == {"irgrid.dense.scorers"}


def test_dense_and_late_interaction_entries_declare_their_scorers():
    from irgrid.core.retrievers import get
    from irgrid.dense import scorers

    assert get("all-minilm-l6-v2").make_scorer is scorers.dense_scorer
    assert get("colbertv2").make_scorer is scorers.late_scorer
    assert get("hyde").make_scorer is None  # built over a dense entry, but it does not re-rank
