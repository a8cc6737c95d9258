"""Per-document token weights from learned sparse models (uniCOIL, DeepCT, SPARTA), as PyTerrier transformers.

No PyTerrier package covers these three offline (pyterrier-deepct is GitHub-only; uniCOIL and SPARTA encoders
live in Pyserini/BEIR scripts), hence our own, each following its paper and reference implementation:
- uniCOIL (Lin & Ma, 2021): BERT, a linear `tok_proj` to one weight per token, ReLU; max over repeats.
- DeepCT (Dai & Callan, 2020): BERT token regression; weights become term frequencies of a pseudo-document.
- SPARTA (Zhao et al., 2021): each vocabulary term scores max_j ReLU(e_v · h_j + b), log(1+·); top-k kept.
All produce `toks` ({term: int impact}) like pyterrier-splade, scaled (×100), rounded and pruned to top-k.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

import more_itertools
import pandas as pd
import pyterrier as pt
import torch

SPECIAL = {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"}


def impacts(weights: dict[str, float], scale: float, top_k: int | None) -> dict[str, int]:
    """Scale, round to integers, drop zeros, keep the top-k terms (the paper's post-processing)."""
    items = sorted(((t, int(round(w * scale))) for t, w in weights.items()), key=lambda x: (-x[1], x[0]))
    items = [(t, w) for t, w in items if w > 0]
    return dict(items[:top_k] if top_k else items)


def _state(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if files:
        out: dict[str, torch.Tensor] = {}
        for f in files:
            out.update(load_file(str(f)))
        return out
    bins = sorted(folder.glob("pytorch_model*.bin"))
    out = {}
    for f in bins:
        out.update(torch.load(str(f), map_location="cpu", weights_only=True))
    return out


@functools.cache
def load_unicoil(location: str, revision: str | None, device: str | None, tiny: bool):
    """BERT plus uniCOIL's `tok_proj` (Pyserini's UniCoilEncoder layout)."""
    from transformers import AutoTokenizer, BertModel

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    bert = BertModel.from_pretrained(location, add_pooling_layer=False, **kw).eval()
    proj = torch.nn.Linear(bert.config.hidden_size, 1)
    state = _state(Path(location)) if Path(location).is_dir() else {}
    if "tok_proj.weight" in state:
        proj.load_state_dict({"weight": state["tok_proj.weight"], "bias": state["tok_proj.bias"]})
    elif tiny:  # a tiny stand-in has no trained head: a seeded random one of the real shape
        torch.manual_seed(0)
        proj.reset_parameters()
    else:
        raise RuntimeError(f"{location}: no uniCOIL `tok_proj` weights found; is this a uniCOIL checkpoint?")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return tokenizer, bert.to(dev), proj.eval().to(dev)


@functools.cache
def load_token_regressor(location: str, revision: str | None, device: str | None):
    """DeepCT: a BERT token-classification head with one output (term importance)."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    model = AutoModelForTokenClassification.from_pretrained(location, num_labels=1, **kw).eval()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return tokenizer, model.to(dev)


@functools.cache
def load_encoder(location: str, revision: str | None, device: str | None):
    """SPARTA: a plain transformer encoder (DistilBERT) and its input embedding table."""
    from transformers import AutoModel, AutoTokenizer

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    model = AutoModel.from_pretrained(location, **kw).eval()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return tokenizer, model.to(dev)


class TokenWeights(pt.Transformer):
    """Base: encodes a text field in length-sorted batches into `{term: weight}` dicts, streamed."""

    in_field, out_field = "text", "toks"

    def __init__(self, batch_size: int = 32, max_length: int = 512, scale: float = 100.0, top_k: int | None = 512):
        self.batch_size, self.max_length, self.scale, self.top_k = batch_size, max_length, scale, top_k

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        raise TypeError(f"{type(self).__name__} must define weights()")  # abstract

    def finish(self, w: dict[str, float]) -> object:
        return impacts(w, self.scale, self.top_k)

    def transform_iter(self, inp: Iterable[dict]) -> Iterator[dict]:
        for chunk in more_itertools.chunked(inp, 16 * self.batch_size):
            order = sorted(range(len(chunk)), key=lambda i: len(chunk[i][self.in_field]))
            out: list[object] = [None] * len(chunk)
            for start in range(0, len(order), self.batch_size):
                idx = order[start: start + self.batch_size]
                for i, w in zip(idx, self.weights([chunk[i][self.in_field] for i in idx])):
                    out[i] = self.finish(w)
            yield from ({**r, self.out_field: o} for r, o in zip(chunk, out))

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        records = list(self.transform_iter(inp.to_dict("records")))
        return pd.DataFrame(records) if records else inp.assign(**{self.out_field: pd.Series(dtype=object)})


class UniCoilEncoder(TokenWeights):
    def __init__(self, model, rep: str = "d", **kw):
        super().__init__(**kw)
        self.tokenizer, self.bert, self.proj = model
        self.rep = rep
        if rep == "q":  # queries keep float weights; the PISA query side quantises them
            self.in_field, self.out_field = "query", "query_toks"

    def finish(self, w: dict[str, float]) -> object:
        return w if self.rep == "q" else impacts(w, self.scale, self.top_k)

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.bert.device)
        with torch.inference_mode():
            w = torch.relu(self.proj(self.bert(**enc).last_hidden_state)).squeeze(-1).float().cpu()
        return _per_token_max(self.tokenizer, enc["input_ids"].cpu(), enc["attention_mask"].cpu(), w)


class DeepCTEncoder(TokenWeights):
    """Weights -> a pseudo-document where each word is repeated round(weight × scale) times (DeepCT-Index)."""

    out_field = "text"

    def __init__(self, model, **kw):
        super().__init__(**kw)
        self.tokenizer, self.model = model

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.model.device)
        with torch.inference_mode():
            w = self.model(**enc).logits.squeeze(-1).float().cpu()
        # word level: a word takes its first word-piece's weight (as DeepCT's reference implementation)
        out = []
        for ids, mask, row in zip(enc["input_ids"].cpu(), enc["attention_mask"].cpu(), w):
            words: dict[str, float] = {}
            current, weight = "", 0.0
            for tok, m, x in zip(self.tokenizer.convert_ids_to_tokens(ids.tolist()), mask.tolist(), row.tolist()):
                if not m or tok in SPECIAL:
                    continue
                if tok.startswith("##") and current:
                    current += tok[2:]
                    continue
                if current:
                    words[current] = max(words.get(current, 0.0), weight)
                current, weight = tok, x
            if current:
                words[current] = max(words.get(current, 0.0), weight)
            out.append(words)
        return out

    def finish(self, w: dict[str, float]) -> object:
        tf = impacts(w, self.scale, self.top_k)
        return " ".join(" ".join([t] * n) for t, n in tf.items())


class SpartaEncoder(TokenWeights):
    def __init__(self, model, **kw):
        super().__init__(**kw)
        self.tokenizer, self.model = model
        self._reverse = {v: k for k, v in self.tokenizer.get_vocab().items()}

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.model.device)
        table = self.model.get_input_embeddings().weight  # [V, H]
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state  # [B, L, H]
            scores = torch.einsum("vh,blh->bvl", table, hidden)
            scores.masked_fill_(~enc["attention_mask"].bool().unsqueeze(1), float("-inf"))
            w = torch.log1p(torch.relu(scores.amax(dim=-1))).float().cpu()  # [B, V]
        out = []
        for row in w:
            k = min(self.top_k or row.numel(), row.numel())
            vals, idx = torch.topk(row, k)
            out.append({self._reverse[int(i)]: float(v) for i, v in zip(idx.tolist(), vals.tolist()) if v > 0})
        return out


class QueryTokens(pt.Transformer):
    """SPARTA's query side: the query's word-pieces, each with weight 1 (the model scores documents only)."""

    def __init__(self, tokenizer, max_length: int = 64):
        self.tokenizer, self.max_length = tokenizer, max_length

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        toks = []
        for q in topics["query"]:
            pieces = self.tokenizer.tokenize(q)[: self.max_length]
            counts: dict[str, float] = {}
            for p in pieces:
                if p not in SPECIAL:
                    counts[p] = counts.get(p, 0.0) + 1.0
            toks.append(counts)
        return topics.assign(query_toks=toks)


def _per_token_max(tokenizer, ids: torch.Tensor, mask: torch.Tensor, w: torch.Tensor) -> list[dict[str, float]]:
    out = []
    for row_ids, row_mask, row_w in zip(ids, mask, w):
        d: dict[str, float] = {}
        for tok, m, x in zip(tokenizer.convert_ids_to_tokens(row_ids.tolist()), row_mask.tolist(), row_w.tolist()):
            if m and tok not in SPECIAL and x > 0:
                d[tok] = max(d.get(tok, 0.0), x)
        out.append(d)
    return out
