"""Checkpoints as data: a Hugging Face id pinned to a revision, and where a resolver found its weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelRef:
    """A checkpoint: a Hugging Face id pinned to a revision (None only where none could be verified).

    `arch` and `tiny` describe the tiny random-weight stand-in of this checkpoint (wiring checks on a CPU): `arch`
    names the real architecture (see `irgrid.models.tiny.ARCHITECTURES`) from which a small random-weight model is
    built, `tiny` holds extra parts of that checkpoint as (key, value) pairs (e.g. a ColBERT projection size).
    `stand_in` says that the stand-in replaces the checkpoint: set by `as_tiny()` when tiny-model mode is on
    (`irgrid run --tiny-models`, `IRGRID_TINY_MODELS=1`, read once where entries are looked up), so the key below
    is a function of this object alone, never of the environment at the time it is computed.
    """

    id: str
    revision: str | None = None
    arch: str | None = None
    tiny: tuple[tuple[str, Any], ...] = ()
    stand_in: bool = False
    # the content identity of the local folder a mapping (`models:`, IRGRID_MODELS, register_local) puts in place
    # of this checkpoint (irgrid.models.resolver.with_mapping): another model mapped under the same id is another
    # key. None when no mapping applies: keys as before
    mapped: str | None = None

    def __post_init__(self) -> None:
        if self.stand_in and self.arch is None:
            raise ValueError(f"model {self.id}: a tiny stand-in needs the real architecture (arch=...)")

    def as_tiny(self) -> ModelRef:
        """This checkpoint replaced by its tiny stand-in; unchanged when it declares no architecture (such a
        checkpoint has no stand-in and loads for real, as in tiny-model mode before)."""
        return self if self.arch is None or self.stand_in else dataclasses.replace(self, stand_in=True)

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "revision": self.revision}
        if self.stand_in:  # tiny weights never share an index or a run with the real checkpoint
            out["tiny"] = {"arch": self.arch, "parts": [list(p) for p in self.tiny]}
        if self.mapped is not None:
            out["mapped"] = self.mapped
        return out

    def __str__(self) -> str:
        return f"{self.id}@{self.revision}" if self.revision else self.id


def map_refs(obj: Any, fn: Callable[[ModelRef], ModelRef]) -> Any:
    """`obj` (a grid cell: an entry, its index recipe and stage, an expression and its parts) with every
    ModelRef inside it replaced by `fn(ref)`; the very same object where nothing changed (keys unchanged)."""
    if isinstance(obj, ModelRef):
        return fn(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = map_refs(value, fn)
            if new is not value:
                changed[f.name] = new
        return dataclasses.replace(obj, **changed) if changed else obj
    if isinstance(obj, Mapping):
        new_items = {k: map_refs(v, fn) for k, v in obj.items()}
        return dict(new_items) if any(new_items[k] is not v for k, v in obj.items()) else obj
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        new_list = [map_refs(v, fn) for v in obj]
        return type(obj)(new_list) if any(a is not b for a, b in zip(new_list, obj)) else obj
    return obj


@dataclass(frozen=True)
class Resolved:
    ref: ModelRef
    source: str  # "mapping" | "package:<name>" | "hf-cache" | "hub" | "tiny" (random weights: never results)
    location: str  # local folder, or the hub id when source == "hub"

    def kwargs(self) -> dict[str, str]:
        """Extra `from_pretrained` arguments: the pinned revision matters only when loading from the hub."""
        return {"revision": self.ref.revision} if self.source == "hub" and self.ref.revision else {}

    def manifest(self) -> dict[str, str | None]:
        return {"id": self.ref.id, "revision": self.ref.revision, "source": self.source, "location": self.location}
