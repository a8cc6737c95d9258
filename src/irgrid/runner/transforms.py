"""Small transformers the engine adds around entries (policy, not retrieval)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid.data.errors import InputError
from irgrid.util.errors import Error


class DropSelfMatches(pt.Transformer):
    """Remove a query's own id from its ranking (datasets whose queries are also documents: ArguAna, Quora).

    PyTerrier has no such transformer; BEIR's evaluation and Pyserini's `--remove-query` do the same.
    """

    def transform(self, res: pd.DataFrame) -> pd.DataFrame:
        if len(res) == 0 or "docno" not in res.columns:
            return res
        kept = res[res["qid"].astype(str) != res["docno"].astype(str)].copy()
        if "rank" in kept.columns:  # ranks renumbered, ties in trec_eval's order (irgrid.core.ties)
            from irgrid.core.ties import canonical_order

            kept = canonical_order(kept)
        return kept

    def __repr__(self) -> str:
        return "DropSelfMatches()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DropSelfMatches)

    def __hash__(self) -> int:
        return hash("DropSelfMatches")


class CheckQueries(pt.Transformer):
    """Queries given through the Python API must be text: None, NaN or a number reached PISA as a SystemError
    (issue 32). PyTerrier has no input check of this kind; one ValueError names the query id instead."""

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if len(inp) and "query" in inp.columns and not all(isinstance(q, str) for q in inp["query"].tolist()):
            bad = inp[~inp["query"].map(lambda q: isinstance(q, str))]
            if len(bad):
                first = bad.iloc[0]
                qid = first["qid"] if "qid" in bad.columns else bad.index[0]
                raise InputError(f"query {first['query']!r} (qid {qid!r}) is not text: {len(bad)} of {len(inp)} "
                                 f"queries are not str; pass each query as a string (drop missing ones first)")
        return inp

    def __repr__(self) -> str:
        return "CheckQueries()"


class RawSumWarning(Error, UserWarning):
    """A PyTerrier `+` adds the raw scores of two entries on different scales (the grammar's `+` normalises)."""


def score_scale(entry: Any) -> str | None:
    """What an entry's scores are, in words, for comparing scales (None: not an entry, e.g. a pipeline)."""
    family = getattr(entry, "family", None)
    if family is None or family == "pipeline":
        return None
    return f"{family} {getattr(entry, 'architecture', '')}".strip()


class EntryPipeline(pt._ops.Compose):
    """An entry's pipeline as the Python door hands it out (`irgrid.pipeline(name, ds)`, `.retriever(ds)`): a
    PyTerrier pipeline that remembers its entry, so that a raw `+` of two differently scaled entries warns.

    Why: Python's `bm25 + dense` is PyTerrier's raw sum, while the expression `bm25 + dense` min-max normalises
    each side first; BM25's unbounded scores then drown a cosine (issue 41)."""

    def __init__(self, *transformers: Any, entry: Any = None):
        super().__init__(*transformers)
        self.entry = entry

    def _check_sum(self, other: Any) -> None:
        import warnings

        mine, theirs = score_scale(self.entry), score_scale(getattr(other, "entry", None))
        if mine and theirs and mine != theirs:
            a, b = self.entry.name, other.entry.name
            warnings.warn(f"{a} + {b}: PyTerrier's `+` adds raw scores of differently scaled entries ({mine} vs "
                          f"{theirs}); the experiment grammar's `{a} + {b}` min-max normalises each first. For that "
                          f"here: ({a} >> irgrid.PerQueryMinMax()) + ({b} >> irgrid.PerQueryMinMax())",
                          RawSumWarning, stacklevel=3)

    def __add__(self, right: Any) -> Any:
        self._check_sum(right)
        return super().__add__(right)

    def __radd__(self, left: Any) -> Any:
        self._check_sum(left)
        return pt._ops.Sum(left, self)


def drop_unjudged_self_matches(res: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The paper's evaluation rule on every dataset: a document whose id equals the query id is removed unless
    it is judged relevant (valentinsvelev/retriever-evaluation src/evaluator.py, skip_self_matches='auto').

    Applied to stored runs at evaluation time, so cached runs (and their keys) are the same under either rule.
    """
    if len(res) == 0:
        return res
    same = res["qid"].astype(str) == res["docno"].astype(str)
    if not same.any():
        return res
    rel = qrels[qrels["label"] > 0]
    judged = set(zip(rel["qid"].astype(str), rel["docno"].astype(str)))
    pairs = zip(res["qid"].astype(str), res["docno"].astype(str))
    drop = same & ~pd.Series([pair in judged for pair in pairs], index=res.index)
    kept = res[~drop].copy()
    if "rank" in kept.columns:
        kept = pt.model.add_ranks(kept.drop(columns=["rank"]))
    return kept


class PerQueryMinMax(pt.Transformer):
    """Per-query min-max scaling of `score` to [0, 1] (a query whose scores are all equal gets 0): the
    normalisation of the expression grammar's `+` (`0.7 * bm25 + 0.3 * dense`). pyterrier-alpha's
    `PerQueryMaxMinScore` does this but fails to import its validator with the pinned PyTerrier, hence ours.
    In Python: `0.7 * (a >> PerQueryMinMax()) + 0.3 * (b >> PerQueryMinMax())`."""

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if len(inp) == 0:
            return inp
        score = inp["score"].astype(float)  # in float64 whatever the retriever's dtype: both doors compute alike
        g = score.groupby(inp["qid"])
        lo, hi = g.transform("min"), g.transform("max")
        span = (hi - lo).where(hi > lo, 1.0)
        return inp.assign(score=(score - lo) / span)

    def __repr__(self) -> str:
        return "PerQueryMinMax()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerQueryMinMax)

    def __hash__(self) -> int:
        return hash("PerQueryMinMax")


def stages(*pipelines: Any) -> list[Any]:
    """Every stage of the pipelines, each once (by identity), in walk order, through PyTerrier's own introspection
    (`pt.inspect.subtransformers`: operators, caches, pyterrier-alpha's fusion, and any transformer that declares
    the `HasSubtransformers` protocol, as irgrid's wrappers do). A transformer PyTerrier cannot inspect is one
    stage: what it holds is then timed with it, not credited separately."""
    import pyterrier as pt

    found, stack, seen = [], list(reversed(pipelines)), set()
    while stack:
        t = stack.pop()
        if id(t) in seen:  # a stage reused within one pipeline is listed once
            continue
        seen.add(id(t))
        found.append(t)
        try:
            inner = pt.inspect.subtransformers(t) if isinstance(t, pt.Transformer) else {}
        except pt.inspect.InspectError:
            inner = {}
        for value in reversed(list(inner.values())):
            stack.extend(reversed(value) if isinstance(value, list) else [value])
    return found


def latency_accounting(*pipelines: Any) -> Callable[[], float]:
    """Sum of `latency_seconds()` over the pipelines' stages: time a stage really costs but that a cache served
    in this process (e.g. cached query generations, memoised encodings). Duck-typed, so any transformer can
    declare it; each stage counts once."""
    parts = [t for t in stages(*pipelines) if hasattr(t, "latency_seconds")]
    return lambda: float(sum(p.latency_seconds() for p in parts))
