"""The exact inputs each dense / late-interaction entry sends to its tokenizer, per profile (`card`: the entry's
defaults from the model card / MTEB; `paper`: what the paper's code ran), with lengths, document fields, pooling
head, normalisation and dtype.

A change of prompt, instruction, prefix or setting must show up here as a visible diff. `Q` is the raw query and
`R` a document record; `D` is its flat title + text. Query pairs (LLM2Vec's paper profile) are (first, second).
"""

from __future__ import annotations

import re

import pytest

from irgrid.core.retrievers import RETRIEVERS
from irgrid.dense.entry import spec_of
from irgrid.dense.spec import ENCODERS

Q = "what is x?"
R = {"title": "Title.", "text": "Body text."}
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
DENSE = sorted(r.name for r in RETRIEVERS if r.family in ("dense", "late-interaction"))


def test_every_entry_and_profile_is_pinned():
    assert {name for name, _ in EXPECTED} == set(DENSE) == set(ENCODERS.names())
    assert len(DENSE) == 26  # the 25 entries of issue 3 + all-minilm-l6-v2
    assert {p for _, p in EXPECTED} == {"paper", "card"}


@pytest.mark.parametrize("name,profile", sorted(EXPECTED))
def test_inputs_and_settings_per_profile(name: str, profile: str):
    entry = RETRIEVERS.get(name).with_profile(profile)
    q, d = spec_of(entry, "q"), spec_of(entry, "d")
    got = (q.render(Q, "q"), d.render(d.document(R), "d"), q.query_max_length, d.doc_max_length,
           "+".join(d.doc_fields), d.doc_sep, q.pooling, q.normalize, q.dtype)
    assert got == EXPECTED[(name, profile)]
    assert (d.pooling, d.normalize, d.dtype) == (q.pooling, q.normalize, q.dtype)  # both sides agree


@pytest.mark.parametrize("name", DENSE)
def test_card_profile_is_the_entry_itself(name: str):
    """The defaults are the card's: applying `card` changes no cache key (the profile documents sources)."""
    entry = RETRIEVERS.get(name)
    card = entry.with_profile("card")
    assert card.key() == entry.key() and card.index.key() == entry.index.key()


def test_paper_settings_name_the_repository_file():
    """Every paper setting cites a file of the paper's code; every entry of the paper has a paper profile."""
    for name in DENSE:
        entry = RETRIEVERS.get(name)
        if entry.paper_name is None:
            continue
        assert "paper" in entry.profiles and "card" in entry.profiles, name
        for key, setting in entry.profiles["paper"].items():
            assert re.match(r"valentinsvelev/retriever-evaluation:[\w/.]+\.(py|txt)@[0-9a-f]{7} ", setting.source), \
                (name, key, setting.source)  # the file and the commit read
        for key, setting in entry.profiles["card"].items():
            assert setting.source and "valentinsvelev" not in setting.source, (name, key)


def test_docs_fidelity_page_shows_every_profile_table(capsys):
    """The docs' "Fidelity to the paper" page (docs/fidelity.md, filled at build time by docs/gen/render.py) holds
    `irgrid list --profiles --format markdown` for every family: no family's tables left out of the page."""
    from pathlib import Path

    from support import docs_render

    from irgrid.cli import main

    render = docs_render()
    page = render.fill_markers((Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text())
    for family in ("dense", "late-interaction", "sparse", "expansion"):
        main(["list", "--profiles", "--format", "markdown", "--family", family])
    lines = [render.unlinked(line) for line in capsys.readouterr().out.splitlines() if line.startswith(("|", "####"))]
    missing = [line for line in lines if line not in page]
    assert lines and not missing, f"docs/fidelity.md lacks profile tables (a <!-- generated: fidelity GROUP --> " \
                                  f"block per group): {missing[:3]}"
