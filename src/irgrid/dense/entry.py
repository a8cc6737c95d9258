"""Turn an `EncoderSpec` into a registry entry: the document side streams through the engine into an index,
the query side is the engine's query encoder followed by exact search. Entries stay data (pipelines/*.py).

The spec travels by value: index params carry `SideSpec(spec, "d")` and the entry its typed `encoder` field
(wiring, not an option; keyed as the `query_config` option it once was), so the engines are built from exactly the
(possibly profiled) settings, and each side's cache key is that side's configuration. Spec fields (`SPEC_OPTIONS`) and index params are options of the entry: setting one (a profile,
or `options:` in an experiment file) re-derives the entry from the changed spec (`Retriever.derive`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from irgrid.core.retrievers import BuildContext, EntryError, IndexRecipe, QueryContext, Retriever, register
from irgrid.dense.engine import engine_for, index_dense, make_query_encoder
from irgrid.dense.scorers import dense_scorer, late_scorer
from irgrid.dense.spec import SPEC_OPTIONS, EncoderSpec, SideSpec, register_encoder, require_spec, side_spec
from irgrid.util.hashing import cache_name


def query_spec(ctx: QueryContext) -> EncoderSpec:
    """The spec a query side encodes with: its entry's typed `encoder` wiring, as profiled / optioned."""
    return require_spec(ctx.encoder, "a dense query side")


def documents(ctx: BuildContext, spec: EncoderSpec) -> Iterator[dict[str, str]]:
    """Flat documents when the spec reads the flat join; its own fields otherwise (when the runner gives them)."""
    if spec.flat_documents or ctx.fielded is None:
        return ctx.docs()
    return ctx.fielded()


@cache_name("irgrid.dense_entry.build_dense")  # its path before the package had layers
def build_dense(ctx: BuildContext) -> None:
    spec = side_spec(ctx.params)
    engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, int(ctx.params["batch_size"]))
    index_dense(engine, documents(ctx, spec), ctx.path / "flex")


def open_dense(path: Path, params: Mapping[str, Any], models: Mapping[str, Any]) -> Any:
    from pyterrier_dr import FlexIndex

    return FlexIndex(str(path / "flex"))


@cache_name("irgrid.dense_entry.dense_query")  # its path before the package had layers
def dense_query(index: Any, ctx: QueryContext) -> Any:
    from irgrid.dense.search import ExactRetriever

    spec = query_spec(ctx)
    engine = engine_for(spec, "q", ctx.models["query"], ctx.device, int(ctx.options["batch_size"]))
    return make_query_encoder(engine) >> ExactRetriever(index, num_results=int(ctx.options["num_results"]),
                                                        device=ctx.device,
                                                        score_dtype=str(ctx.options.get("score_dtype", "fp16")))


def by_size(rule: Any, n_docs: int, what: str) -> int:
    """A fixed number, or [[more_than, value], ...]: the first row whose `more_than` the corpus size exceeds
    (e.g. ColBERT's ncells 4 above 5M documents, 2 otherwise)."""
    if isinstance(rule, int):
        return rule
    for more_than, value in rule:
        if n_docs > int(more_than):
            return int(value)
    raise EntryError(f"{what} rule {rule!r} has no row for {n_docs} documents (end it with [0, N])")


@cache_name("irgrid.dense_entry.build_late")  # its path before the package had layers
def build_late(ctx: BuildContext) -> None:
    from irgrid.dense.search import LateInteractionIndex

    spec = side_spec(ctx.params)
    engine = engine_for(spec, "d", ctx.models["doc"], ctx.device, int(ctx.params["batch_size"]))
    niter = by_size(ctx.params["kmeans_niter"], ctx.docs_count, "kmeans_niter")
    meta = LateInteractionIndex(ctx.path / "late").build(engine.stream(documents(ctx, spec)), kmeans_niter=niter)
    (ctx.path / "encoding.json").write_text(json.dumps({"encoder": spec.name, "kmeans_niter": niter,
                                                        **engine.stats.record(), **meta}))


def open_late(path: Path, params: Mapping[str, Any], models: Mapping[str, Any]) -> Any:
    from irgrid.dense.search import LateInteractionIndex

    return LateInteractionIndex(path / "late")


@cache_name("irgrid.dense_entry.late_query")  # its path before the package had layers
def late_query(index: Any, ctx: QueryContext) -> Any:
    spec = query_spec(ctx)
    engine = engine_for(spec, "q", ctx.models["query"], ctx.device, int(ctx.options["batch_size"]))
    o, n = ctx.options, int(index.meta["docs"])
    return make_query_encoder(engine) >> index.retriever(num_results=int(o["num_results"]),
                                                         ncells=by_size(o["ncells"], n, "ncells"))


def _entry(spec: EncoderSpec, kw: dict[str, Any]) -> Retriever:
    late = spec.pooling == "colbert"
    index_params = dict(kw["index_params"] or {})
    batch_size = kw["batch_size"]
    params = {"encoder": spec.name, "batch_size": batch_size, "doc": SideSpec(spec, "d"), **index_params}
    recipe = IndexRecipe(f"{spec.name}-{'plaid' if late else 'flex'}", build=build_late if late else build_dense,
                         open=open_late if late else open_dense, params=params, models={"doc": spec.document_model},
                         shardable=not late)
    profiled = sorted({k for settings in spec.profiles.values() for k in settings})
    shown = {k: getattr(spec, k) for k in profiled if k in SPEC_OPTIONS}  # visible, settable values
    shown.update({k: index_params[k] for k in profiled if k in index_params})
    # score_dtype: a quirk (irgrid.core.profiles.QUIRKS), out of the key at its default 'fp16'
    scoring = {} if late else {"score_dtype": "fp16"}
    opts = {"batch_size": batch_size, "num_results": 1000, **scoring, **shown, **(kw["options"] or {})}
    fixed = (*SPEC_OPTIONS, *index_params)

    def derive(options: Mapping[str, Any]) -> Retriever:
        changed = spec.with_settings(**{k: v for k, v in options.items() if k in SPEC_OPTIONS})
        # batch_size: the documents' encoding batch (index recipe) as well as the queries' and re-ranking's; it is
        # in the index key, so another value builds another index
        return _entry(changed, {**kw, "batch_size": int(options.get("batch_size", batch_size)),
                                "index_params": {**index_params, **{k: options[k] for k in index_params
                                                                    if k in options}},
                                "options": {**(kw["options"] or {}),
                                            **{k: v for k, v in options.items() if k not in fixed}}})

    reference = spec.citation + (f" | {spec.notes}" if spec.notes else "")
    return Retriever(
        name=kw["name"], family=kw["family"], architecture=kw["architecture"], paper_name=kw["paper_name"],
        index=recipe, models={"query": spec.query_model}, query=late_query if late else dense_query,
        make_scorer=late_scorer if late else dense_scorer,  # right of `>>`, `.scorer(ds)` (not part of the key)
        options=opts, encoder=spec, extra="dense", reference=reference, derive=derive,
        derive_options=(*SPEC_OPTIONS, *index_params, "batch_size"),
        wiring={"encoder": "to run another encoder, list its own entry instead ({name: <value>}): an entry's "
                           "checkpoints, prompts and pooling go together",
                "query_config": "the query side's settings are options of their own (query_template, "
                                "query_max_length, ...): set those"},
        profiles={name: dict(settings) for name, settings in spec.profiles.items()},
    )


def dense_retriever(spec: EncoderSpec, *, architecture: str, paper_name: str | None, batch_size: int = 32,
                    family: str = "dense", index_params: Mapping[str, Any] | None = None,
                    options: Mapping[str, Any] | None = None) -> Retriever:
    """Register the spec and its retriever entry (same name)."""
    register_encoder(spec)
    kw = {"name": spec.name, "architecture": architecture, "paper_name": paper_name, "batch_size": batch_size,
          "family": family, "index_params": index_params, "options": options}
    return register(_entry(spec, kw))
