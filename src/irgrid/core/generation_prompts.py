"""Generation prompts and decoding settings as data (light: entries import this at registry load)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """A generation prompt as data: a user message template with `{query}`, an optional system message,
    and where it comes from."""

    template: str
    system: str | None = None
    source: str = ""

    def render(self, query: str) -> str:
        return self.template.format(query=query)

    def config(self) -> dict[str, Any]:
        return {"template": self.template, "system": self.system}


@dataclass(frozen=True)
class Decoding:
    max_new_tokens: int = 128
    batch_size: int = 8
    seed: int = 0  # greedy decoding is deterministic; the seed is recorded for completeness

    def config(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "do_sample": False, "seed": self.seed}
