"""The PyTerrier transformers a compiled expression is made of (a first stage read from its cell's stored run,
the candidates' texts for a re-ranker, the composed whole), defined on first use: `irgrid list` must not import
PyTerrier."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell
from irgrid.data.errors import CandidateError
from irgrid.runner.grammar import ExpressionError

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store


def CachedRun(entry: GridCell, dataset: Dataset, store: Store, model_map: Mapping[str, str]) -> Any:  # noqa: N802
    return _classes()["CachedRun"](entry, dataset, store, model_map)


def MinMax() -> Any:  # noqa: N802
    from irgrid.runner.transforms import PerQueryMinMax

    return PerQueryMinMax()


def DocText(dataset: Dataset, document: Callable[[Mapping[str, str]], str] | None = None) -> Any:  # noqa: N802
    return _classes()["DocText"](dataset, document)


def with_doc_text(scorer: Any, dataset: Dataset) -> Any:
    """A scorer that reads candidates' texts behind the DocText that gives them: the text its index encoded (the
    scorer's `document`, when its entry joins a document's fields its own way), or none when it needs none."""
    if getattr(scorer, "needs_text", True) is False:
        return scorer
    return DocText(dataset, getattr(scorer, "document", None)) >> scorer


def Composed(inner: Any, parts: list[Any], expression: Any) -> Any:  # noqa: N802
    """The compiled `expression` (an irgrid.runner.expressions.Expression: typed loosely, it imports this module)."""
    return _classes()["Composed"](inner, parts, expression)


@functools.cache
def _classes() -> dict[str, type]:
    """The transformers, defined on first use: `irgrid list` must not import PyTerrier."""
    import pandas as pd
    import pyterrier as pt

    class _CachedRun(pt.Transformer):
        """A first stage read from its grid cell's stored run (computed by the grid's `run_cell` if missing, over
        the dataset's whole query set, so it is the very cell a grid listing this entry has). The stored run's
        measured time per query is declared through `latency_seconds()`, so the expression's latency includes it."""

        def __init__(self, entry: GridCell, dataset: Dataset, store: Store, model_map: Mapping[str, str]):
            self.entry, self.dataset, self.store, self.model_map = entry, dataset, store, model_map
            self._run: pd.DataFrame | None = None
            self._ms = 0.0
            self._served = 0.0

        def _load(self) -> pd.DataFrame:
            if self._run is None:
                from irgrid.runner.cell import run_cell

                cell = run_cell(self.entry, self.dataset, self.dataset.topics(), self.store, dict(self.model_map))
                self._run = cell.res[["qid", "docno", "score", "rank"]].astype({"qid": str, "docno": str})
                self._ms = float(cell.meta.get("ms_per_query") or 0.0)
            return self._run

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            run = self._load()
            topics = inp.drop(columns=[c for c in ("docno", "score", "rank", "text") if c in inp.columns])
            topics = topics.drop_duplicates("qid").astype({"qid": str})
            self._served += self._ms * len(topics) / 1000
            out = topics.merge(run, on="qid", how="inner")
            return out.sort_values(["qid", "rank"], kind="stable").reset_index(drop=True)

        def latency_seconds(self) -> float:
            return self._served

        def __repr__(self) -> str:
            return f"StoredRun({self.entry.name!r}, {self.dataset.name!r})"

    class _DocText(pt.Transformer):
        """Adds each candidate's text: the entry's indexing text, from the ir_datasets docstore. By default the
        dataset's fields joined ("flat", the rule of `Dataset.docs`); `document` (an entry that joins fields its
        own way, e.g. `title [SEP] text`) makes it from the fields as `irgrid.data.doc_fields` yields them. So a
        dense re-ranker sees exactly the text its index encoded."""

        def __init__(self, dataset: Dataset, document: Callable[[Mapping[str, str]], str] | None = None):
            self.dataset, self.document = dataset, document
            self._store: Any = None
            self._all: dict[str, str] | None = None  # collections without a docstore (bring-your-own files)
            self._fields: list[str] = []

        def _texts(self, docnos: list[str]) -> dict[str, str]:
            if self._store is None and self._all is None:
                from irgrid.data.datasets import irds_load

                corpus = self.dataset.corpus_dataset()
                irds = irds_load(corpus)
                names = irds.docs_cls()._fields
                self._fields = [f for f in corpus.fields if f in names]
                try:
                    self._store = irds.docs_store()
                except AttributeError:  # read once into memory: such collections are small files
                    if self.document is None:
                        self._all = {d["docno"]: d["text"] for d in corpus.docs()}
                    else:
                        from irgrid.data.doc_fields import fielded_docs

                        self._all = {d["docno"]: self.document(d) for d in fielded_docs(self.dataset)}
            if self._all is not None:
                return {d: self._all[d] for d in docnos if d in self._all}
            docs = self._store.get_many(docnos)
            if self.document is not None:  # the fields as irgrid.data.doc_fields.fielded_docs gives them
                return {d: self.document({f: getattr(doc, f) or "" for f in self._fields}) for d, doc in docs.items()}
            return {d: " ".join(t for t in (getattr(doc, f) for f in self._fields) if t) for d, doc in docs.items()}

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if "text" in inp.columns:
                return inp
            if len(inp) == 0:
                return inp.assign(text=pd.Series([], dtype=object))
            text = self._texts(list(dict.fromkeys(inp["docno"].astype(str))))
            missing = sorted(set(inp["docno"].astype(str)) - set(text))
            if missing:
                raise CandidateError(f"{self.dataset.corpus}: {len(missing)} candidate document(s) not in the corpus, "
                                     f"e.g. {missing[:3]}")
            return inp.assign(text=inp["docno"].astype(str).map(text))

        def __repr__(self) -> str:
            return f"DocText({self.dataset.corpus!r})"

    class _Composed(pt.Transformer):
        """The compiled expression; sums the latency its stored stages and memoised scorers declare."""

        def __init__(self, inner: Any, parts: list[Any], expression: Any):
            self._inner, self._parts, self.expression = inner, parts, expression
            self.source = expression.source

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if "docno" in inp.columns:  # its first stages serve stored runs per qid: they would retrieve anew
                raise ExpressionError(
                    f"pipeline {self.source!r} is a first stage: it retrieves for each query, and received a result "
                    f"frame (a 'docno' column). To re-rank candidates use a scorer, e.g. "
                    f"irgrid.retriever('all-minilm-l6-v2').scorer(ds), or put the whole cascade in one expression")
            out = self._inner.transform(inp)
            if len(out) == 0:
                return out
            out = out.sort_values(["qid", "score"], ascending=[True, False], kind="stable")
            return pt.model.add_ranks(out.reset_index(drop=True))

        def latency_seconds(self) -> float:
            from irgrid.runner.transforms import latency_accounting

            return latency_accounting(*self._parts)()

        def subtransformers(self) -> dict[str, Any]:
            """pt.inspect's protocol: none listed. The expression is one stage for walkers: its
            `latency_seconds` already sums its stored stages and memoised scorers (listing them would count
            them twice)."""
            return {}

        def __repr__(self) -> str:
            return f"Expression({self.source!r}: {self._inner!r})"

    return {"CachedRun": _CachedRun, "DocText": _DocText, "Composed": _Composed}
