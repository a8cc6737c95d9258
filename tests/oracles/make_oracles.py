"""Oracle vectors from the release's own libraries (issue 38, item 1): `make oracles` runs this.

What it does, in order (each step can run alone: `python tests/oracles/make_oracles.py STEP`):
1. `venv`: the reference environment `.cache/oracle-venv`, built from the release's own version pins
   (`requirements/requirements_new.txt@0ed0bf9` of GitHub valentinsvelev/retriever-evaluation: transformers 4.57.1,
   sentence-transformers 5.1.2, FlagEmbedding 1.3.5, tokenizers 0.22.1, peft 0.17.1, numpy 2.2.0), with torch 2.13.0
   (CPU) from constraints.txt in place of the release's 2.8.0, plus gritlm 1.0.2 (same file); and
   `.cache/oracle-venv-llm` for LLM2Vec from `requirements/requirements_llm2vec.txt@0ed0bf9` (transformers 4.44.2,
   tokenizers 0.19.0, llm2vec 0.2.3, peft 0.17.1). Both build from PyPI alone.
2. `prepare` (this environment, irgrid importable): the inputs (`fixtures/inputs.json`: 20 SciFact test queries,
   three of them non-ASCII; ~50 probe documents: SciFact with titles, one with its title emptied, three title-less
   Vaswani documents, one longer than every entry's limit, non-ASCII ones; and a 300-document SciFact slice for the
   top-10 check), and, per entry, irgrid's own tiny random-weight checkpoint saved in the format the release's
   library loads (a sentence-transformers folder with its pooling, Dense, Normalize modules and prompts, or the
   plain transformers folder FlagEmbedding and AutoModel read; for RepLLaMA and LLM2Vec the hub repositories the
   release assembles at load: a base model and PEFT LoRA adapters whose merge gives irgrid's tiny weights) plus the
   job: which library call, which arguments.
3. `encode`: `release.py` in the reference environment makes the release's call per entry and writes
   `fixtures/<entry>.npz` (query vectors, probe-document vectors, the slice's top-10 per query and its scores).
4. `golden`: entries whose release code is the checkpoint's own remote code (no pip library carries it: Jina v3,
   GTE's NewModel, Nomic, NV-Embed-v2) get irgrid's own output on the tiny weights as a pinned golden fixture.
5. `table`: irgrid's `paper` profile against every fixture, written into docs/fidelity.md (between markers).

The default test tier (tests/integration/test_oracles.py) compares irgrid with the stored fixtures; its heavy
test rebuilds them through steps 1-3 and compares again."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
VENV = Path(os.environ.get("IRGRID_ORACLE_VENV", ROOT / ".cache" / "oracle-venv"))
# LLM2Vec's own reference environment (requirements/requirements_llm2vec.txt@0ed0bf9: llm2vec 0.2.3 pins
# transformers <= 4.44.2)
VENV_LLM = Path(os.environ.get("IRGRID_ORACLE_VENV_LLM", ROOT / ".cache" / "oracle-venv-llm"))
WORK = Path(os.environ.get("IRGRID_ORACLE_WORK", ROOT / ".cache" / "oracles"))
PINS = ["colbert-ai==0.2.22", "sentence-transformers==5.1.2", "transformers==4.57.1", "tokenizers==0.22.1", "FlagEmbedding==1.3.5",
        "peft==0.17.1", "numpy==2.2.0", "safetensors==0.6.2", "accelerate==1.10.1", "gritlm==1.0.2"]
PINS_LLM = ["llm2vec==0.2.3", "transformers==4.44.2", "tokenizers==0.19.0", "peft==0.17.1", "accelerate==1.10.1",
            "numpy==2.2.0", "safetensors==0.6.2", "sentence-transformers==5.1.1"]
RELEASE = "valentinsvelev/retriever-evaluation@4bedb75"
ENC = f"src/encoders/dense_encoder.py@{RELEASE.split('@')[1]}"

BGE_INSTRUCTION = "Represent this sentence for searching relevant passages: "
GEMMA_PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: "}


def _hf(release_name: str, pooling: str, normalize: bool, qi: str | None = None, di: str | None = None) -> dict:
    return {"library": "hf", "release_name": release_name, "pooling": pooling, "normalize": normalize,
            "query_instruction": qi, "doc_instruction": di}


# entry -> the release's handler and arguments (src/configs/models.py and dense_encoder.py at 4bedb75, read by us)
ORACLES: dict[str, dict[str, Any]] = {
    "bge-large-v1.5": {"library": "flag", "release_name": "BAAI/bge-large-en-v1.5",
                       "query_instruction": BGE_INSTRUCTION},
    "gtr-large": {"library": "st", "release_name": "sentence-transformers/gtr-t5-large", "max_seq": 512,
                  "modules": ["pool-mean", "dense", "normalize"]},
    "instructor-large": {"library": "st", "release_name": "hkunlp/instructor-large", "max_seq": 512,
                         "modules": ["pool-mean", "dense", "normalize"]},
    "embeddinggemma": {"library": "st", "release_name": "google/embeddinggemma-300m", "max_seq": 2048,
                       "modules": ["pool-mean", "dense", "dense", "normalize"], "prompts": GEMMA_PROMPTS,
                       "gemma": True},
    "kalm-embedding-v2.5": {"library": "st", "release_name":
                            "KaLM-Embedding/KaLM-embedding-multilingual-mini-instruct-v2.5", "max_seq": 512,
                            "modules": ["pool-mean", "normalize"], "max_seq_length": 512},
    "tas-b": _hf("sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco", "cls", False),
    "ance": _hf("castorini/ance-msmarco-passage", "cls", True),
    "simcse": _hf("princeton-nlp/unsup-simcse-roberta-large", "cls", True),
    "retromae": _hf("Shitao/RetroMAE_BEIR", "cls", False),
    "cocondenser": _hf("Luyu/co-condenser-marco-retriever", "cls", False),
    "contriever": _hf("facebook/contriever-msmarco", "mean", False),
    "coco-dr-large": _hf("OpenMatch/cocodr-large-msmarco", "cls", False),
    "simlm": _hf("intfloat/simlm-base-msmarco-finetuned", "cls", True),
    "me5-large": _hf("intfloat/multilingual-e5-large-instruct", "mean", True,
                     "Instruct: Retrieve passages that answer this question.\nQuery: ", "Passage: "),
    "qwen3-embedding-0.6b": _hf("Qwen/Qwen3-Embedding-0.6B", "last_token", True,
                                "Instruct: Retrieve passages that answer this query\nQuery: ", None),
    "dpr": {"library": "hf-dual", "release_name": "facebook/dpr-question_encoder-multiset-base", "dpr": True,
            "pooling": "cls", "normalize": False},
    "dragon-plus": {"library": "hf-dual", "release_name": "facebook/dragon-plus-query-encoder", "dpr": False,
                    "pooling": "cls", "normalize": False},
    "gritlm": {"library": "gritlm", "release_name": "GritLM/GritLM-7B",
               "query_instruction": "Given a question, retrieve passages that answer the question:",
               # the release encodes batches of 8; one text per call here (release.py gritlm() says why)
               "batch_size": 1},
    "repllama": {"library": "peft", "release_name": "castorini/repllama-v1-7b-lora-passage",
                 "query_instruction": "query: {}</s>", "doc_instruction": "passage: {}</s>"},
    "llm2vec": {"library": "llm2vec", "release_name": "McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp",
                "query_instruction": "Given a web search query, retrieve relevant passages that answer the query:",
                "env": "llm2vec"},
    "splade-v3": {"library": "splade", "release_name": "naver/splade-v3"},
    "colbertv2": {"library": "colbert", "release_name": "colbert-ir/colbertv2.0"},
}
# what a row of the table says about its oracle call where it differs from the release's own call
ORACLE_INFO = {
    "gritlm": "gritlm called one text at a time (the release: batches of 8): a plain MistralModel drops gritlm's "
              "is_causal=False once a batch is padded (batch 8: max |diff| 0.38); the checkpoint's own modeling code "
              "(ContextualAI/gritlm scripts/modeling_mistral_gritlm.py, run in session, not committed) at batch 8 "
              "gives these vectors within 8.9e-8",
}
# remote-code checkpoints: no pip library holds the release's model code; irgrid's own output is pinned
GOLDEN = {"jina-embeddings-v3": "checkpoint remote code (XLMRobertaLoRA, task= adapters)",
          "gte-large-v1.5": "checkpoint remote code (NewModel)",
          "nomic-embed-v1.5": "checkpoint remote code (NomicBertModel)",
          "nv-embed-v2": "checkpoint remote code (NVEmbedModel: bidirectional Mistral, latent attention)"}
# paper entries without an oracle in this round, and why (docs/fidelity.md lists them in the table); the sparse and
# expansion entries have theirs in oracles_sparse.py (their own table)
UNCOVERED = {
    "bm25": "Lucene BM25: checked against Pyserini's published 2CR figure instead (Checked numbers below)",
}
LIBRARY = {"gritlm": "gritlm {gritlm} GritLM(mode='embedding').encode (transformers {transformers})",
           "peft": "peft {peft} PeftModel merge over the base (transformers {transformers}, last token)",
           "llm2vec": "transformers {transformers} + peft {peft} (llm2vec {llm2vec}'s bidirectional Llama), MNTP "
                      "repository + supervised adapter merged at load",
           "flag": "FlagEmbedding {FlagEmbedding} FlagModel.encode",
           "st": "sentence-transformers {sentence-transformers} encode",
           "hf": "transformers {transformers} AutoModel (release pooling)",
           "hf-dual": "transformers {transformers} (release dual encoder)",
           "colbert": "colbert-ai {colbert-ai} Checkpoint (transformers {transformers})",
           "splade": "sentence-transformers {sentence-transformers} SparseEncoder.encode_document (documents)"}


# -- step 1 -----------------------------------------------------------------------------------------------------
def build_venv(venv: Path | None = None, pins: list[str] | None = None) -> Path:
    """A reference environment, from nothing; torch from the project's constraints (the CPU wheel on disk)."""
    venv, pins = venv or VENV, pins or PINS
    py = venv / "bin" / "python"
    constraints = ROOT / "constraints.txt"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q", "-c", str(constraints)]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, *pins], check=True)
    return py


# -- step 2 -----------------------------------------------------------------------------------------------------
def _irds(name: str) -> Any:
    from irgrid.data.datasets import get, irds_load

    return irds_load(get(name).corpus_dataset())


def inputs() -> dict[str, Any]:
    """Queries, probe documents and the 300-document slice, as records with their fields."""
    import itertools

    from irgrid.data.datasets import get

    ds = get("beir/scifact/test")
    topics = ds.topics()
    plain = [q for q in topics["query"] if q.isascii()][:17]
    other = [q for q in topics["query"] if not q.isascii()][:3]
    queries = plain + other
    qids = set(topics[topics["query"].isin(queries)]["qid"])
    qrels = ds.qrels()
    wanted = set(qrels[qrels["qid"].isin(qids)]["docno"])
    corpus = [{"docno": d.doc_id, "title": d.title, "text": d.text} for d in _irds("beir/scifact").docs_iter()]
    slice_, seen = [], set()
    for d in corpus:
        if (d["docno"] in wanted or len(slice_) < 300 - len(wanted)) and d["docno"] not in seen:
            slice_.append(d)
            seen.add(d["docno"])
    slice_ = slice_[:300]
    probe = [dict(d, group="titled") for d in slice_[:40]]
    probe += [dict(d, group="non-ascii") for d in corpus if not (d["title"] + d["text"]).isascii()][:3]
    blank = dict(slice_[40], docno=slice_[40]["docno"] + "-blank", title="", group="empty-title")
    probe.append(blank)
    vaswani = list(itertools.islice(_irds("vaswani").docs_iter(), 3))
    probe += [{"docno": "vaswani-" + d.doc_id, "text": d.text, "group": "no-title"} for d in vaswani]
    long_text = " ".join(d["text"] for d in corpus[:80])  # ~20k word pieces: past 8,192 (Jina), every limit
    probe.append({"docno": "long", "title": "A document longer than every limit", "text": long_text, "group": "long"})
    return {"queries": queries, "docs": probe, "slice": slice_}


def _st_folder(tiny: Path, out: Path, cfg: dict[str, Any]) -> None:
    """irgrid's tiny checkpoint as a sentence-transformers folder shaped like the real one's (modules, pooling,
    Dense layers, Normalize, max_seq_length, prompts)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    dims = []
    for f in tiny.iterdir():
        if f.is_file() and f.name not in ("modules.json",):
            shutil.copyfile(f, out / f.name)
        elif f.is_dir() and f.name.endswith("_Dense"):
            shutil.copytree(f, out / f.name)
            dims.append(f.name)
    hidden = json.loads((tiny / "config.json").read_text())
    width = hidden.get("hidden_size") or hidden.get("d_model")
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    dense = sorted(dims)
    for i, kind in enumerate(cfg["modules"], start=1):
        if kind == "pool-mean":
            (out / f"{i}_Pooling").mkdir()
            (out / f"{i}_Pooling" / "config.json").write_text(json.dumps({
                "word_embedding_dimension": width, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True}))
            modules.append({"idx": i, "name": str(i), "path": f"{i}_Pooling",
                            "type": "sentence_transformers.models.Pooling"})
        elif kind == "dense":
            name = dense.pop(0)
            if name != f"{i}_Dense":
                raise RuntimeError(f"{tiny}: Dense folder {name} where the real layout has {i}_Dense")
            modules.append({"idx": i, "name": str(i), "path": name, "type": "sentence_transformers.models.Dense"})
        elif kind == "normalize":
            (out / f"{i}_Normalize").mkdir()
            modules.append({"idx": i, "name": str(i), "path": f"{i}_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
    (out / "modules.json").write_text(json.dumps(modules, indent=1))
    _patch_tokenizer(out)
    _tokenizer_as_irgrid_reads_it(out)
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": cfg["max_seq"],
                                                               "do_lower_case": False}))
    (out / "config_sentence_transformers.json").write_text(json.dumps({
        "prompts": cfg.get("prompts", {}), "default_prompt_name": None, "similarity_fn_name": "cosine"}))


def _patch_tokenizer(folder: Path) -> None:
    """The tiny models share one BERT tokenizer; the real checkpoints of non-BERT architectures (T5, RoBERTa,
    XLM-R, DistilBERT, decoders) return no token_type_ids, which their models' forward does not take either."""
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type in ("bert", "dpr"):
        return
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["model_input_names"] = ["input_ids", "attention_mask"]
    path.write_text(json.dumps(cfg, indent=1))


# model types whose tokenizer class transformers 5 takes from its own mapping, whatever tokenizer_config.json names
# (MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS): a tiny folder's shared BERT tokenizer becomes Qwen2Tokenizer in
# irgrid's environment, while 4.57.1 follows tokenizer_config.json (WordPiece)
RETYPED_TOKENIZERS = ("qwen2",)


def _tokenizer_as_irgrid_reads_it(folder: Path) -> None:
    """Tiny stand-ins only: the folder's tokenizer saved as irgrid's transformers loads it, so that the reference
    environment (transformers 4.57.1) tokenizes to the same ids (checked: identical ids on the probe texts). Real
    checkpoints carry their own tokenizer, which both versions read alike."""
    if json.loads((folder / "config.json").read_text()).get("model_type") not in RETYPED_TOKENIZERS:
        return
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        (folder / name).unlink(missing_ok=True)
    tok.save_pretrained(folder)


def _copy(tiny: Path, out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(tiny, out)
    _patch_tokenizer(out)
    return out


def _tiny_folder(name: str, side: str) -> Path:
    from irgrid.core.retrievers import RETRIEVERS

    if RETRIEVERS.get(name).family == "sparse":
        from irgrid.core.retrievers import get
        from irgrid.runner.cell import resolve_models

        return Path(resolve_models(get(name, tiny=True).index.stage.models)["encoder"].location)
    from irgrid.dense.spec import spec_of
    from irgrid.models.resolver import resolve

    spec = spec_of(RETRIEVERS.get(name).with_profile("paper"), side)
    return Path(resolve(spec.model(side).as_tiny()).location)


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _lora(weights: dict[str, Any], seed: int, r: int = 4, alpha: int = 8) -> tuple[dict[str, Any], dict[str, Any]]:
    """A random LoRA adapter over every linear layer of a tiny decoder, in PEFT's saved layout (keys
    'base_model.model.<module>.lora_A/B.weight' over a bare decoder model), and each layer's merged delta."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    adapter, delta = {}, {}
    for key, w in weights.items():
        module = key.removesuffix(".weight")
        if not key.endswith(".weight") or module.rsplit(".", 1)[-1] not in LORA_TARGETS:
            continue
        a = torch.randn(r, w.shape[1], generator=gen) * 0.05
        b = torch.randn(w.shape[0], r, generator=gen) * 0.05
        adapter[f"base_model.model.{module}.lora_A.weight"] = a.contiguous()
        adapter[f"base_model.model.{module}.lora_B.weight"] = b.contiguous()
        delta[key] = (alpha / r) * (b @ a)
    return adapter, delta


def _save_adapter(folder: Path, adapter: dict[str, Any], base: str, r: int = 4, alpha: int = 8) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(adapter, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "FEATURE_EXTRACTION", "base_model_name_or_path": base, "r": r,
        "lora_alpha": alpha, "lora_dropout": 0.0, "bias": "none", "target_modules": list(LORA_TARGETS),
        "fan_in_fan_out": False, "inference_mode": True}, indent=1))


def _base_and_adapters(tiny: Path, out: Path, merged: list[str], extra: list[str] = ()) -> dict[str, Path]:
    """irgrid's tiny merged checkpoint W split as the release's hub repositories hold it: a base folder with
    W - (the merged adapters' deltas), and one PEFT adapter folder per name (`merged`: their deltas are what the
    release's load merges back; `extra`: adapters the release's calls are not expected to apply, random too, so
    that applying one shows as a difference)."""
    from safetensors.torch import load_file, save_file

    if out.exists():
        shutil.rmtree(out)
    weights = load_file(str(tiny / "model.safetensors"))
    base = _copy(tiny, out / "base")
    folders = {"base": base}
    for i, name in enumerate([*merged, *extra]):
        adapter, delta = _lora(weights, seed=1000 + i)
        if name in merged:
            weights = {k: v - delta.get(k, 0) for k, v in weights.items()}
        folders[name] = out / name
        _save_adapter(out / name, adapter, str(base))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(base / "model.safetensors"),
              metadata={"format": "pt"})
    return folders


def _llm2vec_repos(tiny: Path, out: Path) -> dict[str, str]:
    """The MNTP repository as the hub holds it (its config with an auto_map to the bidirectional Llama encoder, the
    tokenizer, and the MNTP LoRA adapter over the base model), the supervised adapter, and the base model. The
    checkpoint's remote modeling file is stood in for by a module re-exporting llm2vec 0.2.3's LlamaBiModel (the
    same bidirectional Llama, from the pip library). The supervised delta is taken out of the base, the MNTP one
    is not: equal vectors mean the release's calls merged the supervised adapter alone (see docs/fidelity.md)."""
    f = _base_and_adapters(tiny, out, merged=["supervised"], extra=["mntp"])
    shim = "from llm2vec.models.bidirectional_llama import LlamaBiModel\n\n\nclass LlamaEncoderModel(LlamaBiModel):\n    pass\n"
    for folder in (f["mntp"], f["base"]):
        (folder / "modeling_llama_encoder.py").write_text(shim)
    config = json.loads((tiny / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_llama_encoder.LlamaEncoderModel"}
    (f["mntp"] / "config.json").write_text(json.dumps(config, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (f["base"] / name).exists():
            shutil.copyfile(f["base"] / name, f["mntp"] / name)
    return {"mntp": str(f["mntp"]), "supervised": str(f["supervised"])}


def prepare() -> Path:
    """Inputs from the staged collections into the fixtures, then the jobs."""
    data = inputs()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
    with gzip.GzipFile(FIXTURES / "inputs.json.gz", "wb", mtime=0) as f:  # mtime 0: the same bytes every time
        f.write(raw)
    return prepare_jobs(data)


def inputs_from_fixture() -> dict[str, Any]:
    from irgrid_side import inputs as stored

    return stored()


def prepare_jobs(data: dict[str, Any]) -> Path:
    """Per entry, its tiny checkpoint in the release library's format and the call to make (WORK/jobs.json)."""
    os.environ["IRGRID_TINY_MODELS"] = "1"
    jobs: dict[str, Any] = {"_inputs": data}
    for name, cfg in ORACLES.items():
        job = {k: v for k, v in cfg.items() if k not in ("modules", "max_seq", "prompts")}
        if cfg["library"] == "peft":
            f = _base_and_adapters(_tiny_folder(name, "q"), WORK / "models" / name, merged=["adapter"])
            job.update(adapter=str(f["adapter"]), tokenizer=str(f["base"]))
        elif cfg["library"] == "llm2vec":
            job.update(_llm2vec_repos(_tiny_folder(name, "q"), WORK / "models" / name))
        elif cfg["library"] == "st":
            folder = WORK / "models" / name
            _st_folder(_tiny_folder(name, "q"), folder, cfg)
            job["folder"] = str(folder)
        elif cfg["library"] == "hf-dual":
            job["folder_q"] = str(_copy(_tiny_folder(name, "q"), WORK / "models" / f"{name}-q"))
            job["folder_d"] = str(_copy(_tiny_folder(name, "d"), WORK / "models" / f"{name}-d"))
        else:
            job["folder"] = str(_copy(_tiny_folder(name, "q"), WORK / "models" / name))
        if cfg["library"] == "colbert":  # the projection's width (the real checkpoint's metadata says 128)
            job["dim"] = int(json.loads((Path(job["folder"]) / "tiny.json").read_text())["parts"]["colbert_dim"])
        jobs[name] = job
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / "jobs.json"
    path.write_text(json.dumps(jobs, ensure_ascii=False))
    return path


# -- step 3 -----------------------------------------------------------------------------------------------------
def encode(jobs: Path, out: Path = FIXTURES, only: list[str] | None = None) -> None:
    """The release's calls per entry, each in its reference environment (LLM2Vec's own, the others the main one)."""
    for venv, label in ((VENV, ""), (VENV_LLM, "llm2vec")):
        names = [n for n, cfg in ORACLES.items() if cfg.get("env", "") == label and (not only or n in only)]
        if not names:
            continue
        py = venv / "bin" / "python"
        if not py.exists():
            raise SystemExit(f"no reference environment at {venv}: run `make oracles` (or this script's `venv` "
                             "step)")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES="",
                   IRGRID_ORACLE_ENV=label)
        subprocess.run([str(py), str(HERE / "release.py"), str(jobs), str(out), *names], check=True, env=env)


# -- step 4 -----------------------------------------------------------------------------------------------------
def golden(only: list[str] | None = None) -> None:
    import numpy as np
    from irgrid_side import encode_entry, top10_of
    from irgrid_side import inputs as inputs_of

    os.environ["IRGRID_TINY_MODELS"] = "1"
    data = inputs_of()
    for name in GOLDEN:
        if only and name not in only:
            continue
        q, d, s = encode_entry(name, data)
        top, scores = top10_of(q, s)
        np.savez_compressed(FIXTURES / f"{name}.npz", q=q, d=d, top10=top, top10_scores=scores)
        print(f"{name}: golden q {q.shape} d {d.shape}")


# -- step 5 -----------------------------------------------------------------------------------------------------
def table(rows: list[Any] | None = None, notes: dict[str, str] | None = None) -> str:
    """The comparison of every entry (or the `rows` a test session computed) into docs/fidelity.md."""
    from irgrid_side import compare, render_table

    os.environ["IRGRID_TINY_MODELS"] = "1"
    rows = rows or [compare(name) for name in sorted({*ORACLES, *GOLDEN})]
    text = render_table(rows, notes, UNCOVERED)
    doc = ROOT / "docs" / "fidelity.md"
    start, end = "<!-- oracles: start -->", "<!-- oracles: end -->"
    body = doc.read_text()
    if start in body:
        head, rest = body.split(start, 1)
        body = head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1]
        doc.write_text(body)
    print(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", nargs="?", default="all", choices=["all", "venv", "prepare", "encode", "golden",
                                                                   "table"])
    parser.add_argument("--only", nargs="*", default=[], help="entries to encode (default: all)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if args.step in ("all", "venv"):
        build_venv()
        build_venv(VENV_LLM, PINS_LLM)
    if args.step in ("all", "prepare"):
        prepare()
    if args.step in ("all", "encode"):
        encode(WORK / "jobs.json", FIXTURES, args.only)
    if args.step in ("all", "golden"):
        golden(args.only)
    if args.step in ("all", "table"):
        table()


if __name__ == "__main__":
    main()
