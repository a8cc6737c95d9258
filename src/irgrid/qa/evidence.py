"""DisastQA's evidence settings as PyTerrier transformers: each adds `qcontext` (the passages the reader sees) to a
frame of items, so a setting composes with any reader as `setting >> reader`.

* Base: no passage (closed book).
* Golden: the item's golden passage.
* Mix: the Mix file's passage as released (one passage; see irgrid.data.disastqa for how it differs from the paper).
* Retrieved: the top-k passages of any registered retriever over the derived collection (k=5 by default, the
  paper's "Top-5"), in rank order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid.data import disastqa_ir as collection
from irgrid.util.errors import Error


class EvidenceError(Error, ValueError):
    """An evidence setting irgrid does not know, or one given an unusable depth."""


@dataclass(frozen=True)
class Setting:
    """An evidence setting as declared in an experiment: name, kind and (for Retrieved) retriever and k."""

    name: str
    kind: str  # base | golden | mix | retrieved
    retriever: str | None = None
    k: int = 5
    options: tuple[tuple[str, Any], ...] = ()

    def config(self, retriever_key: str | None = None) -> dict[str, Any]:
        return {"kind": self.kind, "retriever": self.retriever, "retriever_key": retriever_key, "k": self.k}


class FixedEvidence(pt.Transformer):
    """Base / Golden / Mix: the passages come from the item itself (column `source`, or none)."""

    def __init__(self, source: str | None):
        self.source = source

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        out = inp.copy()
        if self.source is None:
            out["qcontext"] = [[] for _ in range(len(out))]
        else:
            out["qcontext"] = [[p] for p in out[self.source]]
        out["evidence_docnos"] = [[collection.docno(p) for p in ps] for ps in out["qcontext"]]
        return out

    def __repr__(self) -> str:
        return f"FixedEvidence({self.source!r})"


class RetrievedEvidence(pt.Transformer):
    """Top-k of a retrieval pipeline (qid, query -> qid, docno, rank) as the reader's passages."""

    def __init__(self, retrieval: pt.Transformer, k: int = 5, texts: dict[str, str] | None = None):
        if k < 1:
            raise EvidenceError(f"k must be at least 1, got {k}")
        self.retrieval = retrieval
        self.k = k
        self.texts = texts if texts is not None else collection.passages()

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        out = inp.copy()
        if len(out) == 0:
            out["qcontext"], out["evidence_docnos"] = pd.Series(dtype=object), pd.Series(dtype=object)
            return out
        res = self.retrieval.transform(out[["qid", "query"]].astype({"qid": str}))
        res = res.sort_values(["qid", "rank"]) if "rank" in res.columns else res.sort_values(
            ["qid", "score"], ascending=[True, False])
        top = res.groupby("qid", sort=False)["docno"].apply(lambda s: list(s.astype(str))[: self.k]).to_dict()
        out["evidence_docnos"] = [top.get(str(q), []) for q in out["qid"]]
        out["qcontext"] = [[self.texts[d] for d in ds] for ds in out["evidence_docnos"]]
        return out

    def __repr__(self) -> str:
        return f"RetrievedEvidence({self.retrieval!r}, k={self.k})"


def fixed(kind: str) -> FixedEvidence:
    sources = {"base": None, "golden": "golden", "mix": "mix"}
    if kind not in sources:
        raise EvidenceError(f"unknown evidence setting {kind!r}; use base, golden, mix or retrieved")
    return FixedEvidence(sources[kind])
