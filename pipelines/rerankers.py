"""Re-rankers (cross-encoders): entries that score a candidate set; used on the right of `>>` in a pipeline
expression (`bm25 % 100 >> ce-ms-marco-minilm-l6-v2`). Behaviour: irgrid.cross_encoders.

No cross-encoder weights can be had offline here (../shared/models/README.md): tests run tiny random-weight models
of the real architectures (`arch`), effectiveness with the real checkpoints needs a machine that reaches the hub.
Revisions are left unpinned: none could be verified offline.
"""

from __future__ import annotations

from irgrid.core.modelref import ModelRef
from irgrid.core.retrievers import Retriever, register
from irgrid.cross_encoders import make_scorer, reranker_query

UNVERIFIED = "revision unverified offline: left unpinned"


def cross_encoder(name: str, model: ModelRef, kind: str, reference: str, batch_size: int = 32,
                  max_length: int = 512) -> Retriever:
    def query(artifact, ctx):  # listed as a plain retriever: says how to use it when it runs
        return reranker_query(artifact, ctx, name, kind)

    return register(Retriever(
        name=name, family="reranker", architecture="cross-encoder" if kind != "monot5" else "sequence-to-sequence",
        query=query, models={"model": model}, extra="dense", reference=reference,
        make_scorer=make_scorer, rerank_only=True,  # scores a candidate set (right of >>), never retrieves
        options={"batch_size": batch_size, "max_length": max_length}, head=kind,
        wiring={"kind": "the scoring head follows the checkpoint: list the re-ranker entry for the head you want "
                        "(`irgrid list --family reranker`)"},
    ))


cross_encoder("ce-ms-marco-minilm-l6-v2", ModelRef("cross-encoder/ms-marco-MiniLM-L-6-v2", arch="bert-cross-encoder"),
              "sequence-classification", f"model card cross-encoder/ms-marco-MiniLM-L-6-v2 (max length 512); {UNVERIFIED}")
cross_encoder("ce-ms-marco-minilm-l12-v2",
              ModelRef("cross-encoder/ms-marco-MiniLM-L-12-v2", arch="bert-cross-encoder"),
              "sequence-classification", f"model card cross-encoder/ms-marco-MiniLM-L-12-v2 (max length 512); {UNVERIFIED}")
cross_encoder("monot5-base", ModelRef("castorini/monot5-base-msmarco-10k", arch="t5", tiny=(("tokenizer", "unigram"),)),
              "monot5", f"Nogueira et al., Findings of EMNLP 2020; pyterrier-t5 MonoT5ReRanker's default checkpoint; "
                        f"{UNVERIFIED}", batch_size=16)
