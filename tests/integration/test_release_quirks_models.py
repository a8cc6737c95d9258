"""The release's model-level behaviours on tiny random weights, each against the call the release makes.

- Jina v3: the release calls the checkpoint's own `encode(texts, task=...)` (remote code: the task's instruction
  prepended, `adapter_mask` = the task's index in `config.lora_adaptations`). A tiny checkpoint with remote code of
  that shape (written here, loaded through `trust_remote_code` like the real one) is encoded by irgrid's engine
  under the paper profile and by its own `encode`: the vectors must agree; without the adapter they must not; a
  checkpoint without adapters must fail, naming what to install.
- SPARTA: the release pads every batch of its 4 workers x 32 documents and takes each term's max over all positions,
  padding included (`sparta_pad_max`); irgrid's per-document widths must give the release's weights exactly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

REMOTE_CODE = '''
import torch
from transformers import BertConfig, BertModel, PreTrainedModel


class TinyLoRAConfig(BertConfig):
    model_type = "tiny-lora-xlmr"

    def __init__(self, lora_adaptations=None, task_instructions=None, **kw):
        super().__init__(**kw)
        self.lora_adaptations = lora_adaptations or []
        self.task_instructions = task_instructions or {}


class TinyLoRAModel(PreTrainedModel):
    """Per-task adapters chosen per row by adapter_mask, and an encode(task=...) that builds that mask and the
    task's instruction itself (the interface of jinaai/jina-embeddings-v3's XLMRobertaLoRA)."""

    config_class = TinyLoRAConfig

    def __init__(self, config):
        super().__init__(config)
        self.roberta = BertModel(config, add_pooling_layer=False)
        self.lora = torch.nn.Parameter(torch.randn(len(config.lora_adaptations), config.hidden_size))
        self._adaptation_map = {name: i for i, name in enumerate(config.lora_adaptations)}
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, adapter_mask=None, **kw):
        out = self.roberta(input_ids=input_ids, attention_mask=attention_mask)
        if adapter_mask is not None:
            out.last_hidden_state = out.last_hidden_state + self.lora[adapter_mask.long()].unsqueeze(1)
        return out

    @torch.inference_mode()
    def encode(self, sentences, task=None, tokenizer=None, max_length=8192):
        adapter_mask = None
        if task:
            sentences = [self.config.task_instructions[task] + s for s in sentences]
            adapter_mask = torch.full((len(sentences),), self._adaptation_map[task], dtype=torch.int32)
        enc = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        hidden = self.forward(**enc, adapter_mask=adapter_mask).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(emb, p=2, dim=-1).numpy()
'''
TASKS = ["retrieval.query", "retrieval.passage", "separation"]


def _tiny_jina(folder: Path, with_adapters: bool = True) -> Path:
    from transformers import AutoConfig, AutoModel

    from irgrid.models.tiny import tokenizer_source

    folder.mkdir(parents=True)
    (folder / "modeling_tiny_lora.py").write_text(REMOTE_CODE)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (tokenizer_source() / name).exists():
            shutil.copy(tokenizer_source() / name, folder / name)
    from irgrid.pipelines.dense_encoder import JINA_D, JINA_Q

    instructions = {"retrieval.query": JINA_Q.replace("{text}", ""), "retrieval.passage": JINA_D.replace("{text}", ""),
                    "separation": ""}
    config = {"model_type": "tiny-lora-xlmr", "vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
              "lora_adaptations": TASKS if with_adapters else [], "task_instructions": instructions,
              "auto_map": {"AutoConfig": "modeling_tiny_lora.TinyLoRAConfig",
                           "AutoModel": "modeling_tiny_lora.TinyLoRAModel"}}
    (folder / "config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(str(folder), trust_remote_code=True),
                                  trust_remote_code=True)
    model.save_pretrained(str(folder))
    (folder / "config.json").write_text(json.dumps(config))  # keep the auto_map pointing at the local code
    return folder


def _engine(spec, side: str, folder: Path):
    from irgrid.core.modelref import Resolved
    from irgrid.dense.engine import Engine

    return Engine(spec, side, Resolved(spec.query_model, "mapping", str(folder)), device="cpu", batch_size=4)


QUERIES = ["what causes floods?", "Überschwemmung im Tal", "x"]
DOCS = ["River flood warnings are issued when water levels rise. " * 3, "Smoke from wildfires", "Ünïcödé tèxt"]


def test_jina_task_adapter_is_the_checkpoints_own_encode(tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from irgrid.core.retrievers import get
    from irgrid.dense.spec import spec_of

    folder = _tiny_jina(tmp_path / "jina")
    own = AutoModel.from_pretrained(str(folder), trust_remote_code=True).eval()
    tok = AutoTokenizer.from_pretrained(str(folder))
    entry = get("jina-embeddings-v3").with_profile("paper")
    for side, texts, task in (("q", QUERIES, "retrieval.query"), ("d", DOCS, "retrieval.passage")):
        spec = spec_of(entry)
        ours = _engine(spec, side, folder).encode(texts)
        theirs = own.encode(texts, task=task, tokenizer=tok)
        assert np.abs(ours - theirs).max() < 1e-5, side
        # the release's call on ArguAna: no task, no adapter, no instruction (the paper profile's per-dataset values)
        arguana = spec_of(entry.for_dataset("beir/arguana/test"))
        assert arguana.adapters is None
        plain = _engine(arguana, side, folder).encode(texts)
        assert np.abs(plain - own.encode(texts, task=None, tokenizer=tok)).max() < 1e-5
        assert np.abs(plain - theirs).max() > 1e-3  # the adapter matters: a silent fallback would show here


def test_jina_checkpoint_without_adapters_fails_naming_what_to_install(tmp_path):
    from irgrid.core.retrievers import get
    from irgrid.dense.spec import spec_of
    from irgrid.models.loading import CheckpointMismatchError

    folder = _tiny_jina(tmp_path / "plain", with_adapters=False)
    with pytest.raises(CheckpointMismatchError, match="lora_adaptations.*remote code.*xlm-roberta-flash-implementation"):
        _engine(spec_of(get("jina-embeddings-v3").with_profile("paper")), "q", folder)


def test_sparta_pad_max_reproduces_the_release_batches():
    """The release's weights (batches of its workers, padded to the batch's longest, max over every position)
    computed directly, against irgrid's SpartaEncoder with the release's per-document widths."""
    import pandas as pd
    import transformers as tf

    from irgrid.models.tiny import tokenizer_source
    from irgrid.sparse.impact import SpartaEncoder, padded_widths, release_batches

    torch.manual_seed(0)
    model = tf.DistilBertModel(tf.DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                                   max_position_embeddings=512)).eval()
    tok = tf.AutoTokenizer.from_pretrained(str(tokenizer_source()))
    words = "flood river smoke fire quake storm rain wind heat snow".split()
    docs = [{"docno": f"d{i}", "text": " ".join(words[(i * 3 + j) % 10] for j in range(1 + (i * 7) % 23))}
            for i in range(13)]
    docs[5]["text"] = "   "  # blank: the release's workers skip it
    workers, batch = 2, 3
    table = model.get_input_embeddings().weight.clone()
    table[list(tok.all_special_ids)] = 0
    release = {}
    for positions, _ in release_batches([d["text"] for d in docs], workers, batch):
        texts = [docs[i]["text"].strip() for i in positions]
        enc = tok(texts, padding=True, truncation=True, max_length=500, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**enc).last_hidden_state
            w = torch.log1p(torch.relu(torch.einsum("bsh,vh->bvs", hidden, table).max(-1).values))
        for i, row in zip(positions, w):
            release[docs[i]["docno"]] = row
    widths = padded_widths(docs, tok, 500, workers, batch)
    encoder = SpartaEncoder((tok, model), zero_special=True, pad_widths=widths, batch_size=4, max_length=500,
                            scale=1.0, top_k=None, rounding="trunc")
    masked = SpartaEncoder((tok, model), zero_special=True, batch_size=4, max_length=500, scale=1.0, top_k=None,
                           rounding="trunc")
    kept = [d for d in docs if d["text"].strip()]
    ours = encoder.weights([(d["text"], widths[d["docno"]]) for d in kept])
    plain = masked.weights([d["text"] for d in kept])
    vocab = {v: k for k, v in tok.get_vocab().items()}
    differs = 0
    for d, mine, theirs_masked in zip(kept, ours, plain):
        ref = release[d["docno"]]
        expect = {vocab[int(i)]: float(ref[i]) for i in torch.nonzero(ref > 0).flatten()}
        assert set(mine) == set(expect) and max(abs(mine[t] - expect[t]) for t in expect) < 1e-5, d["docno"]
        differs += mine != theirs_masked
    assert differs > 0  # padding positions changed some document's weights: the quirk is not a no-op here
    assert len(pd.DataFrame(list(encoder.transform_iter(kept)))) == len(kept)


def _tiny_mlm(folder: Path, positions: int) -> Path:
    import transformers as tf

    from irgrid.models.tiny import tokenizer_source

    torch.manual_seed(0)
    config = tf.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=positions)
    tf.BertForMaskedLM(config).save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (tokenizer_source() / name).exists():
            shutil.copy(tokenizer_source() / name, folder / name)
    return folder


def test_splade_document_length_is_sentence_transformers_default(tmp_path):
    """The release encodes SPLADE documents with `SparseEncoder(name).encode_document(texts)`: the length is
    sentence-transformers' default for the checkpoint. irgrid's rule must give the same number (no config: capped
    by the position table; a saved config: its max_seq_length), and its document vectors must equal the release's
    call on a document longer than every limit, where 256 tokens (irgrid before) do not."""
    from sentence_transformers import SparseEncoder

    from irgrid.pipelines.learned_sparse import load_splade
    from irgrid.sparse.splade import encode_max_first, st_max_seq_length

    plain = _tiny_mlm(tmp_path / "plain", positions=384)
    st = SparseEncoder(str(plain), device="cpu")
    assert st_max_seq_length(plain) == st.max_seq_length == 384
    st.max_seq_length = 128
    st.save(str(tmp_path / "saved"))
    assert st_max_seq_length(tmp_path / "saved") == SparseEncoder(str(tmp_path / "saved"), device="cpu").max_seq_length == 128

    long_doc = " ".join(f"flood{i % 50} river basin über étude" for i in range(200))  # > 384 word pieces
    texts = [long_doc, "Smoke from wildfires harms air quality.", ""]
    release = SparseEncoder(str(plain), device="cpu").encode_document(texts, convert_to_tensor=True).to_dense()
    ours = encode_max_first(load_splade(str(plain), None, st_max_seq_length(plain), "cpu"), texts, 2, 1.0)
    before = encode_max_first(load_splade(str(plain), None, 256, "cpu"), texts, 2, 1.0)
    assert float((ours - release.float()).abs().max()) < 1e-5
    assert float((before[0] - release[0].float()).abs().max()) > 1e-3


@pytest.mark.parametrize("default", ["query", None])
def test_st_default_prompt_is_what_plain_encode_applies(tmp_path, default):
    """KaLM, GTR and INSTRUCTOR: the release calls SentenceTransformer.encode(texts, normalize_embeddings=True) with
    no prompt, which applies the checkpoint's default prompt when its config names one. irgrid's
    st_default_prompt must give that call's vectors, with a default prompt and without."""
    import dataclasses

    from sentence_transformers import SentenceTransformer, models

    from irgrid.core.modelref import Resolved
    from irgrid.dense.engine import Engine
    from irgrid.dense.spec import ENCODERS

    bert = tmp_path / "bert"
    _tiny_mlm(bert, positions=512)
    st = SentenceTransformer(modules=[models.Transformer(str(bert), max_seq_length=256), models.Pooling(32, "mean"),
                                      models.Normalize()],
                             prompts={"query": "query: ", "document": "passage: "}, default_prompt_name=default,
                             device="cpu")
    st.save(str(tmp_path / "st"))
    theirs = SentenceTransformer(str(tmp_path / "st"), device="cpu").encode(QUERIES + DOCS, normalize_embeddings=True)
    spec = dataclasses.replace(ENCODERS.get("all-minilm-l6-v2"), st_default_prompt=True)
    engine = Engine(spec, "d", Resolved(spec.query_model, "mapping", str(tmp_path / "st")), device="cpu")
    ours = engine.encode(QUERIES + DOCS)
    assert np.abs(ours - theirs).max() < 1e-5
    prompt = engine.replicas[0].spec.template("q").split("{text}")[0]
    assert prompt == ("query: " if default else "")


def _qwen_tokenizer(folder: Path, eos_template: bool) -> None:
    """A byte-level BPE tokenizer laid out as Qwen3-Embedding's (tokenizer.json + Qwen2Tokenizer config), with or
    without the post-processor that appends <|endoftext|> (later revisions of the checkpoint's tokenizer have it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" ".join(QUERIES + DOCS)] * 20, trainer)
    if eos_template:
        eos = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", eos)])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "model_max_length": 131072}))


@pytest.mark.parametrize("eos_template", [True, False])
def test_qwen3_end_of_text_follows_the_checkpoints_tokenizer(tmp_path, eos_template):
    """The release tokenizes Qwen3-Embedding with a plain tokenizer call (max_length 512) under transformers
    4.57.1, where Qwen2TokenizerFast has no `add_bos_token` (so its `tokenizer.add_bos_token = True` line is a
    no-op) and the tokenizer.json's own post-processor decides whether <|endoftext|> ends the text; the last
    attended token is pooled. The paper profile must give the tokenizer file's own ids (EOS iff it appends one),
    truncated with the EOS kept, and pool that last token; the card appends the EOS itself, never twice."""
    import transformers as tf
    from tokenizers import Tokenizer

    from irgrid.core.modelref import Resolved
    from irgrid.core.retrievers import get
    from irgrid.dense.engine import Engine
    from irgrid.dense.spec import spec_of
    from irgrid.models.tiny import decoder_config

    folder = tmp_path / "qwen3"
    torch.manual_seed(0)
    tf.Qwen3Model(decoder_config(tf.Qwen3Config)).save_pretrained(str(folder))
    _qwen_tokenizer(folder, eos_template)
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    eos = raw.token_to_id("<|endoftext|>")
    paper = spec_of(get("qwen3-embedding-0.6b").with_profile("paper"))
    card = spec_of(get("qwen3-embedding-0.6b").with_profile("card"))
    engines = {name: Engine(spec, "d", Resolved(spec.query_model, "mapping", str(folder)), device="cpu")
               for name, spec in (("paper", paper), ("card", card))}
    ids = engines["paper"].replicas[0].tokenize(DOCS)
    assert ids == [raw.encode(d).ids for d in DOCS]  # the file's own pipeline: the release's tokenizer (4.57.1)
    assert all((row[-1] == eos) == eos_template for row in ids)
    card_ids = engines["card"].replicas[0].tokenize(DOCS)
    assert all(row[-1] == eos and row[-2] != eos for row in card_ids)
    long = engines["paper"].replicas[0].tokenize([" ".join(DOCS * 200)])[0]
    assert len(long) == 512 and (long[-1] == eos) == eos_template
    # the vector is the (normalised) hidden state of the last token
    model = tf.Qwen3Model.from_pretrained(str(folder)).eval()
    with torch.inference_mode():
        last = model(input_ids=torch.tensor([ids[1]])).last_hidden_state[0, -1]
    expect = torch.nn.functional.normalize(last, dim=-1).numpy()
    assert np.abs(engines["paper"].encode([DOCS[1]])[0] - expect).max() < 1e-5


# -- exact scoring precision -----------------------------------------------------------------------------------------
def test_exact_retriever_takes_a_score_dtype_and_refuses_others(tmp_path):
    from pyterrier_dr import FlexIndex

    from irgrid.data.errors import InputError
    from irgrid.dense.search import ExactRetriever

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((50, 8)).astype(np.float32)
    FlexIndex(str(tmp_path / "flex")).indexer().index({"docno": str(i), "doc_vec": v} for i, v in enumerate(vecs))
    flex = FlexIndex(str(tmp_path / "flex"))
    q = rng.standard_normal((3, 8)).astype(np.float32)
    fp32 = ExactRetriever(flex, num_results=10, device="cpu", score_dtype="fp32").search(q)
    fp16 = ExactRetriever(flex, num_results=10, device="cpu", score_dtype="fp16").search(q)
    assert np.array_equal(fp32[1], fp16[1]) and np.array_equal(fp32[1], np.argsort(-(q @ vecs.T), axis=1)[:, :10])
    with pytest.raises(InputError, match="score_dtype must be one of fp16, fp32"):
        ExactRetriever(flex, score_dtype="bf16")


def test_manifest_records_the_quirks_each_retriever_ran_with(tmp_path, monkeypatch):
    """A paper-profile grid (tiny weights, a bring-your-own collection with a title-less document): the manifest
    names every quirk the entry holds with its value, and the card profile's are off."""
    import irgrid

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "docs.jsonl").write_text(
        '{"_id": "d1", "title": "Flood warnings", "text": "River flood warnings are issued."}\n'
        '{"_id": "d2", "title": "", "text": "Smoke from wildfires harms air quality."}\n'
        '{"_id": "d3", "title": "Quakes", "text": "Drop, cover and hold on."}\n')
    (data / "topics.tsv").write_text("q1\tflood warnings\nq2\twildfire smoke\n")
    (data / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: quirks\nprofile: paper\ncollections:\n  - {name: mine, docs: data/docs.jsonl, topics: "
                   "data/topics.tsv, qrels: data/qrels.txt}\ndatasets: [mine]\nretrievers:\n  - contriever\n"
                   "  - {name: contriever, as: contriever-card, profile: card}\nmeasures: [nDCG@10]\n")
    irgrid.run(str(exp), out=str(tmp_path / "out"))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["retrievers"]["contriever"]["quirks"] == {"none_title": "None", "score_dtype": "fp32"}
    assert manifest["retrievers"]["contriever-card"]["quirks"] == {"none_title": None, "score_dtype": "fp16"}
