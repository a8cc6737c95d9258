"""Dense and late-interaction entries in re-ranking position (right of `>>`, `.scorer(ds)`): each entry declares
its scorer (`Retriever(make_scorer=...)`, irgrid.dense.entry), so the runner never names these.

Dense entries score through a pyterrier-dr `BiEncoder` over irgrid's own encoding engine (the same vectors the
entry's index holds, documents' texts from the dataset's ir_datasets docstore), late-interaction entries by exact
MaxSim (`late_scorer`). A scorer that reads texts says so with `needs_text`, and the way its index joined a
document's fields with `document`; the runner puts the texts in front (irgrid.runner.stages.with_doc_text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from irgrid.core.retrievers import Retriever
from irgrid.data.errors import CandidateError
from irgrid.util.memo import Memo

if TYPE_CHECKING:
    import pandas as pd


PROGRESS_FROM = 1024  # candidate texts to encode from which a progress line is shown


def dense_scorer(entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
    """A dense entry as a re-ranker, scoring the candidates by the dot product of the entry's own vectors:

    - its index is in the cache: the query encoder (irgrid's engine) >> pyterrier-dr's FlexIndex scorer over the
      indexed vectors (exactly the scores of the entry's full run for those documents);
    - otherwise: pyterrier-dr's BiEncoder text scorer over irgrid's engine for this entry (checkpoints, pooling,
      prompts, lengths), encoding only the candidates' texts, no index built, scored as the index path scores
      (`_text_scorer`). On CPU the vectors, hence the scores, equal the indexed ones bit for bit (the engine never
      pads there; `irgrid audit --stability`'s `cold` variant); on a GPU up to the rounding of batch composition
      (tests/integration/test_expressions.py compares the two paths).
    """
    import numpy as np
    import pyterrier_dr

    from irgrid.dense.engine import engine_for, make_query_encoder
    from irgrid.dense.spec import spec_of

    # the entry's own spec as profiled / optioned (not the registered one: a `paper` profile's prompts and lengths
    # would otherwise score differently from the entry's own retrieval)
    spec, d_spec = spec_of(entry, "q"), spec_of(entry, "d")
    batch = int(entry.options["batch_size"])
    q_engine = engine_for(spec, "q", models["query"], device, batch)
    if index is not None:
        scorer = make_query_encoder(q_engine) >> index.scorer()
        return _with_latency(scorer, None, needs_text=False)
    d_engine = engine_for(d_spec, "d", models["doc"], device, batch)

    def encode_texts(todo: list[str]) -> list[Any]:
        # many candidates (a cascade over a whole topic set: minutes on CPU) get the index builds' progress line
        if len(todo) < PROGRESS_FROM:
            return list(d_engine.encode(todo))
        from irgrid.util.console import Progress, reporting

        bar = Progress(len(todo), f"re-ranking with {spec.name}: encoding candidate texts (no index in the cache)")
        try:
            with reporting(bar):
                return list(d_engine.encode(todo))
        finally:
            bar.close()

    class EngineBiEncoder(pyterrier_dr.BiEncoder):
        def __init__(self) -> None:
            super().__init__(batch_size=batch, text_field="text")
            self.docs = Memo()

        def encode_queries(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
            return q_engine.encode(list(texts))

        def encode_docs(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
            vecs = self.docs.get_many(list(texts), encode_texts)
            return np.stack(vecs) if vecs else np.zeros((0, 0), dtype=np.float32)

        def latency_seconds(self) -> float:
            return self.docs.served

        def __repr__(self) -> str:
            return f"EngineBiEncoder({spec.name!r})"

    bi = EngineBiEncoder()
    out = _with_latency(_text_scorer(bi), bi)
    out.document = None if d_spec.flat_documents else d_spec.document  # the text its index encoded (DocText)
    return out


def _text_scorer(bi: Any) -> Any:
    """Candidates scored from their texts exactly as pyterrier-dr's FlexIndex scorer (`NumpyScorer`) scores the
    indexed vectors: per query, `q @ D.T` over its candidates in input order. pyterrier-dr's own text scorer sums
    `q * d` row by row instead, which rounds differently (|Δscore| 1.2e-7 on all-MiniLM-L6-v2 between a cascade
    with and without the entry's index in the cache, issue 43); with the engine's vectors independent of their
    batch, the two paths now give the same scores bit for bit."""
    import numpy as np
    import pyterrier as pt

    class TextScorer(pt.Transformer):
        def transform(self, inp: Any) -> Any:
            inp = inp.reset_index(drop=True)
            uniq, inv = np.unique(inp["query"].astype(str).values, return_inverse=True)
            qvecs = np.asarray(bi.encode_queries(list(uniq)), dtype=np.float32)
            dvecs = np.asarray(bi.encode_docs(inp["text"].astype(str).tolist()), dtype=np.float32)
            scores = np.zeros(len(inp), dtype=np.float32)
            for _, rows in inp.groupby("qid", sort=False).indices.items():
                scores[rows] = (qvecs[inv[rows[0]]].reshape(1, -1) @ dvecs[rows].T).reshape(-1)
            return inp.assign(score=scores)

        def __repr__(self) -> str:
            return repr(bi)

    return TextScorer()


def _with_latency(scorer: Any, owner: Any, needs_text: bool = True) -> Any:
    """The scorer, exposing its owner's memo latency (pyterrier-dr's scorer hides the encoder from walkers);
    accepts the empty frames of warm-up calls, and drops query vectors from its output."""
    import pyterrier as pt

    class _Scorer(pt.Transformer):
        def transform(self, inp: Any) -> Any:
            if len(inp) == 0:
                return inp.assign(score=[], rank=[]) if "score" not in inp.columns else inp
            # `docid`: a first stage's own document ids (another index's numbering): never look vectors up by it
            out = scorer.transform(inp.drop(columns=["score", "rank", "docid"], errors="ignore"))
            out = out.drop(columns=[c for c in ("query_vec", "doc_vec", "docid") if c in out.columns])
            return pt.model.add_ranks(out)

        def latency_seconds(self) -> float:
            return owner.latency_seconds() if owner is not None else 0.0

        def __repr__(self) -> str:
            return repr(scorer)

    out = _Scorer()
    out.needs_text = needs_text
    return out


def late_scorer(entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
    """A late-interaction entry (ColBERT) as a re-ranker: exact MaxSim of the query's token vectors against each
    candidate's, read from the entry's index when the cache holds it (the very scores of its full run: its
    retriever scores candidates by exact MaxSim over the same fp16 vectors), otherwise encoded from the
    candidates' texts by the entry's engine (float32: equal up to fp16 rounding). pyterrier-colbert's text scorer
    does the latter but needs colbert-ai, which fails on the pinned transformers (irgrid.dense.entry)."""
    import numpy as np
    import pyterrier as pt

    from irgrid.dense.engine import engine_for, make_query_encoder
    from irgrid.dense.spec import spec_of

    batch = int(entry.options["batch_size"])
    q_engine = engine_for(spec_of(entry, "q"), "q", models["query"], device, batch)
    encode_queries = make_query_encoder(q_engine)
    stored = index.retriever() if index is not None else None
    row_of = {d: i for i, d in enumerate(stored.docnos)} if stored is not None else None
    d_engine = None if stored is not None else engine_for(spec_of(entry, "d"), "d", models["doc"], device, batch)
    memo = Memo()

    def maxsim(q: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
        return np.array([float((q @ np.asarray(d, dtype=np.float32).T).max(axis=1).sum()) if len(d) else 0.0
                         for d in docs], dtype=np.float32)

    class _LateScorer(pt.Transformer):
        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if len(inp) == 0:
                return inp.assign(score=[], rank=[]) if "score" not in inp.columns else inp
            out = encode_queries.transform(inp.drop(columns=["score", "rank"], errors="ignore")
                                           .reset_index(drop=True))
            scores = np.zeros(len(out), dtype=np.float32)
            for _, rows in out.groupby("qid", sort=False).indices.items():
                q = np.asarray(out["query_embs"].iloc[rows[0]], dtype=np.float32)
                docnos = out["docno"].iloc[rows].astype(str).tolist()
                if stored is not None:
                    missing = [d for d in docnos if d not in row_of]
                    if missing:
                        raise CandidateError(f"{entry.name}: {len(missing)} candidate(s) not in its index, e.g. "
                                             f"{missing[:3]}")
                    scores[rows] = stored.maxsim(q, np.array([row_of[d] for d in docnos], dtype=np.int64))
                else:
                    texts = out["text"].iloc[rows].tolist()
                    scores[rows] = maxsim(q, memo.get_many(texts, lambda todo: list(d_engine.encode(todo))))
            out = out.drop(columns=["query_embs"]).assign(score=scores.astype(float))
            return pt.model.add_ranks(out)

        def latency_seconds(self) -> float:
            return memo.served

        def __repr__(self) -> str:
            return f"LateInteractionScorer({entry.name!r}, {'index' if stored is not None else 'texts'})"

    scorer = _LateScorer()
    scorer.needs_text = stored is None
    return scorer
