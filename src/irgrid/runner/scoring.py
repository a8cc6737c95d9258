"""Entries in re-ranking position (right of `>>` in an expression, `irgrid.retriever(name).scorer(ds)` in Python):
which entries can score a given candidate set, and the scorer an entry gives on a dataset.

An entry declares its scorer itself (`Retriever(make_scorer=...)`: the dense and late-interaction entries with
irgrid.dense.scorers, the re-rankers of pipelines/rerankers.py with irgrid.cross_encoders); `register_scorer` lets
users' own query builders score too. The runner never names a backend's scorer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell
from irgrid.core.retrievers import Retriever
from irgrid.runner.grammar import ExpressionError
from irgrid.runner.stages import with_doc_text

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store

# How an entry scores a given candidate set: its own `make_scorer` (an entry declares it: the dense and
# late-interaction entries, the re-rankers of pipelines/rerankers.py), else the factory registered for its query
# builder: query builder -> factory(entry, resolved models, device, index or None); `irgrid.register_scorer` lets
# users' own query builders score too. RERANK_ONLY: query builders that cannot be a first stage (an entry says so
# itself with `rerank_only`).
SCORERS: dict[Callable[..., Any], Callable[..., Any]] = {}
RERANK_ONLY: set[Callable[..., Any]] = set()


def register_scorer(query: Callable[..., Any], scorer: Callable[..., Any], rerank_only: bool = False) -> None:
    """Let the entries built on the query builder `query` re-rank (`>>`, `.scorer(ds)`) through `scorer`; for
    transformers of your own. An entry declared in pipelines/ says it with `Retriever(make_scorer=...)` instead."""
    SCORERS[query] = scorer
    if rerank_only:
        RERANK_ONLY.add(query)


def scorer_factory(cell: GridCell) -> Callable[..., Any] | None:
    """The factory that makes an entry a scorer of given candidates (None: it cannot score, as a pipeline)."""
    if not isinstance(cell, Retriever):
        return None
    ensure_scorers()
    return cell.make_scorer or SCORERS.get(cell.query)


def rerank_only(cell: GridCell) -> bool:
    """Whether the entry only scores given candidates (it cannot be a first stage); False for a pipeline."""
    if not isinstance(cell, Retriever):
        return False
    ensure_scorers()
    return cell.rerank_only or cell.query in RERANK_ONLY


def ensure_scorers() -> None:
    """Load the entries (and so the scorers they declare, and what their packages register)."""
    from irgrid.core import entries

    entries.load()


def entry_scorer(entry: Retriever, dataset: Dataset, store: Store, model_map: Mapping[str, str]) -> Any:
    """The entry in re-ranking position. Scorer factories get (entry, resolved models, device, index): `index`
    is the entry's opened index when the cache already holds it for this corpus (never built for this), else
    None; a factory that needs texts gets them from the dataset's docstore (DocText)."""
    from irgrid.runner.cell import open_index, resolve_models
    from irgrid.util import settings

    entry = entry.for_dataset(dataset)  # a profile's per-dataset values (a re-ranker's query length on ArguAna)
    factory = scorer_factory(entry)
    if factory is None:
        raise ExpressionError(_scorer_hint(entry))
    models = resolve_models(entry.all_models(), dict(model_map))
    if getattr(factory, "needs_index", False) and entry.index is not None:
        # a scorer that reads the entry's index (a lexical entry scores by its own retrieval): built if missing,
        # opened as the entry's first stage opens it (under its lock: PISA may write query-time files)
        from irgrid.runner.cell import with_index

        scorer = with_index(entry, dataset, store, dict(model_map),
                            lambda index: factory(entry, models, settings.device(), index))
        return with_doc_text(scorer, dataset)
    index = open_index(entry, dataset, store, dict(model_map)) \
        if entry.index is not None and store.indexes.ready(entry.index, dataset) else None
    scorer = factory(entry, models, settings.device(), index)
    return with_doc_text(scorer, dataset)


# -- the scorer role in Python (`irgrid.retriever(name).scorer(ds)`, irgrid.runner.roles) --------------------------


def can_score(entry: GridCell) -> bool:
    """Whether the entry can re-rank a candidate set (a scorer is declared or registered for it)."""
    return scorer_factory(entry) is not None


def _scorer_hint(entry: Retriever) -> str:
    registered = _registered()
    kinds = sorted({f"{e.family}" for e in registered if can_score(e)
                    and all(can_score(o) for o in registered if o.family == e.family)})
    some = sorted(e.name for e in registered if can_score(e) and f"{e.family}" not in kinds)
    return (f"{entry.name!r} ({entry.family}) cannot score given candidates; the entries that can re-rank "
            f"(right of >>, an operand of PyTerrier's ** feature union) are those of the families "
            f"{', '.join(kinds)}{', and the entries ' + ', '.join(some) if some else ''} (`irgrid list`); fuse first stages with "
            f"irgrid.PerQueryMinMax / irgrid.rrf instead")


def _registered() -> list[Retriever]:
    from irgrid.core.retrievers import RETRIEVERS

    return list(RETRIEVERS)


def build_scorer(entry: Retriever, dataset: Any, store: Store | None = None,
                 model_map: Mapping[str, str] | None = None) -> Any:
    """The entry in re-ranking position on a dataset: the very scorer a pipeline expression uses after `>>`
    (the entry's indexed vectors when its index is in the cache, else the candidates' texts)."""
    from irgrid import store as store_mod
    from irgrid.runner.cell import dataset_of
    from irgrid.runner.roles import RoleError, Scorer

    if dataset is None:
        raise RoleError(f"{entry.name}.scorer() needs a dataset, e.g. 'beir/scifact/test'")
    ds = dataset_of(dataset)
    if not can_score(entry):
        raise RoleError(f"{entry.name}.scorer(): {_scorer_hint(entry)}")
    return Scorer(entry, entry_scorer(entry, ds, store or store_mod.current(), dict(model_map or {})))

