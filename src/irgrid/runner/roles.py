"""The roles an entry hands out in Python, as PyTerrier artifacts hand out transformers:
`irgrid.retriever(name).retriever(ds)` (first stage), `.scorer(ds)` (re-ranks the candidates it is given) and
`.indexer(ds)` (builds the entry's index in the cache). The scorers are the ones a pipeline expression puts on
the right of `>>` (`irgrid.runner.scoring.scorer_factory`), so `bm25.retriever(ds) % 100 >> dense.scorer(ds)` is
the YAML item `bm25 % 100 >> dense`.

No silent re-retrieval: PyTerrier composes by data frames, so a first stage placed after another one receives
its result frame. Terrier's own retriever re-ranks such a frame; irgrid's first stages do the same when the entry
can score candidates (dense, late-interaction, re-rankers) and otherwise stop with one error naming what to use.
Retrieving anew while keeping the input rows (k x 1000 rows per query, duplicate pairs) is never done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyterrier as pt

from irgrid.core.retrievers import Retriever
from irgrid.runner.transforms import latency_accounting
from irgrid.util.errors import Error

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store


class RoleError(Error, ValueError):
    """A role used where it cannot work (a first stage that cannot re-rank given a result frame, a scorer given
    no candidates); the message names what to use instead."""


def _dataset(dataset: Any, what: str) -> Dataset:
    from irgrid.data.datasets import get as get_dataset

    if dataset is None:
        raise RoleError(f"{what} needs a dataset, e.g. 'beir/scifact/test'")
    return get_dataset(dataset) if isinstance(dataset, str) else dataset


def build_indexer(entry: Retriever, dataset: Any, store: Store | None, model_map: Mapping[str, str] | None,
                  ensure: Callable[..., Path]) -> Indexer:
    """`ensure`: the runner's `ensure_index` (locks, verification, manifests), handed in by irgrid.runner.cell."""
    from irgrid import store as store_mod

    ds = _dataset(dataset, f"{entry.name}.indexer()")
    if entry.index is None:
        raise RoleError(f"{entry.name}.indexer(): {entry.name!r} builds no index (it scores or rewrites at query "
                        f"time); use {entry.name}.retriever(ds) or .scorer(ds)")
    return Indexer(entry, ds, store or store_mod.current(), dict(model_map or {}), ensure)


class Scorer(pt.Transformer):
    """Re-scores the candidates of a result frame (qid, query, docno); refuses a frame of queries only."""

    def __init__(self, entry: Retriever, inner: Any):
        self.entry, self.transformer = entry, inner

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if "docno" not in inp.columns and len(inp):
            raise RoleError(f"{self.entry.name}.scorer() re-ranks candidates but got queries only (no 'docno' "
                            f"column); give it a first stage's results, e.g. irgrid.retriever('bm25').retriever(ds) "
                            f"% 100 >> irgrid.retriever({self.entry.name!r}).scorer(ds)")
        return self.transformer.transform(inp)

    def subtransformers(self) -> dict[str, Any]:
        """pt.inspect's protocol: the entry's scoring pipeline is inside (latency walkers look there)."""
        return {"transformer": self.transformer}

    def __repr__(self) -> str:
        return repr(self.transformer)


class FirstStage(pt.Transformer):
    """An entry's first-stage pipeline that re-ranks (or refuses) a result frame instead of retrieving anew."""

    def __init__(self, entry: Retriever, inner: Any, make_scorer: Callable[[], Any]):
        """`make_scorer`: the entry in re-ranking position on the same dataset and cache, built on first need
        (irgrid.runner.build hands in irgrid.runner.scoring.build_scorer)."""
        self.entry, self._make_scorer = entry, make_scorer
        self.transformer = inner  # the latency walker (runner.transforms.stages) looks inside: subtransformers()
        self._scorer: Any = None

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        # ties in trec_eval's order (irgrid.core.ties): what follows (a cut, RRF's ranks) sees the stored order
        from irgrid.core.ties import canonical_order

        if "docno" not in inp.columns:
            return canonical_order(self.transformer.transform(inp))
        if self._scorer is None:
            try:
                self._scorer = self._make_scorer()
            except RoleError as e:
                raise RoleError(f"{self.entry.name}: this first-stage retriever received a result frame (a 'docno' "
                                f"column) and would retrieve anew for every row; {str(e).split(': ', 1)[1]}") from None
        return canonical_order(self._scorer.transform(inp))

    def latency_seconds(self) -> float:
        """What the re-ranking path's memoised encodings cost (the first stage's own is the inner pipeline's)."""
        return 0.0 if self._scorer is None else float(latency_accounting(self._scorer)())

    def subtransformers(self) -> dict[str, Any]:
        """pt.inspect's protocol: the first-stage pipeline (the re-ranking path reports itself through
        `latency_seconds`, so it is not listed: it would be counted twice)."""
        return {"transformer": self.transformer}

    def __repr__(self) -> str:
        return repr(self.transformer)


class Indexer:
    """`index()` builds this entry's index of the dataset's corpus into the cache (or reuses a verified one) and
    returns its folder. irgrid indexes corpora it can name (catalog, ir_datasets, bring-your-own collections),
    so that the cache key covers the documents; other documents go in through a bring-your-own collection."""

    def __init__(self, entry: Retriever, dataset: Dataset, store: Store, model_map: dict[str, str],
                 ensure: Callable[..., Path]):
        self.entry, self.dataset, self.store, self.model_map, self._ensure = entry, dataset, store, model_map, ensure

    def index(self, docs: Any = None) -> Path:
        if docs is not None:
            raise RoleError(f"{self.entry.name}.indexer({self.dataset.name!r}).index(): irgrid indexes the dataset's "
                            f"own corpus (its cache key hashes it); to index other documents declare them as a "
                            f"collection (irgrid.dataset({{'name': ..., 'docs': ..., 'topics': ..., 'qrels': ...}}))")
        assert self.entry.index is not None
        return self._ensure(self.entry.index, self.dataset, self.store, self.model_map)

    def __repr__(self) -> str:
        return f"Indexer({self.entry.name!r}, {self.dataset.name!r})"
