"""The cached causal-LM generator of expansion retrievers (query2doc, HyDE): batched, deterministic, cached.

Every generation is keyed by (model id, revision, resolved weights, prompt template, decoding settings, input),
so a second run of the same grid makes no model calls, while a changed prompt or model regenerates. The time
the model took is stored with each output and counted in query latency even when served from the cache
(the paper's code leaves generation time out of latency; we do not). The outputs live in the store's
generations area (`Store.generations.db`: one SQLite file per model, each batch one transaction).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid import store as store_mod
from irgrid.generation.spec import Decoding, Prompt
from irgrid.models.cache import cached_model
from irgrid.models.devices import pick_device
from irgrid.store import Store
from irgrid.util.hashing import config_hash


def render_chat(tokenizer, prompt: Prompt, text: str) -> str:
    """The exact string the generator sees: the system and user messages through the checkpoint's chat template
    (with the assistant turn opened), or joined by newlines for a model without one (base models, tiny ones)."""
    messages = ([{"role": "system", "content": prompt.system}] if prompt.system else [])
    messages.append({"role": "user", "content": prompt.render(text)})
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in messages) + "\n"


@cached_model
def _load_causal_lm(location: str, revision: str | None, device: str | None):
    """Loaded strictly, held in the bounded model cache (shared by query2doc and HyDE when they use the same
    generator)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from irgrid.models.loading import from_pretrained_strict

    kwargs = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    tokenizer.padding_side = "left"  # batched generation continues every prompt at the same position
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dev = pick_device(device)
    dtype = torch.bfloat16 if dev.startswith("cuda") else torch.float32
    model = from_pretrained_strict(AutoModelForCausalLM, location, what=f"generator {location}", dtype=dtype,
                                   **kwargs).to(dev).eval()
    return tokenizer, model


@dataclass
class GenerationStats:
    calls: int = 0  # prompts sent to the model
    hits: int = 0  # prompts served from the cache
    model_seconds: float = 0.0
    cached_seconds: float = 0.0  # model time originally spent on the cached outputs

    def record(self) -> dict[str, Any]:
        return {"calls": self.calls, "cache_hits": self.hits, "model_seconds": round(self.model_seconds, 3),
                "cached_model_seconds": round(self.cached_seconds, 3)}


@dataclass
class Generator:
    """A causal LM behind a persistent cache (the store's generations area). `resolved` is an
    `irgrid.core.modelref.Resolved`; `store` defaults to the current one (`irgrid.store.current`)."""

    resolved: Any
    prompt: Prompt
    decoding: Decoding = field(default_factory=Decoding)
    device: str | None = None
    stats: GenerationStats = field(default_factory=GenerationStats)
    store: Store | None = None

    def key(self) -> str:
        return config_hash({"model": self.resolved.ref.config(), "prompt": self.prompt.config(),
                            "decoding": self.decoding.config()})

    @functools.cached_property
    def _store(self) -> Store:
        return self.store or store_mod.current()

    @functools.cached_property
    def _db(self) -> sqlite3.Connection:
        return self._store.generations.open(self.resolved.ref.id)

    _lock = threading.Lock()  # one connection per generator, shared by the threads of a process

    def _item_key(self, text: str) -> str:
        return hashlib.sha256(f"{self.key()}\x00{text}".encode()).hexdigest()

    def _lookup(self, keys: Sequence[str]) -> dict[str, tuple[str, float]]:
        found: dict[str, tuple[str, float]] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start: start + 500])
            with self._lock:
                rows = self._db.execute(f"SELECT k, output, seconds FROM gen WHERE k IN ({','.join('?' * len(chunk))})",
                                        chunk).fetchall()
            found.update({k: (o, s) for k, o, s in rows})
        return found

    def generate(self, inputs: Sequence[str]) -> list[str]:
        """The outputs for `inputs`, generating only those the generations area lacks. A pass (the missing
        prompts) is generated by one job: another job missing the same prompts waits on the pass's lock and
        reads the rows it committed."""
        keys = [self._item_key(t) for t in inputs]
        found = self._lookup(keys)
        missing = list(dict.fromkeys(t for t, k in zip(inputs, keys) if k not in found))
        generated: set[str] = set()
        if missing:
            pass_id = hashlib.sha256("\n".join(sorted(self._item_key(t) for t in missing)).encode()).hexdigest()[:16]
            artifact = self._store.generations.pass_artifact(self.resolved.ref.id, pass_id)
            with self._store.lock(artifact, f"generations of {self.resolved.ref} ({len(missing)} prompts)"):
                found.update(self._lookup([self._item_key(t) for t in missing]))  # another job's pass, if any
                missing = [t for t in missing if self._item_key(t) not in found]
                if missing:
                    found.update(self._generate_missing(missing))
                    generated = {self._item_key(t) for t in missing}
                    self._store.record_build("generations", artifact, model=str(self.resolved.ref),
                                             outputs=len(missing), key=self.key())
        for k in keys:
            if k not in generated:
                self.stats.hits += 1
                self.stats.cached_seconds += found[k][1]
        return [found[k][0] for k in keys]

    def _generate_missing(self, missing: list[str]) -> dict[str, tuple[str, float]]:
        """Generate in batches, each committed as one transaction (a killed pass keeps its finished batches)."""
        from irgrid.util.console import Progress

        # one bar per generation pass, in prompts, with rate and ETA (plain lines in a log file)
        bar = Progress(len(missing), f"generating with {self.resolved.ref}", unit="prompt")
        out: dict[str, tuple[str, float]] = {}
        meta = json.dumps({"model": str(self.resolved.ref), "source": self.resolved.source})
        for start in range(0, len(missing), self.decoding.batch_size):
            batch = missing[start: start + self.decoding.batch_size]
            t0 = time.perf_counter()
            outputs = self._generate_batch(batch)
            bar.advance(len(batch))
            per_item = (time.perf_counter() - t0) / len(batch)
            self.stats.calls += len(batch)
            self.stats.model_seconds += per_item * len(batch)
            rows = [(self._item_key(t), o, per_item, meta) for t, o in zip(batch, outputs)]
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO gen VALUES (?, ?, ?, ?)", rows)
            out.update({k: (o, sec) for k, o, sec, _ in rows})
        bar.close()
        return out

    def _generate_batch(self, texts: list[str]) -> list[str]:
        import torch

        tokenizer, model = _load_causal_lm(self.resolved.location, self.resolved.kwargs().get("revision"),
                                           self.device)
        rendered = [render_chat(tokenizer, self.prompt, text) for text in texts]
        limit = self.decoding.max_input_length
        enc = tokenizer(rendered, return_tensors="pt", padding=True, add_special_tokens=False,
                        **({"truncation": True, "max_length": int(limit)} if limit else {})).to(model.device)
        kwargs = self.decoding.generate_kwargs()
        if self.decoding.eos == "tokenizer":  # the tokenizer's one eos token, not generation_config's list
            kwargs["eos_token_id"] = tokenizer.eos_token_id
        torch.manual_seed(self.decoding.seed)
        with torch.inference_mode():
            out = model.generate(**enc, pad_token_id=tokenizer.pad_token_id, **kwargs)
        return [tokenizer.decode(o[enc["input_ids"].shape[1]:], skip_special_tokens=True).strip() for o in out]


class Expand(pt.Transformer):
    """Query expansion as a PyTerrier prefix: keeps the original in `query_0`, as PyTerrier's rewriters do.

    `mode='query2doc'`: query repeated `repeats` times, then the generated passage (Wang et al., 2023, sparse);
    `mode='column'`: the generation goes to `out_column` (HyDE encodes it next to the query).
    """

    def __init__(self, generator: Generator, mode: str = "query2doc", repeats: int = 5, out_column: str = "gen_doc"):
        self.generator, self.mode, self.repeats, self.out_column = generator, mode, repeats, out_column

    def __repr__(self) -> str:
        return f"Expand({self.generator.resolved.ref}, mode={self.mode!r}, key={self.generator.key()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expand) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    def latency_seconds(self) -> float:
        """Generation time of cached outputs, to be added to measured latency (see module docstring)."""
        return self.generator.stats.cached_seconds

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        if len(topics) == 0:
            return topics.assign(**({"query_0": pd.Series(dtype=str)} if self.mode == "query2doc"
                                    else {self.out_column: pd.Series(dtype=str)}))
        generated = self.generator.generate(topics["query"].tolist())
        if self.mode == "query2doc":
            out = pt.model.push_queries(topics, keep_original=False, inplace=False)
            out["query"] = [" ".join([q] * self.repeats + [g]) for q, g in zip(topics["query"], generated)]
            return out
        return topics.assign(**{self.out_column: generated})
