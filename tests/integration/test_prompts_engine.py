"""The engine sends exactly the rendered prompt strings (a tiny model of the real architecture, real tokenizer)."""

from __future__ import annotations

from irgrid.core.retrievers import RETRIEVERS
from irgrid.dense.entry import spec_of

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

