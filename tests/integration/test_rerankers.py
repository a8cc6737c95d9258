"""Cross-encoder re-rankers end to end in a grid: tiny random-weight models of the real architectures (no
cross-encoder weights can be had offline: ../shared/models/README.md), BERT sequence classification for the MS MARCO
MiniLM cross-encoders and T5 for monoT5, on BM25's top 10 for 5 Vaswani queries (seconds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid import grid
from irgrid.runner.experiment import from_dict

CASCADES = {"ce": "ce-ms-marco-minilm-l6-v2", "t5": "monot5-base"}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")


@pytest.fixture
def reranked(tiny, shared_store):
    spec = from_dict({
        "datasets": [{"name": "vaswani", "queries": 5}], "measures": ["nDCG@10"], "latency_sample": 2,
        "retrievers": ["bm25-pisa", *({"as": a, "pipeline": f"bm25-pisa % 10 >> {e}"} for a, e in CASCADES.items())],
    })
    results = grid.run(spec, store=shared_store, fail_fast=True).results
    ds = spec.datasets[0]
    runs = {r.name: shared_store.runs.load(r, ds) for r in spec.retrievers}
    return spec, results, runs


def _independent_score(entry_name: str, query: str, text: str) -> float:
    """The architecture's score for one pair, computed here without irgrid's scorer."""
    import torch
    import transformers as tf

    from irgrid.core import retrievers
    from irgrid.runner.cell import resolve_models

    entry = retrievers.get(entry_name)
    location = resolve_models(entry.models)["model"].location
    tok = tf.AutoTokenizer.from_pretrained(location)
    with torch.inference_mode():
        if entry.head == "monot5":
            model = tf.T5ForConditionalGeneration.from_pretrained(location).eval()
            enc = tok(f"Query: {query} Document: {text} Relevant:", return_tensors="pt", truncation=True,
                      max_length=512)
            logits = model(**enc, decoder_input_ids=torch.tensor([[0]])).logits[0, 0]
            true, false = tok.convert_tokens_to_ids("▁true"), tok.convert_tokens_to_ids("▁false")
            return float(logits[true] - torch.logsumexp(logits[[false, true]], 0))
        model = tf.BertForSequenceClassification.from_pretrained(location).eval()
        return float(model(**tok(query, text, return_tensors="pt", truncation=True, max_length=512)).logits[0, 0])


@pytest.mark.parametrize("alias", list(CASCADES))
def test_tiny_cross_encoders_rerank_bm25_candidates(reranked, alias):
    spec, results, runs = reranked
    bm25, _ = runs["bm25-pisa"]
    res, meta = runs[alias]
    top = bm25[bm25["rank"] < 10]
    assert set(zip(res.qid, res.docno)) == set(zip(top.qid, top.docno))  # the candidates, nothing else
    assert meta["models"][f"{CASCADES[alias]}:model"]["source"] == "tiny"
    assert not np.allclose(res.sort_values(["qid", "docno"])["score"], top.sort_values(["qid", "docno"])["score"])
    # ranks follow the cross-encoder's scores
    for _, group in res.groupby("qid"):
        assert list(group.sort_values("rank")["score"]) == sorted(group["score"], reverse=True)
    # the stored score of the best pair is the architecture's score for that (query, text)
    from irgrid.runner.stages import DocText

    best = res.sort_values(["qid", "rank"]).iloc[0]
    query = spec.datasets[0].topics().set_index("qid").loc[best["qid"], "query"]
    frame = pd.DataFrame({"qid": [best["qid"]], "query": [query], "docno": [best["docno"]]})
    text = DocText(spec.datasets[0]).transform(frame)["text"][0]
    assert best["score"] == pytest.approx(_independent_score(CASCADES[alias], query, text), abs=1e-4)
    assert alias in set(results["system"])


def test_a_reranker_listed_as_a_retriever_says_how_to_use_it(tiny, shared_store):
    spec = from_dict({"datasets": [{"name": "vaswani", "queries": 2}], "measures": ["AP"],
                      "retrievers": ["bm25-pisa", "monot5-base"], "latency_sample": 0})
    (failure,) = grid.run(spec, store=shared_store).failures
    assert failure.retriever == "monot5-base"
    assert "monot5-base is a re-ranker" in failure.error and '"bm25 % 100 >> monot5-base"' in failure.error


def test_reranker_checkpoints_load_strictly(tiny):
    """A checkpoint of another head is refused, never scored with random weights."""
    from irgrid.core.retrievers import get
    from irgrid.cross_encoders import make_scorer
    from irgrid.models.loading import CheckpointMismatchError
    from irgrid.runner.cell import resolve_models

    ce = get("ce-ms-marco-minilm-l6-v2")
    bi = resolve_models(get("all-minilm-l6-v2").models)["query"]  # a BertModel folder: no classifier head
    scorer = make_scorer(ce, {"model": bi}, "cpu")
    with pytest.raises(CheckpointMismatchError, match="missing .*classifier"):
        scorer.transform(pd.DataFrame({"qid": ["1"], "query": ["q"], "docno": ["d"], "text": ["t"]}))
