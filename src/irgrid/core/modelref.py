"""Checkpoints as data: a Hugging Face id pinned to a revision, and where a resolver found its weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelRef:
    """A checkpoint: a Hugging Face id pinned to a revision (None only where none could be verified).

    `arch` and `tiny` only matter in tiny-model mode (`IRGRID_TINY_MODELS=1`, `irgrid run --tiny-models`): `arch`
    names the real architecture (see `irgrid.models.tiny.ARCHITECTURES`) from which a small random-weight model is built,
    `tiny` holds extra parts of that checkpoint as (key, value) pairs (e.g. a ColBERT projection size).
    """

    id: str
    revision: str | None = None
    arch: str | None = None
    tiny: tuple[tuple[str, Any], ...] = ()

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "revision": self.revision}
        if self.arch is not None:
            from irgrid.core import settings

            if settings.tiny_models():  # tiny weights never share an index or a run with the real checkpoint
                out["tiny"] = {"arch": self.arch, "parts": [list(p) for p in self.tiny]}
        return out

    def __str__(self) -> str:
        return f"{self.id}@{self.revision}" if self.revision else self.id


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
