"""Generation prompts and decoding settings as data: what an entry's options say about generating.

Light: no torch or transformers (entries import this at registry load, and `irgrid list` must stay free of torch);
the engine that runs a causal LM with these settings is `irgrid.generation.engine`, docT5query's stage
`irgrid.generation.doc2query`."""

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
    """Decoding settings of an entry (its options): greedy by default; `do_sample` with `temperature`, `top_p`,
    `top_k` (None: the checkpoint's generation_config decides, as in a plain `generate(do_sample=True, ...)`
    call); `max_input_length` truncates the rendered prompt (None: no truncation); `eos` 'tokenizer' passes the
    tokenizer's eos token as generate()'s only end token (None: the checkpoint's generation_config, which may list
    more than one).

    `config()` (part of every generation cache key) lists only the knobs that differ from greedy decoding, so a
    greedy configuration keeps the key it had before the sampling knobs existed."""

    max_new_tokens: int = 128
    batch_size: int = 8
    seed: int = 0  # greedy decoding is deterministic; the seed is recorded for completeness
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_input_length: int | None = None
    eos: str | None = None  # 'tokenizer': stop at the tokenizer's eos token only; None: the checkpoint's eos list

    def __post_init__(self) -> None:
        if self.eos not in (None, "tokenizer"):
            from irgrid.core.retrievers import EntryError

            raise EntryError(f"eos must be 'tokenizer' (stop at the tokenizer's eos token only) or null (the "
                             f"checkpoint's generation_config), got {self.eos!r}")

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": False, "seed": self.seed}
        extra = {"do_sample": self.do_sample, "temperature": self.temperature, "top_p": self.top_p,
                 "top_k": self.top_k, "max_input_length": self.max_input_length, "eos": self.eos}
        out.update({k: v for k, v in extra.items() if v not in (None, False)})
        return out

    def generate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of transformers' `generate` (the sampling knobs only when sampling)."""
        kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            kw.update({k: v for k, v in (("temperature", self.temperature), ("top_p", self.top_p),
                                         ("top_k", self.top_k)) if v is not None})
        return kw
