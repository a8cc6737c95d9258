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
from irgrid.dense.spec import ENCODERS, spec_of

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
    ('bge-large-v1.5', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'fp16'),
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
    ('embeddinggemma', 'paper'): ('task: search result | query: task: search result | query: what is x?', 'title: none | text: title: Title. | text: Body text.', 2048, 2048, 'title+text', ' | text: ', 'mean', True, 'fp32'),
    ('gritlm', 'card'): ('<|user|>\nGiven a question, retrieve passages that answer the question\n<|embed|>\nwhat is x?', '<|embed|>\nTitle. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('gritlm', 'paper'): ('<|user|>\nGiven a question, retrieve passages that answer the question:\n<|embed|>\nwhat is x?', '<|embed|>\nTitle. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16'),
    ('gte-large-v1.5', 'card'): (Q, D, 8192, 8192, 'title+text', ' ', 'cls', True, 'bf16'),
    ('gte-large-v1.5', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'cls', True, 'fp16-autocast'),
    ('gtr-large', 'card'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('gtr-large', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'fp32'),
    ('instructor-large', 'card'): ('Represent the Wikipedia question for retrieving supporting documents: what is x?', 'Represent the Wikipedia document for retrieval: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('instructor-large', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'fp32'),
    ('jina-embeddings-v3', 'card'): ('Represent the query for retrieving evidence documents: what is x?', 'Represent the document for retrieval: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'bf16'),
    ('jina-embeddings-v3', 'paper'): ('Represent the query for retrieving evidence documents: what is x?', 'Represent the document for retrieval: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'fp32'),
    ('kalm-embedding-v2.5', 'card'): ('Instruct: Given a query, retrieve documents that answer the query. \n Query: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('kalm-embedding-v2.5', 'paper'): (Q, D, 512, 512, 'title+text', ' ', 'mean', True, 'fp32'),
    ('llm2vec', 'card'): ('Given a web search query, retrieve relevant passages that answer the query: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('llm2vec', 'paper'): (('Given a web search query, retrieve relevant passages that answer the query:', Q), D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('me5-large', 'card'): ('Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: what is x?', D, 512, 512, 'title+text', ' ', 'mean', True, 'bf16'),
    ('me5-large', 'paper'): ('Instruct: Retrieve passages that answer this question.\nQuery: what is x?', 'Passage: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16-autocast'),
    ('nomic-embed-v1.5', 'card'): ('search_query: what is x?', 'search_document: Title. Body text.', 8192, 8192, 'title+text', ' ', 'mean', True, 'bf16'),
    ('nomic-embed-v1.5', 'paper'): ('search_query: what is x?', 'search_document: Title. Body text.', 512, 512, 'title+text', ' ', 'mean', True, 'fp16-autocast'),
    ('nv-embed-v2', 'card'): ('Instruct: Given a question, retrieve passages that answer the question\nQuery: what is x?</s>', 'Title. Body text.</s>', 32768, 32768, 'title+text', ' ', 'latent-attention', True, 'bf16'),
    ('nv-embed-v2', 'paper'): ('Instruct: Given a question, retrieve passages that answer the question\nQuery: what is x?</s>', 'Title. Body text.</s>', 512, 512, 'title+text', ' ', 'latent-attention', True, 'bf16'),
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


# the values a profile sets on named datasets (the release's per-dataset code paths), as the cell on that dataset
# sends them: (entry, dataset): (query input, document input, query length, adapters)
PER_DATASET = {
    ('colbertv2', 'beir/scifact/test'): ('. what is x?', '. Title. Body text.', 32, None),
    ('colbertv2', 'beir/arguana/test'): ('. what is x?', '. Title. Body text.', 300, None),
    ('colbertv2', 'beir/climate-fever/test'): ('. what is x?', '. Title. Body text.', 64, None),
    ('jina-embeddings-v3', 'beir/scifact/test'): ('Represent the query for retrieving evidence documents: what is x?',
                                                  'Represent the document for retrieval: Title. Body text.', 8192,
                                                  ('retrieval.query', 'retrieval.passage')),
    ('jina-embeddings-v3', 'beir/arguana/test'): (Q, D, 8192, None),
}


@pytest.mark.parametrize("name,dataset", sorted(PER_DATASET))
def test_paper_profile_per_dataset(name: str, dataset: str):
    """colbert.py@4bedb75: query_maxlen 300 on ArguAna, 64 on Climate-FEVER, else 32; dense_encoder.py@4bedb75:
    Jina v3 without a task on ArguAna. The card runs one configuration everywhere; a cell's key follows its values."""
    from irgrid.data import datasets

    ds = datasets.get(dataset)
    entry = RETRIEVERS.get(name).with_profile("paper")
    cell = entry.for_dataset(ds)
    q, d = spec_of(cell, "q"), spec_of(cell, "d")
    assert (q.render(Q, "q"), d.render(d.document(R), "d"), q.query_max_length, q.adapters) == PER_DATASET[(name, dataset)]
    assert (cell.key() == entry.key()) == (dataset == "beir/scifact/test")
    # ColBERTv2's query length is query-side: the index is shared; Jina's task changes the documents' vectors too
    assert (cell.index.key() == entry.index.key()) == (name == "colbertv2" or dataset == "beir/scifact/test")
    card = RETRIEVERS.get(name).with_profile("card")
    assert card.for_dataset(ds).key() == card.key()


def test_an_explicit_option_holds_on_every_dataset():
    """An experiment's own option wins over the profile's per-dataset value."""
    from irgrid.runner.experiment import from_dict

    spec = from_dict({"datasets": ["beir/arguana/test"], "profile": "paper",
                      "retrievers": [{"name": "colbertv2", "as": "colbert-40", "options": {"query_max_length": 40}},
                                     "colbertv2"]})
    mine, plain = spec.retrievers[0], spec.retrievers[1]
    assert spec_of(mine.for_dataset(spec.datasets[0])).query_max_length == 40
    assert spec_of(plain.for_dataset(spec.datasets[0])).query_max_length == 300


def test_paper_settings_name_the_repository_file():
    """Every paper setting cites a file of the paper's code at the release; every entry of the paper has a paper
    profile."""
    from irgrid.core.paper_code import RELEASE

    for name in DENSE:
        entry = RETRIEVERS.get(name)
        if entry.paper_name is None:
            continue
        assert "paper" in entry.profiles and "card" in entry.profiles, name
        for key, setting in entry.profiles["paper"].items():
            m = re.match(r"valentinsvelev/retriever-evaluation:[\w/.]+\.(py|txt)@([0-9a-f]{7})[ ,]", setting.source)
            assert m, (name, key, setting.source)  # the file and the commit read
            assert m[2] == RELEASE or f"release {RELEASE}" in setting.source, (name, key, setting.source)
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
