"""Where the `paper` profile's settings come from: files of the paper's code (GitHub
valentinsvelev/retriever-evaluation), named with the commit read. Light module (no heavy imports)."""

from __future__ import annotations

from typing import Any

from irgrid.core.profiles import Setting

REPO = "valentinsvelev/retriever-evaluation"
MODELS_PY = "src/configs/models.py@2221346"
ENCODER_PY = "src/encoders/dense_encoder.py@f8a7b63"
ENCODER_PY_OLD = "src/encoders/dense_encoder.py@2221346"  # an older version (INSTRUCTOR's own handler)
REQUIREMENTS_OLD = "requirements/requirements_old.txt@0ed0bf9"
NVEMBED_PY = "src/models/nvembed.py@a20eed2"
LLM2VEC_PY = "src/models/llm2vec.py@f790625"
GRITLM_PY = "src/models/gritlm.py@4723eff"
COLBERT_PY = "src/models/colbert.py@c56c84f"


def code(path: str, where: str = "") -> str:
    """A source naming a file of the paper's repository (and the key or function in it)."""
    return f"{REPO}:{path}" + (f" {where}" if where else "")


def paper(value: Any, path: str, where: str = "") -> Setting:
    return Setting(value, code(path, where))


# the generic transformer path of DenseEncoder (AutoModel, fp32 weights, fp16 autocast, 512 tokens both sides)
GENERIC_LENGTH = "encode(): tokenizer(..., truncation=True, max_length=512) for queries and documents"
GENERIC_DTYPE = "_load_manual_transformer(): fp32 AutoModel; encode(): autocast(cuda, float16)"
GENERIC_TITLES = "encode(): documents f'{title} {text}'"


def generic(**extra: Setting) -> dict[str, Setting]:
    """The settings every model on DenseEncoder's generic transformer path shares, plus its own."""
    return {"query_max_length": paper(512, ENCODER_PY, GENERIC_LENGTH),
            "doc_max_length": paper(512, ENCODER_PY, GENERIC_LENGTH),
            "dtype": paper("fp16-autocast", ENCODER_PY, GENERIC_DTYPE), **extra}
