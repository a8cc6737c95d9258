"""Expansion-based retrievers (Table 1): docT5query (document side), query2doc and HyDE (query side).

Generators are model roles, so an experiment file can swap them (`options: {generator: org/name}`); HyDE's
`encoder` option names the dense entry it wraps, and HyDE then shares that entry's index. Prompts are data,
with their sources. Query-side generation is cached and its time counted in latency (irgrid.generation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from irgrid.pipelines.sparse import LUCENE_FLAT, build_lucene, open_lucene

from irgrid.prompts import Decoding, Prompt
from irgrid.retrievers import (
    RETRIEVERS,
    BuildContext,
    DocStage,
    IndexRecipe,
    ModelRef,
    QueryContext,
    Retriever,
    register,
)
from irgrid.tiny import ARCHITECTURES, _decoder

ARCHITECTURES.setdefault("qwen2-causal", (lambda tf: _decoder(tf.Qwen2Config), "Qwen2ForCausalLM"))
ARCHITECTURES.setdefault("t5", (lambda tf: tf.T5Config(vocab_size=30522, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                      num_heads=2, pad_token_id=0, eos_token_id=102,
                                                      decoder_start_token_id=0), "T5ForConditionalGeneration"))

QWEN = ModelRef("Qwen/Qwen2.5-7B-Instruct", arch="qwen2-causal")  # the paper's generator (GPT-4/InstructGPT gone)
DOC2QUERY = ModelRef("doc2query/msmarco-t5-base-v1", arch="t5", tiny=(("tokenizer", "unigram"),))  # the paper's README; revision unverifiable offline

# query2doc (Wang et al., EMNLP 2023), zero-shot as in the paper (Section 3.3.3) — the original is few-shot
QUERY2DOC_PROMPT = Prompt("Write a passage that answers the given query:\n\nQuery: {query}\n\nPassage:",
                          source="Wang et al. 2023, Query2doc, Section 3 prompt, without the k-shot examples")
# HyDE (Gao et al., ACL 2023), the web-search instruction of the authors' repository
HYDE_PROMPT = Prompt("Please write a passage to answer the question.\nQuestion: {query}\nPassage:",
                     source="Gao et al. 2023, HyDE, web search prompt (texttron/hyde promptor.py)")


def _generator(ctx: QueryContext, prompt: Prompt):
    from irgrid.generation import Generator

    decoding = Decoding(max_new_tokens=int(ctx.options["max_new_tokens"]), batch_size=int(ctx.options["gen_batch_size"]))
    return Generator(ctx.models["generator"], prompt, decoding, device=ctx.device)


# -- docT5query ---------------------------------------------------------------------------------------------------
def doc2query_stage(ctx: BuildContext):
    import pyterrier as pt
    import torch
    from pyterrier_doc2query import Doc2Query

    torch.manual_seed(int(ctx.params["seed"]))  # docT5query samples (top-k 10): fixed seed, recorded in params
    gen = ctx.models["generator"]
    d2q = Doc2Query(gen.location, num_samples=int(ctx.params["num_samples"]), batch_size=int(ctx.params["batch_size"]),
                    append=True, fast_tokenizer=True, device=ctx.device)
    return d2q >> pt.apply.generic(lambda df: df[["docno", "text"]])


def bm25_query(index, ctx: QueryContext):
    o = ctx.options
    return index.bm25(k1=o["k1"], b=o["b"], num_results=o["num_results"])


register(Retriever(
    name="doct5query", family="expansion", architecture="document-expansion", paper_name="docT5query",
    index=IndexRecipe("doct5query-lucene-flat", build=build_lucene, open=open_lucene,
                      stage=DocStage("doct5query-3", make=doc2query_stage, models={"generator": DOC2QUERY},
                                     params={"num_samples": 3, "batch_size": 8, "seed": 0})),
    query=bm25_query, options={"k1": 0.9, "b": 0.4, "num_results": 1000}, extra="expansion",
    reference="Nogueira & Lin 2019; 3 generated queries per document appended, BM25 defaults (the paper, "
              "Section 3.3.3); pyterrier-doc2query; checkpoint from the paper's README",
))


# -- query2doc ----------------------------------------------------------------------------------------------------
def query2doc_query(index, ctx: QueryContext):
    from irgrid.generation import Expand

    return Expand(_generator(ctx, QUERY2DOC_PROMPT), mode="query2doc", repeats=int(ctx.options["repeats"])) >> \
        bm25_query(index, ctx)


GEN_OPTIONS = {"max_new_tokens": 128, "gen_batch_size": 8}

register(Retriever(
    name="query2doc", family="expansion", architecture="query-expansion", paper_name="query2doc",
    index=LUCENE_FLAT, query=query2doc_query, models={"generator": QWEN},
    options={"k1": 0.9, "b": 0.4, "num_results": 1000, "repeats": 5, **GEN_OPTIONS}, extra="expansion",
    reference=f"Wang et al. 2023; q+ = query ×5 + pseudo-document, BM25 (shares the bm25 index); "
              f"prompt: {QUERY2DOC_PROMPT.source}; generator Qwen2.5-7B-Instruct as in the paper",
))


# -- HyDE -----------------------------------------------------------------------------------------------------------
def hyde_query(index, ctx: QueryContext):
    from irgrid.dense_search import ExactRetriever
    from irgrid.encoders import ENCODERS, engine_for
    from irgrid.generation import Expand

    spec = ENCODERS.get(ctx.options["encoder"])
    batch = int(ctx.options["batch_size"])
    q_engine = engine_for(spec, "q", ctx.models["query"], ctx.device, batch)
    d_engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, batch)
    return (Expand(_generator(ctx, HYDE_PROMPT), mode="column", out_column="hyde_doc")
            >> HydeEncode(q_engine, d_engine)
            >> ExactRetriever(index, num_results=int(ctx.options["num_results"]), device=ctx.device))


class _HydeEncodeBase:
    """HyDE's query vector: the mean of the query's embedding and the hypothetical document's (document side)."""


def _hyde_encode_cls():
    import numpy as np
    import pandas as pd
    import pyterrier as pt

    class HydeEncode(pt.Transformer, _HydeEncodeBase):
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


def make_hyde(options: Mapping[str, Any]) -> Retriever:
    """HyDE over the dense entry named by `encoder`: same index, same encoders, plus a generator."""
    dense = RETRIEVERS.get(str(options["encoder"]))
    if dense.family != "dense" or "query" not in dense.models or dense.index is None:
        raise ValueError(f"hyde: encoder {dense.name!r} is not a single-vector dense entry")
    opts = {**dense.options, **GEN_OPTIONS, **{k: v for k, v in options.items()
                                                 if k in GEN_OPTIONS or k == "num_results"}}
    opts["encoder"] = dense.name
    return dataclasses.replace(
        dense, name="hyde", family="expansion", architecture="query-expansion", paper_name="HyDE",
        query=hyde_query, models={"query": dense.models["query"], "doc": dense.index.models["doc"],
                                  "generator": QWEN},
        options=opts, extra="expansion", derive=make_hyde, derive_options=("encoder",),
        reference=f"Gao et al. 2023; hypothetical document from Qwen2.5-7B-Instruct (the paper), averaged with the "
                  f"query embedding, over the {dense.name} index (shared); prompt: {HYDE_PROMPT.source}",
    )


register(make_hyde({"encoder": "contriever"}))
