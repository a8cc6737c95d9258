"""The roles an entry hands out in Python, as PyTerrier artifacts hand out transformers:
`irgrid.retriever(name).retriever(ds)` (first stage), `.scorer(ds)` (re-ranks the candidates it is given) and
`.indexer(ds)` (builds the entry's index in the cache). The scorers are the ones a pipeline expression puts on
the right of `>>` (`irgrid.runner.expressions.SCORERS`), so `bm25.retriever(ds) % 100 >> dense.scorer(ds)` is
the YAML item `bm25 % 100 >> dense`.

No silent re-retrieval: PyTerrier composes by data frames, so a first stage placed after another one receives
its result frame. Terrier's own retriever re-ranks such a frame; irgrid's first stages do the same when the entry
can score candidates (dense, late-interaction, re-rankers) and otherwise stop with one error naming what to use.
Retrieving anew while keeping the input rows (k x 1000 rows per query, duplicate pairs) is never done.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyterrier as pt

from irgrid.core.errors import Error
from irgrid.core.retrievers import Retriever

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store


class RoleError(Error, ValueError):
    """A role used where it cannot work (a first stage that cannot re-rank given a result frame, a scorer given
    no candidates); the message names what to use instead."""


def can_score(entry: Retriever) -> bool:
    """Whether the entry can re-rank a candidate set (a scorer is registered for it)."""
    from irgrid.runner.expressions import SCORERS, _ensure_scorers

    _ensure_scorers()
    return entry.query in SCORERS


def _scorer_hint(entry: Retriever) -> str:
    from irgrid.runner.expressions import SCORERS

    kinds = sorted({f"{e.family}" for e in _registered() if e.query in SCORERS})
    return (f"{entry.name!r} ({entry.family}) cannot score given candidates; the entries that can re-rank are "
            f"of the families {', '.join(kinds)} (`irgrid list`); fuse first stages with "
            f"irgrid.PerQueryMinMax / irgrid.rrf instead")


def _registered() -> list[Retriever]:
    from irgrid.core.retrievers import RETRIEVERS

    return list(RETRIEVERS)


def _dataset(dataset: Any, what: str) -> Dataset:
    from irgrid.data.datasets import get as get_dataset

    if dataset is None:
        raise ValueError(f"{what} needs a dataset, e.g. 'beir/scifact/test'")
    return get_dataset(dataset) if isinstance(dataset, str) else dataset


def build_scorer(entry: Retriever, dataset: Any, store: Store | None = None,
                 model_map: Mapping[str, str] | None = None) -> Any:
    """The entry in re-ranking position on a dataset: the very scorer a pipeline expression uses after `>>`
    (the entry's indexed vectors when its index is in the cache, else the candidates' texts)."""
    from irgrid.runner.expressions import _scorer
    from irgrid.store import Store

    ds = _dataset(dataset, f"{entry.name}.scorer()")
    if not can_score(entry):
        raise RoleError(f"{entry.name}.scorer(): {_scorer_hint(entry)}")
    return Scorer(entry, _scorer(entry, ds, store or Store(), dict(model_map or {})))


def build_indexer(entry: Retriever, dataset: Any, store: Store | None = None,
                  model_map: Mapping[str, str] | None = None) -> Indexer:
    from irgrid.store import Store

    ds = _dataset(dataset, f"{entry.name}.indexer()")
    if entry.index is None:
        raise RoleError(f"{entry.name}.indexer(): {entry.name!r} builds no index (it scores or rewrites at query "
                        f"time); use {entry.name}.retriever(ds) or .scorer(ds)")
    return Indexer(entry, ds, store or Store(), dict(model_map or {}))


class Scorer(pt.Transformer):
    """Re-scores the candidates of a result frame (qid, query, docno); refuses a frame of queries only."""

    def __init__(self, entry: Retriever, inner: Any):
        self.entry, self.transformer = entry, inner  # `transformer`: latency walkers look inside

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if "docno" not in inp.columns and len(inp):
            raise RoleError(f"{self.entry.name}.scorer() re-ranks candidates but got queries only (no 'docno' "
                            f"column); give it a first stage's results, e.g. irgrid.retriever('bm25').retriever(ds) "
                            f"% 100 >> irgrid.retriever({self.entry.name!r}).scorer(ds)")
        return self.transformer.transform(inp)

    def __repr__(self) -> str:
        return repr(self.transformer)


class FirstStage(pt.Transformer):
    """An entry's first-stage pipeline that re-ranks (or refuses) a result frame instead of retrieving anew."""

    def __init__(self, entry: Retriever, dataset: Dataset, store: Store, model_map: Mapping[str, str],
                 inner: Any):
        self.entry, self.dataset, self.store, self.model_map = entry, dataset, store, dict(model_map)
        self.transformer = inner  # `transformer`: latency walkers (irgrid.runner.cell) look inside
        self._scorer: Any = None

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if "docno" not in inp.columns:
            return self.transformer.transform(inp)
        if self._scorer is None:
            if not can_score(self.entry):
                raise RoleError(f"{self.entry.name}: this first-stage retriever received a result frame (a 'docno' "
                                f"column) and would retrieve anew for every row; {_scorer_hint(self.entry)}")
            self._scorer = build_scorer(self.entry, self.dataset, self.store, self.model_map)
        return self._scorer.transform(inp)

    def latency_seconds(self) -> float:
        """What the re-ranking path's memoised encodings cost (the first stage's own is the inner pipeline's)."""
        if self._scorer is None:
            return 0.0
        from irgrid.runner.cell import _latency_accounting

        return float(_latency_accounting(self._scorer)())

    def __repr__(self) -> str:
        return repr(self.transformer)


class Indexer:
    """`index()` builds this entry's index of the dataset's corpus into the cache (or reuses a verified one) and
    returns its folder. irgrid indexes corpora it can name (catalog, ir_datasets, bring-your-own collections),
    so that the cache key covers the documents; other documents go in through a bring-your-own collection."""

    def __init__(self, entry: Retriever, dataset: Dataset, store: Store, model_map: dict[str, str]):
        self.entry, self.dataset, self.store, self.model_map = entry, dataset, store, model_map

    def index(self, docs: Any = None) -> Path:
        from irgrid.runner.cell import ensure_index

        if docs is not None:
            raise RoleError(f"{self.entry.name}.indexer({self.dataset.name!r}).index(): irgrid indexes the dataset's "
                            f"own corpus (its cache key hashes it); to index other documents declare them as a "
                            f"collection (irgrid.dataset({{'name': ..., 'docs': ..., 'topics': ..., 'qrels': ...}}))")
        assert self.entry.index is not None
        return ensure_index(self.entry.index, self.dataset, self.store, self.model_map)

    def __repr__(self) -> str:
        return f"Indexer({self.entry.name!r}, {self.dataset.name!r})"
