"""Manifests of published folders (sizes and sha256 of every file) and the one check that reads them.

The store writes and checks them before the grid uses an index; `pt.Artifact.load` on a cache folder
(irgrid.core.artifacts) runs the same check, so both doors refuse the same damage. Here, below both, because
the store sits above core in the import layers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from irgrid.util.hashing import file_sha256

FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones by their first and last MiB

# (path, digest, size, mtime_ns) hashed in full by this process already: a file rewritten in place (same size)
# has a new mtime and is hashed again
_VERIFIED: set[tuple[str, str, int, int]] = set()


def file_digest(path: Path, size: int | None = None) -> str:
    """sha256 of a file, or for a file over FULL_HASH_BYTES of its size, first and last MiB (cheap to verify
    on every open; catches truncation, garbage and partial writes, not a flipped byte in the middle of a
    multi-GB index)."""
    size = path.stat().st_size if size is None else size
    if size <= FULL_HASH_BYTES:
        return file_sha256(path)
    digest = hashlib.sha256(b"sampled:%d:" % size)
    with path.open("rb") as f:
        digest.update(f.read(1 << 20))
        f.seek(size - (1 << 20))
        digest.update(f.read(1 << 20))
    return digest.hexdigest()


def check_files(folder: Path, files: dict[str, dict[str, Any]], full: bool,
                digest: Any = None) -> str | None:
    """Why the listed files do not match their manifest entries (None: they do). Sizes always; with `full`,
    content hashes too (once per process per unchanged file). `digest` replaces `file_digest` (the store's)."""
    digest = digest or file_digest
    for rel, want in files.items():
        f = folder / rel
        try:
            st = f.lstat()
        except OSError:
            return f"{rel} is missing"
        if not f.is_file() or f.is_symlink():
            return f"{rel} is not a plain file (a link or a folder where the manifest lists a file)"
        size = st.st_size
        if size != want["size"]:
            return f"{rel} has {size} bytes, its manifest says {want['size']}"
        seen = (str(f), want["sha256"], size, st.st_mtime_ns)
        if full and seen not in _VERIFIED:
            if digest(f, size) != want["sha256"]:
                return f"{rel} does not match its manifest's sha256"
            _VERIFIED.add(seen)
    return None


def folder_problem(folder: Path, marker_name: str, full: bool = True, digest: Any = None) -> str | None:
    """Why a published folder cannot be trusted (None: it can): its manifest `marker_name` inside it lists
    every file with its size and sha256."""
    marker = folder / marker_name
    if not folder.exists():
        return "missing"
    if not marker.exists():
        return f"{marker_name} is missing (an unfinished or damaged build)"
    try:
        meta = json.loads(marker.read_text())
        files = meta["files"]
        files.items()
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return f"{marker_name} is unreadable ({type(e).__name__}: {e})"
    if not files:
        return "the folder holds no files"
    return check_files(folder, files, full, digest)
