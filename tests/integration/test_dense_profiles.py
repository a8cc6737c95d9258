"""Profiles of dense entries (paper vs card) as an experiment sees them, the engine capabilities the paper's code
used (document fields, the pooler head, text-pair queries, ColBERT's query lengths, corpus-size rules), and strict
loading through the engine's loaders. Tiny random-weight models of the real architectures, real tokenizers."""

from __future__ import annotations

import numpy as np
import pytest

from irgrid.core.retrievers import RETRIEVERS, get
from irgrid.dense.spec import spec_of

R = {"docno": "d1", "title": "Title words", "text": "body text of the document"}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")


def _side(spec, side="q"):
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    return SideModel(spec, side, resolve(spec.model(side).as_tiny()), "cpu")


# -- engine capabilities -------------------------------------------------------------------------------------------
def test_document_fields_select_what_is_encoded(tiny):
    from irgrid.dense.engine import Engine
    from irgrid.models.resolver import resolve

    card = spec_of(RETRIEVERS.get("bge-large-v1.5"), "d")
    paper = spec_of(RETRIEVERS.get("bge-large-v1.5").with_options(doc_fields=("text",)), "d")  # an option
    assert (card.document(R), paper.document(R)) == ("Title words body text of the document",
                                                     "body text of the document")
    assert card.document({"text": "flat"}) == "flat" and card.flat_documents and not paper.flat_documents
    gemma = spec_of(RETRIEVERS.get("embeddinggemma"), "d")  # MTEB's format: a missing title reads 'none'
    assert gemma.render(gemma.document({"text": "Body"}), "d") == "title: none | text: Body"
    assert gemma.render(gemma.document(R), "d") == "title: Title words | text: body text of the document"
    engine = Engine(paper, "d", resolve(paper.document_model.as_tiny()), "cpu")
    (_, streamed), = list(engine.stream([R]))
    assert np.allclose(streamed[0], engine.encode([R["text"]])[0], atol=1e-6)
    assert np.abs(streamed[0] - engine.encode([card.document(R)])[0]).max() > 1e-4  # the title changes the vector


def test_dpr_paper_documents_carry_the_sep_token(tiny):
    spec = spec_of(RETRIEVERS.get("dpr").with_profile("paper"), "d")
    side = _side(spec, "d")
    ids = side.tokenize([spec.document(R)])[0]
    sep = side.tokenizer.sep_token_id
    assert ids.count(sep) == 2 and ids[-1] == sep  # "title [SEP] text [SEP]": the tokenizer reads [SEP] as one id


def test_pooler_head_is_the_models_pooler_output(tiny):
    import torch

    spec = spec_of(RETRIEVERS.get("simcse").with_profile("paper"))
    side = _side(spec)
    batch = side.tokenize(["what is x?"])
    vec = side.forward(batch)
    with torch.inference_mode():
        out = side.model(input_ids=torch.tensor(batch), attention_mask=torch.ones(1, len(batch[0]), dtype=torch.long))
    expected = torch.nn.functional.normalize(out.pooler_output.float(), dim=-1)
    cls = torch.nn.functional.normalize(out.last_hidden_state[:, 0].float(), dim=-1)
    assert torch.allclose(vec, expected, atol=1e-5) and not torch.allclose(vec, cls, atol=1e-3)


def test_text_pair_queries_use_the_tokenizers_pair_template(tiny):
    spec = spec_of(RETRIEVERS.get("llm2vec").with_profile("paper"))
    side = _side(spec)
    first, second = spec.render("what is x?", "q")
    assert side.tokenize(["what is x?"])[0] == side.tokenizer(first, second)["input_ids"]
    assert side.tokenize(["what is x?"])[0] != side.tokenizer(first + "what is x?")["input_ids"]


def test_colbert_query_length_rule_and_augmentation(tiny):
    spec = spec_of(RETRIEVERS.get("colbertv2"))
    side = _side(spec)
    short, long_ = "what is x?", " ".join(["word"] * 40)
    fixed = side.tokenize([short, long_])
    assert [len(ids) for ids in fixed] == [32, 32]  # [MASK]-augmented / truncated to query_maxlen
    assert fixed[0][-1] == side.tokenizer.mask_token_id and fixed[1][-1] == side.tokenizer.sep_token_id
    ruled = spec.with_settings(query_length_rule=(1.35, 512))
    assert (ruled.query_length(short), ruled.query_length(long_)) == (32, 54)  # max(32, int(1.35 * words))
    side = _side(ruled)
    ids = side.tokenize([short, long_])
    assert [len(x) for x in ids] == [32, 54]
    import torch

    with torch.inference_mode():
        vecs = side.forward(ids)
    assert [v.shape[0] for v in vecs] == [32, 54]  # each query keeps its own length, augmentation included


# -- strict loading through the engine ------------------------------------------------------------------------------
def test_engine_loader_rejects_a_wrong_head_on_a_tiny_model(tiny):
    import dataclasses

    from irgrid.models.loading import CheckpointMismatchError

    spec = spec_of(RETRIEVERS.get("colbertv2"))
    _side(spec)  # loads: the projection and the pooler are declared
    with pytest.raises(CheckpointMismatchError, match=r"colbertv2 \(query side\).*unexpected \(ignored\): .*linear"):
        _side(dataclasses.replace(spec, allow_unexpected=("*pooler.*",)))


def test_engine_loader_rejects_real_minilm_weights_in_the_wrong_class():
    from irgrid.core.modelref import ModelRef
    from irgrid.dense.spec import EncoderSpec
    from irgrid.models.loading import CheckpointMismatchError

    minilm = ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a")
    spec = EncoderSpec(name="minilm-as-dpr", query_model=minilm, loader="dpr", pooling="cls", normalize=False,
                       similarity="dot", query_max_length=32, doc_max_length=32)
    with pytest.raises(CheckpointMismatchError, match=r"minilm-as-dpr \(query side\).*missing \(would be random\)"):
        _side(spec)


# -- documents with their fields, as the runner hands them to dense builders ---------------------------------------
def test_fielded_documents_match_the_flat_join_and_reach_the_builder(tmp_path):
    import itertools

    from irgrid.core.retrievers import BuildContext
    from irgrid.data.datasets import get
    from irgrid.data.doc_fields import fielded_docs
    from irgrid.dense.entry import documents

    ds = get("beir/scifact/test")
    fielded = list(itertools.islice(fielded_docs(ds), 50))
    flat = list(itertools.islice(ds.docs(), 50))
    assert [d["docno"] for d in fielded] == [d["docno"] for d in flat] and all(d["title"] for d in fielded)
    card = spec_of(RETRIEVERS.get("bge-large-v1.5"), "d")
    paper = spec_of(RETRIEVERS.get("bge-large-v1.5").with_options(doc_fields=("text",)), "d")  # an option
    assert [card.document(d) for d in fielded] == [d["text"] for d in flat]  # flat join == the card's fields
    ctx = BuildContext(path=tmp_path, params={}, models={}, docs=lambda: iter(flat), docs_count=50,
                       fielded=lambda: iter(fielded))
    assert next(documents(ctx, card)) is flat[0]  # flat specs keep the runner's flat documents
    assert paper.document(next(documents(ctx, paper))) == fielded[0]["text"]  # text only: no title


def test_fp16_autocast_keeps_fp32_weights_and_wraps_the_forward(tiny, monkeypatch):
    """The paper's generic path: fp32 weights, forward under torch.autocast(cuda, float16). No GPU here, so the
    wiring is checked: the weights stay fp32 and the forward enters exactly that autocast context."""
    import contextlib

    import torch

    from irgrid.dense.checkpoints import dtype_of

    assert dtype_of("fp16-autocast") == torch.float32
    spec = spec_of(RETRIEVERS.get("contriever").with_profile("paper"))
    assert spec.dtype == "fp16-autocast"
    side = _side(spec)
    assert side.dtype_name == "fp32"  # CPU always encodes in fp32
    entered = []
    monkeypatch.setattr(torch, "autocast", lambda device, dtype: entered.append((device, dtype))
                        or contextlib.nullcontext())
    side.dtype_name = "fp16-autocast"  # as on a GPU
    with torch.inference_mode():
        side.forward(side.tokenize(["what is x?"]))
    assert entered == [("cuda", torch.float16)] and next(side.model.parameters()).dtype == torch.float32


# -- paper profiles end to end (index -> retrieve) on a staged collection, tiny weights of the real architectures ---
@pytest.fixture(scope="module")
def scifact_fielded():
    from dense_helpers import scifact_slice

    from irgrid.data.datasets import get
    from irgrid.data.doc_fields import fielded_docs

    docs, topics, qrels = scifact_slice(n_queries=5, n_docs=30)
    wanted = {d["docno"] for d in docs}
    fielded = [d for d in fielded_docs(get("beir/scifact/test")) if d["docno"] in wanted]
    return docs, fielded, topics, qrels


@pytest.mark.parametrize("name", ["ance", "simcse", "dpr", "llm2vec", "nv-embed-v2", "colbertv2"])
def test_paper_profile_end_to_end(name, scifact_fielded, tmp_path, tiny):
    from irgrid.core.retrievers import BuildContext, QueryContext
    from irgrid.data.datasets import get as get_dataset
    from irgrid.runner.cell import resolve_models

    docs, fielded, topics, _ = scifact_fielded
    entry = get(name).with_profile("paper")
    recipe = entry.index
    models = resolve_models(recipe.models)
    ctx = BuildContext(path=tmp_path, params=recipe.params, models=models, docs=lambda: iter(docs),
                       docs_count=len(docs), device="cpu", fielded=lambda: iter(fielded))
    recipe.build(ctx)
    artifact = recipe.open(tmp_path, recipe.params, models)
    pipeline = entry.query(artifact, QueryContext(options=entry.options, models=resolve_models(entry.models),
                                                  device="cpu", encoder=entry.encoder))
    res = pipeline.transform(topics)
    assert set(res["qid"]) == set(topics["qid"]) and (res.groupby("qid").size() == len(docs)).all()
    assert res["score"].notna().all()
    if name == "colbertv2":
        return
    # as a re-ranker (`.scorer(ds)`, no index: the candidates' texts encoded) it scores with the same profiled
    # spec as its own retrieval: the same scores for the same documents
    from irgrid.dense.scorers import dense_scorer
    from irgrid.runner.stages import with_doc_text

    scorer = dense_scorer(entry, resolve_models(entry.all_models()), "cpu", index=None)
    scored = with_doc_text(scorer, get_dataset("beir/scifact/test")).transform(res[["qid", "query", "docno"]])
    both = scored.merge(res, on=["qid", "docno"], suffixes=("", "_retrieved"))
    assert len(both) == len(res)
    np.testing.assert_allclose(both["score"], both["score_retrieved"], rtol=1e-4, atol=1e-4)
