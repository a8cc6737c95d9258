"""Where the `paper` profile's settings come from: files of the paper's code (GitHub
valentinsvelev/retriever-evaluation), named with the commit read. Light module (no heavy imports)."""

from __future__ import annotations

import re
from typing import Any

from irgrid.core.profiles import Setting

REPO = "valentinsvelev/retriever-evaluation"
# The release the `paper` profile follows: the files headed "Last updated: 31.01.2026" whose README tells readers to
# reproduce the paper with run_scripts/run_*.py (which import src/run.py and src/models/*.py) and, for ColBERTv2,
# src/models/colbert.py. Every paper setting cites `path@commit` at this release (or at an earlier commit of a file
# the stored history shows unchanged since, with the release named beside it); `irgrid list --profiles --check`.
RELEASE = "4bedb75"
RUN_PY = f"src/run.py@{RELEASE}"
MODELS_PY = f"src/configs/models.py@{RELEASE}"
ENCODER_PY = f"src/encoders/dense_encoder.py@{RELEASE}"
SPARSE_ENCODER_PY = f"src/encoders/sparse_encoder.py@{RELEASE}"
MISC_PY = f"src/misc.py@{RELEASE}"
EVALUATOR_PY = f"src/evaluator.py@{RELEASE}"
NVEMBED_PY = f"src/models/nvembed.py@{RELEASE}"
LLM2VEC_PY = f"src/models/llm2vec.py@{RELEASE}"
GRITLM_PY = f"src/models/gritlm.py@{RELEASE}"
COLBERT_PY = f"src/models/colbert.py@{RELEASE}"
SPARTA_PY = f"src/models/sparta.py@{RELEASE}"
LUCENE_PY = f"src/indexing/lucene_indexer.py@{RELEASE}"
DATA_HANDLER_PY = f"src/data_handler.py@{RELEASE}"
FAISS_PY = f"src/indexing/faiss_indexer.py@{RELEASE}"
REQUIREMENTS_OLD = f"requirements/requirements_old.txt@0ed0bf9 (its only stored version; release {RELEASE})"
# older versions that differ from the release (named in the entries' notes, never followed silently)
ENCODER_PY_OLD = "src/encoders/dense_encoder.py@2221346"  # INSTRUCTOR's own handler with unified instructions
ENCODER_PY_F8 = "src/encoders/dense_encoder.py@f8a7b63"  # EmbeddingGemma without prompts; Jina's task everywhere
NVEMBED_PY_OLD = "src/models/nvembed.py@a20eed2"  # raw instruction, max_length 4096, documents text only
LLM2VEC_PY_OLD = "src/models/llm2vec.py@f790625"  # documents text only
RUN_PY_OLD = "src/run.py@f8a7b63"  # DeepCT searched with k1 0.9, b 0.4
RUN_V2_PY = "src/run_v2.py@76d4f89"  # docT5query: build_d2q_docs(max_input_len=512) on docs_df; DeepCT 0.9 / 0.4

# `path@commit` of a source naming the paper's repository (what `irgrid list --profiles --check` requires)
PINNED = re.compile(rf"^{re.escape(REPO)}:(?P<path>[\w./-]+\.(?:py|txt|md))@(?P<commit>[0-9a-f]{{7}})\b")


def pinned(source: str) -> tuple[str, str] | None:
    """(path, commit) of a source citing the paper's repository at a commit; None when it names no commit."""
    m = PINNED.match(source)
    return (m["path"], m["commit"]) if m else None

def code(path: str, where: str = "") -> str:
    """A source naming a file of the paper's repository (and the key or function in it)."""
    return f"{REPO}:{path}" + (f" {where}" if where else "")


def paper(value: Any, path: str, where: str = "") -> Setting:
    return Setting(value, code(path, where))


# the generic transformer path of DenseEncoder (AutoModel, fp32 weights, fp16 autocast, 512 tokens both sides)
GENERIC_LENGTH = "encode(): tokenizer(..., truncation=True, max_length=512) for queries and documents"
GENERIC_DTYPE = "_load_manual_transformer(): fp32 AutoModel; encode(): autocast(cuda, float16)"
GENERIC_TITLES = "encode(): documents f'{title} {text}'"


# a corpus without titles: DataHandler gives it a title column of pd.NA, None after its parquet round trip
NO_TITLES = (f"{DATA_HANDLER_PY} _normalize_docs: a corpus without a title field gets title pd.NA (None once read "
             f"back from parquet), and {RUN_PY} passes it as doc_titles")


def release_titles(path: str = ENCODER_PY, where: str = GENERIC_TITLES, keep_empty: bool = True) -> dict[str, Setting]:
    """How the release writes a document's title where it formats f'{title} {text}': the quirk `none_title` (a
    title-less corpus gets the literal 'None') and an empty title kept (' text'), unless the line strips it."""
    out = {"none_title": paper("None", path, f"{where}: title None -> 'None {{text}}' ({NO_TITLES})")}
    if keep_empty:
        out["keep_empty_title"] = paper(True, path, f"{where}: an empty title leaves ' {{text}}' (no test for '')")
    return out


def card_titles(keep_empty: bool = True) -> dict[str, Setting]:
    """The `card` profile's side of `release_titles`: both off."""
    out = {"none_title": Setting(None, "irgrid (quirk off): a document of a title-less corpus is its text")}
    if keep_empty:
        out["keep_empty_title"] = Setting(False, "MTEB retrieval corpus / irgrid: an empty title is left out")
    return out


def generic(**extra: Setting) -> dict[str, Setting]:
    """The settings every model on DenseEncoder's generic transformer path shares, plus its own."""
    return {"query_max_length": paper(512, ENCODER_PY, GENERIC_LENGTH),
            "doc_max_length": paper(512, ENCODER_PY, GENERIC_LENGTH),
            "dtype": paper("fp16-autocast", ENCODER_PY, GENERIC_DTYPE), **release_titles(), **extra}
