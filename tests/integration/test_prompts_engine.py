"""The engine sends exactly the rendered prompt strings (a tiny model of the real architecture, real tokenizer)."""

from __future__ import annotations

from irgrid.core.retrievers import RETRIEVERS
from irgrid.dense.spec import spec_of

Q = "what is x?"
# me5-large's query input per profile, as tests/unit/test_prompts.py pins it for every entry from spec.render
SENT = {
    "card": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: what is x?",
    "paper": "Instruct: Retrieve passages that answer this question.\nQuery: what is x?",
}


def test_engine_sends_exactly_the_rendered_strings(monkeypatch):
    """The tokenizer gets spec.render(...) and nothing else (checked on a tiny model of the real architecture)."""
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    for profile in ("card", "paper"):
        spec = spec_of(RETRIEVERS.get("me5-large").with_profile(profile))
        side = SideModel(spec, "q", resolve(spec.query_model.as_tiny()), "cpu")
        seen: list[str] = []
        real = side.tokenizer.__class__.__call__

        def spy(tok, texts, *a, real=real, seen=seen, **k):
            if isinstance(texts, list):
                seen.extend(texts)
            return real(tok, texts, *a, **k)

        monkeypatch.setattr(side.tokenizer.__class__, "__call__", spy)
        side.tokenize([Q])
        monkeypatch.undo()
        monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
        assert seen == [spec.render(Q, "q")] == [SENT[profile]]



# The entries the release (valentinsvelev/retriever-evaluation@4bedb75) changed: what the engine's tokenizer gets for
# a query and a document under the paper profile, on SciFact (and ArguAna where the release differs there).
R = {"title": "Title.", "text": "Body text."}
RELEASE = {
    ("bge-large-v1.5", "beir/scifact/test"): ("what is x?", "Title. Body text."),
    ("instructor-large", "beir/scifact/test"): ("what is x?", "Title. Body text."),
    ("llm2vec", "beir/scifact/test"): (("Given a web search query, retrieve relevant passages that answer the query:",
                                        "what is x?"), "Title. Body text."),
    ("nv-embed-v2", "beir/scifact/test"): (
        "Instruct: Given a question, retrieve passages that answer the question\nQuery: what is x?</s>",
        "Title. Body text.</s>"),
    ("embeddinggemma", "beir/scifact/test"): (
        "task: search result | query: task: search result | query: what is x?",
        "title: none | text: title: Title. | text: Body text."),
    ("jina-embeddings-v3", "beir/scifact/test"): ("Represent the query for retrieving evidence documents: what is x?",
                                                  "Represent the document for retrieval: Title. Body text."),
    ("jina-embeddings-v3", "beir/arguana/test"): ("what is x?", "Title. Body text."),
}


def _sent(monkeypatch, side) -> list:
    seen: list = []
    real = side.tokenizer.__class__.__call__

    def spy(tok, texts, *a, **k):
        if isinstance(texts, list):
            seen.extend(zip(texts, a[0]) if a and isinstance(a[0], list) else texts)
        return real(tok, texts, *a, **k)

    monkeypatch.setattr(side.tokenizer.__class__, "__call__", spy)
    return seen


def test_engine_sends_the_release_strings(monkeypatch):
    """The paper profile's cells send exactly the release's strings (tiny models of the real architectures)."""
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.data import datasets
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    for (name, dataset), (query, doc) in sorted(RELEASE.items()):
        entry = RETRIEVERS.get(name).with_profile("paper").for_dataset(datasets.get(dataset))
        for side_name, text, want in (("q", Q, query), ("d", None, doc)):
            spec = spec_of(entry, side_name)
            side = SideModel(spec, side_name, resolve(spec.model(side_name).as_tiny()), "cpu")
            seen = _sent(monkeypatch, side)
            side.tokenize([text if side_name == "q" else spec.document(R)])
            monkeypatch.undo()
            monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
            assert seen == [want], (name, dataset, side_name)


def test_nv_embed_masks_the_instruction_as_its_encode_does(monkeypatch):
    """nvembed.py@4bedb75 calls the checkpoint's encode(instruction=...), which leaves len(tokenize(instruction))
    positions from the start (BOS included) out of the pooling; the card keeps irgrid's BOS + prompt count."""
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    prefix = "Instruct: Given a question, retrieve passages that answer the question\nQuery: "
    counts = {}
    for profile in ("paper", "card"):
        spec = spec_of(RETRIEVERS.get("nv-embed-v2").with_profile(profile))
        side = SideModel(spec, "q", resolve(spec.query_model.as_tiny()), "cpu")
        counts[profile] = side._prefix_tokens
        plain = len(side.tokenizer.tokenize(prefix))
        leading = len(side.tokenizer(prefix)["input_ids"]) - len(side.tokenizer(prefix, add_special_tokens=False)
                                                                 ["input_ids"])
    assert counts == {"paper": plain, "card": plain + (1 if leading else 0)} and plain > 10
