"""Declarative bi-encoder specs and the one encoding engine every dense entry uses.

An `EncoderSpec` is data: checkpoints (query and document side), pooling, normalisation, similarity, maximum
lengths, prompt templates, dtype, `trust_remote_code`, citation and notes. `Engine` is behaviour, written once:

- texts are rendered through the spec's templates (`{text}` is replaced; the rendered strings are exactly what
  the tokenizer gets, and `tests/test_prompts.py` pins them per entry);
- a chunk of texts is tokenized ahead by a worker thread (the Rust tokenizer releases the GIL) while the model
  encodes the previous chunk;
- within a chunk, texts are sorted by length and batched by a token budget, so batches carry little padding;
- on a GPU: bf16/fp16 as declared, pinned host memory with asynchronous copies, optional `torch.compile`
  (IRGRID_COMPILE=1), one model replica per visible GPU; out-of-memory halves the batch and retries instead of
  failing, and the batch size and dtype actually used are recorded;
- document encodings stream into the index chunk by chunk (no whole-corpus lists in memory).

Models too large for one GPU are never quantised: they are sharded over the visible GPUs (`device_map="auto"`),
or loading fails with a clear error when no GPU can hold them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import logging
import os
import string
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from irgrid._util import config_hash
from irgrid.loading import check_loading_info, from_pretrained_strict
from irgrid.registry import Registry
from irgrid.retrievers import ModelRef

if TYPE_CHECKING:
    import torch

    from irgrid.models import Resolved

log = logging.getLogger("irgrid")

POOLINGS = ("cls", "pooler", "mean", "last", "latent-attention", "colbert")
SIMILARITIES = ("dot", "cos")
# fp16-autocast: fp32 weights, fp16 compute under torch.autocast (the paper code's generic path); CPU is always fp32
DTYPES = ("fp32", "fp16", "bf16", "fp16-autocast")
LOADERS = ("auto", "dpr", "t5-encoder", "colbert", "nv-embed", "ance")
DOC_FIELDS = ("title", "text")
FLAT = (("title", "text"), " ")  # (doc_fields, doc_sep) of the flat documents `Dataset.docs()` yields
# spec fields a profile (irgrid.profiles) or an experiment's `options:` may set on a dense entry
SPEC_OPTIONS = ("query_template", "doc_template", "query_max_length", "doc_max_length", "doc_fields", "doc_sep",
                "doc_empty",
                "query_pair", "query_length_rule", "pooling", "normalize", "similarity", "pool_prompt", "append_eos",
                "dtype", "loader", "adapters", "truncate_dim")
_TUPLE_FIELDS = ("doc_fields", "query_length_rule", "adapters", "allow_missing", "allow_unexpected")


@dataclass(frozen=True)
class EncoderSpec:
    """Everything that determines a bi-encoder's vectors, as data (see module docstring).

    The defaults of an entry are the model card's (or MTEB's) values; `profiles` holds the named, sourced
    settings (irgrid.profiles): `card` documents where the defaults come from, `paper` what the paper's code ran
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
    query_pair: bool = False  # the query template's prefix is the first sequence of a text pair, the query the second
    # (factor, cap): each query's length is min(cap, max(query_max_length, int(factor * words))) (RAGatouille)
    query_length_rule: tuple[float, int] | None = None
    pool_prompt: bool = True  # False: prompt tokens are excluded from mean pooling (LLM2Vec, GritLM, NV-Embed)
    bidirectional: bool = False  # decoder run without its causal mask (LLM2Vec, NV-Embed, GritLM embedding mode)
    append_eos: bool = False  # last-token pooling on an EOS appended after truncation (unless already there)
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
            raise ValueError(f"{self.name}: pooling {self.pooling!r} not one of {POOLINGS}")
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"{self.name}: similarity {self.similarity!r} not one of {SIMILARITIES}")
        if self.dtype not in DTYPES:
            raise ValueError(f"{self.name}: dtype {self.dtype!r} not one of {DTYPES}")
        if self.loader not in LOADERS:
            raise ValueError(f"{self.name}: loader {self.loader!r} not one of {LOADERS}")
        for t in (self.query_template, self.doc_template):
            if not isinstance(t, str) or t.count("{text}") != 1:
                raise ValueError(f"{self.name}: template {t!r} must contain '{{text}}' exactly once")
        bad = [f for f in self.doc_fields if f not in DOC_FIELDS]
        if bad or not self.doc_fields:
            raise ValueError(f"{self.name}: doc_fields {list(self.doc_fields)} must name some of {DOC_FIELDS}")
        if self.query_length_rule is not None and len(self.query_length_rule) != 2:
            raise ValueError(f"{self.name}: query_length_rule is (factor, cap), got {self.query_length_rule!r}")

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
        return (tuple(self.doc_fields), self.doc_sep) == FLAT and not self.doc_empty

    def document(self, record: Mapping[str, Any]) -> str:
        """A document's text from its fields ({'title', 'text'}; flat records hold only 'text')."""
        if self.doc_empty:
            return self.doc_sep.join(str(record.get(f) or self.doc_empty) for f in self.doc_fields)
        return self.doc_sep.join(str(record[f]) for f in self.doc_fields if record.get(f))

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
            raise ValueError(f"{self.name}: {unknown} cannot be set; settable: {', '.join(SPEC_OPTIONS)}")
        fixed = {k: tuple(v) if k in _TUPLE_FIELDS and isinstance(v, list) else v for k, v in settings.items()}
        return dataclasses.replace(self, **fixed)

    def side_config(self, side: str, with_model: bool = True) -> dict[str, Any]:
        """What determines one side's vectors: its hash keys indexes (document side) and runs."""
        out = {k: v for k, v in dataclasses.asdict(self).items()
               if k not in ("name", "citation", "notes", "query_model", "doc_model", "query_template",
                            "doc_template", "query_max_length", "doc_max_length", "profiles", "allow_missing",
                            "allow_unexpected", "doc_fields", "doc_sep", "doc_empty", "query_pair",
                            "query_length_rule")}
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
        if side == "q" and self.query_pair:
            out["query_pair"] = True
        if side == "q" and self.query_length_rule is not None:
            out["query_length_rule"] = list(self.query_length_rule)
        return out

    def config(self) -> dict[str, Any]:
        return {"q": self.side_config("q"), "d": self.side_config("d")}


@dataclass(frozen=True, eq=False)
class SideSpec:
    """One side of a spec carried by value in index params / query options: engines are built from `spec`,
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
    import irgrid.pipelines  # noqa: F401


ENCODERS: Registry[EncoderSpec] = Registry("encoder", loader=_load_entries)


def register_encoder(spec: EncoderSpec) -> EncoderSpec:
    return ENCODERS.register(spec.name, spec)


# -------------------------------------------------------------------------------------------------------------
# heads that some checkpoints carry beyond the transformer


def _define_latent_attention() -> type:
    import torch
    from torch import nn

    class _PreNorm(nn.Module):
        def __init__(self, dim: int, fn: nn.Module, context_dim: int | None = None):
            super().__init__()
            self.fn = fn
            self.norm = nn.LayerNorm(dim)
            self.norm_context = nn.LayerNorm(context_dim) if context_dim is not None else None

        def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
            x = self.norm(x)
            if self.norm_context is not None:
                return self.fn(x, context=self.norm_context(context))
            return self.fn(x)

    class _GEGLU(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x, gates = x.chunk(2, dim=-1)
            return x * nn.functional.gelu(gates)

    class _FeedForward(nn.Module):
        def __init__(self, dim: int, mult: int = 4):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(dim, dim * mult * 2), _GEGLU(), nn.Linear(dim * mult, dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

    class _CrossAttention(nn.Module):
        def __init__(self, query_dim: int, context_dim: int, heads: int, dim_head: int):
            super().__init__()
            inner = heads * dim_head
            self.heads = heads
            self.to_q = nn.Linear(query_dim, inner, bias=False)
            self.to_kv = nn.Linear(context_dim, inner * 2, bias=False)
            self.to_out = nn.Linear(inner, query_dim, bias=False)

        def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
            b, n, _ = x.shape
            q = self.to_q(x)
            k, v = self.to_kv(context).chunk(2, dim=-1)

            def split(t: torch.Tensor) -> torch.Tensor:
                return t.reshape(t.shape[0], t.shape[1], self.heads, -1).transpose(1, 2)

            out = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v))
            return self.to_out(out.transpose(1, 2).reshape(b, n, -1))

    class LatentAttentionModule(nn.Module):
        """NV-Embed's latent-attention pooling (Lee et al., 2025): token states attend to trainable latents,
        a GEGLU feed-forward follows, both residual; the engine then mean-pools over the document tokens.
        Attribute names follow the checkpoint's `latent_attention_model.*` keys so its weights load as they are."""

        def __init__(self, hidden: int, num_latents: int, heads: int, dim_head: int):
            super().__init__()
            self.cross_attend_blocks = nn.ModuleList([
                _PreNorm(hidden, _CrossAttention(hidden, hidden, heads, dim_head), context_dim=hidden),
                _PreNorm(hidden, _FeedForward(hidden)),
            ])
            self.latents = nn.Parameter(torch.randn(num_latents, hidden))

        def forward(self, hiddens: torch.Tensor) -> torch.Tensor:
            attn, ff = self.cross_attend_blocks
            latents = self.latents.unsqueeze(0).expand(hiddens.shape[0], -1, -1).to(hiddens.dtype)
            hiddens = attn(hiddens, context=latents) + hiddens
            return ff(hiddens) + hiddens

    return LatentAttentionModule


def __getattr__(name: str) -> Any:  # LatentAttention is defined lazily: `irgrid list` must not import torch
    if name == "LatentAttention":
        cls = _define_latent_attention()
        globals()["LatentAttention"] = cls
        return cls
    raise AttributeError(name)



def _read_state(folder: Path, prefix: str) -> dict[str, Any]:
    """Tensors whose names start with `prefix` from a checkpoint folder (safetensors, sharded or not, or .bin)."""
    import torch

    out: dict[str, Any] = {}
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors import safe_open

        for f in files:
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    if k.startswith(prefix):
                        out[k[len(prefix):]] = fh.get_tensor(k)
    else:
        for f in sorted(folder.glob("pytorch_model*.bin")):
            state = torch.load(str(f), map_location="cpu", weights_only=True)
            out.update({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return out


def _st_dense_layers(folder: Path) -> list[Any]:
    """The sentence-transformers Dense modules after pooling (GTR, EmbeddingGemma, INSTRUCTOR), in order."""
    import torch

    modules_file = folder / "modules.json"
    if not modules_file.exists():
        return []
    layers = []
    for m in json.loads(modules_file.read_text()):
        if not m["type"].endswith("models.Dense"):
            continue
        sub = folder / m["path"]
        cfg = json.loads((sub / "config.json").read_text())
        linear = torch.nn.Linear(cfg["in_features"], cfg["out_features"], bias=cfg.get("bias", True))
        state = _read_state(sub, "linear.")
        linear.load_state_dict(state)
        act = cfg.get("activation_function", "torch.nn.modules.linear.Identity")
        if not act.endswith("Identity"):
            mod, _, cls = act.rpartition(".")
            import importlib

            linear = torch.nn.Sequential(linear, getattr(importlib.import_module(mod), cls)())
        layers.append(linear.eval())
    return layers


# -------------------------------------------------------------------------------------------------------------
# the loaded model for one side


def _torch_dtype(name: str) -> Any:
    import torch

    # fp16-autocast keeps fp32 weights; the forward pass runs under torch.autocast (SideModel.forward)
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
            "fp16-autocast": torch.float32}[name]


def pick_device(device: str | None) -> str:
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


class SideModel:
    """Tokenizer + transformer + head for one side of a spec, on one device."""

    def __init__(self, spec: EncoderSpec, side: str, resolved: Resolved, device: str):
        import torch
        import transformers as tf

        self.spec, self.side, self.resolved = spec, side, resolved
        self.device = device
        folder = Path(resolved.location) if resolved.source != "hub" else None
        cuda = device.startswith("cuda")
        self.dtype_name = spec.dtype if cuda else "fp32"
        dtype = _torch_dtype(self.dtype_name)
        what = f"{spec.name} ({'query' if side == 'q' else 'document'} side) from {resolved.ref}"
        strict = {"what": what, "allow_missing": spec.allow_missing, "allow_unexpected": spec.allow_unexpected}
        kw: dict[str, Any] = dict(resolved.kwargs())
        if spec.trust_remote_code and resolved.source != "tiny":
            kw["trust_remote_code"] = True
        self.tokenizer = tf.AutoTokenizer.from_pretrained(resolved.location, **kw)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        self.head: Any = None
        self.dense: list[Any] = []
        load = spec.loader
        if load == "dpr":
            cls = tf.DPRQuestionEncoder if side == "q" else tf.DPRContextEncoder
            outer = from_pretrained_strict(cls, resolved.location, dtype=dtype, **strict, **kw)
            model = (outer.question_encoder if side == "q" else outer.ctx_encoder).bert_model
        elif load == "t5-encoder":
            model = from_pretrained_strict(tf.T5EncoderModel, resolved.location, dtype=dtype, **strict, **kw)
        elif load == "colbert":
            model = from_pretrained_strict(tf.BertModel, resolved.location, dtype=dtype, add_pooling_layer=False,
                                           **strict, **kw)
            if folder is None:
                raise ValueError("ColBERT's projection is read from a local folder; stage the checkpoint")
            weight = _read_state(folder, "linear.")["weight"]
            self.head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
            self.head.load_state_dict({"weight": weight})
        elif load == "ance":  # Pyserini's AnceEncoder: RoBERTa, CLS -> embeddingHead (linear) -> LayerNorm
            model = from_pretrained_strict(tf.RobertaModel, resolved.location, dtype=dtype, **strict, **kw)
            if folder is None:
                raise ValueError("ANCE's head is read from a local folder; stage the checkpoint")
            lin, norm = _read_state(folder, "embeddingHead."), _read_state(folder, "norm.")
            linear = torch.nn.Linear(lin["weight"].shape[1], lin["weight"].shape[0])
            linear.load_state_dict(lin)
            layer_norm = torch.nn.LayerNorm(norm["weight"].shape[0])
            layer_norm.load_state_dict(norm)
            self.dense = [linear, layer_norm]
        elif load == "nv-embed":
            if folder is None:
                raise ValueError("NV-Embed's parts are read from a local folder; stage the checkpoint")
            model = self._load_nv_embed(folder, dtype, what)
        else:
            model = self._load_auto(resolved, dtype, kw, cuda, strict)
        if folder is not None and load not in ("colbert", "ance"):
            self.dense = _st_dense_layers(folder)
        if spec.bidirectional:
            _make_bidirectional(model)
        if spec.adapters is not None and resolved.source != "tiny":
            adapter = spec.adapters[0 if side == "q" else 1]
            if not hasattr(model, "set_adapter"):
                raise ValueError(f"{spec.name}: checkpoint {resolved.ref} has no task adapters ({adapter!r})")
            model.set_adapter(adapter)
        self.model = model.eval()
        if not getattr(model, "hf_device_map", None):
            self.model.to(device)
        for part in [self.head, *self.dense]:
            if part is not None:
                part.to(device=device, dtype=dtype).eval()
        if os.environ.get("IRGRID_COMPILE", "").lower() in ("1", "true", "yes"):
            self.model = torch.compile(self.model, dynamic=True)
        self._prefix_tokens = self._count_prefix_tokens()
        self._skip_ids = self._colbert_skiplist() if side == "d" and spec.colbert else None

    def _load_auto(self, resolved: Resolved, dtype: Any, kw: dict[str, Any], cuda: bool,
                   strict: dict[str, Any]) -> Any:
        import torch
        import transformers as tf

        config = tf.AutoConfig.from_pretrained(resolved.location, **kw)
        if cuda and torch.cuda.is_available() and resolved.source != "tiny":
            n_params = _estimate_params(config)
            need = n_params * torch.finfo(dtype).bits // 8 * 1.2
            free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
            if need > max(free):
                if need > sum(free):
                    raise MemoryError(
                        f"{self.spec.name}: {resolved.ref} needs ~{need / 2**30:.0f} GiB in {self.spec.dtype} but the "
                        f"visible GPUs have {sum(free) / 2**30:.0f} GiB free together; irgrid never quantises "
                        f"silently: use more GPUs (CUDA_VISIBLE_DEVICES) or a larger one")
                log.info("%s: sharding %s over %d GPUs", self.spec.name, resolved.ref, len(free))
                return from_pretrained_strict(tf.AutoModel, resolved.location, dtype=dtype, device_map="auto",
                                              **strict, **kw)
        return from_pretrained_strict(tf.AutoModel, resolved.location, dtype=dtype, **strict, **kw)

    def _load_nv_embed(self, folder: Path, dtype: Any, what: str) -> Any:
        import transformers as tf

        config = tf.AutoConfig.from_pretrained(folder)
        text_config = getattr(config, "text_config", None) or config
        if isinstance(text_config, dict):
            text_config = tf.MistralConfig(**text_config)
        model = tf.MistralModel(text_config)
        info = model.load_state_dict(_read_state(folder, "embedding_model."), strict=False)
        check_loading_info({"missing_keys": info.missing_keys, "unexpected_keys": info.unexpected_keys},
                           what, self.spec.allow_missing, self.spec.allow_unexpected)
        la_file = folder / "latent_attention.json"
        la = json.loads(la_file.read_text()) if la_file.exists() else dict(config.latent_attention_config)
        heads = int(la.get("heads", la.get("num_cross_heads", 8)))
        dim_head = int(la.get("dim_head", la.get("cross_dim_head", text_config.hidden_size)))
        num_latents = int(la.get("num_latents", la.get("num_latents_value", 512)))
        from irgrid import encoders

        self.head = encoders.LatentAttention(text_config.hidden_size, num_latents, heads, dim_head)
        self.head.load_state_dict(_read_state(folder, "latent_attention_model."))
        return model.to(dtype)

    def _count_prefix_tokens(self) -> int:
        """Tokens before `{text}` (leading special tokens included): excluded from pooling when pool_prompt=False."""
        prefix = self.spec.template(self.side).split("{text}")[0]
        ids = self.tokenizer(prefix, add_special_tokens=True)["input_ids"]
        plain = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        specials = set(self.tokenizer.all_special_ids)
        leading = 0
        while leading < len(ids) and ids[leading] in specials and (not plain or ids[leading] != plain[0]):
            leading += 1
        return leading + len(plain)

    def _colbert_skiplist(self) -> set[int]:
        ids = set()
        for ch in string.punctuation:
            ids.update(self.tokenizer(ch, add_special_tokens=False)["input_ids"])
        return ids

    # -- tokenization (runs in a worker thread) ------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        spec, side = self.spec, self.side
        rendered = [spec.render(t, side) for t in texts]
        max_len = spec.max_length(side)
        eos = self.tokenizer.eos_token_id if spec.append_eos else None
        colbert_q = spec.colbert is not None and side == "q"
        if colbert_q and spec.query_length_rule is not None:  # each query has its own length
            lengths = [spec.query_length(t) for t in texts]
            max_len = max(lengths, default=max_len)
        if rendered and isinstance(rendered[0], tuple):  # text pairs: the tokenizer's own pair template
            enc = self.tokenizer([r[0] for r in rendered], [r[1] for r in rendered], add_special_tokens=True,
                                 truncation=True, max_length=max_len - (1 if eos is not None else 0))["input_ids"]
        else:
            enc = self.tokenizer(list(rendered), add_special_tokens=True, truncation=True,
                                 max_length=max_len - (1 if eos is not None else 0))["input_ids"]
        if eos is not None:
            enc = [ids if ids and ids[-1] == eos else ids + [eos] for ids in enc]
        if spec.colbert is not None:
            marker = self.tokenizer.convert_tokens_to_ids(spec.colbert["q_marker" if side == "q" else "d_marker"])
            for ids in enc:
                ids[1] = marker
        if colbert_q:  # query augmentation: [MASK] up to the query's length (not attended to, but encoded)
            targets = lengths if spec.query_length_rule is not None else [max_len] * len(enc)
            sep = self.tokenizer.sep_token_id
            mask_id = self.tokenizer.mask_token_id
            out = []
            for ids, target in zip(enc, targets):
                if len(ids) > target:  # truncated to this query's own length, [SEP] kept last
                    ids = ids[: target - 1] + [sep]
                out.append(ids + [mask_id] * (target - len(ids)))
            enc = out
        return enc

    # -- the forward pass on one padded batch -------------------------------------------------------------
    def forward(self, batch: list[list[int]]) -> Any:
        import contextlib

        import torch

        spec, side = self.spec, self.side
        pad = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in batch)
        colbert_q = spec.colbert is not None and side == "q"
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        mask_id = self.tokenizer.mask_token_id if colbert_q else None
        for i, row in enumerate(batch):
            ids[i, : len(row)] = torch.tensor(row)
            attended = len(row)
            if colbert_q:  # the [MASK] augmentation is encoded but not attended to (ColBERT's default)
                while attended > 1 and row[attended - 1] == mask_id:
                    attended -= 1
            mask[i, :attended] = 1
        target = self.device if not getattr(self.model, "hf_device_map", None) else next(self.model.parameters()).device
        if str(target).startswith("cuda"):
            ids, mask = ids.pin_memory().to(target, non_blocking=True), mask.pin_memory().to(target, non_blocking=True)
        inputs = {"input_ids": ids, "attention_mask": mask}
        autocast = (torch.autocast("cuda", dtype=torch.float16) if self.dtype_name == "fp16-autocast"
                    else contextlib.nullcontext())
        with autocast:
            out = self.model(**inputs)
            hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
            pool_mask = mask.clone()
            if not spec.pool_prompt and self._prefix_tokens:
                lengths = mask.sum(1)
                keep = torch.minimum(torch.full_like(lengths, self._prefix_tokens), lengths - 1)  # keep >= 1 token
                positions = torch.arange(width, device=mask.device).unsqueeze(0)
                pool_mask = pool_mask * (positions >= keep.unsqueeze(1)).long()
            if spec.pooling == "colbert":
                return self._colbert(hidden, ids, mask, [len(row) for row in batch])
            if spec.pooling == "pooler":  # the checkpoint's pooler head (e.g. SimCSE's MLP over CLS)
                pooled = getattr(out, "pooler_output", None)
                if pooled is None:
                    raise ValueError(f"{spec.name}: pooling 'pooler' but {self.resolved.ref} has no pooler head")
                return self._pool(pooled, mask, pool_mask, pooled=True)
            return self._pool(hidden, mask, pool_mask)

    def _dtype(self) -> Any:
        return _torch_dtype(self.dtype_name)

    def _pool(self, hidden: Any, mask: Any, pool_mask: Any, pooled: bool = False) -> Any:
        import torch

        spec = self.spec
        if pooled:
            vec = hidden
        elif spec.pooling == "cls":
            vec = hidden[:, 0]
        elif spec.pooling == "last":
            vec = hidden[torch.arange(hidden.shape[0], device=hidden.device), mask.sum(1) - 1]
        else:
            if spec.pooling == "latent-attention":
                hidden = self.head(hidden)
            m = pool_mask.unsqueeze(-1).to(hidden.dtype)
            vec = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        for layer in self.dense:
            vec = layer(vec)
        vec = vec.float()
        if spec.truncate_dim:
            vec = vec[:, : spec.truncate_dim]
        if spec.normalize:
            vec = torch.nn.functional.normalize(vec, p=2, dim=-1)
        return vec

    def _colbert(self, hidden: Any, ids: Any, mask: Any, lengths: list[int]) -> list[np.ndarray]:
        import torch

        vecs = torch.nn.functional.normalize(self.head(hidden).float(), p=2, dim=-1)
        if self.side == "q":  # every position of the query's own length, [MASK] augmentation included
            return [vecs[i, :n].cpu().numpy() for i, n in enumerate(lengths)]
        keep = mask.bool()
        if self._skip_ids:
            skip = torch.tensor(sorted(self._skip_ids), device=ids.device)
            keep &= ~torch.isin(ids, skip)
        return [vecs[i][keep[i]].cpu().numpy() for i in range(vecs.shape[0])]


def _estimate_params(config: Any) -> int:
    h = getattr(config, "hidden_size", 1024)
    n = getattr(config, "num_hidden_layers", 24)
    ffn = getattr(config, "intermediate_size", 4 * h)
    vocab = getattr(config, "vocab_size", 32000)
    return n * (4 * h * h + 3 * h * ffn) + vocab * h


def _make_bidirectional(model: Any) -> None:
    """Remove a decoder's causal mask (LLM2Vec, NV-Embed, GritLM's embedding mode)."""
    for m in model.modules():
        if hasattr(m, "is_causal"):
            m.is_causal = False
    if hasattr(model.config, "use_bidirectional_attention"):
        model.config.use_bidirectional_attention = True
    model.config.is_causal = False  # transformers' mask builders then make a padding-only (bidirectional) mask


# -------------------------------------------------------------------------------------------------------------
# the engine


def is_oom(error: BaseException) -> bool:
    import torch

    return isinstance(error, torch.cuda.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


@dataclass
class EncodeStats:
    docs: int = 0
    seconds: float = 0.0
    batch_size: int = 0
    dtype: str = ""
    devices: list[str] = field(default_factory=list)
    oom_backoffs: int = 0

    def record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "docs_per_s": round(self.docs / self.seconds, 2) if self.seconds else None}


def default_chunk_size() -> int:
    """Documents per encoding chunk (IRGRID_ENCODE_CHUNK, default 4096). Batches never cross a chunk, so shards
    that start on a chunk boundary encode exactly as one process would (irgrid.sharding)."""
    value = int(os.environ.get("IRGRID_ENCODE_CHUNK") or 4096)
    if value < 1:
        raise ValueError(f"IRGRID_ENCODE_CHUNK must be a positive whole number, got {value}")
    return value


class Engine:
    """Encodes texts for one side of a spec on one or more devices (one replica per visible GPU)."""

    def __init__(self, spec: EncoderSpec, side: str, resolved: Resolved, device: str | None = None,
                 batch_size: int = 32, chunk_size: int | None = None):
        import torch

        self.spec, self.side = spec, side
        device = pick_device(device)
        if device == "cuda" and torch.cuda.device_count() > 1 and side == "d":
            devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        else:
            devices = [device]
        self.replicas = [SideModel(spec, side, resolved, d) for d in devices[:1]]
        if len(devices) > 1 and not getattr(self.replicas[0].model, "hf_device_map", None):
            self.replicas += [SideModel(spec, side, resolved, d) for d in devices[1:]]
        self.batch_size = batch_size
        self.chunk_size = chunk_size or default_chunk_size()
        self.stats = EncodeStats(batch_size=batch_size, dtype=self.replicas[0].dtype_name,
                                 devices=[r.device for r in self.replicas])

    @property
    def tokenizer(self) -> Any:
        return self.replicas[0].tokenizer

    def _batches(self, tokenized: list[list[int]]) -> list[list[int]]:
        """Indices sorted by length (longest first), cut into batches of at most batch_size x longest tokens."""
        order = sorted(range(len(tokenized)), key=lambda i: -len(tokenized[i]))
        budget = self.batch_size * max((len(t) for t in tokenized), default=1)
        batches, current, width = [], [], 0
        for i in order:
            width = max(width, len(tokenized[i])) if current else len(tokenized[i])
            if current and (len(current) + 1) * width > budget or len(current) >= self.batch_size * 4:
                batches.append(current)
                current, width = [], len(tokenized[i])
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _encode_tokenized(self, replica: SideModel, tokenized: list[list[int]]) -> list[Any]:
        import torch

        out: list[Any] = [None] * len(tokenized)
        pending = self._batches(tokenized)
        with torch.inference_mode():
            while pending:
                batch = pending.pop(0)
                try:
                    result = replica.forward([tokenized[i] for i in batch])
                except Exception as e:  # noqa: BLE001  (only out-of-memory is handled; everything else re-raises)
                    if not is_oom(e) or len(batch) == 1:
                        raise
                    self.stats.oom_backoffs += 1
                    self.batch_size = max(1, self.batch_size // 2)
                    self.stats.batch_size = self.batch_size
                    log.warning("%s: out of memory on a batch of %d; retrying with batch size %d",
                                self.spec.name, len(batch), self.batch_size)
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    size = min(self.batch_size, max(1, len(batch) // 2))
                    pending = [b[i:i + size] for b in [batch, *pending] for i in range(0, len(b), size)]
                    continue
                if isinstance(result, list):
                    for i, r in zip(batch, result):
                        out[i] = r
                else:
                    arr = result.cpu().numpy()
                    for j, i in enumerate(batch):
                        out[i] = arr[j]
        return out

    def encode(self, texts: Sequence[str]) -> Any:
        """Vectors for a list of texts, in input order (an (n, dim) array; a list of arrays for ColBERT)."""
        if len(texts) == 0:
            return [] if self.spec.pooling == "colbert" else np.zeros((0, 0), dtype=np.float32)
        start = time.perf_counter()
        parts = [self._encode_tokenized(self.replicas[0], self.replicas[0].tokenize(texts))]
        self.stats.docs += len(texts)
        self.stats.seconds += time.perf_counter() - start
        out = parts[0]
        return out if self.spec.pooling == "colbert" else np.stack(out).astype(np.float32)

    def stream(self, docs: Iterable[Mapping[str, str]]) -> Iterator[tuple[list[str], Any]]:
        """(docnos, vectors) chunk by chunk: the next chunk is tokenized while this one encodes; with several
        GPUs, chunks go round-robin to one replica each. Only a few chunks are ever in memory. A document's text
        is `spec.document(record)`: its declared fields of {'docno', 'title', 'text'} (flat records: 'text')."""
        it = iter(docs)
        _fixed_mmap_threshold()

        def take() -> tuple[list[str], list[str]]:
            docnos, texts = [], []
            for d in it:
                docnos.append(d["docno"])
                texts.append(self.spec.document(d))
                if len(texts) >= self.chunk_size:
                    break
            return docnos, texts

        n = len(self.replicas)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1 + n) as pool:
            def tokenize_next() -> concurrent.futures.Future:
                def job() -> tuple[list[str], list[list[int]]]:
                    docnos, texts = take()
                    return docnos, self.replicas[0].tokenize(texts) if texts else []
                return pool.submit(job)

            ahead = tokenize_next()
            running: list[tuple[list[str], concurrent.futures.Future]] = []
            k = 0
            while True:
                docnos, tokenized = ahead.result()
                if not docnos:
                    break
                ahead = tokenize_next()
                start = time.perf_counter()
                replica = self.replicas[k % n]
                k += 1
                if n == 1:
                    vecs = self._encode_tokenized(replica, tokenized)
                    self.stats.docs += len(docnos)
                    self.stats.seconds += time.perf_counter() - start
                    yield docnos, self._finish(vecs)
                    continue
                running.append((docnos, pool.submit(self._encode_tokenized, replica, tokenized)))
                if len(running) >= n:
                    d, fut = running.pop(0)
                    self.stats.docs += len(d)
                    yield d, self._finish(fut.result())
            for d, fut in running:
                self.stats.docs += len(d)
                yield d, self._finish(fut.result())

    def _finish(self, vecs: list[Any]) -> Any:
        return vecs if self.spec.pooling == "colbert" else np.stack(vecs).astype(np.float32)


MMAP_THRESHOLD = 64 * 1024  # bytes: allocations at least this big are mmapped, so freeing them returns memory


@functools.cache
def _fixed_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold (once per process) so streaming encoding stays flat in memory.

    Why: glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), after which
    the per-batch activation and token buffers (sizes vary with batch length) come from the heap arenas of the
    tokenizer and encoder threads and fragment them: RSS grew ~10 KB per document (722 MB at 2.5k documents,
    1,178 MB at 100k). A fixed threshold keeps big buffers in mmap, returned on free; measured flat (~575 MB
    from the second chunk on). False where the C library is not glibc (nothing to change there)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(-3, MMAP_THRESHOLD))  # M_MMAP_THRESHOLD


def engine_for(spec: EncoderSpec, side: str, resolved: Resolved, device: str | None, batch_size: int) -> Engine:
    """One engine per (spec, side, checkpoint location, device, batch size) per process."""
    key = (spec.name, side, resolved.location, resolved.source, device, batch_size, json.dumps(spec.config(),
                                                                                              sort_keys=True))
    if key not in _ENGINES:
        _ENGINES[key] = Engine(spec, side, resolved, device=device, batch_size=batch_size)
    return _ENGINES[key]


_ENGINES: dict[tuple, Engine] = {}


# -------------------------------------------------------------------------------------------------------------
# PyTerrier transformers


def make_query_encoder(engine: Engine) -> Any:
    """A PyTerrier transformer adding `query_vec` (or `query_toks_vecs` for late interaction)."""
    import pandas as pd
    import pyterrier as pt

    column = "query_embs" if engine.spec.pooling == "colbert" else "query_vec"

    class _QueryEncoder(pt.Transformer):
        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if len(inp) == 0:
                return inp.assign(**{column: pd.Series([], dtype=object)})
            uniq, inv = np.unique(inp["query"].astype(str).values, return_inverse=True)
            vecs = engine.encode(list(uniq))
            return inp.assign(**{column: [vecs[i] for i in inv]})

        def __repr__(self) -> str:
            return f"EngineQueryEncoder({engine.spec.name!r})"

    return _QueryEncoder()


def index_dense(engine: Engine, docs: Iterable[Mapping[str, str]], path: Path) -> dict[str, Any]:
    """Stream a corpus through the engine into a pyterrier-dr FlexIndex at `path`; returns the encoding record."""
    from pyterrier_dr import FlexIndex

    def records() -> Iterator[dict[str, Any]]:
        for docnos, vecs in engine.stream(docs):
            for docno, vec in zip(docnos, vecs):
                yield {"docno": docno, "doc_vec": vec}

    FlexIndex(str(path)).indexer().index(records())
    record = {"encoder": engine.spec.name, **engine.stats.record()}
    (path / "encoding.json").write_text(json.dumps(record, indent=2))
    return record


def loaded(spec: EncoderSpec, side: str, models: Mapping[str, Resolved], device: str | None,
           batch_size: int) -> Engine:
    return engine_for(spec, side, models["query" if side == "q" else "doc"], device, batch_size)
