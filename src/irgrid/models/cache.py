"""One bounded cache for loaded models, so a grid never keeps every checkpoint it has used in memory.

Every loader in irgrid (dense engines, SPLADE, uniCOIL/DeepCT/SPARTA, docT5query, generators, cross-encoders)
goes through `MODELS`: a load is keyed by what determines the loaded object (checkpoint location, revision,
device, ...), reused while cached, and the least recently used model is released once more than
`settings.max_models()` are held. Releasing drops the cache's reference and returns the freed GPU memory to the
device (`torch.cuda.empty_cache`); an object still used elsewhere (a pipeline being run) lives on until that
user lets it go. The grid calls `release_all()` after each retriever's cells.
"""

from __future__ import annotations

import functools
import gc
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from irgrid.util import settings

log = logging.getLogger("irgrid")
T = TypeVar("T")


class ModelCache:
    """Loaded models by key, least recently used first out. `capacity` None: `settings.max_models()`, read at
    each load (so a test or a notebook may change it)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()  # one load per key even when several threads ask at once

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        """The cached model for `key`, or `load()`'s, made after releasing what the bound requires (so the
        memory is free before the next model arrives)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            limit = self.capacity if self.capacity is not None else settings.max_models()
            while self._items and len(self._items) >= limit:
                old, _ = self._items.popitem(last=False)
                log.info("model cache: releasing %s (at most %d loaded models)", _label(old), limit)
                _free()
            value = load()
            self._items[key] = value
            return value

    def release(self, key: Hashable) -> bool:
        """Drop one model (True if it was cached)."""
        with self._lock:
            found = key in self._items
            self._items.pop(key, None)
        if found:
            _free()
        return found

    def release_all(self) -> int:
        """Drop every cached model; returns how many there were."""
        with self._lock:
            n = len(self._items)
            self._items.clear()
        if n:
            _free()
        return n

    def keys(self) -> list[Hashable]:
        """Cached keys, least recently used first."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


def _label(key: Hashable) -> str:
    return " ".join(str(k) for k in key[:3]) if isinstance(key, tuple) else str(key)


def _free() -> None:
    """Collect the dropped objects now and hand cached CUDA blocks back (never imports torch itself)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


MODELS = ModelCache()


def release_all() -> int:
    """Release every model this process holds (the grid does it after each retriever's cells)."""
    return MODELS.release_all()


def cached_model(fn: Callable[..., T]) -> Callable[..., T]:
    """`functools.cache` for model loaders, through the bounded `MODELS` (arguments must be hashable)."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        key = (name, *args, *sorted(kwargs.items()))
        return MODELS.get(key, lambda: fn(*args, **kwargs))

    return wrapper
