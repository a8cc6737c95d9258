"""The one builder: how a registry entry becomes runnable, and the Python door that builds any grid cell.

`irgrid.pipeline(...)` and an entry's `.pipeline(ds)` / `.retriever(ds)` end in `python_pipeline` (so the two doors
cannot drift apart); `Retriever.build` (the `GridCell` protocol's, which the grid calls through
`irgrid.runner.cell.build_pipeline`) is `build_entry`; `.scorer(ds)` and `.indexer(ds)` are the other roles. Entries
(irgrid.core.retrievers) reach this module by one lazy import, declared in the import contract: they stay data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell
from irgrid.core.retrievers import QueryContext, Retriever
from irgrid.models.resolver import with_mapping
from irgrid.runner.cell import build_pipeline, dataset_of, ensure_index, resolve_models, with_index
from irgrid.util import settings

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store


def python_pipeline(cell: GridCell, dataset: Any = None, **kwargs: Any) -> Any:
    """The Python door's builder: the cell's pipeline on a dataset, every query checked to be text
    (`build_pipeline`'s keywords: store, model_map, check_queries)."""
    return build_pipeline(cell, dataset, **kwargs)


def build_entry(entry: Retriever, dataset: Dataset, store: Store, model_map: Mapping[str, str] | None = None) -> Any:
    """`Retriever.build`: a registry entry's query pipeline on a dataset, its index built or reused, the dataset's
    policies applied."""
    ctx = QueryContext(options=entry.options, models=resolve_models(entry.models, model_map),
                       device=settings.device(), encoder=entry.encoder)
    if entry.index is None:
        pipeline = entry.query(None, ctx)
    else:
        pipeline = with_index(entry, dataset, store, model_map, lambda artifact: entry.query(artifact, ctx))
    from irgrid.runner.roles import FirstStage
    from irgrid.runner.scoring import build_scorer

    # given a result frame, a first stage re-ranks it or says what to use: it never retrieves anew
    models = dict(model_map or {})
    pipeline = FirstStage(entry, pipeline, lambda: build_scorer(entry, dataset, store, models))
    if dataset.drop_self_matches:
        from irgrid.runner.transforms import DropSelfMatches

        pipeline = pipeline >> DropSelfMatches()
    return pipeline


def scorer_role(entry: Retriever, dataset: Any = None, store: Store | None = None,
                model_map: Mapping[str, str] | None = None) -> Any:
    """`Retriever.scorer()`: the entry in re-ranking position (irgrid.runner.scoring.build_scorer)."""
    from irgrid.runner.scoring import build_scorer

    entry = with_mapping(entry, dict(model_map or {}))  # mapped checkpoints keyed by their folders' content
    return build_scorer(entry, dataset, store, model_map)


def indexer_role(entry: Retriever, dataset: Any = None, store: Store | None = None,
                 model_map: Mapping[str, str] | None = None) -> Any:
    """`Retriever.indexer()` (irgrid.runner.roles.Indexer)."""
    from irgrid.runner.roles import build_indexer

    ds = None if dataset is None else dataset_of(dataset)
    entry = entry if ds is None else entry.for_dataset(ds)  # per-dataset values can change the index recipe
    entry = with_mapping(entry, dict(model_map or {}))  # mapped checkpoints keyed by their folders' content
    return build_indexer(entry, ds, store, dict(model_map) if model_map is not None else None, ensure_index)
