"""One error base: every exception class defined in irgrid (src/irgrid and the entries in pipelines/) derives from
`irgrid.Error`, so a script or the CLI catches every user-facing error with one `except irgrid.Error`.

The classes are found by parsing every file (a class defined anywhere, whatever its module imports), then the
modules that define one are imported to check the real class hierarchy; none of them imports torch.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
from pathlib import Path

import irgrid

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"irgrid": ROOT / "src" / "irgrid", "irgrid.pipelines": ROOT / "pipelines"}

# Internal control flow only: raised and caught inside one function, never reaching a user.
INTERNAL = {
    # LuceneIndex.index catches it to kill the indexer and raise a RuntimeError with the indexer's log tail
    "irgrid.sparse.lucene._IndexerExited",
}

BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _module(package: str, root: Path, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _base_name(node: ast.expr) -> str:
    """`ValueError`, `errors.Error` -> `Error`, anything else (a call, a subscript) -> ''."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@functools.cache
def _exception_classes() -> dict[str, bool]:
    """'module.Class' -> whether it is defined at module level, for every class whose bases make it an exception:
    a builtin exception, a class found here to be one, or a name that reads as one (a third party's `...Error`)."""
    classes: list[tuple[str, ast.ClassDef, bool]] = []
    for package, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            top = {id(n) for n in tree.body}
            classes += [(_module(package, root, path), n, id(n) in top)
                        for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    known = set(BUILTIN_EXCEPTIONS)
    found: dict[str, bool] = {}
    while True:  # a class deriving from one of ours, in any file order
        new = {f"{m}.{c.name}": top for m, c, top in classes if f"{m}.{c.name}" not in found and any(
            (b := _base_name(base)) in known or b.endswith(("Error", "Exception")) for base in c.bases)}
        if not new:
            return found
        found |= new
        known |= {name.rpartition(".")[2] for name in new}


def test_the_walk_finds_the_known_errors():
    found = _exception_classes()
    for name in ("irgrid.data.errors.DatasetError", "irgrid.util.locks.LockTimeout", "irgrid.store.CacheError",
                 "irgrid.data.errors.InputError", "irgrid.util.registry.UnknownNameError"):
        assert name in found
    assert len(found) >= 25


def test_every_exception_class_derives_from_irgrid_error():
    wrong, nested = [], []
    for name, top_level in sorted(_exception_classes().items()):
        if name in INTERNAL:
            continue
        if not top_level:
            nested.append(name)
            continue
        module, _, cls_name = name.rpartition(".")
        cls = getattr(importlib.import_module(module), cls_name)
        if issubclass(cls, BaseException) and not issubclass(cls, irgrid.Error):
            wrong.append(name)
    assert not nested, f"exception classes defined inside a function or class (define them at module level): {nested}"
    assert not wrong, (f"exception classes that do not derive from irgrid.Error (add it as a base beside the builtin "
                       f"one, e.g. `class MyError(Error, ValueError)`): {wrong}")


def test_the_errors_keep_their_builtin_bases():
    """Narrower `except` clauses written before irgrid.Error existed still catch them."""
    from irgrid.data.errors import InputError
    from irgrid.util.locks import LockTimeout
    from irgrid.util.registry import UnknownNameError

    assert issubclass(LockTimeout, TimeoutError) and issubclass(UnknownNameError, KeyError)
    assert issubclass(InputError, ValueError) and issubclass(InputError, RuntimeError)
    assert str(UnknownNameError("no 'x' here")) == "no 'x' here"  # KeyError's quoting still undone


def test_the_cli_reports_any_irgrid_error_in_one_line(capsys):
    """One `except irgrid.Error` in the CLI: an error it never listed by name ends in one line and exit 2; a bug
    (any other exception) still raises with its traceback."""
    import argparse

    import pytest

    from irgrid.cli import _run_reporting_errors
    from irgrid.models.loading import CheckpointMismatchError

    def command(error: Exception):
        def func(args) -> int:
            raise error
        return argparse.Namespace(func=func, verbose=False)

    message = "checkpoint x: 3 parameters missing (encoder.layer.0...); is this the right architecture?"
    assert _run_reporting_errors(command(CheckpointMismatchError(message))) == 2
    assert capsys.readouterr().err == f"irgrid: error: {message}\n"
    with pytest.raises(ZeroDivisionError):
        _run_reporting_errors(command(ZeroDivisionError("a bug")))


# Builtin errors still raised on purpose: internal invariants a user cannot reach through irgrid's doors (a caller's
# bug, checked before by a schema or a typed option), and a failed cell re-raised by `fail_fast` with its traceback.
BUILTIN_RAISES_ALLOWED = {
    ("src/irgrid/sparse/pisa_writer.py", "add"),  # the writer's own columns disagree in length
    ("src/irgrid/sparse/pisa_writer.py", "add_postings"),
    ("src/irgrid/sparse/lucene_pisa.py", "int_to_byte4"),  # a negative document length from the analyser
    ("src/irgrid/grid.py", "evaluate"),  # fail_fast: the first failing cell's own error, with its traceback
    ("src/irgrid/cluster/sharding.py", "shard_ranges"),  # arguments checked by ExecutorConfig before
    ("src/irgrid/core/modelref.py", "__post_init__"),  # a tiny stand-in made without its architecture
    ("src/irgrid/core/significance.py", "_paired"),  # two runs' per-query scores aligned by the caller
    ("src/irgrid/core/significance.py", "__post_init__"),  # the test name, checked by the experiment schema first
    ("src/irgrid/core/power.py", "family_alpha"),  # the correction name, checked by the experiment schema first
    ("src/irgrid/core/ranks.py", "resolve"),  # per-query columns aligned with the systems by the caller
    ("src/irgrid/util/settings.py", "variable"),  # a name irgrid's code asks for without listing it in READ
}
BUILTIN_ERRORS = {"RuntimeError", "ValueError", "KeyError", "FileNotFoundError"}


def _builtin_raises() -> set[tuple[str, str]]:
    """(file, innermost enclosing function) of every `raise ValueError(...)` (and RuntimeError, KeyError,
    FileNotFoundError)."""
    found = set()

    def visit(node: ast.AST, path: str, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id in BUILTIN_ERRORS):
            found.add((path, function))
        for child in ast.iter_child_nodes(node):
            visit(child, path, function)

    for root in PACKAGES.values():
        for path in sorted(root.rglob("*.py")):
            visit(ast.parse(path.read_text(), str(path)), str(path.relative_to(ROOT)), "<module>")
    return found


def test_user_facing_errors_are_irgrid_errors_not_bare_builtins():
    """A bare `raise ValueError(...)` escapes `except irgrid.Error` and ends the CLI in a traceback: raise the
    irgrid.Error subclass that fits (EntryError, InputError, SettingsError, ...). The allow-list is internal."""
    found = _builtin_raises()
    unexpected = sorted(found - BUILTIN_RAISES_ALLOWED)
    assert not unexpected, f"bare builtin errors raised (use an irgrid.Error subclass): {unexpected}"
    assert not BUILTIN_RAISES_ALLOWED - found, f"stale allow-list entries: {sorted(BUILTIN_RAISES_ALLOWED - found)}"
