"""A small name -> value registry that refuses duplicates and suggests near names.

MTEB's registry silently overwrites duplicates; ir_datasets raises. We raise: two entries with one name
would make an experiment file ambiguous.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from irgrid.util.errors import Error

T = TypeVar("T")


class UnknownNameError(Error, KeyError):
    """An unknown name, with the closest known names in the message."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class DuplicateNameError(Error, ValueError):
    pass


class RegistryError(Error, ValueError):
    """An item registered lazily that cannot be made (it wraps itself, or its factory makes another name)."""


def did_you_mean(name: str, known: list[str], n: int = 3) -> str:
    close = difflib.get_close_matches(name, known, n=n, cutoff=0.5)
    if not close:
        close = [k for k in known if name.lower() in k.lower()][:n]
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


class _Lazy:
    """A registered name whose value is made on first lookup (`Registry.register_lazy`)."""

    def __init__(self, make: Callable[[], Any]):
        self.make, self.making = make, False


class Registry(Generic[T]):
    def __init__(self, kind: str, populate: Callable[[], None] | None = None,
                 hint: Callable[[str, list[str]], str | None] | None = None):
        self.kind = kind
        self._hint = hint  # a better suggestion than spelling for an unknown name (an alias, another case)
        self._items: dict[str, T | _Lazy] = {}
        self._populate = populate
        self._loaded = populate is None

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._loaded = True  # set first: `populate` registers into us
            assert self._populate is not None
            try:
                self._populate()
            except BaseException:
                self._loaded = False  # a failed load (a broken entry package) fails again, never half-loaded
                raise

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise DuplicateNameError(f"{self.kind} {name!r} is already registered; names must be unique")
        self._items[name] = item
        return item

    def register_lazy(self, name: str, make: Callable[[], T]) -> None:
        """Reserve `name` (its place in the listing, duplicates refused now) for the value `make()` returns on
        first lookup: an item that wraps another by name resolves it then, not when its module is imported."""
        if name in self._items:
            raise DuplicateNameError(f"{self.kind} {name!r} is already registered; names must be unique")
        self._items[name] = _Lazy(make)

    def _value(self, name: str) -> T:
        item = self._items[name]
        if not isinstance(item, _Lazy):
            return item
        if item.making:
            raise RegistryError(f"{self.kind} {name!r} wraps itself (directly or through the items it names)")
        item.making = True
        try:
            value = item.make()
        finally:
            item.making = False
        made = getattr(value, "name", name)
        if made != name:
            raise RegistryError(f"{self.kind} {name!r} was registered lazily but its factory made {made!r}")
        self._items[name] = value
        return value

    def get(self, name: str) -> T:
        self._ensure_loaded()
        if not isinstance(name, str):  # difflib's TypeError otherwise (issue 32)
            raise UnknownNameError(f"a {self.kind} name is text, got {name!r}; see `irgrid list` for the names")
        if name not in self._items:
            special = self._hint(name, list(self._items)) if self._hint is not None else None
            hint = f" {special}" if special else did_you_mean(name, list(self._items))
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}.{hint} See `irgrid list` for all {len(self._items)} names."
            )
        return self._value(name)

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        self._ensure_loaded()
        return iter([self._value(name) for name in list(self._items)])

    def names(self) -> list[str]:
        self._ensure_loaded()
        return list(self._items)

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._items)


class Declarations(Generic[T]):
    """Facts about names declared by entry modules (what loading a checkpoint needs, what an entry was trained
    on): one value per name, the same value declared again accepted (a module imported twice), a different one
    refused with `error`. Unlike a Registry, an undeclared name is not an error: it reads as None."""

    def __init__(self, what: str, where: str, error: type[Exception], populate: Callable[[], None]):
        self.what, self.where, self.error, self._populate = what, where, error, populate
        self.values: dict[str, T] = {}

    def declare(self, name: str, value: T) -> T:
        if name in self.values and self.values[name] != value:
            raise self.error(f"{name!r}: {self.what} declared twice, differently; keep one declaration ({self.where})")
        self.values[name] = value
        return value

    def of(self, name: str) -> T | None:
        """The declared value (every entry package loaded first), or None."""
        self._populate()
        return self.values.get(name)
