"""The engine sends exactly the rendered prompt strings (a tiny model of the real architecture, real tokenizer)."""

from __future__ import annotations

from irgrid.core.retrievers import RETRIEVERS
from irgrid.dense.entry import spec_of

Q = "what is x?"
D = "Title. Body text."

# (entry, profile): (query input, document input, query length, document length, document fields, separator,
#                    pooling, normalised, dtype on GPU)
EXPECTED = {
    ('all-minilm-l6-v2', 'card'): (Q, D, 256, 256, 'title+text', ' ', 'mean', True, 'bf16'),
    ('all-minilm-l6-v2', 'paper'): (Q, D, 256, 256, 'title+text', ' ', 'mean', True, 'bf16'),
    ('ance', 'card'): (Q, D, 64, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('ance', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'fp16-autocast'),
    ('bge-large-v1.5', 'card'): ('Represent this sentence for searching relevant passages: what is x?', D, 512, 512, 'title+text', ' ', 'cls', True, 'bf16'),
    ('bge-large-v1.5', 'paper'): (Q, 'Body text.', 512, 512, 'text', ' ', 'cls', True, 'fp16'),
    ('coco-dr-large', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('coco-dr-large', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'fp16-autocast'),
    ('cocondenser', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('cocondenser', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'fp16-autocast'),
    ('colbertv2', 'card'): ('. what is x?', '. Title. Body text.', 32, 180, 'title+text', ' ', 'colbert', True, 'bf16'),
    ('colbertv2', 'paper'): ('. what is x?', '. Title. Body text.', 32, 300, 'title+text', ' ', 'colbert', True, 'bf16'),
    ('contriever', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'mean', False, 'bf16'),
    ('contriever', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', False, 'fp16-autocast'),
    ('dpr', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('dpr', 'paper'): (Q, 'Title. [SEP] Body text.', 512, 512, 'title+text', ' [SEP] ', 'cls', False, 'fp16-autocast'),
    ('dragon-plus', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('dragon-plus', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'fp16-autocast'),
    ('embeddinggemma', 'card'): ('task: search result | query: what is x?', 'title: Title. | text: Body text.', 2048, 2048, 'title+text', ' | text: ', 'mean', True, 'bf16'),
    ('embeddinggemma', 'paper'): (Q, D, 2048, 2048, 'title+text', ' ', 'mean', True, 'fp32'),
    ('gritlm', 'card'): ('<|user|>\nGiven a question, retrieve passages that answer the question\n<|embed|>\nwhat is x?', '<|embed|>\nTitle. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('gritlm', 'paper'): ('<|user|>\nGiven a question, retrieve passages that answer the question:\n<|embed|>\nwhat is x?', '<|embed|>\nTitle. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16'),
    ('gte-large-v1.5', 'card'): (Q, D, 8192, 8192, 'title+text', ' ', 'cls', True, 'bf16'),
    ('gte-large-v1.5', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'fp16-autocast'),
    ('gtr-large', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('gtr-large', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'fp32'),
    ('instructor-large', 'card'): ('Represent the Wikipedia question for retrieving supporting documents: what is x?', 'Represent the Wikipedia document for retrieval: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('instructor-large', 'paper'): ('Represent the question: what is x?', 'Represent the document: Body text.', 512, 512, 'text', ' ', 'mean', True, 'fp32'),
    ('jina-embeddings-v3', 'card'): ('Represent the query for retrieving evidence documents: what is x?', 'Represent the document for retrieval: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'bf16'),
    ('jina-embeddings-v3', 'paper'): ('Represent the query for retrieving evidence documents: what is x?', 'Represent the document for retrieval: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'fp32'),
    ('kalm-embedding-v2.5', 'card'): ('Instruct: Given a query, retrieve documents that answer the query. \n Query: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('kalm-embedding-v2.5', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'fp32'),
    ('llm2vec', 'card'): ('Given a web search query, retrieve relevant passages that answer the query: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('llm2vec', 'paper'): (('Given a web search query, retrieve relevant passages that answer the query:', Q), 'Body text.', 512, 512, 'text', ' ', 'mean', True, 'bf16'),
    ('me5-large', 'card'): ('Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('me5-large', 'paper'): ('Instruct: Retrieve passages that answer this question.\nQuery: what is x?', 'Passage: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16-autocast'),
    ('nomic-embed-v1.5', 'card'): ('search_query: what is x?', 'search_document: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'bf16'),
    ('nomic-embed-v1.5', 'paper'): ('search_query: what is x?', 'search_document: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16-autocast'),
    ('nv-embed-v2', 'card'): ('Instruct: Given a question, retrieve passages that answer the question\nQuery: what is x?</s>', 'Title. Body text.</s>', 32768, 32768, 'title+text', ' ', 'latent-attention', True, 'bf16'),
    ('nv-embed-v2', 'paper'): ('Given a question, retrieve passages that answer the questionwhat is x?</s>', 'Body text.</s>', 4096, 4096, 'text', ' ', 'latent-attention', True, 'bf16'),
    ('qwen3-embedding-0.6b', 'card'): ('Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:what is x?', D, 8192, 8192, 'title+text', ' ', 'last', True, 'bf16'),
    ('qwen3-embedding-0.6b', 'paper'): ('Instruct: Retrieve passages that answer this query\nQuery: what is x?', D, 512, 512, 'title+text', ' ', 'last', True, 'fp16-autocast'),
    ('repllama', 'card'): ('query: what is x?</s>', 'passage: Title. Body text.</s>', 512, 1024, 'title+text', ' ', 'last', True, 'bf16'),
    ('repllama', 'paper'): ('query: what is x?</s>', 'passage: Title. Body text.</s>', 1024, 1024, 'title+text', ' ', 'last', True, 'fp16'),
    ('retromae', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('retromae', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'fp16-autocast'),
    ('simcse', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'bf16'),
    ('simcse', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'pooler', True, 'fp16-autocast'),
    ('simlm', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'bf16'),
    ('simlm', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'fp16-autocast'),
    ('tas-b', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'bf16'),
    ('tas-b', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', False, 'fp16-autocast'),
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
        assert seen == [EXPECTED[("me5-large", profile)][0]]

