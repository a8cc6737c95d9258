"""The exact strings each dense entry sends to its tokenizer, for one query and one document.

A change of prompt, instruction or prefix must show up here as a visible diff. `Q` and `D` are the raw texts;
documents are the flat title + text of the paper.
"""

from __future__ import annotations

import pytest

from irgrid.encoders import ENCODERS, EncoderSpec

Q, D = "what is x?", "Title. Body text."
GRIT_Q = "<|user|>\nGiven a question, retrieve passages that answer the question\n<|embed|>\n"
NV_Q = "Instruct: Given a question, retrieve passages that answer the question\nQuery: "

EXPECTED: dict[str, tuple[str, str]] = {
    # encoder-only
    "all-minilm-l6-v2": (Q, D),
    "dpr": (Q, D),
    "tas-b": (Q, D),
    "ance": (Q, D),
    "simcse": (Q, D),
    "retromae": (Q, D),
    "cocondenser": (Q, D),
    "contriever": (Q, D),
    "coco-dr-large": (Q, D),
    "simlm": (Q, D),
    "dragon-plus": (Q, D),
    "me5-large": ("Instruct: Retrieve passages that answer this question.\nQuery: " + Q, "Passage: " + D),
    "gte-large-v1.5": (Q, D),
    "bge-large-v1.5": ("Represent this sentence for searching relevant passages: " + Q, D),
    "jina-embeddings-v3": ("Represent the query for retrieving evidence documents: " + Q,
                           "Represent the document for retrieval: " + D),
    "nomic-embed-v1.5": ("search_query: " + Q, "search_document: " + D),
    # encoder-decoder
    "gtr-large": (Q, D),
    "instructor-large": ("Represent the question: " + Q, "Represent the document: " + D),
    # decoder-only
    "llm2vec": ("Given a web search query, retrieve relevant passages that answer the query: " + Q, D),
    "repllama": ("query: " + Q + "</s>", "passage: " + D + "</s>"),
    "gritlm": (GRIT_Q + Q, "<|embed|>\n" + D),
    "qwen3-embedding-0.6b": ("Instruct: Retrieve passages that answer this query\nQuery: " + Q, D),
    "nv-embed-v2": (NV_Q + Q + "</s>", D + "</s>"),
    "embeddinggemma": (Q, D),
    "kalm-embedding-v2.5": ("Instruct: Given a query, retrieve documents that answer the query \n Query: " + Q, D),
    # late interaction: ColBERT's ". " placeholder, overwritten by the [unused0]/[unused1] marker after tokenizing
    "colbertv2": (". " + Q, ". " + D),
}

# the model cards' recommendations, kept beside ours (None: the card gives none, or ours is the card's)
CARD_DIFFERS = {
    "me5-large": ("Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: {text}",
                  "{text}"),
    "instructor-large": ("Represent the Wikipedia question for retrieving supporting documents: {text}",
                         "Represent the Wikipedia document for retrieval: {text}"),
    "qwen3-embedding-0.6b": ("Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                             "Query:{text}", None),
    "embeddinggemma": ("task: search result | query: {text}", "title: none | text: {text}"),
}


def test_every_encoder_is_pinned():
    assert set(EXPECTED) == set(ENCODERS.names())
    assert len(EXPECTED) == 26  # the 25 entries of issue 3 + all-minilm-l6-v2


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_strings_sent_to_the_tokenizer(name: str):
    spec: EncoderSpec = ENCODERS.get(name)
    assert (spec.render(Q, "q"), spec.render(D, "d")) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(CARD_DIFFERS))
def test_card_prompts_kept_beside_ours(name: str):
    spec = ENCODERS.get(name)
    assert (spec.card_query_template, spec.card_doc_template) == CARD_DIFFERS[name]
    assert (spec.card_query_template, spec.card_doc_template) != (spec.query_template, spec.doc_template)


def test_engine_sends_exactly_the_rendered_strings(monkeypatch):
    """The tokenizer gets spec.render(...) and nothing else (checked on a tiny model of the real architecture)."""
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.encoders import SideModel
    from irgrid.models import resolve

    spec = ENCODERS.get("me5-large")
    side = SideModel(spec, "q", resolve(spec.query_model), "cpu")
    seen: list[str] = []
    real = side.tokenizer.__class__.__call__

    def spy(tok, texts, *a, **k):
        if isinstance(texts, list):
            seen.extend(texts)
        return real(tok, texts, *a, **k)

    monkeypatch.setattr(side.tokenizer.__class__, "__call__", spy)
    side.tokenize([Q])
    assert seen == [EXPECTED["me5-large"][0]]
