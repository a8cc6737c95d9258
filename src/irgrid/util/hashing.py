"""Cache keys: a canonical JSON form of a configuration and its hash, so equal configurations share caches."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar


def canonical(obj: Any) -> Any:
    """A JSON-able canonical form, so equal configurations hash equally whatever their dict order."""
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if callable(obj) and hasattr(obj, "__qualname__"):
        return getattr(obj, "__cache_name__", None) or f"{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "config"):
        return canonical(obj.config())
    raise TypeError(f"cannot hash configuration value {obj!r} of type {type(obj).__name__}")


def file_sha256(path: str | os.PathLike, length: int | None = None) -> str:
    """sha256 of a file's bytes as hex, read in 1 MiB blocks; `length` keeps that many leading hex characters
    (16: the content key of a local input file or a staged copy). The one file hash in irgrid: a file hashed
    anywhere gives the same key everywhere."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]


def config_hash(obj: Any, length: int = 12) -> str:
    data = json.dumps(canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:length]


F = TypeVar("F", bound=Callable[..., Any])


def cache_name(name: str) -> Callable[[F], F]:
    """Pin the name a function has in cache keys, so moving or renaming the code keeps every cache valid.

    A configuration names the code that computes it (a build or query function) by module path; a function
    that moved keeps its old path here, and a key changes only when the computation does."""

    def mark(fn: F) -> F:
        fn.__cache_name__ = name  # type: ignore[attr-defined]
        return fn

    return mark
