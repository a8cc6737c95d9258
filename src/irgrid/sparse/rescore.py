"""Lexical entries in re-ranking position (right of `>>`, `.scorer(ds)`, an operand of PyTerrier's `**` feature
union): the scores the entry's own retrieval gives the candidates, for a BM25 feature in learning to rank.

PISA has no scorer of given documents, and a text scorer over the candidates (`pt.text.scorer`) computes BM25 with
the statistics of the candidate set, not of the corpus: other numbers than the entry's run. So the entry retrieves
each query itself, from its own index with its own options, deep enough to see every candidate: first at its own
depth (`num_results`), then ten times deeper for the queries whose candidates are not all found, until each
candidate is found or the query returned fewer documents than asked for, which means it returned every document
that matches a query term. A candidate that matches none scores 0, as in BM25. Every score is thus the entry's own,
bit for bit (tests/integration/test_sparse_scorer.py), on every backend the entry runs (PISA, Lucene, the Lucene
weights in PISA). The cost is a retrieval per query, deeper where candidates come from elsewhere (a dense run).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from irgrid.core.retrievers import Retriever

DEEPER = 10  # each further pass retrieves this many times deeper
MAX_ROWS = 10_000_000  # results asked for in one batch (queries x depth): deeper passes go in smaller batches


class RetrievalScorerFactory:
    """The `make_scorer` of entries that score given candidates by their own retrieval (the lexical BM25 entries).
    `needs_index`: irgrid.runner.scoring opens (and builds, if missing) the entry's index for it."""

    needs_index = True

    def __call__(self, entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
        from irgrid.core.retrievers import QueryContext
        from irgrid.data.errors import CandidateError

        if index is None:
            raise CandidateError(f"{entry.name}: scoring given candidates needs the entry's own index (none was "
                                 f"opened)")

        def retrieve(k: int) -> Any:
            options = {**entry.options, "num_results": int(k)}
            return entry.query(index, QueryContext(options=options, models=models, device=device,
                                                   encoder=entry.encoder))

        scorer = _scorer_class()(entry.name, retrieve, int(entry.options.get("num_results") or 1000))
        # opened now, while the caller holds the index's lock: a backend that writes query-time files on opening
        # (PISA's per-k1/b files) writes them here; deeper retrievers of the same k1/b reuse them
        scorer.retriever(scorer.depth)
        return scorer

    def __repr__(self) -> str:
        return "irgrid.sparse.rescore.retrieval_scorer"


retrieval_scorer = RetrievalScorerFactory()


@functools.cache
def _scorer_class() -> type:
    """Defined on first use: `irgrid list` (which registers the entries) must not import PyTerrier."""
    import pandas as pd
    import pyterrier as pt

    class RetrievalScorer(pt.Transformer):
        """Scores a result frame's (qid, query, docno) rows with a retriever's own scores of those documents."""

        needs_text = False  # reads the entry's index, not the candidates' texts

        def __init__(self, name: str, retrieve: Callable[[int], Any], depth: int):
            self.name, self._retrieve, self.depth = name, retrieve, depth
            self._at: dict[int, Any] = {}  # depth -> the entry's retriever at that depth (opened once)
            self.passes: list[tuple[int, int]] = []  # (depth, queries) of each retrieval: what re-scoring cost

        def __repr__(self) -> str:
            return f"RetrievalScorer({self.name!r})"

        def retriever(self, k: int) -> Any:
            if k not in self._at:
                self._at[k] = self._retrieve(k)
            return self._at[k]

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            from irgrid.data.errors import CandidateError

            missing = [c for c in ("qid", "query", "docno") if c not in inp.columns]
            if missing:
                raise CandidateError(f"{self.name} scores given candidates: the input needs the columns qid, query "
                                     f"and docno, it lacks {missing} (give it a first stage's results)")
            out = inp.drop(columns=["score", "rank"], errors="ignore").reset_index(drop=True)
            if not len(out):
                return out.assign(score=pd.Series(dtype="float64"), rank=pd.Series(dtype="int64"))
            qids, docnos = out["qid"].astype(str), out["docno"].astype(str)
            wanted: dict[str, set[str]] = {}
            for q, d in zip(qids, docnos):
                wanted.setdefault(q, set()).add(d)
            queries = out.assign(qid=qids).drop_duplicates("qid")[["qid", "query"]].reset_index(drop=True)
            scores: dict[tuple[str, str], float] = {}
            k = max(self.depth, max(len(d) for d in wanted.values()))
            todo = queries
            while len(todo):
                deeper = []
                step = max(1, MAX_ROWS // k)
                for start in range(0, len(todo), step):
                    batch = todo.iloc[start:start + step]
                    self.passes.append((k, len(batch)))
                    res = self.retriever(k).transform(batch)
                    got = res.groupby(res["qid"].astype(str), sort=False)
                    for q in batch["qid"]:
                        block = got.get_group(q) if q in got.groups else res.iloc[:0]
                        for d, s in zip(block["docno"].astype(str), block["score"]):
                            if d in wanted[q]:
                                scores[(q, d)] = float(s)
                        found = sum((q, d) in scores for d in wanted[q])
                        if found < len(wanted[q]) and len(block) >= k:  # some may lie deeper
                            deeper.append(q)
                todo = queries[queries["qid"].isin(deeper)]
                k *= DEEPER
            out["score"] = [scores.get((q, d), 0.0) for q, d in zip(qids, docnos)]  # no query term: BM25 is 0
            return pt.model.add_ranks(out)

    return RetrievalScorer
