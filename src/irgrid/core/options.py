"""What each knob of an entry means: type, range, choices, what None stands for and a one-line description.

`Option` is the metadata; `KNOBS` the vocabulary shared by the families (a dense encoder's `query_max_length` means
the same on every dense entry). An entry declares its own knobs, or a different meaning of a shared name (the
generation `top_k` of docT5query is sampling's, not impact pruning), with `Retriever(option_types={...})`.
`with_options` checks values against it; `irgrid list NAME` prints it, so every knob is documented where it is
used. Metadata validates and documents, never changes a run: it is not part of any cache key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_KIND_NAMES = {int: "int", float: "float", str: "str", bool: "bool", dict: "mapping", tuple: "list", list: "list"}


@dataclass(frozen=True)
class Option:
    """One knob. `kind`: its Python type (None: a structured value that `description` explains); `low`/`high`:
    inclusive bounds (None: open); `choices`: the allowed values; `nullable`: what None means (None: not allowed
    unless the default is None)."""

    description: str
    kind: type | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    nullable: str | None = None

    def type_text(self) -> str:
        """`int >= 1`, `str in {'cls', 'mean'}`, `float in [0, 1]`, with what None means."""
        text = _KIND_NAMES.get(self.kind, getattr(self.kind, "__name__", "value")) if self.kind else "value"
        if self.choices:
            text += " in {" + ", ".join(repr(c) for c in self.choices) + "}"
        elif self.low is not None and self.high is not None:
            text += f" in [{self.low:g}, {self.high:g}]"
        elif self.low is not None:
            text += f" >= {self.low:g}"
        elif self.high is not None:
            text += f" <= {self.high:g}"
        return text + (f", None = {self.nullable}" if self.nullable else "")


def as_option(value: Option | tuple[type, float | None, float | None], name: str) -> Option:
    """An entry's `option_types` value: an Option, or the older (type, min, max) triple (described by `KNOBS`)."""
    if isinstance(value, Option):
        return value
    kind, low, high = value
    shared = KNOBS.get(name)
    return Option(shared.description if shared else "", kind, low, high,
                  nullable=shared.nullable if shared else None)


def declared(entry_types: Mapping[str, Any] | None) -> dict[str, Option]:
    """The knobs an entry is checked and documented against: the shared vocabulary, its own declarations over it."""
    return {**KNOBS, **{name: as_option(v, name) for name, v in dict(entry_types or {}).items()}}


_QUIRK = "the release's quirk (profile `paper`; `irgrid list NAME --profiles` cites the code): "
_LENGTH = "tokens; longer input is truncated"

# The vocabulary shared by irgrid's families, each as the engine reads it (irgrid.dense.spec for the dense fields,
# irgrid.sparse.impact for the impact encoders, irgrid.generation for the expansions).
KNOBS: dict[str, Option] = {
    # every retriever
    "num_results": Option("documents returned per query (a first stage's depth)", int, 1),
    "batch_size": Option("texts per forward pass when encoding (memory vs speed; the vectors do not depend on it "
                         "except where a quirk says so); a dense entry's documents too, whose index is keyed by it",
                         int, 1),
    "seed": Option("random seed of sampling (generation), fixed per batch so that a resumed stage regenerates the "
                   "same text", int, 0),
    # BM25 / QLD
    "k1": Option("BM25 term-frequency saturation", float, 0.0),
    "b": Option("BM25 document-length normalisation (0: none, 1: full)", float, 0.0, 1.0),
    "mu": Option("Dirichlet smoothing of query likelihood", float, 0.0),
    "c": Option("PL2/DFR term-frequency normalisation", float, 0.0),
    # dense encoders (irgrid.dense.spec.EncoderSpec)
    "query_max_length": Option(f"query length in {_LENGTH}", int, 1),
    "doc_max_length": Option(f"document length in {_LENGTH} ('sentence-transformers': the checkpoint's own "
                             "max_seq_length, as SentenceTransformer reads it)", None,
                             nullable="the tokenizer's model_max_length"),
    "max_length": Option(f"input length in {_LENGTH} (queries and documents, or the model's input)", int, 1),
    "dtype": Option("weights and compute on a GPU (fp16-autocast: fp32 weights, fp16 compute under autocast); a "
                    "CPU always computes in fp32", str, choices=("fp32", "fp16", "bf16", "fp16-autocast")),
    "score_dtype": Option("the precision of the document matrix queries are scored against (fp16 halves GPU "
                          "memory; faiss scores in fp32)", str, choices=("fp16", "fp32")),
    "pooling": Option("how token vectors become one vector", str,
                      choices=("cls", "pooler", "mean", "last", "latent-attention", "colbert")),
    "similarity": Option("query-document score: dot product or cosine", str, choices=("dot", "cos")),
    "normalize": Option("L2-normalise the vectors (then dot equals cosine)", bool),
    "query_template": Option("text around each query; {text} is replaced by the query (instructions, prefixes)", str),
    "doc_template": Option("text around each document; {text} is replaced by its fields joined by doc_sep", str),
    "doc_fields": Option("the document fields encoded, in order", tuple),
    "doc_sep": Option("what joins the document fields", str),
    "doc_empty": Option("what stands for an empty or absent field ('': the field is left out)", str),
    "keep_empty_title": Option("an empty-string title is kept and joined with doc_sep (the release's "
                               "f'{title} {text}' gives ' text'); False: left out", bool),
    "none_title": Option(_QUIRK + "the text a title-less corpus's missing title becomes", str,
                         nullable="the quirk is off: such a document is its text"),
    "query_pair": Option("the query template's prefix is the first sequence of a text pair, the query the "
                         "second", bool),
    "pool_prompt": Option("prompt tokens take part in mean pooling (False: excluded, as LLM2Vec, GritLM and "
                          "NV-Embed do)", bool),
    "prompt_mask_specials": Option("with pool_prompt False, the leading special tokens (BOS) are excluded with "
                                   "the instruction", bool),
    "bidirectional": Option("attention of a decoder backbone: True bidirectional, False causal, 'own' the "
                            "checkpoint's own masks (Gemma 3's sliding window)", None),
    "append_eos": Option("last-token pooling reads an end-of-text token appended after truncation", bool),
    "left_pad_last_token": Option(_QUIRK + "pad left in batches of this size and pool at the last attended "
                                  "position (the vectors then depend on the batch)", int, 1,
                                  nullable="right padding, the last real token"),
    "st_default_prompt": Option("apply the prompt the checkpoint's sentence-transformers config names as default "
                                "(what a plain SentenceTransformer.encode() does)", bool),
    "loader": Option("how the checkpoint is read (its layout: Hugging Face auto classes, or a named one such as "
                     "Pyserini's ANCE)", str),
    "adapters": Option("(query, document) task LoRA adapters chosen as the checkpoint's own encode(task=) does "
                       "(Jina v3)", tuple, nullable="no adapter"),
    "ncells": Option("late interaction: PLAID cells probed per query token (a number, or [[documents, cells], ...] "
                     "by collection size)", None),
    "strict": Option("strict loading: which checkpoint weights may be missing or unexpected per role "
                     "({'doc': {'allow_unexpected': [...]}}), everything else must match", dict),
    # learned sparse (irgrid.sparse.impact)
    "scale": Option("impact quantisation: weights are multiplied by this before rounding", float, 0.0),
    "rounding": Option("impact quantisation: round to nearest or truncate", str, choices=("round", "trunc")),
    "top_k": Option("terms kept per document, the largest impacts", int, 1, nullable="no pruning"),
    "skip": Option("regex of word-pieces never indexed", str, nullable="none skipped"),
    "keep_sep": Option("[SEP] is a term like any other (Pyserini skips only [CLS] and padding)", bool),
    "zero_special": Option("special tokens ([CLS], [SEP], ...) never become document terms", bool),
    "keep_unk": Option("[UNK] word-pieces are terms like any other (Pyserini's uniCOIL encoders keep them)", bool),
    "query_quantise": Option("query weights quantised as a library does ('pyserini': round(w / 5 x 256), as "
                             "Pyserini's uniCOIL query encoder returns them)", str, choices=("pyserini",),
                             nullable="float weights"),
    "query_aggregate": Option("how repeats of a query word-piece combine", str, choices=("sum", "max")),
    "query_unique": Option("a repeated query word-piece counts once (else once per occurrence)", bool),
    "query_max_tokens": Option("query word-pieces used", int, 1, nullable="all"),
    "unicoil_tail_batches": Option(_QUIRK + "documents of the last, incomplete batch of each worker are dropped "
                                   "({'workers': 4, 'batch_size': 32})", dict, nullable="off: every document"),
    "sparta_pad_max": Option(_QUIRK + "the max over padding positions of batches of this shape "
                             "({'workers': 4, 'batch_size': 32})", dict, nullable="off: real tokens only"),
    # generation (docT5query, query2doc, HyDE)
    "num_samples": Option("expansions generated per document", int, 1),
    "input_max_length": Option(f"generator input length in {_LENGTH}", int, 1),
    "max_input_length": Option(f"prompt length in {_LENGTH}", int, 1, nullable="the prompt is sent whole"),
    "max_new_tokens": Option("generated tokens at most", int, 1),
    "do_sample": Option("sample (else greedy decoding)", bool),
    "top_p": Option("nucleus sampling mass", float, 0.0, 1.0,
                    nullable="the checkpoint's generation_config decides"),
    "temperature": Option("sampling temperature", float, 0.0,
                          nullable="the checkpoint's generation_config decides"),
    "prompt": Option("the generation prompt; {query} (or {text}) is replaced", str),
    "eos": Option("where generation stops: 'tokenizer', the tokenizer's end-of-sequence token (the release's "
                  "generate(eos_token_id=tokenizer.eos_token_id))", str, choices=("tokenizer",),
                  nullable="the checkpoint's generation_config decides"),
    "system_prompt": Option("a chat model's system message", str, nullable="none"),
    "gen_batch_size": Option("prompts per generation batch", int, 1),
    "encoder": Option("the dense entry the generated text is encoded with", str),
    "encoder_profile": Option("the profile of that dense entry", str, choices=("card", "paper")),
}
