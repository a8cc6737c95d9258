"""Reading a bi-encoder checkpoint: one loader per checkpoint layout (Hugging Face auto classes, DPR, T5's
encoder, ColBERT's projection, ANCE's head, NV-Embed's parts), the heads stored beside the transformer
(Sentence-Transformers dense layers) and the model surgery some specs declare (bidirectional attention)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid.core.retrievers import EntryError
from irgrid.models.loading import check_loading_info, from_pretrained_strict
from irgrid.models.resolver import ModelUnavailableError

if TYPE_CHECKING:
    from irgrid.core.modelref import Resolved
    from irgrid.dense.spec import EncoderSpec

log = logging.getLogger("irgrid")


def _read_state(folder: Path, prefix: str) -> dict[str, Any]:
    """Tensors whose names start with `prefix` from a checkpoint folder (safetensors, sharded or not, or .bin)."""
    import torch

    out: dict[str, Any] = {}
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors import safe_open

        for f in files:
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    if k.startswith(prefix):
                        out[k[len(prefix):]] = fh.get_tensor(k)
    else:
        for f in sorted(folder.glob("pytorch_model*.bin")):
            state = torch.load(str(f), map_location="cpu", weights_only=True)
            out.update({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return out


def st_dense_layers(folder: Path) -> list[Any]:
    """The sentence-transformers Dense modules after pooling (GTR, EmbeddingGemma, INSTRUCTOR), in order."""
    import torch

    modules_file = folder / "modules.json"
    if not modules_file.exists():
        return []
    layers = []
    for m in json.loads(modules_file.read_text()):
        if not m["type"].endswith("models.Dense"):
            continue
        sub = folder / m["path"]
        cfg = json.loads((sub / "config.json").read_text())
        linear = torch.nn.Linear(cfg["in_features"], cfg["out_features"], bias=cfg.get("bias", True))
        state = _read_state(sub, "linear.")
        linear.load_state_dict(state)
        act = cfg.get("activation_function", "torch.nn.modules.linear.Identity")
        if not act.endswith("Identity"):
            mod, _, cls = act.rpartition(".")
            import importlib

            linear = torch.nn.Sequential(linear, getattr(importlib.import_module(mod), cls)())
        layers.append(linear.eval())
    return layers


def dtype_of(name: str) -> Any:
    import torch

    # fp16-autocast keeps fp32 weights; the forward pass runs under torch.autocast (SideModel.forward)
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
            "fp16-autocast": torch.float32}[name]


def _estimate_params(config: Any) -> int:
    h = getattr(config, "hidden_size", 1024)
    n = getattr(config, "num_hidden_layers", 24)
    ffn = getattr(config, "intermediate_size", 4 * h)
    vocab = getattr(config, "vocab_size", 32000)
    return n * (4 * h * h + 3 * h * ffn) + vocab * h


def make_bidirectional(model: Any, own_masks: bool = False) -> None:
    """Remove a decoder's causal mask (LLM2Vec, NV-Embed, GritLM's embedding mode, KaLM).

    `own_masks` (the entry's `bidirectional="own"`): the architecture has its own bidirectional mode
    (`config.use_bidirectional_attention`, Gemma 3 / EmbeddingGemma) and keeps its masks, as transformers and
    sentence-transformers run it: full-attention layers see every token, sliding-window layers the tokens closer
    than the window (|i - j| < window). Setting `config.is_causal=False` there would replace them with transformers'
    generic bidirectional masks (4.57: no window; 5.x: |i - j| <= window), which the oracle (sentence-transformers
    5.1.2) shows differ. Declared by the entry, so the choice is in its cache key."""
    if own_masks:
        if not hasattr(model.config, "use_bidirectional_attention"):
            raise EntryError(f"{type(model).__name__}: the entry declares bidirectional='own', but the checkpoint's "
                             f"config has no use_bidirectional_attention; declare bidirectional=True instead")
        model.config.use_bidirectional_attention = True
        return
    for m in model.modules():
        if hasattr(m, "is_causal"):
            m.is_causal = False
    if hasattr(model.config, "use_bidirectional_attention"):
        model.config.use_bidirectional_attention = True
    model.config.is_causal = False  # transformers' mask builders then make a padding-only (bidirectional) mask


# -- one loader per checkpoint layout (`EncoderSpec.loader`) -------------------------------------------------------


@dataclass(frozen=True)
class LoadRequest:
    """What every loader gets: the spec and side, where the checkpoint is (`folder`: None on the hub), the dtype,
    `from_pretrained` keywords and the strict-loading arguments (`irgrid.models.loading`)."""

    spec: EncoderSpec
    side: str
    resolved: Resolved
    folder: Path | None
    dtype: Any
    kw: dict[str, Any]
    strict: dict[str, Any]
    cuda: bool
    what: str

    def local(self, parts: str) -> Path:
        if self.folder is None:
            raise ModelUnavailableError(f"{parts} read from a local folder; stage the checkpoint")
        return self.folder


@dataclass
class Loaded:
    """A loaded transformer with the head it carries; `dense` None: read Sentence-Transformers dense layers from
    the checkpoint folder (if any), a list: the loader's own layers."""

    model: Any
    head: Any = None
    dense: list[Any] | None = None


def _load_dpr(r: LoadRequest) -> Loaded:
    import transformers as tf

    cls = tf.DPRQuestionEncoder if r.side == "q" else tf.DPRContextEncoder
    outer = from_pretrained_strict(cls, r.resolved.location, dtype=r.dtype, **r.strict, **r.kw)
    return Loaded((outer.question_encoder if r.side == "q" else outer.ctx_encoder).bert_model)


def _load_t5_encoder(r: LoadRequest) -> Loaded:
    import transformers as tf

    return Loaded(from_pretrained_strict(tf.T5EncoderModel, r.resolved.location, dtype=r.dtype, **r.strict, **r.kw))


def _load_colbert(r: LoadRequest) -> Loaded:
    import torch
    import transformers as tf

    model = from_pretrained_strict(tf.BertModel, r.resolved.location, dtype=r.dtype, add_pooling_layer=False,
                                   **r.strict, **r.kw)
    weight = _read_state(r.local("ColBERT's projection is"), "linear.")["weight"]
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    head.load_state_dict({"weight": weight})
    return Loaded(model, head=head, dense=[])


def _load_ance(r: LoadRequest) -> Loaded:
    """Pyserini's AnceEncoder: RoBERTa, CLS -> embeddingHead (linear) -> LayerNorm."""
    import torch
    import transformers as tf

    model = from_pretrained_strict(tf.RobertaModel, r.resolved.location, dtype=r.dtype, **r.strict, **r.kw)
    folder = r.local("ANCE's head is")
    lin, norm = _read_state(folder, "embeddingHead."), _read_state(folder, "norm.")
    linear = torch.nn.Linear(lin["weight"].shape[1], lin["weight"].shape[0])
    linear.load_state_dict(lin)
    layer_norm = torch.nn.LayerNorm(norm["weight"].shape[0])
    layer_norm.load_state_dict(norm)
    return Loaded(model, dense=[linear, layer_norm])


def _load_nv_embed(r: LoadRequest) -> Loaded:
    import transformers as tf

    from irgrid.models.architectures import LatentAttention

    folder = r.local("NV-Embed's parts are")
    config = tf.AutoConfig.from_pretrained(folder)
    text_config = getattr(config, "text_config", None) or config
    if isinstance(text_config, dict):
        text_config = tf.MistralConfig(**text_config)
    model = tf.MistralModel(text_config)
    info = model.load_state_dict(_read_state(folder, "embedding_model."), strict=False)
    check_loading_info({"missing_keys": info.missing_keys, "unexpected_keys": info.unexpected_keys},
                       r.what, r.spec.allow_missing, r.spec.allow_unexpected)
    la_file = folder / "latent_attention.json"
    la = json.loads(la_file.read_text()) if la_file.exists() else dict(config.latent_attention_config)
    heads = int(la.get("heads", la.get("num_cross_heads", 8)))
    dim_head = int(la.get("dim_head", la.get("cross_dim_head", text_config.hidden_size)))
    num_latents = int(la.get("num_latents", la.get("num_latents_value", 512)))
    head = LatentAttention(text_config.hidden_size, num_latents, heads, dim_head)
    head.load_state_dict(_read_state(folder, "latent_attention_model."))
    return Loaded(model.to(r.dtype), head=head)


def _load_auto(r: LoadRequest) -> Loaded:
    """transformers' AutoModel; a model larger than the freest GPU is sharded over all of them, never quantised."""
    import torch
    import transformers as tf

    config = tf.AutoConfig.from_pretrained(r.resolved.location, **r.kw)
    if r.cuda and torch.cuda.is_available() and r.resolved.source != "tiny":
        n_params = _estimate_params(config)
        need = n_params * torch.finfo(r.dtype).bits // 8 * 1.2
        free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
        if need > max(free):
            if need > sum(free):
                raise MemoryError(
                    f"{r.spec.name}: {r.resolved.ref} needs ~{need / 2**30:.0f} GiB in {r.spec.dtype} but the "
                    f"visible GPUs have {sum(free) / 2**30:.0f} GiB free together; irgrid never quantises "
                    f"silently: use more GPUs (CUDA_VISIBLE_DEVICES) or a larger one")
            log.info("%s: sharding %s over %d GPUs", r.spec.name, r.resolved.ref, len(free))
            return Loaded(from_pretrained_strict(tf.AutoModel, r.resolved.location, dtype=r.dtype, device_map="auto",
                                                 **r.strict, **r.kw))
    return Loaded(from_pretrained_strict(tf.AutoModel, r.resolved.location, dtype=r.dtype, **r.strict, **r.kw))


CHECKPOINT_LOADERS: dict[str, Callable[[LoadRequest], Loaded]] = {
    "auto": _load_auto, "dpr": _load_dpr, "t5-encoder": _load_t5_encoder, "colbert": _load_colbert,
    "ance": _load_ance, "nv-embed": _load_nv_embed,
}


def load_checkpoint(request: LoadRequest) -> Loaded:
    """The transformer and head of one side, by the spec's declared checkpoint layout."""
    return CHECKPOINT_LOADERS[request.spec.loader](request)
