"""Atomic file and folder writes: a killed run never leaves a half-written result under a final name."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def slug(name: str) -> str:
    """A dataset, corpus or model name as one folder or file name: "beir/scifact/test" -> "beir--scifact--test"
    (run folders, qrels files, index, stage and model caches and report tables all name it so; `--` keeps it
    readable and reversible, since names do not contain it)."""
    return name.replace("/", "--")


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
