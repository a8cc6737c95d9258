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
    for name in ("irgrid.data.errors.DatasetError", "irgrid.core.locks.LockTimeout", "irgrid.store.CacheError",
                 "irgrid.data.loaders.InputError", "irgrid.core.registry.UnknownNameError"):
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
    from irgrid.core.locks import LockTimeout
    from irgrid.core.registry import UnknownNameError
    from irgrid.data.loaders import InputError

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
