"""Dense bi-encoders (encoder-only). Documents are encoded once into a pyterrier-dr FlexIndex; queries are
encoded by the same checkpoint and searched exactly."""

from __future__ import annotations

import functools

from irgrid.retrievers import BuildContext, IndexRecipe, ModelRef, QueryContext, Retriever, register


@functools.cache
def load_sbert(location: str, device: str | None, batch_size: int):
    """One model per process: every entry and index using this checkpoint shares it."""
    from pyterrier_dr import SBertBiEncoder

    return SBertBiEncoder(location, batch_size=batch_size, device=device)


def _sbert(models, params, device):
    return load_sbert(models["encoder"].location, device, int(params.get("batch_size", 32)))


def build_flex_sbert(ctx: BuildContext) -> None:
    from pyterrier_dr import FlexIndex

    model = _sbert(ctx.models, ctx.params, ctx.device)
    (model.doc_encoder() >> FlexIndex(str(ctx.path / "flex")).indexer()).index(ctx.docs())


def open_flex(path, params, models):
    from pyterrier_dr import FlexIndex

    return FlexIndex(str(path / "flex"))


def sbert_query(index, ctx: QueryContext):
    model = _sbert(ctx.models, ctx.options, ctx.device)
    return model.query_encoder() >> index.np_retriever(num_results=ctx.options["num_results"])


MINILM = ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a")

register(Retriever(
    name="all-minilm-l6-v2", family="dense", architecture="encoder-only",
    index=IndexRecipe("flex-all-minilm-l6-v2", build=build_flex_sbert, open=open_flex,
                      params={"batch_size": 32}, models={"encoder": MINILM}),
    models={"encoder": MINILM}, query=sbert_query,
    options={"batch_size": 32, "num_results": 1000}, extra="dense",
    reference="sentence-transformers model card: mean pooling, L2-normalised, max 256 tokens, cosine",
))
