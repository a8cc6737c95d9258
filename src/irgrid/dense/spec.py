"""Bi-encoder specs as data: checkpoints (query and document side), pooling, normalisation, similarity,
maximum lengths, prompt templates, dtype and document fields, and the registry of every dense entry's spec.

Light: no torch (entries and `irgrid list` import it). The rendered strings are exactly what the tokenizer gets;
`tests/unit/test_prompts.py` pins them per entry."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irgrid.core.modelref import ModelRef
from irgrid.core.retrievers import EntryError
from irgrid.util.hashing import config_hash
from irgrid.util.registry import Registry

if TYPE_CHECKING:
    from irgrid.core.retrievers import Retriever


POOLINGS = ("cls", "pooler", "mean", "last", "latent-attention", "colbert")


SIMILARITIES = ("dot", "cos")


# fp16-autocast: fp32 weights, fp16 compute under torch.autocast (the paper code's generic path); CPU is always fp32
DTYPES = ("fp32", "fp16", "bf16", "fp16-autocast")


LOADERS = ("auto", "dpr", "t5-encoder", "colbert", "nv-embed", "ance")


DOC_FIELDS = ("title", "text")


FLAT = (("title", "text"), " ")  # (doc_fields, doc_sep) of the flat documents `Dataset.docs()` yields


# spec fields a profile (irgrid.core.profiles) or an experiment's `options:` may set on a dense entry
SPEC_OPTIONS = ("query_template", "doc_template", "query_max_length", "doc_max_length", "doc_fields", "doc_sep",
                "doc_empty", "none_title", "keep_empty_title", "st_default_prompt",
                "query_pair", "query_length_rule", "pooling", "normalize", "similarity", "pool_prompt", "append_eos",
                "dtype", "loader", "adapters", "truncate_dim", "prompt_mask_specials", "left_pad_last_token",
                "bidirectional")


_TUPLE_FIELDS = ("doc_fields", "query_length_rule", "adapters", "allow_missing", "allow_unexpected")


@dataclass(frozen=True)
class EncoderSpec:
    """Everything that determines a bi-encoder's vectors, as data (see module docstring).

    The defaults of an entry are the model card's (or MTEB's) values; `profiles` holds the named, sourced
    settings (irgrid.core.profiles): `card` documents where the defaults come from, `paper` what the paper's code ran
    where it differs. The dense entry applies a profile by replacing these fields (`SPEC_OPTIONS`)."""

    name: str
    query_model: ModelRef
    pooling: str
    normalize: bool
    similarity: str
    query_max_length: int
    doc_max_length: int
    doc_model: ModelRef | None = None  # None: one checkpoint encodes both sides
    query_template: str = "{text}"  # `{text}` is replaced by the query
    doc_template: str = "{text}"  # `{text}` is replaced by the document (its `doc_fields` joined by `doc_sep`)
    doc_fields: tuple[str, ...] = ("title", "text")  # which document fields, in order (empty ones are skipped)
    doc_sep: str = " "
    doc_empty: str = ""  # stands for an empty or absent field (EmbeddingGemma's 'none'); "": such fields are skipped
    # the quirk `none_title` (irgrid.core.profiles.QUIRKS): the text that stands for the title of a document whose
    # corpus has no titles (the record has no 'title' key); None: no title (doc_empty, if set, applies instead)
    none_title: str | None = None
    # an empty-string title is kept as '' and joined with doc_sep (the release's f'{title} {text}' gives ' text',
    # DPR's ' [SEP] text', EmbeddingGemma's 'title:  | text: ...'); False: skipped (or doc_empty)
    keep_empty_title: bool = False
    # the checkpoint's sentence-transformers default prompt (config_sentence_transformers.json default_prompt_name)
    # goes before both sides' templates, as SentenceTransformer.encode() without a prompt applies it
    st_default_prompt: bool = False
    query_pair: bool = False  # the query template's prefix is the first sequence of a text pair, the query the second
    # (factor, cap): each query's length is min(cap, max(query_max_length, int(factor * words))) (RAGatouille)
    query_length_rule: tuple[float, int] | None = None
    pool_prompt: bool = True  # False: prompt tokens are excluded from mean pooling (LLM2Vec, GritLM, NV-Embed)
    # with pool_prompt=False, how many leading positions are excluded: True, the leading special tokens (BOS) plus
    # the prompt's tokens; False, len(tokenizer.tokenize(prompt)) positions from the start, BOS included, so the
    # prompt's last token is pooled (NV-Embed's remote `encode`: instruction_lens = len(tokenize(instruction)))
    prompt_mask_specials: bool = True
    # decoder run without its causal mask (LLM2Vec, NV-Embed, GritLM embedding mode); "own": the architecture's own
    # bidirectional masks (Gemma 3's sliding windows kept: irgrid.dense.checkpoints.make_bidirectional)
    bidirectional: bool | str = False
    append_eos: bool = False  # last-token pooling on an EOS appended after truncation (unless already there)
    # the quirk `left_pad_last_token` (irgrid.core.profiles.QUIRKS): the release's batch size; texts are encoded in
    # input order in batches of exactly that many, padded on the left, and pooled at position (attended tokens - 1)
    left_pad_last_token: int | None = None
    dtype: str = "bf16"  # on GPU; CPU encodes in fp32
    trust_remote_code: bool = False
    loader: str = "auto"
    adapters: tuple[str, str] | None = None  # (query, document) task adapters (Jina v3 LoRA)
    truncate_dim: int | None = None  # Matryoshka truncation (before normalisation)
    colbert: Mapping[str, Any] | None = None  # late interaction: query augmentation, markers, skiplist
    # checkpoint parameters this entry knowingly leaves unloaded / unused (globs); anything else is an error
    allow_missing: tuple[str, ...] = ()
    allow_unexpected: tuple[str, ...] = ()
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> {field: Setting}
    citation: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise EntryError(f"{self.name}: pooling {self.pooling!r} not one of {POOLINGS}")
        if self.similarity not in SIMILARITIES:
            raise EntryError(f"{self.name}: similarity {self.similarity!r} not one of {SIMILARITIES}")
        if self.dtype not in DTYPES:
            raise EntryError(f"{self.name}: dtype {self.dtype!r} not one of {DTYPES}")
        if self.loader not in LOADERS:
            raise EntryError(f"{self.name}: loader {self.loader!r} not one of {LOADERS}")
        for t in (self.query_template, self.doc_template):
            if not isinstance(t, str) or t.count("{text}") != 1:
                raise EntryError(f"{self.name}: template {t!r} must contain '{{text}}' exactly once")
        bad = [f for f in self.doc_fields if f not in DOC_FIELDS]
        if bad or not self.doc_fields:
            raise EntryError(f"{self.name}: doc_fields {list(self.doc_fields)} must name some of {DOC_FIELDS}")
        if self.query_length_rule is not None and len(self.query_length_rule) != 2:
            raise EntryError(f"{self.name}: query_length_rule is (factor, cap), got {self.query_length_rule!r}")
        if self.bidirectional not in (False, True, "own"):
            raise EntryError(f"{self.name}: bidirectional is False, True or 'own', got {self.bidirectional!r}")
        lp = self.left_pad_last_token
        if lp is not None and (isinstance(lp, bool) or not isinstance(lp, int) or lp < 1 or self.pooling != "last"):
            raise EntryError(f"{self.name}: left_pad_last_token is the release's batch size (a positive whole "
                             f"number) with pooling 'last'; got {lp!r} with pooling {self.pooling!r}")

    @property
    def document_model(self) -> ModelRef:
        return self.doc_model or self.query_model

    def model(self, side: str) -> ModelRef:
        return self.query_model if side == "q" else self.document_model

    def template(self, side: str) -> str:
        return self.query_template if side == "q" else self.doc_template

    def max_length(self, side: str) -> int:
        return self.query_max_length if side == "q" else self.doc_max_length

    @property
    def flat_documents(self) -> bool:
        """Whether the documents are the flat join every dataset yields (title + text, space-separated)."""
        return ((tuple(self.doc_fields), self.doc_sep) == FLAT and not self.doc_empty and self.none_title is None
                and not self.keep_empty_title)

    def document(self, record: Mapping[str, Any]) -> str:
        """A document's text from its fields ({'title', 'text'}; flat records hold only 'text'). A record of a
        title-less corpus has no 'title' key (irgrid.data.doc_fields); an empty title is ''."""
        parts = []
        for f in self.doc_fields:
            value = record.get(f)
            if f == "title" and "title" not in record and self.none_title is not None:
                parts.append(self.none_title)
            elif f == "title" and value == "" and self.keep_empty_title:
                parts.append("")
            elif value:
                parts.append(str(value))
            elif self.doc_empty:
                parts.append(self.doc_empty)
        return self.doc_sep.join(parts)

    def render(self, text: str, side: str) -> str | tuple[str, str]:
        """The exact input the tokenizer gets for a query ('q') or a document text ('d'): a string, or a
        (first, second) text pair when `query_pair` is set."""
        prefix, suffix = self.template(side).split("{text}")
        if side == "q" and self.query_pair:
            return prefix, text + suffix
        if self.colbert is not None:  # ColBERT prepends ". " and overwrites that token with its Q/D marker
            prefix = ". " + prefix
        return prefix + text + suffix

    def query_length(self, text: str) -> int:
        """The token length of one query: fixed, or RAGatouille's rule on the words of the templated query."""
        if self.query_length_rule is None:
            return self.query_max_length
        factor, cap = self.query_length_rule
        words = len(self.template("q").replace("{text}", text).split(" "))
        return min(int(cap), max(self.query_max_length, int(words * float(factor))))

    def with_settings(self, **settings: Any) -> EncoderSpec:
        """This spec with some `SPEC_OPTIONS` replaced (values from YAML: lists become tuples)."""
        unknown = sorted(set(settings) - set(SPEC_OPTIONS))
        if unknown:
            raise EntryError(f"{self.name}: {unknown} cannot be set; settable: {', '.join(SPEC_OPTIONS)}")
        fixed = {k: tuple(v) if k in _TUPLE_FIELDS and isinstance(v, list) else v for k, v in settings.items()}
        return dataclasses.replace(self, **fixed)

    def side_config(self, side: str, with_model: bool = True) -> dict[str, Any]:
        """What determines one side's vectors: its hash keys indexes (document side) and runs."""
        out = {k: v for k, v in dataclasses.asdict(self).items()
               if k not in ("name", "citation", "notes", "query_model", "doc_model", "query_template",
                            "doc_template", "query_max_length", "doc_max_length", "profiles", "allow_missing",
                            "allow_unexpected", "doc_fields", "doc_sep", "doc_empty", "none_title",
                            "keep_empty_title", "st_default_prompt", "query_pair",
                            "query_length_rule", "prompt_mask_specials", "left_pad_last_token")}
        if with_model:
            out["model"] = self.model(side).config()
        out["template"] = self.template(side)
        out["max_length"] = self.max_length(side)
        out["adapters"] = list(self.adapters) if self.adapters else None
        out["colbert"] = dict(self.colbert) if self.colbert else None
        # settings added later enter the key only when not at their default, so older caches stay valid
        if side == "d" and not self.flat_documents:
            out["doc_fields"], out["doc_sep"] = list(self.doc_fields), self.doc_sep
            if self.doc_empty:
                out["doc_empty"] = self.doc_empty
            if self.none_title is not None:
                out["none_title"] = self.none_title
            if self.keep_empty_title:
                out["keep_empty_title"] = True
        if self.st_default_prompt:
            out["st_default_prompt"] = True
        if self.left_pad_last_token is not None:
            out["left_pad_last_token"] = self.left_pad_last_token
        if side == "q" and self.query_pair:
            out["query_pair"] = True
        if side == "q" and self.query_length_rule is not None:
            out["query_length_rule"] = list(self.query_length_rule)
        if not self.prompt_mask_specials and not self.pool_prompt and self.template(side).split("{text}")[0]:
            out["prompt_mask_specials"] = False
        return out

    def config(self) -> dict[str, Any]:
        return {"q": self.side_config("q"), "d": self.side_config("d")}

    def wiring_options(self) -> dict[str, Any]:
        """This spec as an entry's cache key names it (`Retriever.keyed_options`): under the option names it had
        when it sat in the entry's options (its name, and its query side by value), so keys are unchanged."""
        return {"encoder": self.name, "query_config": SideSpec(self, "q")}


@dataclass(frozen=True, eq=False)
class SideSpec:
    """One side of a spec carried by value in index params / an entry's cache key: engines are built from `spec`,
    and the cache key is that side's configuration only, so profiles that agree on a side share its caches."""

    spec: EncoderSpec
    side: str

    def config(self) -> Any:
        cfg = self.spec.side_config(self.side, with_model=False)
        return cfg if self.side == "d" else config_hash(cfg)  # the query side's key was a hash: keep it

    def __str__(self) -> str:
        return f"{self.spec.name}:{self.side}"

    __repr__ = __str__


def _load_entries() -> None:
    from irgrid.core import entries

    entries.load()


ENCODERS: Registry[EncoderSpec] = Registry("encoder", populate=_load_entries)


def register_encoder(spec: EncoderSpec) -> EncoderSpec:
    return ENCODERS.register(spec.name, spec)


# -- the spec an entry (as profiled / optioned) encodes with: its typed wiring, read by its query side, its
# index and its scorer (irgrid.dense.entry, irgrid.dense.scorers) --------------------------------------------


def side_spec(params: Mapping[str, Any], side: str = "d") -> EncoderSpec:
    """The spec carried by an index's params (the document side, the only one params carry)."""
    if side != "d":
        raise EntryError(f"index params carry the document side's spec only, not {side!r}: use spec_of(entry)")
    value = params["doc"]
    if not isinstance(value, SideSpec):
        raise EntryError(f"dense entry {params.get('encoder')!r}: expected the spec by value, got {value!r}")
    return value.spec


def require_spec(value: Any, what: str) -> EncoderSpec:
    """`value` as an encoder spec, or an error naming `what` lacks it."""
    if not isinstance(value, EncoderSpec):
        raise EntryError(f"{what} needs its entry's encoder spec (Retriever.encoder), got {value!r}")
    return value


def spec_of(entry: Retriever, side: str = "q") -> EncoderSpec:
    """The spec a dense entry (as profiled / optioned) encodes with."""
    if side == "q":
        return require_spec(entry.encoder, f"entry {entry.name!r}")
    return side_spec(entry.index.params)  # type: ignore[union-attr]
