"""SPLADE encoding, max-first.

pyterrier-splade computes log(1 + ReLU(logits)) over the whole [batch, tokens, vocabulary] tensor and then
max-pools. log1p∘ReLU is monotone, so max-pooling the raw logits first (padding masked to -inf) gives the same
vector while touching the 30,522-wide tensor once instead of four times; batches are also formed from
length-sorted texts so padding is minimal. Same outputs as `Splade.encode` (to float rounding), ~3x faster on
CPU for small models, whose cost is the vocabulary head. No library offers this, hence our own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import more_itertools
import pandas as pd
import pyterrier as pt
import torch

from irgrid.core.retrievers import EntryError
from irgrid.util.console import advance
from irgrid.util.errors import Error


class _Captured(Error):  # noqa: N818  (control flow, not an error: carries the vocabulary head's input; caught at once)
    def __init__(self, hidden: torch.Tensor):
        super().__init__()
        self.hidden = hidden


def _head_input(model, enc) -> torch.Tensor | None:
    """The hidden states the model's vocabulary projection (`get_output_embeddings()`, a Linear) receives, the
    model run up to it and not through it (a pre-hook stops it there); None where there is no such Linear."""
    decoder = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(decoder, torch.nn.Linear):
        return None

    def stop(_module, args):
        raise _Captured(args[0])

    handle = decoder.register_forward_pre_hook(stop)
    try:
        model(**enc)
    except _Captured as captured:
        return captured.hidden
    finally:
        handle.remove()
    raise EntryError(f"{type(model).__name__} never called its output embeddings (get_output_embeddings()); the "
                     f"SPLADE head cannot be computed on attended positions only")


# MKL's sgemm takes another kernel for a handful of rows (on 2 threads: fewer than 12), whose float rounding
# differs; the head is never given fewer rows than this, so every row is computed as in the [batch x tokens]
# product (tests/integration/test_splade_head_identity.py)
MIN_HEAD_ROWS = 16
# rows of attended positions per vocabulary-head product: whole texts, at least this many (short texts share one)
SLAB_ROWS = 256


def _full_logits_max(model, enc, mask: torch.Tensor) -> torch.Tensor:
    logits = model(**enc).logits
    logits.masked_fill_(~mask.unsqueeze(-1), float("-inf"))
    return logits.amax(dim=1)


def _pooled_batch(model, enc, buffer: list[torch.Tensor], per_text_head: bool = True) -> torch.Tensor:
    """[batch, vocab] max over each text's attended positions of its MLM logits (bias included).

    On CPU the vocabulary head is applied to the attended positions only, packed text after text into slabs of
    whole texts (>= SLAB_ROWS rows, at least MIN_HEAD_ROWS) in one reused [rows, vocab] buffer, each text's rows
    max-pooled from it, and the bias added once after the max (rounding is monotone, so max(x) + b == max(x + b)
    exactly): no [batch, tokens, vocab] tensor (2 GB at batch 64, length 256) is allocated, page-faulted,
    masked and scanned. The result is bit-identical to the full logits' (tested). Other devices, batches of
    fewer than MIN_HEAD_ROWS positions and heads that are not a plain Linear take the full logits."""
    mask = enc["attention_mask"].bool()
    counts = mask.sum(dim=1).tolist()
    if not per_text_head or mask.device.type != "cpu" or sum(counts) < MIN_HEAD_ROWS:
        return _full_logits_max(model, enc, mask)
    hidden = _head_input(model, enc)
    if hidden is None:
        return _full_logits_max(model, enc, mask)
    decoder = model.get_output_embeddings()
    weight_t = decoder.weight.t()
    packed = hidden[mask]  # [positions, hidden], text after text
    offsets = [0]
    for n in counts:
        offsets.append(offsets[-1] + n)
    slabs, first = [], 0  # [first text, last text + 1)
    for t in range(len(counts)):
        if offsets[t + 1] - offsets[first] >= SLAB_ROWS:
            slabs.append((first, t + 1))
            first = t + 1
    if first < len(counts):
        if slabs and offsets[-1] - offsets[first] < MIN_HEAD_ROWS:
            slabs[-1] = (slabs[-1][0], len(counts))
        else:
            slabs.append((first, len(counts)))
    need = max(offsets[end] - offsets[start] for start, end in slabs)
    if not buffer or buffer[0].shape[0] < need or buffer[0].dtype != hidden.dtype:
        buffer[:] = [torch.empty(need, weight_t.shape[1], dtype=hidden.dtype)]
    out = torch.empty(len(counts), weight_t.shape[1], dtype=hidden.dtype)
    for start, end in slabs:
        base = offsets[start]
        logits = torch.mm(packed[base: offsets[end]], weight_t, out=buffer[0][: offsets[end] - base])
        for t in range(start, end):
            torch.amax(logits[offsets[t] - base: offsets[t + 1] - base], dim=0, out=out[t])
    if decoder.bias is not None:
        out.add_(decoder.bias)
    return out


def iter_max_first(splade, texts: list[str], batch_size: int, scale: float,
                   per_text_head: bool = True) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(positions in `texts`, [len(positions), vocab] SPLADE max-pooled weights × `scale`) per batch; batches
    are formed from length-sorted texts so padding is minimal. `per_text_head=False`: the full logits, as
    before issue 41 (benchmarks/encode.py compares the two)."""
    model, tokenizer = splade.model, splade.tokenizer
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    buffer: list[torch.Tensor] = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = order[start: start + batch_size]
            enc = tokenizer([texts[i] for i in idx], add_special_tokens=True, padding="longest", truncation=True,
                            max_length=splade.max_length, return_tensors="pt").to(splade.device)
            pooled = _pooled_batch(model, enc, buffer, per_text_head)
            yield idx, (torch.log1p(torch.relu(pooled)) * scale).float().cpu()
            advance(len(idx))  # an index build's bar moves per batch (nothing at query time)


def encode_max_first(splade, texts: list[str], batch_size: int, scale: float,
                     per_text_head: bool = True) -> torch.Tensor:
    """[len(texts), vocab] SPLADE max-pooled weights, multiplied by `scale`."""
    out = torch.zeros(len(texts), splade.model.config.vocab_size)
    for idx, pooled in iter_max_first(splade, texts, batch_size, scale, per_text_head):
        out[idx] = pooled
    return out


def to_toks(reps: torch.Tensor, reverse_vocab: dict[int, str], integer: bool, rounding: str = "trunc",
            top_k: int | None = None) -> list[dict[str, float]]:
    """Sparse dicts as pyterrier-splade produces them. Documents (`integer`): impacts made integers by `rounding`
    ('trunc' as pyterrier-splade, 'round' as the paper's code), zeros dropped, then the `top_k` of highest
    weight kept (ranked by the unquantised weight; ties by vocabulary id). Terms in vocabulary-id order."""
    if rounding not in ("trunc", "round"):
        raise EntryError(f"rounding must be 'round' or 'trunc', got {rounding!r}")
    rows, cols = torch.nonzero(reps, as_tuple=True)  # row-major: each row's columns ascending
    weights = reps[rows, cols]
    if integer:
        ints = weights.trunc() if rounding == "trunc" else torch.round(weights)
        keep = ints > 0
        values = ints[keep]
    else:
        keep = weights > 0
        values = weights[keep]
    rows, cols, weights = rows[keep], cols[keep], weights[keep]
    counts = torch.bincount(rows, minlength=reps.shape[0]).tolist()
    col_list, value_list = cols.tolist(), values.tolist()
    cast = int if integer else float
    result, start = [], 0
    for n in counts:
        cs, vs = col_list[start: start + n], value_list[start: start + n]
        if integer and top_k and n > top_k:
            w = weights[start: start + n].tolist()
            order = sorted(range(n), key=lambda i: (-w[i], cs[i]))[:top_k]
            order.sort()
            cs, vs = [cs[i] for i in order], [vs[i] for i in order]
        result.append({reverse_vocab[c]: cast(v) for c, v in zip(cs, vs)})
        start += n
    return result


class MaxFirstSpladeEncoder(pt.Transformer):
    """Adds `toks` (documents) or `query_toks` (queries): a drop-in for `Splade.doc_encoder/query_encoder`."""

    def __init__(self, splade, rep: str = "d", batch_size: int = 64, scale: float = 100.0, rounding: str = "trunc",
                 top_k: int | None = None):
        self.splade, self.rep, self.batch_size, self.scale = splade, rep, batch_size, scale
        self.rounding, self.top_k = rounding, top_k
        self.in_field, self.out_field = ("text", "toks") if rep == "d" else ("query", "query_toks")
        self._reverse = {v: k for k, v in splade.tokenizer.get_vocab().items()}

    def __repr__(self) -> str:
        return (f"MaxFirstSpladeEncoder({self.splade.model.name_or_path!r}, rep={self.rep!r}, scale={self.scale}, "
                f"rounding={self.rounding!r}, top_k={self.top_k})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MaxFirstSpladeEncoder) and other.splade is self.splade and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    def transform_iter(self, inp: Iterable[dict]) -> Iterator[dict]:
        # chunks bound memory on large corpora; within a chunk texts are length-sorted into batches
        for chunk in more_itertools.chunked(inp, 64 * self.batch_size):
            toks: list[dict | None] = [None] * len(chunk)
            # sparsified per batch: no [chunk, vocab] dense tensor
            for idx, pooled in iter_max_first(self.splade, [r[self.in_field] for r in chunk], self.batch_size,
                                              self.scale):
                for i, t in zip(idx, to_toks(pooled, self._reverse, integer=self.rep == "d",
                                             rounding=self.rounding, top_k=self.top_k)):
                    toks[i] = t
            yield from ({**r, self.out_field: t} for r, t in zip(chunk, toks))

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        records = list(self.transform_iter(inp.to_dict("records")))
        if not records:
            return inp.assign(**{self.out_field: pd.Series(dtype=object)})
        return pd.DataFrame(records)


# an entry's `doc_max_length` naming this rule: the length sentence-transformers gives the checkpoint by default
ST_DEFAULT_LENGTH = "sentence-transformers"


def st_max_seq_length(folder: str | Path) -> int:
    """The maximum length sentence-transformers encodes a checkpoint with when the caller sets none (the release's
    `SparseEncoder(name).encode_document`): the `max_seq_length` of its sentence-transformers config where one
    says so (`sentence_bert_config.json` of its Transformer module), else min(max_position_embeddings, the
    tokenizer's model_max_length): 512 for BERT-base checkpoints."""
    import json

    from transformers import AutoConfig, AutoTokenizer

    folder = Path(folder)
    if not folder.is_dir():
        raise EntryError(f"doc_max_length {ST_DEFAULT_LENGTH!r} reads the checkpoint's own files: {folder} is not a "
                         f"local folder; stage the checkpoint (IRGRID_MODELS / models:)")
    modules = folder / "modules.json"
    subdirs = [""]
    if modules.exists():
        subdirs = [m.get("path", "") for m in json.loads(modules.read_text()) if "Transformer" in m.get("type", "")]
    for sub in subdirs:
        cfg = folder / sub / "sentence_bert_config.json"
        if cfg.exists():
            value = json.loads(cfg.read_text()).get("max_seq_length")
            if value:
                return int(value)
    config = AutoConfig.from_pretrained(str(folder))
    limit = int(AutoTokenizer.from_pretrained(str(folder)).model_max_length)
    positions = getattr(config, "max_position_embeddings", None)
    return min(limit, int(positions)) if positions and positions > 0 else limit


def doc_max_length(rule: int | str | None, max_length: int, location: str) -> int:
    """The document side's length: `max_length` (None), a number, or the sentence-transformers default."""
    if rule is None:
        return int(max_length)
    if rule == ST_DEFAULT_LENGTH:
        return st_max_seq_length(location)
    if isinstance(rule, int) and not isinstance(rule, bool) and rule > 0:
        return rule
    raise EntryError(f"doc_max_length must be a whole number > 0, {ST_DEFAULT_LENGTH!r} or null (= max_length), "
                     f"got {rule!r}")


__all__ = ["encode_max_first", "iter_max_first", "to_toks", "MaxFirstSpladeEncoder", "st_max_seq_length", "doc_max_length"]


class PruneToks(pt.Transformer):
    """Keep a document's `top_k` highest impacts (the paper prunes to 512); None keeps all."""

    def __init__(self, top_k: int | None):
        self.top_k = top_k

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if not self.top_k or len(inp) == 0:
            return inp
        pruned = [dict(sorted(t.items(), key=lambda x: (-x[1], x[0]))[: self.top_k]) for t in inp["toks"]]
        return inp.assign(toks=pruned)
