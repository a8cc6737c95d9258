"""Hashing and atomic file writes: the two primitives that make grids resumable and safe to kill."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def canonical(obj: Any) -> Any:
    """A JSON-able canonical form, so equal configurations hash equally whatever their dict order."""
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "config"):
        return canonical(obj.config())
    raise TypeError(f"cannot hash configuration value {obj!r} of type {type(obj).__name__}")


def config_hash(obj: Any, length: int = 12) -> str:
    data = json.dumps(canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:length]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block finishes.

    A run killed inside the block leaves a `.tmp-*` file that nothing ever reads as a result.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name and rename it into place when complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; indexes are shared by a team or a cluster
    try:
        yield tmp
        if path.exists():  # a concurrent builder finished first: keep theirs
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# -- third-party chatter -------------------------------------------------------------------------------------
_QUIET = {"depth": 0, "stream": None}


def verbose() -> bool:
    """`irgrid -v` (IRGRID_VERBOSE=1): show libraries' own output (PISA percentages, JVM warnings, tracebacks)."""
    return os.environ.get("IRGRID_VERBOSE", "").lower() in ("1", "true", "yes")


def progress_stream():
    """Where irgrid's own progress bars go: the real stderr, also while native chatter is silenced."""
    import sys

    return _QUIET["stream"] or sys.stderr


@contextlib.contextmanager
def quiet_native(what: str) -> Iterator[None]:
    """Silence what native libraries write straight to file descriptor 2 (PISA's ~300 percentage lines, Java/
    Lucene warnings) unless verbose. Nothing is lost: irgrid's own log lines are passed through after the block,
    and on an error the captured tail is printed with `what` it belonged to. Python-level stderr (irgrid's
    progress bars) keeps going to the terminal through `progress_stream()`."""
    import logging
    import sys

    if verbose() or _QUIET["depth"]:  # verbose, or already inside a quiet block
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved, saved_out = os.dup(2), os.dup(1)
    capture = tempfile.TemporaryFile()
    os.dup2(capture.fileno(), 2)
    os.dup2(capture.fileno(), 1)  # PISA's spdlog writes its [info] lines to stdout
    _QUIET["depth"], _QUIET["stream"] = 1, os.fdopen(os.dup(saved), "w", buffering=1)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.dup2(saved_out, 1)
        os.close(saved)
        os.close(saved_out)
        _QUIET["stream"].close()
        _QUIET["depth"], _QUIET["stream"] = 0, None
        capture.seek(0)
        lines = capture.read().decode("utf-8", "replace").splitlines()
        capture.close()
        ours = [line for line in lines if " irgrid " in line]
        for line in ours:
            print(line, file=sys.stderr)
        if failed and lines:
            logging.getLogger("irgrid").error("last output of %s (-v shows all of it):\n%s", what,
                                              "\n".join(lines[-15:]))
