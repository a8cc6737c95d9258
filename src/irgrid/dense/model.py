"""One side of a spec on one device: tokenizer, transformer and head; tokenization with the spec's templates,
the forward pass and pooling (CLS, mean, last token, latent attention, ColBERT token vectors)."""

from __future__ import annotations

import logging
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from irgrid.dense.checkpoints import (
    LoadRequest,
    dtype_of,
    load_checkpoint,
    make_bidirectional,
    st_dense_layers,
)
from irgrid.dense.spec import EncoderSpec
from irgrid.models.loading import CheckpointMismatchError
from irgrid.util import settings

if TYPE_CHECKING:
    from irgrid.core.modelref import Resolved

log = logging.getLogger("irgrid")


def st_default_prompt(folder: Path | None) -> str:
    """The prompt SentenceTransformer.encode() applies when the caller names none: the checkpoint's
    config_sentence_transformers.json `prompts[default_prompt_name]`; '' when it names no default."""
    import json

    if folder is None:
        from irgrid.models.resolver import ModelUnavailableError

        raise ModelUnavailableError("st_default_prompt reads the checkpoint's config_sentence_transformers.json from "
                                    "a local folder; stage the checkpoint (IRGRID_MODELS / models:)")
    path = folder / "config_sentence_transformers.json"
    if not path.exists():
        return ""
    config = json.loads(path.read_text())
    name = config.get("default_prompt_name")
    if not name:
        return ""
    prompts = config.get("prompts") or {}
    if name not in prompts:
        raise CheckpointMismatchError(f"{path}: default_prompt_name {name!r} is not one of its prompts {sorted(prompts)}")
    return str(prompts[name])


def with_st_default_prompt(spec: EncoderSpec, folder: Path | None) -> EncoderSpec:
    """`spec` with the checkpoint's sentence-transformers default prompt before both templates (if it has one)."""
    import dataclasses

    prompt = st_default_prompt(folder)
    if not prompt:
        return spec
    log.info("%s: the checkpoint's default prompt %r precedes both sides (st_default_prompt)", spec.name, prompt)
    return dataclasses.replace(spec, query_template=prompt + spec.query_template, doc_template=prompt + spec.doc_template)


def task_adapter_id(model: Any, task: str, what: str) -> int:
    """The index of a task adapter in the checkpoint's `config.lora_adaptations`, which its forward takes per row as
    `adapter_mask` (jinaai/jina-embeddings-v3's remote code: XLMRobertaLoRA.encode(task=...) builds exactly this
    mask). A checkpoint without that mechanism is an error, never an encoding without the adapter."""
    import inspect

    names = getattr(model.config, "lora_adaptations", None)
    if not names:
        raise CheckpointMismatchError(
            f"{what}: the entry selects the task adapter {task!r}, but the checkpoint declares no task adapters "
            f"(config.lora_adaptations) — loaded as {type(model).__name__}. Load it with its own remote code "
            f"(trust_remote_code; for jinaai/jina-embeddings-v3 also stage jinaai/xlm-roberta-flash-implementation, "
            f"which its config's auto_map names); `irgrid doctor` lists what each checkpoint needs")
    if task not in names:
        raise CheckpointMismatchError(f"{what}: no task adapter {task!r} in config.lora_adaptations {list(names)}")
    params = inspect.signature(model.forward).parameters
    if "adapter_mask" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise CheckpointMismatchError(f"{what}: {type(model).__name__}.forward takes no adapter_mask, so the task "
                                      f"adapter {task!r} cannot be selected")
    return list(names).index(task)


class SideModel:
    """Tokenizer + transformer + head for one side of a spec, on one device."""

    def __init__(self, spec: EncoderSpec, side: str, resolved: Resolved, device: str):
        import torch
        import transformers as tf

        folder = Path(resolved.location) if resolved.source != "hub" else None
        if spec.st_default_prompt:
            spec = with_st_default_prompt(spec, folder)
        self.spec, self.side, self.resolved = spec, side, resolved
        self.device = device
        cuda = device.startswith("cuda")
        self.dtype_name = spec.dtype if cuda else "fp32"
        dtype = dtype_of(self.dtype_name)
        what = f"{spec.name} ({'query' if side == 'q' else 'document'} side) from {resolved.ref}"
        strict = {"what": what, "allow_missing": spec.allow_missing, "allow_unexpected": spec.allow_unexpected}
        kw: dict[str, Any] = dict(resolved.kwargs())
        if spec.trust_remote_code and resolved.source != "tiny":
            kw["trust_remote_code"] = True
        self.tokenizer = tf.AutoTokenizer.from_pretrained(resolved.location, **kw)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        self.head: Any = None
        self.dense: list[Any] = []
        request = LoadRequest(spec, side, resolved, folder, dtype, kw, strict, cuda, what)
        loaded = load_checkpoint(request)
        model, self.head = loaded.model, loaded.head
        self.dense = loaded.dense if loaded.dense is not None else (st_dense_layers(folder) if folder else [])
        if spec.bidirectional:
            make_bidirectional(model, own_masks=spec.bidirectional == "own")
        # task LoRA adapters chosen per row, as the checkpoint's own encode(task=...) does (Jina v3's remote
        # XLMRobertaLoRA: adapter_mask = the task's index in config.lora_adaptations). Tiny stand-ins carry no
        # adapters: they check wiring only (irgrid.models.tiny)
        self.adapter_id = (task_adapter_id(model, spec.adapters[0 if side == "q" else 1], what)
                           if spec.adapters is not None and resolved.source != "tiny" else None)
        self.model = model.eval()
        if not getattr(model, "hf_device_map", None):
            self.model.to(device)
        for part in [self.head, *self.dense]:
            if part is not None:
                part.to(device=device, dtype=dtype).eval()
        if (settings.variable("IRGRID_COMPILE") or "").lower() in ("1", "true", "yes"):
            self.model = torch.compile(self.model, dynamic=True)
        self._prefix_tokens = self._count_prefix_tokens()
        self._skip_ids = self._colbert_skiplist() if side == "d" and spec.colbert else None

    def _count_prefix_tokens(self) -> int:
        """Tokens before `{text}` (leading special tokens included): excluded from pooling when pool_prompt=False."""
        prefix = self.spec.template(self.side).split("{text}")[0]
        if not self.spec.prompt_mask_specials:  # the prompt's own token count, from position 0 (see the spec)
            return len(self.tokenizer.tokenize(prefix)) if prefix else 0
        ids = self.tokenizer(prefix, add_special_tokens=True)["input_ids"]
        plain = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        specials = set(self.tokenizer.all_special_ids)
        leading = 0
        while leading < len(ids) and ids[leading] in specials and (not plain or ids[leading] != plain[0]):
            leading += 1
        return leading + len(plain)

    def _colbert_skiplist(self) -> set[int]:
        ids = set()
        for ch in string.punctuation:
            ids.update(self.tokenizer(ch, add_special_tokens=False)["input_ids"])
        return ids

    # -- tokenization (runs in a worker thread) ------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        spec, side = self.spec, self.side
        rendered = [spec.render(t, side) for t in texts]
        max_len = spec.max_length(side)
        eos = self.tokenizer.eos_token_id if spec.append_eos else None
        colbert_q = spec.colbert is not None and side == "q"
        if colbert_q and spec.query_length_rule is not None:  # each query has its own length
            lengths = [spec.query_length(t) for t in texts]
            max_len = max(lengths, default=max_len)
        if rendered and isinstance(rendered[0], tuple):  # text pairs: the tokenizer's own pair template
            enc = self.tokenizer([r[0] for r in rendered], [r[1] for r in rendered], add_special_tokens=True,
                                 truncation=True, max_length=max_len - (1 if eos is not None else 0))["input_ids"]
        else:
            enc = self.tokenizer(list(rendered), add_special_tokens=True, truncation=True,
                                 max_length=max_len - (1 if eos is not None else 0))["input_ids"]
        if eos is not None:
            enc = [ids if ids and ids[-1] == eos else ids + [eos] for ids in enc]
        if spec.colbert is not None:
            marker = self.tokenizer.convert_tokens_to_ids(spec.colbert["q_marker" if side == "q" else "d_marker"])
            for ids in enc:
                ids[1] = marker
        if colbert_q:  # query augmentation: [MASK] up to the query's length (not attended to, but encoded)
            targets = lengths if spec.query_length_rule is not None else [max_len] * len(enc)
            sep = self.tokenizer.sep_token_id
            mask_id = self.tokenizer.mask_token_id
            out = []
            for ids, target in zip(enc, targets):
                if len(ids) > target:  # truncated to this query's own length, [SEP] kept last
                    ids = ids[: target - 1] + [sep]
                out.append(ids + [mask_id] * (target - len(ids)))
            enc = out
        return enc

    # -- the forward pass on one padded batch -------------------------------------------------------------
    def forward(self, batch: list[list[int]]) -> Any:
        import contextlib

        import torch

        spec, side = self.spec, self.side
        pad = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in batch)
        colbert_q = spec.colbert is not None and side == "q"
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        mask_id = self.tokenizer.mask_token_id if colbert_q else None
        for i, row in enumerate(batch):
            if spec.left_pad_last_token:  # the quirk: padded on the left, as the release's Qwen tokenizer pads
                ids[i, width - len(row):] = torch.tensor(row)
                mask[i, width - len(row):] = 1
                continue
            ids[i, : len(row)] = torch.tensor(row)
            attended = len(row)
            if colbert_q:  # the [MASK] augmentation is encoded but not attended to (ColBERT's default)
                while attended > 1 and row[attended - 1] == mask_id:
                    attended -= 1
            mask[i, :attended] = 1
        target = self.device if not getattr(self.model, "hf_device_map", None) else next(self.model.parameters()).device
        if str(target).startswith("cuda"):
            ids, mask = ids.pin_memory().to(target, non_blocking=True), mask.pin_memory().to(target, non_blocking=True)
        inputs = {"input_ids": ids, "attention_mask": mask}
        if self.adapter_id is not None:
            inputs["adapter_mask"] = torch.full((len(batch),), self.adapter_id, dtype=torch.int32, device=ids.device)
        autocast = (torch.autocast("cuda", dtype=torch.float16) if self.dtype_name == "fp16-autocast"
                    else contextlib.nullcontext())
        with autocast:
            out = self.model(**inputs)
            hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
            pool_mask = mask.clone()
            if not spec.pool_prompt and self._prefix_tokens:
                lengths = mask.sum(1)
                keep = torch.minimum(torch.full_like(lengths, self._prefix_tokens), lengths - 1)  # keep >= 1 token
                positions = torch.arange(width, device=mask.device).unsqueeze(0)
                pool_mask = pool_mask * (positions >= keep.unsqueeze(1)).long()
            if spec.pooling == "colbert":
                return self._colbert(hidden, ids, mask, [len(row) for row in batch])
            if spec.pooling == "pooler":  # the checkpoint's pooler head (e.g. SimCSE's MLP over CLS)
                pooled = getattr(out, "pooler_output", None)
                if pooled is None:
                    raise CheckpointMismatchError(f"{spec.name}: pooling 'pooler' but {self.resolved.ref} has no "
                                                  f"pooler head")
                return self._pool(pooled, mask, pool_mask, pooled=True)
            return self._pool(hidden, mask, pool_mask)

    def _pool(self, hidden: Any, mask: Any, pool_mask: Any, pooled: bool = False) -> Any:
        import torch

        spec = self.spec
        if pooled:
            vec = hidden
        elif spec.pooling == "cls":
            vec = hidden[:, 0]
        elif spec.pooling == "last":  # the last attended token; left-padded (quirk): position attended - 1
            vec = hidden[torch.arange(hidden.shape[0], device=hidden.device), mask.sum(1) - 1]
        else:
            if spec.pooling == "latent-attention":
                hidden = self.head(hidden)
            m = pool_mask.unsqueeze(-1).to(hidden.dtype)
            vec = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        for layer in self.dense:
            vec = layer(vec)
        vec = vec.float()
        if spec.truncate_dim:
            vec = vec[:, : spec.truncate_dim]
        if spec.normalize:
            vec = torch.nn.functional.normalize(vec, p=2, dim=-1)
        return vec

    def _colbert(self, hidden: Any, ids: Any, mask: Any, lengths: list[int]) -> list[np.ndarray]:
        import torch

        vecs = torch.nn.functional.normalize(self.head(hidden).float(), p=2, dim=-1)
        if self.side == "q":  # every position of the query's own length, [MASK] augmentation included
            return [vecs[i, :n].cpu().numpy() for i, n in enumerate(lengths)]
        keep = mask.bool()
        if self._skip_ids:
            skip = torch.tensor(sorted(self._skip_ids), device=ids.device)
            keep &= ~torch.isin(ids, skip)
        return [vecs[i][keep[i]].cpu().numpy() for i in range(vecs.shape[0])]
