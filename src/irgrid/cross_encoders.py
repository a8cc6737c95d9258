"""Cross-encoder re-rankers (the `reranker` family): a query and one candidate's text in, a relevance score out.

Two architectures, as their checkpoints define them:

- `sequence-classification`: BERT-style `AutoModelForSequenceClassification` over the pair (query, text), the
  score is the single logit (MS MARCO MiniLM cross-encoders; sentence-transformers' `CrossEncoder` applies a
  sigmoid on top, which does not change a ranking);
- `monot5`: `T5ForConditionalGeneration` on "Query: q Document: d Relevant:"; the score is the log-probability of
  "true" against "false" at the first decoded position (Nogueira et al., 2020; pyterrier-t5's MonoT5ReRanker).

Written here because no installable package provides them offline (pyterrier-t5 is GitHub-only; sentence-
transformers' CrossEncoder loads without irgrid's strict checkpoint check). Checkpoints load through
`from_pretrained_strict`, so a wrong head is an error, never random scores.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from irgrid.core.retrievers import EntryError, QueryContext, Retriever
from irgrid.models.loading import CheckpointMismatchError

KINDS = ("sequence-classification", "monot5")
MONOT5_TEMPLATE = "Query: {query} Document: {text} Relevant:"


def make_scorer(entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
    """The entry's scorer for the right side of >> (the entries' declared `make_scorer`, read by
    irgrid.runner.scoring)."""
    return _scorer_class()(entry.name, entry.head, dict(entry.options), models["model"], device)


def reranker_query(artifact: Any, ctx: QueryContext, name: str, head: str | None) -> Any:
    """A re-ranker listed as a plain grid retriever: it has nothing to retrieve, and says so when it runs."""
    return _scorer_class()(name, head, dict(ctx.options), ctx.models["model"], ctx.device)


@functools.cache
def _scorer_class() -> type:
    """The scorer class, defined on first use (irgrid's one lazy-class idiom: `functools.cache` over a function
    that imports PyTerrier and defines the class), so importing the entries imports no torch or PyTerrier."""
    import numpy as np
    import pandas as pd
    import pyterrier as pt

    from irgrid.models.devices import pick_device
    from irgrid.util.memo import Memo

    class CrossEncoderScorer(pt.Transformer):
        def __init__(self, name: str, head: str | None, options: dict[str, Any], resolved: Any, device: str | None):
            self.name, self.options, self.resolved = name, options, resolved
            self.device = pick_device(device)
            self.kind = head  # the entry's typed `head` (wiring: it follows the checkpoint)
            if self.kind not in KINDS:
                raise EntryError(f"re-ranker {name!r}: head {self.kind!r} is not one of {KINDS}")
            self.batch_size, self.max_length = int(options["batch_size"]), int(options["max_length"])
            self.memo = Memo()  # (query, text) -> score: single-query latency runs re-use batch scores, declared
            self._model: Any = None

        def _load(self) -> None:
            from irgrid.models.cache import MODELS

            key = ("cross-encoder", self.resolved.location, self.resolved.source, self.kind, self.device,
                   tuple(sorted(self.resolved.kwargs().items())))
            self.tokenizer, self._model = MODELS.get(key, self._read)
            if self.kind == "monot5":
                ids = [self.tokenizer.encode(w, add_special_tokens=False) for w in ("false", "true")]
                if any(len(i) != 1 for i in ids):
                    raise CheckpointMismatchError(f"re-ranker {self.name}: 'true'/'false' are not single tokens of "
                                                  f"its tokenizer ({ids}): not a monoT5 tokenizer")
                self.false_true = [ids[0][0], ids[1][0]]

        def _read(self) -> tuple[Any, Any]:
            import transformers as tf

            from irgrid.models.loading import from_pretrained_strict

            loc, kw = self.resolved.location, self.resolved.kwargs()
            tokenizer = tf.AutoTokenizer.from_pretrained(loc, **kw)
            cls = tf.AutoModelForSequenceClassification if self.kind == "sequence-classification" \
                else tf.T5ForConditionalGeneration
            model = from_pretrained_strict(cls, loc, what=f"re-ranker {self.name} ({self.resolved.ref})",
                                           **kw).to(self.device).eval()
            return tokenizer, model

        def _score(self, pairs: list[tuple[str, str]]) -> list[float]:
            import torch

            if self._model is None:
                self._load()
            out: list[float] = []
            # longest first: batches carry little padding
            order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][1]))
            scores = np.zeros(len(pairs), dtype=np.float64)
            with torch.inference_mode():
                for start in range(0, len(order), self.batch_size):
                    idx = order[start:start + self.batch_size]
                    qs, ds = [pairs[i][0] for i in idx], [pairs[i][1] for i in idx]
                    if self.kind == "sequence-classification":
                        enc = self.tokenizer(qs, ds, padding=True, truncation="longest_first",
                                             max_length=self.max_length, return_tensors="pt").to(self.device)
                        logits = self._model(**enc).logits.float()
                        s = logits[:, 0] if logits.shape[1] == 1 else torch.log_softmax(logits, -1)[:, 1]
                    else:
                        texts = [MONOT5_TEMPLATE.format(query=q, text=d) for q, d in zip(qs, ds)]
                        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                             return_tensors="pt").to(self.device)
                        start_id = self._model.config.decoder_start_token_id
                        dec = torch.full((len(texts), 1), start_id, dtype=torch.long, device=self.device)
                        logits = self._model(**enc, decoder_input_ids=dec).logits[:, 0, self.false_true].float()
                        s = torch.log_softmax(logits, -1)[:, 1]
                    scores[idx] = s.cpu().numpy()
            out = scores.tolist()
            return out

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if not {"docno", "text", "query"} <= set(inp.columns):
                if len(inp) == 0:
                    return inp.assign(score=pd.Series([], dtype=float), rank=pd.Series([], dtype=int))
                raise EntryError(f"{self.name} is a re-ranker: it scores candidates (query, docno, text), it does "
                                 f"not retrieve. Use it in a pipeline, e.g. {{as: bm25-{self.name}, pipeline: "
                                 f"\"bm25 % 100 >> {self.name}\"}}")
            if len(inp) == 0:
                return inp.assign(score=pd.Series([], dtype=float), rank=pd.Series([], dtype=int))
            pairs = list(zip(inp["query"].astype(str), inp["text"].astype(str)))
            scores = self.memo.get_many(pairs, self._score)
            return pt.model.add_ranks(inp.assign(score=scores))

        def latency_seconds(self) -> float:
            return self.memo.served

        def __repr__(self) -> str:
            return f"CrossEncoder({self.name!r}, {self.kind})"

    return CrossEncoderScorer
