"""Expansion-based retrievers (Table 1): docT5query (document side), query2doc and HyDE (query side).

Generators are model roles, so an experiment file can swap them (`options: {generator: org/name}`); HyDE's
`encoder` option names the dense entry it wraps, and HyDE then shares that entry's index. Prompts are data,
with their sources. Query-side generation is cached and its time counted in latency (irgrid.generation.engine).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from irgrid.core import paper_code
from irgrid.core.modelref import ModelRef
from irgrid.core.options import Option
from irgrid.core.paper_code import code
from irgrid.core.profiles import Setting
from irgrid.core.retrievers import (
    RETRIEVERS,
    BuildContext,
    DocStage,
    EntryError,
    IndexRecipe,
    QueryContext,
    Retriever,
    register,
    register_lazy,
)
from irgrid.generation.spec import Decoding, Prompt
from irgrid.models.tiny import decoder_config, register_architecture
from irgrid.pipelines import sparse
from irgrid.pipelines.sparse import LUCENE_FLAT, build_lucene, open_lucene

# the generator's tiny stand-in (irgrid.models.tiny, which declares docT5query's "t5" itself: monoT5 uses it too)
register_architecture("qwen2-causal", lambda tf: decoder_config(tf.Qwen2Config), "Qwen2ForCausalLM")

QWEN = ModelRef("Qwen/Qwen2.5-7B-Instruct", arch="qwen2-causal")  # the paper's generator (GPT-4/InstructGPT gone)
DOC2QUERY = ModelRef("doc2query/msmarco-t5-base-v1", arch="t5", tiny=(("tokenizer", "unigram"),))  # the paper's README; revision unverifiable offline

# query2doc (Wang et al., EMNLP 2023), zero-shot as in the paper (Section 3.3.3) — the original is few-shot
QUERY2DOC_PROMPT = Prompt("Write a passage that answers the given query:\n\nQuery: {query}\n\nPassage:",
                          source="Wang et al. 2023, Query2doc, Section 3 prompt, without the k-shot examples")
# HyDE (Gao et al., ACL 2023), the web-search instruction of the authors' repository
HYDE_PROMPT = Prompt("Please write a passage to answer the question.\nQuestion: {query}\nPassage:",
                     source="Gao et al. 2023, HyDE, web search prompt (texttron/hyde src/hyde/promptor.py)")
# the paper's code: one system + user prompt for both HyDE and query2doc
DENSE_PY = code(paper_code.ENCODER_PY)
RUN_PY = code(paper_code.RUN_PY)
PAPER_SYSTEM = (
    "You are a retrieval-focused assistant. Given a query, you write a *self-contained*, factual passage that "
    "could appear in a document relevant to that query.\n\nRequirements:\n- Do NOT mention that you are an "
    "assistant or that this is hypothetical.\n- Do NOT restate the query.\n- No bullet points or headings.\n"
    "- Write one coherent paragraph of 150–300 words."
)
PAPER_USER = "Query: {query}\n\nWrite a single, detailed passage that could answer this query. Return only the passage text."
_GEN = f"{DENSE_PY} generate_docs_for_query_expansion"
PAPER_GENERATION = {
    "system_prompt": Setting(PAPER_SYSTEM, f"{_GEN}: build_messages, system message"),
    "prompt": Setting(PAPER_USER, f"{_GEN}: build_messages, user message"),
    "do_sample": Setting(True, f"{_GEN}: model.generate(do_sample=True)"),
    "temperature": Setting(0.7, f"{_GEN}: model.generate(temperature=0.7)"),
    "top_p": Setting(None, f"{_GEN}: top_p commented out (the checkpoint's generation_config applies)"),
    "top_k": Setting(None, f"{_GEN}: not set (the checkpoint's generation_config applies)"),
    "max_new_tokens": Setting(256, f"{_GEN}: model.generate(max_new_tokens=256)"),
    "max_input_length": Setting(768, f"{_GEN}: tokenizer(..., truncation=True, max_length=768)"),
    "eos": Setting("tokenizer", f"{_GEN}: model.generate(eos_token_id=tokenizer.eos_token_id): the tokenizer's one "
                                f"eos token replaces the checkpoint's generation_config list (Qwen2.5-Instruct: "
                                f"<|im_end|> and <|endoftext|>), so generation runs on past <|endoftext|>"),
}
# query2doc's own generator in the release: another system message (its "query:." is verbatim),
# the same user message, T=1 sampling, 128 new tokens
_Q2D = f"{DENSE_PY} generate_pseudo_docs_for_query_expansion"
QUERY2DOC_PAPER_SYSTEM = (
    "You are a retrieval-focused assistant. Write a passage that answers the given query:.\n\nRequirements:\n"
    "- Do NOT mention that you are an assistant or that this is hypothetical.\n- Do NOT restate the query.\n"
    "- No bullet points or headings.\n- Write one coherent paragraph of 150–300 words."
)
QUERY2DOC_PAPER_GENERATION = {
    "system_prompt": Setting(QUERY2DOC_PAPER_SYSTEM, f"{_Q2D}: build_messages, system message"),
    "prompt": Setting(PAPER_USER, f"{_Q2D}: build_messages, user message"),
    "do_sample": Setting(True, f"{_Q2D}: model.generate(do_sample=True)"),
    "temperature": Setting(1.0, f"{_Q2D}: model.generate(temperature=1)"),
    "top_p": Setting(None, f"{_Q2D}: top_p commented out (the checkpoint's generation_config applies)"),
    "top_k": Setting(None, f"{_Q2D}: not set (the checkpoint's generation_config applies)"),
    "max_new_tokens": Setting(128, f"{_Q2D}: model.generate(max_new_tokens=128)"),
    "max_input_length": Setting(768, f"{_Q2D}: tokenizer(..., truncation=True, max_length=768)"),
    "eos": Setting("tokenizer", f"{_Q2D}: model.generate(eos_token_id=tokenizer.eos_token_id) (the tokenizer's one "
                                f"eos token, not the checkpoint's generation_config list)"),
}
# generation options every generating entry has (the card values of query2doc; HyDE overrides its own)
GEN_OPTIONS = {"max_new_tokens": 128, "gen_batch_size": 8, "prompt": QUERY2DOC_PROMPT.template, "system_prompt": None,
               "do_sample": False, "temperature": None, "top_p": None, "top_k": None, "max_input_length": None,
               "seed": 0, "eos": None}

def _generator(ctx: QueryContext, source: str):
    from irgrid.generation.engine import Generator

    o = ctx.options
    decoding = Decoding(max_new_tokens=int(o["max_new_tokens"]), batch_size=int(o["gen_batch_size"]),
                        seed=int(o["seed"]), do_sample=bool(o["do_sample"]), temperature=o["temperature"],
                        top_p=o["top_p"], top_k=o["top_k"], max_input_length=o["max_input_length"],
                        eos=o.get("eos"))
    prompt = Prompt(o["prompt"], system=o["system_prompt"], source=source)
    return Generator(ctx.models["generator"], prompt, decoding, device=ctx.device)


# -- docT5query ---------------------------------------------------------------------------------------------------
def doc2query_stage(ctx: BuildContext):
    import pyterrier as pt

    from irgrid.generation.doc2query import DocT5Query, load_seq2seq

    p, gen = ctx.params, ctx.models["generator"]
    model = load_seq2seq(gen.location, gen.kwargs().get("revision"), ctx.device)
    d2q = DocT5Query(model, num_samples=int(p["num_samples"]), input_max_length=int(p["input_max_length"]),
                     max_length=int(p["max_length"]), do_sample=bool(p["do_sample"]), top_k=p["top_k"],
                     top_p=p["top_p"], batch_size=int(p["batch_size"]), seed=int(p["seed"]), store=ctx.store,
                     resolved=gen)  # batches kept in the store's generations area as they are made: resumable
    return d2q >> pt.apply.generic(lambda df: df[["docno", "text"]])


def bm25_query(index, ctx: QueryContext):
    """`irgrid.pipelines.sparse.bm25_query`; kept under this module's name because a query function's module and
    name are part of the run cache key (docT5query's cached runs stay valid)."""
    return sparse.bm25_query(index, ctx)


# generation's top_k is sampling's (0 disables it), not the impact pruning `top_k` of irgrid.core.options.KNOBS
SAMPLING_TOP_K = {"top_k": Option("sampling: the most likely tokens sampled from (0: no top-k cut)", int, 0,
                                  nullable="the checkpoint's generation_config decides")}
QUERY2DOC_TYPES = {**SAMPLING_TOP_K,
                   "repeats": Option("the query repeated this many times before the generated passage", int, 1)}
D2Q_DOC_OPTIONS = ("num_samples", "input_max_length", "max_length", "do_sample", "top_k", "top_p", "batch_size",
                   "seed")
D2Q_PY = code(paper_code.SPARSE_ENCODER_PY)
_D2Q = f"{D2Q_PY} SparseEncoder.encode(): worker_kwargs for doc2query ->"


def make_doct5query(options: Mapping[str, Any]) -> Retriever:
    """docT5query: documents expanded in a cached stage (its params: the document-side options), then BM25."""
    # version 3: sampling seeded per batch (a resumed stage samples as an uninterrupted one), empty documents
    # expanded to nothing
    stage = DocStage("doct5query", make=doc2query_stage, models={"generator": DOC2QUERY}, version=3,
                     params={k: options[k] for k in D2Q_DOC_OPTIONS})
    return Retriever(
        name="doct5query", family="expansion", architecture="document-expansion", paper_name="docT5query",
        index=IndexRecipe("doct5query-lucene-flat", build=build_lucene, open=open_lucene, stage=stage),
        query=bm25_query, options=dict(options), extra="expansion", version=2,
        derive=make_doct5query, derive_options=D2Q_DOC_OPTIONS, profiles=DOCT5QUERY_PROFILES,
        option_types=SAMPLING_TOP_K, swappable=("generator",),
        reference=f"Nogueira & Lin 2019; 3 generated queries per document appended, BM25 0.9/0.4 (the paper, "
                  f"Section 3.3.3); checkpoint from the paper's README. The release generates from title + ' ' + "
                  f"text truncated to 320 tokens ({D2Q_PY} _worker_doc2query on the corpus of "
                  f"{paper_code.MISC_PY} prepare_pyserini_corpus), as irgrid in both profiles. Older version: "
                  f"{paper_code.RUN_V2_PY} build_d2q_docs(max_input_len=512) on the documents' DataFrame",
    )


DOCT5QUERY_PROFILES = {
    "paper": {
        "input_max_length": Setting(320, f"{_D2Q} 'max_input_len': 320 (t5_tokenizer(..., max_length=320, "
                                         f"truncation=True) on title + ' ' + text)"),
        "max_length": Setting(64, f"{_D2Q} 'max_query_len': 64 -> generate(max_length=64)"),
        "num_samples": Setting(3, f"{_D2Q} 'queries_per_doc': 3"),
        "do_sample": Setting(True, f"{_D2Q} 'do_sample': True"),
        "top_k": Setting(10, f"{_D2Q} 'top_k': 10"),
        "top_p": Setting(None, f"{D2Q_PY} _worker_doc2query: generate() without top_p"),
        "k1": Setting(0.9, f"{RUN_PY} run(): searcher.set_bm25(k1=0.9, b=0.4) for doc2query"),
        "b": Setting(0.4, f"{RUN_PY} run(): searcher.set_bm25(k1=0.9, b=0.4)"),
    },
    "card": {
        "input_max_length": Setting(320, "doc2query/msmarco-t5-base-v1 model card: input truncated to 320 word "
                                         "pieces in training (not re-verified offline)"),
        "max_length": Setting(64, "doc2query/msmarco-t5-base-v1 model card: generate(max_length=64)"),
        "do_sample": Setting(True, "doc2query/msmarco-t5-base-v1 model card: sampling example"),
        "top_k": Setting(10, "doc2query/msmarco-t5-base-v1 model card: generate(top_k=10, top_p=0.95)"),
        "top_p": Setting(0.95, "doc2query/msmarco-t5-base-v1 model card: generate(top_k=10, top_p=0.95)"),
        "num_samples": Setting(3, "the paper's text, Section 3.3.3 (the card's example draws 5, docTTTTTquery 40)"),
        "k1": Setting(0.9, "Pyserini/Anserini BM25 defaults (Nogueira & Lin 2019 retrieve with BM25)"),
        "b": Setting(0.4, "Pyserini/Anserini BM25 defaults"),
    },
}
register(make_doct5query({"k1": 0.9, "b": 0.4, "num_results": 1000, "num_samples": 3, "input_max_length": 320,
                          "max_length": 64, "do_sample": True, "top_k": 10, "top_p": 0.95, "batch_size": 8,
                          "seed": 0}))


# -- query2doc ----------------------------------------------------------------------------------------------------
def query2doc_query(index, ctx: QueryContext):
    from irgrid.generation.engine import Expand

    return Expand(_generator(ctx, "query2doc"), mode="query2doc", repeats=int(ctx.options["repeats"])) >> \
        bm25_query(index, ctx)


QUERY2DOC_PROFILES = {
    "paper": {**QUERY2DOC_PAPER_GENERATION,
              "repeats": Setting(5, f"{RUN_PY} make_q_plus(q, pseudo, repeat=5): the query 5 times, then the "
                                    f"pseudo-document"),
              "k1": Setting(0.9, f"{RUN_PY} run() query2doc branch: searcher.set_bm25(k1=0.9, b=0.4)"),
              "b": Setting(0.4, f"{RUN_PY} run() query2doc branch: searcher.set_bm25(k1=0.9, b=0.4)")},
    "card": {
        "prompt": Setting(QUERY2DOC_PROMPT.template, QUERY2DOC_PROMPT.source),
        "system_prompt": Setting(None, "Wang et al. 2023: a single prompt, no system message"),
        "do_sample": Setting(False, "irgrid: greedy (the GPT-4 API sampling of Wang et al. 2023 is not reproducible)"),
        "max_new_tokens": Setting(128, "Wang et al. 2023, Section 3: at most 128 generated tokens"),
        "repeats": Setting(5, "Wang et al. 2023, Eq. 1: q+ = concat({q} × 5, d')"),
        "temperature": Setting(None, "greedy decoding: no temperature"),
        "top_p": Setting(None, "greedy decoding: no nucleus sampling"),
        "top_k": Setting(None, "greedy decoding: no top-k sampling"),
        "max_input_length": Setting(None, "Wang et al. 2023: the prompt is sent whole"),
        "k1": Setting(0.9, "Pyserini/Anserini BM25 defaults (Wang et al. 2023 retrieve with BM25)"),
        "b": Setting(0.4, "Pyserini/Anserini BM25 defaults"),
    },
}

register(Retriever(
    name="query2doc", family="expansion", architecture="query-expansion", paper_name="query2doc",
    index=LUCENE_FLAT, query=query2doc_query, models={"generator": QWEN},
    options={"k1": 0.9, "b": 0.4, "num_results": 1000, "repeats": 5, **GEN_OPTIONS}, extra="expansion",
    profiles=QUERY2DOC_PROFILES, option_types=QUERY2DOC_TYPES, swappable=("generator",),
    reference=f"Wang et al. 2023; q+ = query ×5 + pseudo-document, BM25 (shares the bm25 index); "
              f"prompt: {QUERY2DOC_PROMPT.source}; generator Qwen2.5-7B-Instruct as in the paper. The release's "
              f"{RUN_PY} has a query2doc branch: generate_pseudo_docs_for_query_expansion ({DENSE_PY}: its own "
              f"system message, T=1 sampling, 128 new tokens), then make_q_plus (the query 5 times + the "
              f"pseudo-document) searched with BM25 0.9/0.4 over the bm25 index; the paper profile follows it. "
              f"Generation dtype: fp16 in the paper's code, bf16 here",
))


# -- HyDE -----------------------------------------------------------------------------------------------------------
def hyde_query(index, ctx: QueryContext):
    from irgrid.dense.engine import engine_for
    from irgrid.dense.entry import query_spec
    from irgrid.dense.search import ExactRetriever
    from irgrid.generation.engine import Expand

    spec = query_spec(ctx)  # the wrapped dense entry's spec as profiled (carried by value)
    batch = int(ctx.options["batch_size"])
    q_engine = engine_for(spec, "q", ctx.models["query"], ctx.device, batch)
    d_engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, batch)
    return (Expand(_generator(ctx, "hyde"), mode="column", out_column="hyde_doc")
            >> HydeEncode(q_engine, d_engine)
            >> ExactRetriever(index, num_results=int(ctx.options["num_results"]), device=ctx.device,
                              score_dtype=str(ctx.options.get("score_dtype", "fp16"))))


@functools.cache
def _hyde_encode_cls() -> type:
    import numpy as np
    import pandas as pd
    import pyterrier as pt

    class HydeEncode(pt.Transformer):
        """HyDE's query vector: the mean of the query's embedding and the hypothetical document's (document
        side)."""

        def __init__(self, q_engine, d_engine):
            self.q_engine, self.d_engine = q_engine, d_engine

        def __repr__(self) -> str:
            return f"HydeEncode({self.q_engine.spec.name!r})"

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if len(inp) == 0:
                return inp.assign(query_vec=pd.Series([], dtype=object))
            q = self.q_engine.encode(inp["query"].astype(str).tolist())
            d = self.d_engine.encode(inp["hyde_doc"].astype(str).tolist())
            vecs = (np.asarray(q) + np.asarray(d)) / 2.0
            return inp.assign(query_vec=list(vecs.astype(np.float32)))

    return HydeEncode


def HydeEncode(q_engine, d_engine):  # noqa: N802  (a class built lazily: no torch/pyterrier import at registry load)
    return _hyde_encode_cls()(q_engine, d_engine)


_HYDE_GEN = "texttron/hyde src/hyde/generator.py OpenAIGenerator defaults"
HYDE_OPTIONS = {**GEN_OPTIONS, "prompt": HYDE_PROMPT.template, "do_sample": True, "temperature": 0.7, "top_p": 1.0,
                "top_k": 0, "max_new_tokens": 512}
HYDE_PROFILES = {
    "paper": {**PAPER_GENERATION,
              "encoder_profile": Setting("paper", f"{RUN_PY} model_key == 'hyde': DenseEncoder("
                                                  f"'facebook/contriever-msmarco', MODELS['contriever']), the "
                                                  f"paper's Contriever settings")},
    "card": {
        "encoder_profile": Setting("card", "texttron/hyde src/hyde/hyde.py: the dense encoder as published"),
        "prompt": Setting(HYDE_PROMPT.template, HYDE_PROMPT.source),
        "system_prompt": Setting(None, "texttron/hyde src/hyde/generator.py: one user message"),
        "do_sample": Setting(True, f"{_HYDE_GEN}: temperature=0.7"),
        "temperature": Setting(0.7, f"{_HYDE_GEN}: temperature=0.7"),
        "top_p": Setting(1.0, f"{_HYDE_GEN}: top_p=1"),
        "top_k": Setting(0, f"{_HYDE_GEN}: the OpenAI API has no top-k (0 disables the checkpoint's)"),
        "max_new_tokens": Setting(512, f"{_HYDE_GEN}: max_tokens=512"),
        "max_input_length": Setting(None, "texttron/hyde src/hyde/generator.py: the prompt is sent whole"),
    },
}


def make_hyde(options: Mapping[str, Any]) -> Retriever:
    """HyDE over the dense entry named by `encoder`: same index, same encoders, plus a generator."""
    dense = RETRIEVERS.get(str(options["encoder"]))
    if dense.family != "dense" or "query" not in dense.models or dense.index is None:
        raise EntryError(f"hyde: encoder {dense.name!r} is not a single-vector dense entry")
    encoder_profile = options.get("encoder_profile")
    if encoder_profile is not None:  # the wrapped entry under a profile: its spec, index and keys follow
        dense = dense.with_profile(str(encoder_profile))
    # the wrapped entry's encoder settings are wiring here (`wraps`, `encoder`), not options of HyDE's
    # (batch_size re-derives a dense entry, for its documents' batch, but is HyDE's own knob for its query side)
    wired = [k for k in dense.derive_options if k != "batch_size"]
    knobs = {k: v for k, v in dense.options.items() if k not in wired}
    opts = {**knobs, **HYDE_OPTIONS, **{k: v for k, v in options.items() if k in HYDE_OPTIONS or k == "num_results"}}
    opts["encoder"] = dense.name
    opts["encoder_profile"] = encoder_profile
    # the wrapped entry's encoder settings travel in its query spec: setting one here would change the key only
    via = f"hyde encodes with the settings of its encoder entry ({dense.name}): choose them with encoder / encoder_profile"
    wiring = {"query_config": via, **{k: via for k in wired if k in dense.options}}
    return dataclasses.replace(
        dense, name="hyde", family="expansion", architecture="query-expansion", paper_name="HyDE",
        query=hyde_query, models={"query": dense.models["query"], "doc": dense.index.models["doc"],
                                  "generator": QWEN},
        options=opts, extra="expansion", derive=make_hyde, derive_options=("encoder", "encoder_profile"), profiles=HYDE_PROFILES,
        option_types=SAMPLING_TOP_K, wraps=dense, wiring=wiring, swappable=("generator",),
        make_scorer=None,  # HyDE does not re-rank: its query side generates (the dense entry's scorer is its own)
        reference=f"Gao et al. 2023; hypothetical document from Qwen2.5-7B-Instruct (the paper), averaged with the "
                  f"query embedding, over the {dense.name} index (shared); prompt: {HYDE_PROMPT.source}. HyDE's "
                  f"repository averages 8 sampled documents (n=8); irgrid generates one in both profiles, as the "
                  f"paper's code (0.5 * (q + d), {paper_code.RUN_PY})",
    )


# built on first lookup, once every entry module is imported: `contriever` may register after this module
register_lazy("hyde", lambda: make_hyde({"encoder": "contriever", "encoder_profile": "card"}))
