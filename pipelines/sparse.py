"""Lexical retrievers. `bm25` is the paper's exact setup: Lucene (Anserini), flat title+text, k1=0.9, b=0.4."""

from __future__ import annotations

from irgrid.retrievers import BuildContext, IndexRecipe, QueryContext, Retriever, register


def build_lucene(ctx: BuildContext) -> None:
    from irgrid.backends.lucene import LuceneIndex

    LuceneIndex(ctx.path / "lucene").index(ctx.docs(), threads=int(ctx.params.get("threads", 1)))


def open_lucene(path, params, models):
    from irgrid.backends.lucene import LuceneIndex

    return LuceneIndex(path / "lucene")


def build_pisa(ctx: BuildContext) -> None:
    from pyterrier_pisa import PisaIndex

    index = PisaIndex(str(ctx.path / "pisa"), stemmer=ctx.params["stemmer"], stops=ctx.params["stops"], threads=1)
    index.indexer(text_field="text").index(ctx.docs())


def open_pisa(path, params, models):
    from pyterrier_pisa import PisaIndex

    return PisaIndex(str(path / "pisa"), stemmer=params["stemmer"], stops=params["stops"])


def bm25_query(index, ctx: QueryContext):
    o = ctx.options
    return index.bm25(k1=o["k1"], b=o["b"], num_results=o["num_results"])


# Anserini's default analysis (Porter stemming, Lucene's English stopwords) over "flat" title + text.
LUCENE_FLAT = IndexRecipe("lucene-flat", build=build_lucene, open=open_lucene)
# PISA's own pipeline: Porter2 stemming and Terrier's stopword list.
PISA_PORTER2 = IndexRecipe(
    "pisa-porter2", build=build_pisa, open=open_pisa, params={"stemmer": "porter2", "stops": "terrier"},
    isolate=True,
)
BM25_OPTIONS = {"k1": 0.9, "b": 0.4, "num_results": 1000}

register(Retriever(
    name="bm25", family="sparse", architecture="lexical", paper_name="BM25",
    index=LUCENE_FLAT, query=bm25_query, options=BM25_OPTIONS, extra="lucene",
    reference="Pyserini 2CR beir.yaml (flat): Lucene BM25 k1=0.9 b=0.4",
))
register(Retriever(
    name="bm25-pisa", family="sparse", architecture="lexical",
    index=PISA_PORTER2, query=bm25_query, options=BM25_OPTIONS, extra="pisa",
    reference="pyterrier-pisa BM25; same parameters as the paper's Lucene BM25",
))
