"""Lexical retrievers. `bm25` is the paper's exact setup: Lucene (Anserini), flat title+text, k1=0.9, b=0.4."""

from __future__ import annotations

from irgrid.profiles import Setting
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

# `bm25`'s two profiles agree (one index, one run cache): title + text in one field, BM25 k1=0.9 b=0.4.
_PAPER_RUN = "valentinsvelev/retriever-evaluation:src/run.py: LuceneSearcher ... searcher.set_bm25(k1=0.9, b=0.4)"
BM25_PROFILES = {
    "paper": {"k1": Setting(0.9, _PAPER_RUN), "b": Setting(0.4, _PAPER_RUN)},
    "card": {"k1": Setting(0.9, "Pyserini 2CR beir.yaml (flat index): Lucene BM25 k1=0.9"),
             "b": Setting(0.4, "Pyserini 2CR beir.yaml (flat index): Lucene BM25 b=0.4")},
}
register(Retriever(
    name="bm25", family="sparse", architecture="lexical", paper_name="BM25",
    index=LUCENE_FLAT, query=bm25_query, options=BM25_OPTIONS, extra="lucene", profiles=BM25_PROFILES,
    reference="Pyserini 2CR beir.yaml (flat): Lucene BM25 k1=0.9 b=0.4. Documents: title + ' ' + text in one "
              "field, as the paper's code (valentinsvelev/retriever-evaluation:src/misc.py prepare_pyserini_corpus)",
))
register(Retriever(
    name="bm25-pisa", family="sparse", architecture="lexical",
    index=PISA_PORTER2, query=bm25_query, options=BM25_OPTIONS, extra="pisa",
    reference="pyterrier-pisa BM25; same parameters as the paper's Lucene BM25",
))
