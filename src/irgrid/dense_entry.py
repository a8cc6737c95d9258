"""Turn an `EncoderSpec` into a registry entry: the document side streams through the engine into an index,
the query side is the engine's query encoder followed by exact search. Entries stay data (pipelines/*.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from irgrid._util import config_hash
from irgrid.encoders import (
    ENCODERS,
    EncoderSpec,
    engine_for,
    index_dense,
    make_query_encoder,
    register_encoder,
)
from irgrid.retrievers import BuildContext, IndexRecipe, QueryContext, Retriever, register


def _spec(params: Mapping[str, Any]) -> EncoderSpec:
    return ENCODERS.get(params["encoder"])


def build_dense(ctx: BuildContext) -> None:
    spec = _spec(ctx.params)
    engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, int(ctx.params["batch_size"]))
    index_dense(engine, ctx.docs(), ctx.path / "flex")


def open_dense(path: Path, params: Mapping[str, Any], models: Mapping[str, Any]) -> Any:
    from pyterrier_dr import FlexIndex

    return FlexIndex(str(path / "flex"))


def dense_query(index: Any, ctx: QueryContext) -> Any:
    from irgrid.dense_search import ExactRetriever

    spec = ENCODERS.get(ctx.options["encoder"])
    engine = engine_for(spec, "q", ctx.models["query"], ctx.device, int(ctx.options["batch_size"]))
    return make_query_encoder(engine) >> ExactRetriever(index, num_results=int(ctx.options["num_results"]),
                                                        device=ctx.device)


def build_late(ctx: BuildContext) -> None:
    from irgrid.dense_search import LateInteractionIndex

    spec = _spec(ctx.params)
    engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, int(ctx.params["batch_size"]))
    meta = LateInteractionIndex(ctx.path / "late").build(engine.stream(ctx.docs()),
                                                         kmeans_niter=int(ctx.params["kmeans_niter"]))
    import json

    (ctx.path / "encoding.json").write_text(json.dumps({"encoder": spec.name, **engine.stats.record(), **meta}))


def open_late(path: Path, params: Mapping[str, Any], models: Mapping[str, Any]) -> Any:
    from irgrid.dense_search import LateInteractionIndex

    return LateInteractionIndex(path / "late")


def late_query(index: Any, ctx: QueryContext) -> Any:
    spec = ENCODERS.get(ctx.options["encoder"])
    engine = engine_for(spec, "q", ctx.models["query"], ctx.device, int(ctx.options["batch_size"]))
    o = ctx.options
    return make_query_encoder(engine) >> index.retriever(num_results=int(o["num_results"]), ncells=int(o["ncells"]),
                                                         ndocs=int(o["ndocs"]))


def dense_retriever(spec: EncoderSpec, *, architecture: str, paper_name: str | None, batch_size: int = 32,
                    family: str = "dense", index_params: Mapping[str, Any] | None = None,
                    options: Mapping[str, Any] | None = None) -> Retriever:
    """Register the spec and its retriever entry (same name)."""
    register_encoder(spec)
    late = spec.pooling == "colbert"
    params = {"encoder": spec.name, "batch_size": batch_size, "doc": spec.side_config("d", with_model=False), **(index_params or {})}
    recipe = IndexRecipe(f"{spec.name}-{'plaid' if late else 'flex'}", build=build_late if late else build_dense,
                         open=open_late if late else open_dense, params=params, models={"doc": spec.document_model}, shardable=not late)
    opts = {"encoder": spec.name, "batch_size": batch_size, "num_results": 1000, "query_config": config_hash(spec.side_config("q", with_model=False)),
            **(options or {})}
    reference = spec.citation + (f" | {spec.notes}" if spec.notes else "")
    return register(Retriever(
        name=spec.name, family=family, architecture=architecture, paper_name=paper_name,
        index=recipe, models={"query": spec.query_model}, query=late_query if late else dense_query,
        options=opts, extra="dense", reference=reference,
    ))
