"""Profiles of dense entries (paper vs card) as an experiment sees them, the engine capabilities the paper's code
used (document fields, the pooler head, text-pair queries, ColBERT's query lengths, corpus-size rules), and strict
loading through the engine's loaders. Tiny random-weight models of the real architectures, real tokenizers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from irgrid.core.retrievers import RETRIEVERS, get
from irgrid.dense.entry import by_size, spec_of
from irgrid.runner import experiment

R = {"docno": "d1", "title": "Title words", "text": "body text of the document"}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")


def _side(spec, side="q"):
    from irgrid.dense.encoders import SideModel
    from irgrid.models.resolver import resolve

    return SideModel(spec, side, resolve(spec.model(side).as_tiny()), "cpu")


# -- keys follow values --------------------------------------------------------------------------------------------
def test_profiles_that_agree_share_every_cache_key():
    entry = RETRIEVERS.get("tas-b")
    paper, card = entry.with_profile("paper"), entry.with_profile("card")
    assert paper.key() != card.key() and paper.index.key() != card.index.key()  # dtype (and the paper's depth) differ
    agreed = paper.with_options(dtype=card.options["dtype"], num_results=card.options["num_results"])  # differences set to the card's
    assert agreed.key() == card.key() and agreed.index.key() == card.index.key()


def test_a_query_side_difference_keeps_the_document_index():
    entry = RETRIEVERS.get("bge-large-v1.5")
    changed = entry.with_options(query_template="{text}")
    assert changed.index.key() == entry.index.key() and changed.key() != entry.key()
    assert spec_of(changed).render("q", "q") == "q"


def test_experiment_holds_both_profiles_of_one_entry():
    spec = experiment.from_dict({
        "datasets": ["beir/scifact/test"], "profile": "card",
        "retrievers": [{"name": "nv-embed-v2", "profile": "paper", "as": "nv-embed-v2-paper"},
                       {"name": "nv-embed-v2", "as": "nv-embed-v2-card"},
                       {"name": "nv-embed-v2", "profile": "paper", "as": "nv-embed-v2-paper-8k",
                        "options": {"query_max_length": 8192}},
                       "bm25"],
    }, source="exp.yaml")
    paper, card, longer, bm25 = spec.retrievers
    assert (paper.name, paper.profile, card.profile, bm25.profile) == ("nv-embed-v2-paper", "paper", "card", "card")
    assert spec_of(paper).render("q?", "q") == "Given a question, retrieve passages that answer the questionq?</s>"
    assert spec_of(card).render("q?", "q").startswith("Instruct: ")
    assert spec_of(paper, "d").doc_fields == ("text",) and spec_of(card, "d").doc_fields == ("title", "text")
    assert paper.key() != card.key() and card.key() == RETRIEVERS.get("nv-embed-v2").key()
    # options apply on top of the profile: the paper's prompt is kept, the length is the item's
    assert longer.profile == "paper" and spec_of(longer).query_max_length == 8192
    assert spec_of(longer).query_template == spec_of(paper).query_template
    assert experiment.from_dict({"datasets": ["beir/scifact/test"], "profile": "paper",
                                 "retrievers": ["gte-large-v1.5"]}).retrievers[0].options["query_max_length"] == 512


def test_unknown_profile_names_file_and_key():
    with pytest.raises(experiment.ExperimentError, match=r"exp\.yaml: retrievers\[0\]: profile: .*'papr'.*"
                                                         r"Did you mean 'paper'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"],
                              "retrievers": [{"name": "dpr", "profile": "papr"}]}, source="exp.yaml")
    with pytest.raises(experiment.ExperimentError, match=r"exp\.yaml: profile: .*'crad'.*Did you mean 'card'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"], "profile": "crad", "retrievers": ["dpr"]},
                             source="exp.yaml")
    with pytest.raises(experiment.ExperimentError, match=r"retrievers\[0\]: .*no option\(s\) 'dtyp'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"],
                              "retrievers": [{"name": "dpr", "options": {"dtyp": "fp32"}}]}, source="exp.yaml")


def test_list_shows_profile_differences_with_sources_without_torch():
    code = ("import sys; from irgrid.cli import main; main(['list', 'bge-large-v1.5']); "
            "main(['list', '--profiles', '--family', 'late-interaction', '--format', 'csv']); "
            "assert 'torch' not in sys.modules, 'irgrid list imported torch'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "query_template" in out and "'{text}'" in out and "src/encoders/dense_encoder.py@f8a7b63" in out
    assert "doc_fields" in out and "MTEB retrieval corpus" in out
    assert "colbertv2,doc_max_length,300,180,valentinsvelev/retriever-evaluation:src/models/colbert.py" in out


# -- engine capabilities -------------------------------------------------------------------------------------------
def test_document_fields_select_what_is_encoded(tiny):
    from irgrid.dense.encoders import Engine
    from irgrid.models.resolver import resolve

    card = spec_of(RETRIEVERS.get("bge-large-v1.5"), "d")
    paper = spec_of(RETRIEVERS.get("bge-large-v1.5").with_profile("paper"), "d")
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


def test_corpus_size_rules():
    rule = [[4_999_999, 4], [0, 2]]
    assert (by_size(rule, 5_183, "ncells"), by_size(rule, 8_841_823, "ncells"), by_size(3, 10, "x")) == (2, 4, 3)
    with pytest.raises(ValueError, match="no row for 0 documents"):
        by_size([[0, 2]], 0, "ncells")


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
    from irgrid.dense.encoders import EncoderSpec
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
    paper = spec_of(RETRIEVERS.get("bge-large-v1.5").with_profile("paper"), "d")
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

    from irgrid.dense.encoders import _torch_dtype

    assert _torch_dtype("fp16-autocast") == torch.float32
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
                                                  device="cpu"))
    res = pipeline.transform(topics)
    assert set(res["qid"]) == set(topics["qid"]) and (res.groupby("qid").size() == len(docs)).all()
    assert res["score"].notna().all()
