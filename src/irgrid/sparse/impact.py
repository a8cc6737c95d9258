"""Per-document token weights from learned sparse models (uniCOIL, DeepCT, SPARTA), as PyTerrier transformers.

No PyTerrier package covers these three offline (pyterrier-deepct is GitHub-only; uniCOIL and SPARTA encoders
live in Pyserini/BEIR scripts), hence our own, each following its paper and reference implementation:
- uniCOIL (Lin & Ma, 2021): BERT, a linear `tok_proj` to one weight per token, ReLU; max over repeats.
- DeepCT (Dai & Callan, 2020): BERT token regression; weights become term frequencies of a pseudo-document.
- SPARTA (Zhao et al., 2021): each vocabulary term scores max_j ReLU(e_v · h_j + b), log(1+·); top-k kept.
All produce `toks` ({term: int impact}) like pyterrier-splade, scaled (×100), rounded and pruned to top-k.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import more_itertools
import pandas as pd
import pyterrier as pt
import torch

from irgrid.core.retrievers import EntryError
from irgrid.models.cache import cached_model
from irgrid.models.devices import pick_device
from irgrid.models.loading import CheckpointMismatchError
from irgrid.util.console import advance

SPECIAL = {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"}
# Pyserini's UniCoilQueryEncoder: integer query weights round(w / weight_range x quant_range)
PYSERINI_WEIGHT_RANGE, PYSERINI_QUANT_RANGE = 5, 256


def quantise(w: float, scale: float, rounding: str) -> int:
    """One impact: `w × scale` made an integer by rounding to nearest ('round') or toward zero ('trunc', what
    Anserini does to float weights in an impact index and pyterrier-splade to its ×100 weights)."""
    if rounding == "round":
        return int(round(w * scale))
    if rounding == "trunc":
        return int(w * scale)
    raise EntryError(f"rounding must be 'round' or 'trunc', got {rounding!r}")


def impacts(weights: dict[str, float], scale: float, top_k: int | None, rounding: str = "round",
            min_impact: int = 1, skip: str | None = None) -> dict[str, int]:
    """Quantise and prune one document: drop terms matching the regex `skip`, quantise (`quantise`), keep those
    of at least `min_impact`, then the `top_k` of highest weight (ties: term order). Ranking by the float weight
    before quantising equals the paper code's ranking by integer impact wherever that is not tied."""
    pattern = re.compile(skip) if skip else None
    ranked = sorted(((t, w) for t, w in weights.items() if not (pattern and pattern.fullmatch(t))),
                    key=lambda x: (-x[1], x[0]))
    out: dict[str, int] = {}
    for t, w in ranked:
        q = quantise(w, scale, rounding)
        if q >= min_impact:
            out[t] = q
            if top_k and len(out) >= top_k:
                break
    return out


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


@cached_model
def load_unicoil(location: str, revision: str | None, device: str | None, tiny: bool,
                 allow_unexpected: tuple[str, ...] = ()):
    """BERT plus uniCOIL's `tok_proj` (Pyserini's UniCoilEncoder layout), loaded strictly: BERT must match the
    checkpoint but for `allow_unexpected` (the entry declares the head and pooler it loads or leaves)."""
    from transformers import AutoTokenizer, BertModel

    from irgrid.models.loading import from_pretrained_strict

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    bert = from_pretrained_strict(BertModel, location, what=f"uniCOIL encoder {location}",
                                  allow_unexpected=allow_unexpected, add_pooling_layer=False, **kw).eval()
    proj = torch.nn.Linear(bert.config.hidden_size, 1)
    state = _state(Path(location)) if Path(location).is_dir() else {}
    if "tok_proj.weight" in state:
        proj.load_state_dict({"weight": state["tok_proj.weight"], "bias": state["tok_proj.bias"]})
    elif tiny:  # a tiny stand-in has no trained head: a seeded random one of the real shape
        torch.manual_seed(0)
        proj.reset_parameters()
    else:
        raise CheckpointMismatchError(f"{location}: no uniCOIL `tok_proj` weights found; is this a uniCOIL checkpoint?")
    dev = torch.device(pick_device(device))
    return tokenizer, bert.to(dev), proj.eval().to(dev)


@cached_model
def load_token_regressor(location: str, revision: str | None, device: str | None,
                         allow_missing: tuple[str, ...] = (), allow_unexpected: tuple[str, ...] = ()):
    """DeepCT: a BERT token-classification head with one output (term importance), loaded strictly (a
    checkpoint without the regression head would otherwise get a random one)."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from irgrid.models.loading import from_pretrained_strict

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    model = from_pretrained_strict(AutoModelForTokenClassification, location, what=f"DeepCT {location}",
                                   allow_missing=allow_missing, allow_unexpected=allow_unexpected, num_labels=1,
                                   **kw).eval()
    dev = torch.device(pick_device(device))
    return tokenizer, model.to(dev)


@cached_model
def load_encoder(location: str, revision: str | None, device: str | None,
                 allow_unexpected: tuple[str, ...] = ()):
    """SPARTA: a plain transformer encoder (DistilBERT) and its input embedding table, loaded strictly."""
    from transformers import AutoModel, AutoTokenizer

    from irgrid.models.loading import from_pretrained_strict

    kw = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **kw)
    model = from_pretrained_strict(AutoModel, location, what=f"SPARTA encoder {location}",
                                   allow_unexpected=allow_unexpected, **kw).eval()
    dev = torch.device(pick_device(device))
    return tokenizer, model.to(dev)


class TokenWeights(pt.Transformer):
    """Base: encodes a text field in length-sorted batches into `{term: weight}` dicts, streamed."""

    in_field, out_field = "text", "toks"

    def __init__(self, batch_size: int = 32, max_length: int = 512, scale: float = 100.0, top_k: int | None = 512,
                 rounding: str = "round", min_impact: int = 1, skip: str | None = None):
        self.batch_size, self.max_length, self.scale, self.top_k = batch_size, max_length, scale, top_k
        self.rounding, self.min_impact, self.skip = rounding, min_impact, skip
        quantise(1.0, scale, rounding)  # a bad rounding name fails here, before any encoding

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        raise TypeError(f"{type(self).__name__} must define weights()")  # abstract

    def finish(self, w: dict[str, float]) -> object:
        return impacts(w, self.scale, self.top_k, self.rounding, self.min_impact, self.skip)

    def transform_iter(self, inp: Iterable[dict]) -> Iterator[dict]:
        for chunk in more_itertools.chunked(inp, 16 * self.batch_size):
            order = sorted(range(len(chunk)), key=lambda i: len(chunk[i][self.in_field]))
            out: list[object] = [None] * len(chunk)
            for start in range(0, len(order), self.batch_size):
                idx = order[start: start + self.batch_size]
                for i, w in zip(idx, self.weights([chunk[i][self.in_field] for i in idx])):
                    out[i] = self.finish(w)
                advance(len(idx))  # an index build's bar moves per batch (nothing at query time)
            yield from ({**r, self.out_field: self.complete(r, o)} for r, o in zip(chunk, out))

    def complete(self, record: dict, out: object) -> object:
        """The output stored for one record (subclasses may fall back on the input)."""
        return out

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        records = list(self.transform_iter(inp.to_dict("records")))
        return pd.DataFrame(records) if records else inp.assign(**{self.out_field: pd.Series(dtype=object)})


class UniCoilEncoder(TokenWeights):
    """`aggregate`: how repeats of a word-piece combine ('max' as Pyserini's document encoder, 'sum' as its query
    encoder); `keep_sep`: [SEP] is a term like any other (Pyserini skips only [CLS] and padding)."""

    def __init__(self, model, rep: str = "d", aggregate: str = "max", keep_sep: bool = False, keep_unk: bool = False,
                 query_quantise: str | None = None, **kw):
        super().__init__(**kw)
        self.tokenizer, self.bert, self.proj = model
        if aggregate not in ("max", "sum"):
            raise EntryError(f"uniCOIL: aggregate must be 'max' or 'sum', got {aggregate!r}")
        if query_quantise not in (None, "pyserini"):
            raise EntryError(f"uniCOIL: query_quantise must be 'pyserini' (round(w / 5 x 256), Pyserini's "
                             f"UniCoilQueryEncoder) or null (float weights), got {query_quantise!r}")
        self.aggregate, self.keep_sep, self.keep_unk, self.query_quantise = aggregate, keep_sep, keep_unk, \
            query_quantise
        self.rep = rep
        if rep == "q":  # queries keep float weights (the PISA query side quantises them) unless query_quantise
            self.in_field, self.out_field = "query", "query_toks"

    def finish(self, w: dict[str, float]) -> object:
        if self.rep != "q":
            return super().finish(w)
        if self.query_quantise == "pyserini":  # Python's round (half to even), as Pyserini's
            return {t: float(round(x / PYSERINI_WEIGHT_RANGE * PYSERINI_QUANT_RANGE)) for t, x in w.items()}
        return w

    def weights(self, texts: list[str]) -> list[dict[str, float]]:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.bert.device)
        with torch.inference_mode():
            w = torch.relu(self.proj(self.bert(**enc).last_hidden_state)).squeeze(-1).float().cpu()
        skip = SPECIAL - ({"[SEP]"} if self.keep_sep else set()) - ({"[UNK]"} if self.keep_unk else set())
        return _per_token(self.tokenizer, enc["input_ids"].cpu(), enc["attention_mask"].cpu(), w, skip,
                          self.aggregate)


class DeepCTEncoder(TokenWeights):
    """Weights -> a pseudo-document where each word is repeated tf times (DeepCT-Index).

    A word takes its first word-piece's weight (as DeepCT's reference implementation). Knobs, all declared by
    the entry: `activation` on the raw regression output ('identity' or 'sigmoid'), `scale`/`rounding` to a term
    frequency, `cap` (largest tf), `aggregate` ('max': one tf per distinct word from its largest weight; 'each':
    every occurrence of a word contributes its own tf, in document order), `keep_text_if_empty` (a document whose
    words all get tf 0 is indexed with its original text instead of nothing)."""

    out_field = "text"

    def __init__(self, model, activation: str = "identity", cap: int | None = None, aggregate: str = "max",
                 keep_text_if_empty: bool = False, **kw):
        super().__init__(**kw)
        self.tokenizer, self.model = model
        if activation not in ("identity", "sigmoid") or aggregate not in ("max", "each"):
            raise EntryError(f"DeepCT: activation must be 'identity' or 'sigmoid' (got {activation!r}), aggregate "
                             f"'max' or 'each' (got {aggregate!r})")
        self.activation, self.cap, self.aggregate, self.keep_text_if_empty = activation, cap, aggregate, \
            keep_text_if_empty

    def weights(self, texts: list[str]) -> list[list[tuple[str, float]]]:  # type: ignore[override]
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.model.device)
        with torch.inference_mode():
            w = self.model(**enc).logits.squeeze(-1).float()
            if self.activation == "sigmoid":
                w = torch.sigmoid(w)
            w = w.cpu()
        return [words(self.tokenizer, ids, mask, row)
                for ids, mask, row in zip(enc["input_ids"].cpu(), enc["attention_mask"].cpu(), w)]

    def tf(self, weight: float) -> int:
        n = quantise(weight, self.scale, self.rounding)
        return min(n, self.cap) if self.cap is not None else n

    def finish(self, occurrences: list[tuple[str, float]]) -> object:  # type: ignore[override]
        if self.aggregate == "each":
            pairs = [(t, self.tf(w)) for t, w in occurrences]
        else:
            best: dict[str, float] = {}
            for t, w in occurrences:
                best[t] = max(best.get(t, w), w)
            pairs = [(t, min(n, self.cap) if self.cap is not None else n)
                     for t, n in impacts(best, self.scale, self.top_k, self.rounding, self.min_impact).items()]
        return " ".join(" ".join([t] * n) for t, n in pairs if n >= self.min_impact)

    def complete(self, record: dict, out: object) -> object:
        return out if out or not self.keep_text_if_empty else record[self.in_field]


def words(tokenizer, ids: torch.Tensor, mask: torch.Tensor, row: torch.Tensor) -> list[tuple[str, float]]:
    """(word, weight of its first word-piece) for every word of one encoded text, in order; special tokens and
    padding skipped. A leading '##' piece (after truncation or a special token) starts a word without its '##'."""
    out: list[tuple[str, float]] = []
    current, weight = "", 0.0
    special = set(getattr(tokenizer, "all_special_tokens", ())) | SPECIAL
    for tok, m, x in zip(tokenizer.convert_ids_to_tokens(ids.tolist()), mask.tolist(), row.tolist()):
        if not m or tok in special:
            continue
        if tok.startswith("##"):
            if current:
                current += tok[2:]
                continue
            tok = tok[2:]
        if current:
            out.append((current, weight))
        current, weight = tok, x
    if current:
        out.append((current, weight))
    return out


class SpartaEncoder(TokenWeights):
    """`zero_special`: special tokens ([CLS], [SEP], ...) never become document terms (BEIR zeroes their input
    embeddings); without it they compete like any other vocabulary entry (the paper's code)."""

    def __init__(self, model, zero_special: bool = False, pad_widths: Mapping[str, int] | None = None, **kw):
        super().__init__(**kw)
        self.tokenizer, self.model = model
        self.zero_special = zero_special
        # docno -> the padded width its release batch had (`padded_widths`): the max then runs over padding
        # positions up to that width, as the release's does; None: padding is masked
        self.pad_widths = pad_widths
        self._reverse = {v: k for k, v in self.tokenizer.get_vocab().items()}

    def transform_iter(self, inp: Iterable[dict]) -> Iterator[dict]:
        if self.pad_widths is None:
            yield from super().transform_iter(inp)
            return
        for chunk in more_itertools.chunked(inp, 16 * self.batch_size):  # widths travel with the texts
            texts = [(r[self.in_field], self._width(r)) for r in chunk]
            out = [self.finish(w) for start in range(0, len(texts), self.batch_size)
                   for w in self.weights(texts[start:start + self.batch_size])]  # type: ignore[arg-type]
            yield from ({**r, self.out_field: o} for r, o in zip(chunk, out))

    def _width(self, record: Mapping[str, Any]) -> int:
        docno = str(record["docno"])
        if docno not in self.pad_widths:  # type: ignore[operator]
            raise EntryError(f"SPARTA sparta_pad_max: document {docno!r} has no release batch width; the widths "
                             f"were computed over another corpus")
        return int(self.pad_widths[docno])  # type: ignore[index]

    def weights(self, texts: list[str] | list[tuple[str, int]]) -> list[dict[str, float]]:
        widths = [t[1] for t in texts] if texts and isinstance(texts[0], tuple) else None
        plain = [t[0] if isinstance(t, tuple) else t for t in texts]
        if widths is not None:  # the release strips and pads to its batch's width
            plain = [t.strip() for t in plain]
        if widths is None:
            enc = self.tokenizer(plain, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        else:  # a text's own length (at most max_length) never exceeds its width, so this cuts nothing more
            enc = self.tokenizer(plain, padding="max_length", truncation=True, max_length=max(widths),
                                 return_tensors="pt")
        enc = enc.to(self.model.device)
        table = self.model.get_input_embeddings().weight  # [V, H]
        if self.zero_special:
            table = table.clone()
            table[list(self.tokenizer.all_special_ids)] = 0
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state  # [B, L, H]
            scores = torch.einsum("vh,blh->bvl", table, hidden)
            if widths is None:
                keep = enc["attention_mask"].bool()
            else:  # every position below the release batch's width, padding included
                keep = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0) < torch.tensor(
                    widths, device=hidden.device).unsqueeze(1)
            scores.masked_fill_(~keep.unsqueeze(1), float("-inf"))
            w = torch.log1p(torch.relu(scores.amax(dim=-1))).float().cpu()  # [B, V]
        out = []
        for row in w:
            k = min(self.top_k or row.numel(), row.numel())
            vals, idx = torch.topk(row, k)
            out.append({self._reverse[int(i)]: float(v) for i, v in zip(idx.tolist(), vals.tolist()) if v > 0})
        return out


# -- the release's multi-process document batches (the quirks unicoil_tail_batches and sparta_pad_max) ---------------
def release_batches(texts: Iterable[str], workers: int, batch_size: int) -> Iterator[tuple[list[int], bool]]:
    """(document positions, is_tail) of every batch the release's document workers encode: document i goes to worker
    i % workers; a worker skips documents whose text is blank and cuts the rest into batches of `batch_size` in
    order; a worker's last batch is its tail when shorter than `batch_size`. Batches come worker by worker."""
    if workers < 1 or batch_size < 1:
        raise EntryError(f"release batches need workers >= 1 and batch_size >= 1, got {workers}, {batch_size}")
    own: list[list[int]] = [[] for _ in range(workers)]
    for i, text in enumerate(texts):
        if str(text or "").strip():
            own[i % workers].append(i)
    for positions in own:
        for start in range(0, len(positions), batch_size):
            batch = positions[start:start + batch_size]
            yield batch, len(batch) < batch_size


def release_setting(value: Any, what: str) -> tuple[int, int]:
    """(workers, batch_size) from a quirk's value {workers: W, batch_size: B}; one error naming the quirk else."""
    if not isinstance(value, Mapping) or set(value) != {"workers", "batch_size"} or not all(
            isinstance(value[k], int) and not isinstance(value[k], bool) and value[k] >= 1 for k in value):
        raise EntryError(f"{what} takes {{workers: W, batch_size: B}} (whole numbers >= 1; the release: 4 and 32), "
                         f"got {value!r}")
    return int(value["workers"]), int(value["batch_size"])


def tail_documents(docs: Iterable[Mapping[str, Any]], workers: int, batch_size: int) -> set[str]:
    """Docnos the release never encodes: each worker's last partial batch (the quirk unicoil_tail_batches)."""
    docnos: list[str] = []

    def texts() -> Iterator[str]:
        for d in docs:
            docnos.append(str(d["docno"]))
            yield str(d.get("text") or "")

    dropped = {docnos[i] for batch, tail in release_batches(texts(), workers, batch_size) if tail for i in batch}
    if docnos and len(dropped) == len(docnos):
        raise EntryError(f"uniCOIL unicoil_tail_batches: the release's {workers} workers would encode none of this "
                         f"corpus's {len(docnos)} documents (each worker drops its last batch of fewer than "
                         f"{batch_size}, and no worker fills one: fewer than {batch_size} documents each), so the "
                         f"index would be empty; use a corpus of at least {workers * batch_size} documents, or turn "
                         f"the quirk off (options: {{unicoil_tail_batches: null}}, or the card profile)")
    return dropped


class DropDocuments(pt.Transformer):
    """Leaves out the given documents (the release's dropped uniCOIL tail batches); everything else passes."""

    def __init__(self, docnos: set[str]):
        self.docnos = docnos

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if not self.docnos or len(inp) == 0:
            return inp
        return inp[~inp["docno"].astype(str).isin(self.docnos)].reset_index(drop=True)


def padded_widths(docs: Iterable[Mapping[str, Any]], tokenizer: Any, max_length: int, workers: int,
                  batch_size: int) -> dict[str, int]:
    """docno -> the width (tokens) of the padded release batch each document was encoded in: min(max_length,
    longest document of its batch). A padding position's hidden state depends on the document and the width only
    (attention is masked to the document's tokens), so these widths reproduce the release's batch-dependent
    SPARTA weights exactly (the quirk sparta_pad_max)."""
    docnos, texts = [], []
    for d in docs:
        docnos.append(str(d["docno"]))
        texts.append(str(d.get("text") or ""))
    lengths: list[int] = []
    for start in range(0, len(texts), 4096):
        part = [t.strip() for t in texts[start:start + 4096]]
        lengths += [len(ids) for ids in tokenizer(part, truncation=True, max_length=max_length)["input_ids"]]
    out: dict[str, int] = {}
    for batch, _ in release_batches(texts, workers, batch_size):
        width = max(lengths[i] for i in batch)
        out.update({docnos[i]: width for i in batch})
    return out


class QueryTokens(pt.Transformer):
    """SPARTA's query side: the query's word-pieces, each with weight 1 (the model scores documents only).
    `unique`: a repeated word-piece counts once (the paper's code builds a dict) or once per occurrence (BEIR
    sums a row per query token); `max_tokens` caps the pieces used (None: all)."""

    def __init__(self, tokenizer, unique: bool = False, max_tokens: int | None = None):
        self.tokenizer, self.unique, self.max_tokens = tokenizer, unique, max_tokens

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        toks = []
        for q in topics["query"]:
            pieces = self.tokenizer.tokenize(q)
            pieces = pieces[: self.max_tokens] if self.max_tokens else pieces
            counts: dict[str, float] = {}
            for p in pieces:
                if p not in SPECIAL:
                    counts[p] = 1.0 if self.unique else counts.get(p, 0.0) + 1.0
            toks.append(counts)
        return topics.assign(query_toks=toks)


def _per_token(tokenizer, ids: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, skip: set[str] = SPECIAL,
               aggregate: str = "max") -> list[dict[str, float]]:
    """{word-piece: weight} per text: padding and `skip` tokens left out, repeats combined by max or sum."""
    out = []
    for row_ids, row_mask, row_w in zip(ids, mask, w):
        d: dict[str, float] = {}
        for tok, m, x in zip(tokenizer.convert_ids_to_tokens(row_ids.tolist()), row_mask.tolist(), row_w.tolist()):
            if m and tok not in skip and x > 0:
                d[tok] = (max(d.get(tok, 0.0), x) if aggregate == "max" else d.get(tok, 0.0) + x)
        out.append(d)
    return out
