"""docT5query's document stage: each document's text expanded with queries a seq2seq model samples from it.

Its outputs are not cached here: the stage's records are (the store's `stages/` area, written by the index
builder), so one document collection is expanded once per stage configuration.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import time
from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid.models.cache import cached_model
from irgrid.models.devices import pick_device
from irgrid.util.hashing import config_hash


@cached_model
def load_seq2seq(location: str, revision: str | None, device: str | None):
    """A docT5query checkpoint, loaded strictly. pyterrier-doc2query's Doc2Query loads non-strictly and fixes the
    input length at 64 tokens (the model card and the paper's code use 320/512), hence our own small stage."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from irgrid.models.loading import from_pretrained_strict

    kwargs = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    model = from_pretrained_strict(AutoModelForSeq2SeqLM, location, what=f"docT5query {location}", **kwargs)
    dev = pick_device(device)
    return tokenizer, model.to(dev).eval()


class DocT5Query(pt.Transformer):
    """Appends `num_samples` generated queries to each document's text (docT5query): the document truncated to
    `input_max_length` tokens, queries sampled up to `max_length` tokens (top-k and/or nucleus sampling), the
    expansion `text + " " + " ".join(queries)` as in the paper's code.

    A document without text is expanded to nothing (there is nothing to generate from: a batch of only empty
    documents is a zero-length tensor the model cannot take). With a `store` (the grid's stage), each batch's
    queries are committed to the store's generations area as they are made, keyed by the model, the sampling
    settings and the document's text: a killed stage resumes from what was kept, never generating twice.
    Sampling is seeded per batch (`seed`), so an uninterrupted pass is reproducible."""

    def __init__(self, model, num_samples: int = 3, input_max_length: int = 512, max_length: int = 64,
                 do_sample: bool = True, top_k: int | None = 10, top_p: float | None = None, batch_size: int = 8,
                 seed: int = 0, store: Any = None, resolved: Any = None):
        self.tokenizer, self.model = model
        self.num_samples, self.input_max_length, self.max_length = num_samples, input_max_length, max_length
        self.do_sample, self.top_k, self.top_p, self.batch_size = do_sample, top_k, top_p, batch_size
        self.seed, self.store, self.resolved = seed, store, resolved
        self.generated = 0  # documents sent to the model by this instance (the rest: empty, or kept earlier)

    def queries(self, texts: list[str]) -> list[list[str]]:
        import torch

        enc = self.tokenizer(texts, max_length=self.input_max_length, truncation=True, padding=True,
                             return_tensors="pt").to(self.model.device)
        kw: dict[str, Any] = {"max_length": self.max_length, "do_sample": self.do_sample,
                              "num_return_sequences": self.num_samples}
        kw.update({k: v for k, v in (("top_k", self.top_k), ("top_p", self.top_p)) if v is not None})
        torch.manual_seed(self.seed)
        with torch.inference_mode():
            out = self.model.generate(**{k: v for k, v in enc.items() if k != "token_type_ids"}, **kw)
        decoded = self.tokenizer.batch_decode(out, skip_special_tokens=True)
        n = self.num_samples
        return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]

    @functools.cached_property
    def _config(self) -> str:
        model = self.resolved.ref.config() if self.resolved is not None else None
        return config_hash({"kind": "doct5query", "model": model, "num_samples": self.num_samples,
                            "input_max_length": self.input_max_length, "max_length": self.max_length,
                            "do_sample": self.do_sample, "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed})

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._config}\x00{text}".encode()).hexdigest()

    @functools.cached_property
    def _db(self) -> sqlite3.Connection:
        return self.store.generations.open(self.resolved.ref.id)

    def _kept(self, keys: list[str]) -> dict[str, list[str]]:
        if self.store is None or self.resolved is None:
            return {}
        found: dict[str, list[str]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start: start + 500]
            rows = self._db.execute(f"SELECT k, output FROM gen WHERE k IN ({','.join('?' * len(chunk))})",
                                    chunk).fetchall()
            found.update({k: json.loads(o) for k, o in rows})
        return found

    def _keep(self, rows: list[tuple[str, list[str], float]]) -> None:
        if self.store is None or self.resolved is None:
            return
        meta = json.dumps({"model": str(self.resolved.ref), "source": self.resolved.source, "kind": "doct5query"})
        with self._db:  # one transaction per batch: a killed writer's batch is rolled back, the others kept
            self._db.executemany("INSERT OR REPLACE INTO gen VALUES (?, ?, ?, ?)",
                                 [(k, json.dumps(q), sec, meta) for k, q, sec in rows])

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if len(inp) == 0:
            return inp
        texts = inp["text"].fillna("").astype(str).tolist()
        keys = [self._key(t) for t in texts]
        done = self._kept(list(dict.fromkeys(keys)))
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if t.strip() and k not in done))
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start: start + self.batch_size]
            t0 = time.perf_counter()
            made = self.queries(batch)
            per_doc = (time.perf_counter() - t0) / len(batch)
            self.generated += len(batch)
            rows = [(self._key(t), qs, per_doc) for t, qs in zip(batch, made)]
            self._keep(rows)
            done.update({k: qs for k, qs, _ in rows})
        expanded = [" ".join([t, *done[k]]) if t.strip() else t for t, k in zip(texts, keys)]
        return inp.assign(text=expanded)
