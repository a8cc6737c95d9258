"""docT5query's document stage: each document's text expanded with queries a seq2seq model samples from it.

Its outputs are not cached here: the stage's records are (the store's `stages/` area, written by the index
builder), so one document collection is expanded once per stage configuration.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid.models.cache import cached_model
from irgrid.models.devices import pick_device


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
    expansion `text + " " + " ".join(queries)` as in the paper's code. Sampling is seeded once per instance."""

    def __init__(self, model, num_samples: int = 3, input_max_length: int = 512, max_length: int = 64,
                 do_sample: bool = True, top_k: int | None = 10, top_p: float | None = None, batch_size: int = 8,
                 seed: int = 0):
        import torch

        self.tokenizer, self.model = model
        self.num_samples, self.input_max_length, self.max_length = num_samples, input_max_length, max_length
        self.do_sample, self.top_k, self.top_p, self.batch_size = do_sample, top_k, top_p, batch_size
        torch.manual_seed(seed)

    def queries(self, texts: list[str]) -> list[list[str]]:
        import torch

        enc = self.tokenizer(texts, max_length=self.input_max_length, truncation=True, padding=True,
                             return_tensors="pt").to(self.model.device)
        kw: dict[str, Any] = {"max_length": self.max_length, "do_sample": self.do_sample,
                              "num_return_sequences": self.num_samples}
        kw.update({k: v for k, v in (("top_k", self.top_k), ("top_p", self.top_p)) if v is not None})
        with torch.inference_mode():
            out = self.model.generate(**enc, **kw)
        decoded = self.tokenizer.batch_decode(out, skip_special_tokens=True)
        n = self.num_samples
        return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if len(inp) == 0:
            return inp
        texts = inp["text"].astype(str).tolist()
        expanded = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start: start + self.batch_size]
            expanded += [" ".join([t, *qs]) for t, qs in zip(batch, self.queries(batch))]
        return inp.assign(text=expanded)
