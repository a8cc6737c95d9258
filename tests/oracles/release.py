"""The release's library calls, run inside the reference environment (`make oracles` builds it): no irgrid import.

Each function re-states, in our own words, what release 4bedb75 of the paper's code (GitHub
valentinsvelev/retriever-evaluation, `src/encoders/dense_encoder.py`, `src/configs/models.py`) does for one handler,
then makes the library call it makes, with its arguments: FlagEmbedding's `FlagModel.encode`, sentence-transformers'
`SentenceTransformer.encode` / `encode_query` / `encode_document`, and the generic transformers path (AutoModel,
padding to the longest text of a batch of 256, the release's pooling rules, L2 normalisation unless the model's
config says otherwise). Documents are `f"{title} {text}"` as the release writes them, so a title-less record gives the
literal "None" there (the quirk irgrid calls `none_title`).

Run as `python release.py JOBS.json OUT_DIR` with the reference environment's interpreter."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

RELEASE_BATCH = {"flag": 256, "st": 32, "hf": 256, "hf-dual": 256}  # dense_encoder.py encode(): batch_size


def _titled(docs: list[dict[str, Any]], sep: str = " ") -> list[str]:
    """The release's document text: title, separator, text; a missing title formats as the string 'None'."""
    return [f"{d.get('title')}{sep}{d['text']}" for d in docs]


# -- FlagEmbedding (BGE) ---------------------------------------------------------------------------------------------
def flag(job: dict[str, Any]) -> dict[str, np.ndarray]:
    from FlagEmbedding import FlagModel

    model = FlagModel(job["folder"], query_instruction_for_retrieval=job["query_instruction"], devices="cpu")
    enc = lambda texts: np.asarray(model.encode(texts, batch_size=RELEASE_BATCH["flag"]), dtype=np.float32)  # noqa: E731
    return {"q": enc(job["queries"]), "d": enc(_titled(job["docs"])), "s": enc(_titled(job["slice"]))}


# -- sentence-transformers (GTR, INSTRUCTOR, EmbeddingGemma, KaLM) ------------------------------------------------------
def st(job: dict[str, Any]) -> dict[str, np.ndarray]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(job["folder"], trust_remote_code=True, device="cpu")
    if job.get("max_seq_length"):
        model.max_seq_length = job["max_seq_length"]
    if job.get("gemma"):  # the release writes the prompts itself, then calls encode_query / encode_document
        def q(texts: list[str]) -> np.ndarray:
            return model.encode_query([f"task: search result | query: {t}" for t in texts])

        def d(docs: list[dict[str, Any]]) -> np.ndarray:
            texts = [f"title: {x.get('title') if x.get('title') is not None else 'none'} | text: {x['text']}"
                     for x in docs]
            return model.encode_document(texts)
        out = {"q": q(job["queries"]), "d": d(job["docs"]), "s": d(job["slice"])}
    else:
        def enc(texts: list[str]) -> np.ndarray:
            return model.encode(texts, batch_size=RELEASE_BATCH["st"], normalize_embeddings=True)
        out = {"q": enc(job["queries"]), "d": enc(_titled(job["docs"])), "s": enc(_titled(job["slice"]))}
    return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}


# -- the generic transformers path -----------------------------------------------------------------------------------
def _pool(hidden: Any, mask: Any, strategy: str, pooler: Any, simcse: bool) -> Any:
    """The release's pooling rules: 'cls' (SimCSE: the pooler output), 'mean', and 'last_token', whose index is
    (attended tokens - 1) whatever the padding side."""
    import torch

    if strategy == "cls":
        return pooler if simcse and pooler is not None else hidden[:, 0]
    if strategy == "mean":
        m = mask.unsqueeze(-1).float()
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if strategy == "last_token":
        return hidden[torch.arange(hidden.shape[0]), mask.sum(1).long() - 1]
    raise ValueError(f"unknown pooling {strategy!r}")


def _instruct(texts: list[str], instruction: str | None) -> list[str]:
    if not instruction:
        return texts
    return [instruction.format(t) if "{}" in instruction else instruction + t for t in texts]


def _tokenizer(folder: str, release_name: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, use_fast=True, clean_up_tokenization_spaces=True)
    if "qwen" in release_name.lower():
        tok.padding_side = "left"
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
        tok.padding_side = "right"
    if hasattr(tok, "add_bos_token"):
        tok.add_bos_token = True
    return tok


def _run(model: Any, tok: Any, texts: list[str], job: dict[str, Any], dpr: bool) -> np.ndarray:
    import torch

    out = []
    for i in range(0, len(texts), RELEASE_BATCH["hf"]):
        inputs = tok(texts[i:i + RELEASE_BATCH["hf"]], return_tensors="pt", padding=True, truncation=True,
                     max_length=512)
        with torch.no_grad():
            o = model(**inputs)
            if dpr:
                e = o.pooler_output
            else:
                e = _pool(o.last_hidden_state, inputs["attention_mask"], job["pooling"],
                          getattr(o, "pooler_output", None), "simcse" in job["release_name"].lower())
            if job["normalize"]:
                e = torch.nn.functional.normalize(e, p=2, dim=1)
        out.append(e.float().numpy())
    return np.concatenate(out).astype(np.float32)


def hf(job: dict[str, Any]) -> dict[str, np.ndarray]:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(job["folder"], low_cpu_mem_usage=True).eval()
    tok = _tokenizer(job["folder"], job["release_name"])
    q = _run(model, tok, _instruct(job["queries"], job["query_instruction"]), job, False)
    d = [_run(model, tok, _instruct(_titled(job[k]), job["doc_instruction"]), job, False) for k in ("docs", "slice")]
    return {"q": q, "d": d[0], "s": d[1]}


def hf_dual(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """Two checkpoints: DPR through its own classes and tokenizers (the pooler output; documents
    'title [SEP] text' with the context tokenizer's separator), others (Dragon+) through AutoModel with pooling."""
    import transformers as tf

    dpr = job["dpr"]
    if dpr:
        qm = tf.DPRQuestionEncoder.from_pretrained(job["folder_q"]).eval()
        dm = tf.DPRContextEncoder.from_pretrained(job["folder_d"]).eval()
        qt = tf.DPRQuestionEncoderTokenizerFast.from_pretrained(job["folder_q"])
        dt = tf.DPRContextEncoderTokenizerFast.from_pretrained(job["folder_d"])
        sep = f" {dt.sep_token} "
    else:
        qm = tf.AutoModel.from_pretrained(job["folder_q"]).eval()
        dm = tf.AutoModel.from_pretrained(job["folder_d"]).eval()
        qt = tf.AutoTokenizer.from_pretrained(job["folder_q"], use_fast=True)
        dt = tf.AutoTokenizer.from_pretrained(job["folder_d"], use_fast=True)
        sep = " "
    return {"q": _run(qm, qt, job["queries"], job, dpr), "d": _run(dm, dt, _titled(job["docs"], sep), job, dpr),
            "s": _run(dm, dt, _titled(job["slice"], sep), job, dpr)}


def top10(q: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 20 best slice documents per query by inner product in fp32 (the release's faiss IndexFlatIP), and their
    scores (ties keep the lower index first): the top 10 are compared, ranks 11-20 tell a tie at rank 10 apart."""
    scores = q.astype(np.float32) @ s.astype(np.float32).T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :20]
    return order.astype(np.int16), np.take_along_axis(scores, order, axis=1).astype(np.float32)


# -- SPLADE-v3 documents: sentence-transformers' SparseEncoder ----------------------------------------------------------
def splade(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """The release's document side (src/encoders/sparse_encoder.py _splade_worker): SparseEncoder(model) at its
    defaults, encode_document on batches of 32, decode to (token, weight) pairs, then its _quantize_pairs: weights
    x100 rounded, those >= 1 kept, the 256 largest. Stored: the 256 largest raw weights (vocabulary ids, floats)
    and the quantised impacts, per probe document (title + ' ' + text, the flat document)."""
    from sentence_transformers import SparseEncoder

    model = SparseEncoder(job["folder"], device="cpu")
    texts = [" ".join(t for t in (d.get("title"), d["text"]) if t) for d in job["docs"]]
    vocab = model.tokenizer.get_vocab()
    ids, raw, quant = [], [], []
    for i in range(0, len(texts), 32):
        emb = model.encode_document(texts[i:i + 32])
        for pairs in model.decode(emb):
            items = [(tok, int(round(float(w) * 100))) for tok, w in pairs if float(w) > 0]
            items = [(t, w) for t, w in items if w >= 1]
            if len(items) > 256:
                items = sorted(items, key=lambda x: x[1], reverse=True)[:256]
            top = sorted(pairs, key=lambda x: -float(x[1]))[:256]
            ids.append([vocab[t] for t, _ in top] + [-1] * (256 - len(top)))
            raw.append([float(w) for _, w in top] + [0.0] * (256 - len(top)))
            q = sorted((vocab[t], w) for t, w in items)
            quant.append([x for pair in q for x in pair] + [-1] * (512 - 2 * len(q)))
    return {"d_ids": np.asarray(ids, dtype=np.int32), "d_w": np.asarray(raw, dtype=np.float32),
            "d_quant": np.asarray(quant, dtype=np.int32), "max_seq_length": np.asarray(model.max_seq_length)}


# -- ColBERTv2: colbert-ai's Checkpoint, as the release's Indexer / Searcher call it --------------------------------------
COLBERT_DOCS = 14  # probe documents stored (token matrices are large): the first ten, then one of each other group


def colbert_docs(docs: list[dict[str, Any]]) -> list[int]:
    picked = list(range(10))
    for group in ("non-ascii", "empty-title", "no-title", "long"):
        picked.append(next(i for i, d in enumerate(docs) if d.get("group") == group))
    return picked


def colbert(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """src/models/colbert.py: the collection written as whitespace-collapsed 'title text' (title only when
    non-empty), ColBERTConfig(nbits=2, dim as the checkpoint's (tiny: its projection), query_maxlen=32, doc_maxlen=300, kmeans_niters=4, index_bsize=128);
    the Indexer encodes documents with docFromText(bsize=index_bsize), the Searcher each query alone with
    queryFromText."""
    from colbert.infra import ColBERTConfig
    from colbert.modeling.checkpoint import Checkpoint

    def clean(x: Any) -> str:
        return " ".join(str(x).split()) if x is not None else ""

    config = ColBERTConfig(checkpoint=job["folder"], nbits=2, query_maxlen=32, doc_maxlen=300, kmeans_niters=4,
                           index_bsize=128, ncells=2, ndocs=2 * 2 ** 12, dim=job["dim"])
    ckpt = Checkpoint(job["folder"], colbert_config=config)
    q = np.stack([ckpt.queryFromText([clean(t)], to_cpu=True)[0].float().numpy() for t in job["queries"]])
    docs = [job["docs"][i] for i in colbert_docs(job["docs"])]
    texts = [(clean(d.get("title")) + " " + clean(d["text"])).strip() if clean(d.get("title")) else clean(d["text"])
             for d in docs]
    flat, lens = ckpt.docFromText(texts, bsize=128, keep_dims="flatten", showprogress=False)
    return {"q": q, "d_flat": flat.float().numpy(), "d_lens": np.asarray(lens, dtype=np.int32)}


# -- decoders with their own loading: GritLM (gritlm), RepLLaMA (PEFT merge), LLM2Vec (its own environment) --------
def _stripped(docs: list[dict[str, Any]]) -> list[str]:
    """src/models/{llm2vec,gritlm}.py run(): f"{doc.get('title', '')} {doc.get('text', '')}".strip() over the
    DataHandler's records (a title-less corpus gives title None, hence 'None ...')."""
    return [f"{d.get('title', None)} {d.get('text', '')}".strip() for d in docs]


def gritlm(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """src/models/gritlm.py: GritLM(name, mode='embedding', torch_dtype=float16) (fp32 here, on the CPU), then
    model.encode(texts, instruction=_gritlm_instruction(...), batch_size=8) at the library's defaults (max_length
    512, mean pooling without the instruction's tokens, bidirectional 'bbcc', normalized); queries
    '<|user|>\n{instruction}\n<|embed|>\n', documents '<|embed|>\n' (their instruction is '').

    Here the batch is the job's (1): the tiny stand-in is a plain transformers MistralModel, which honours gritlm's
    `is_causal=False` only where no padding mask is built (an unpadded batch); the checkpoint's own
    modeling_gritlm7b.py (remote code, not shipped by any pip library) builds a bidirectional padding mask, so its
    vectors do not depend on the batch (checked in session against ContextualAI/gritlm's
    scripts/modeling_mistral_gritlm.py, see docs/fidelity.md)."""
    import torch
    from gritlm import GritLM

    model = GritLM(job["folder"], mode="embedding", torch_dtype=torch.float32, device="cpu")
    model.model.config.use_cache = False
    qi = f"<|user|>\n{job['query_instruction']}\n<|embed|>\n"

    def enc(texts: list[str], instruction: str) -> np.ndarray:
        return np.asarray(model.encode(texts, instruction=instruction, batch_size=job["batch_size"]),
                          dtype=np.float32)
    return {"q": enc(job["queries"], qi), "d": enc(_stripped(job["docs"]), "<|embed|>\n"),
            "s": enc(_stripped(job["slice"]), "<|embed|>\n")}


def peft_biencoder(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """dense_encoder.py _load_peft_biencoder(): PeftConfig -> the base's AutoModel (float16 there; fp32 here),
    PeftModel.from_pretrained(base, adapter).merge_and_unload(); the tokenizer (Llama-2's there, the stand-in's
    here) with pad = eos only if it has none; encode(): batches of 8, the models.py templates 'query: {}</s>' /
    'passage: {}</s>', tokenizer(max_length=1024), last_token pooling (attended tokens - 1), L2 normalised;
    documents f'{title} {text}'."""
    import torch
    from peft import PeftConfig, PeftModel
    from transformers import AutoModel, AutoTokenizer

    cfg = PeftConfig.from_pretrained(job["adapter"])
    base = AutoModel.from_pretrained(cfg.base_model_name_or_path, torch_dtype=torch.float32, low_cpu_mem_usage=True)
    tok = AutoTokenizer.from_pretrained(job["tokenizer"])
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token, tok.padding_side = tok.eos_token, "right"
    model = PeftModel.from_pretrained(base, job["adapter"]).merge_and_unload().eval()

    def enc(texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), 8):
            inputs = tok(texts[i:i + 8], return_tensors="pt", padding=True, truncation=True, max_length=1024)
            with torch.no_grad():
                e = _pool(model(**inputs).last_hidden_state, inputs["attention_mask"], "last_token", None, False)
            out.append(torch.nn.functional.normalize(e, p=2, dim=1).float().numpy())
        return np.concatenate(out).astype(np.float32)
    return {"q": enc(_instruct(job["queries"], job["query_instruction"])),
            "d": enc(_instruct(_titled(job["docs"]), job["doc_instruction"])),
            "s": enc(_instruct(_titled(job["slice"]), job["doc_instruction"]))}


def llm2vec(job: dict[str, Any]) -> dict[str, np.ndarray]:
    """src/models/llm2vec.py (its own environment: transformers 4.44.2, peft 0.17.1, llm2vec 0.2.3): AutoTokenizer
    and AutoConfig of the MNTP repository (trust_remote_code), AutoModel.from_pretrained(MNTP repository, config=...,
    trust_remote_code=True; bfloat16 there, fp32 here), then PeftModel.from_pretrained(model, supervised adapter)
    .merge_and_unload(); encode(): queries as [instruction, text] pairs to the tokenizer, documents plain, batches
    of 16, max_length 512, mean over the whole attention mask, L2 normalised."""
    import torch
    from peft import PeftModel
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(job["mntp"], trust_remote_code=True, use_fast=True)
    config = AutoConfig.from_pretrained(job["mntp"], trust_remote_code=True)
    base = AutoModel.from_pretrained(job["mntp"], config=config, trust_remote_code=True, torch_dtype=torch.float32,
                                     low_cpu_mem_usage=True)
    model = PeftModel.from_pretrained(base, job["supervised"]).merge_and_unload().eval()

    def enc(payload: list[Any]) -> np.ndarray:
        out = []
        for i in range(0, len(payload), 16):
            inputs = tok(payload[i:i + 16], padding=True, truncation=True, max_length=512, return_tensors="pt")
            with torch.no_grad():
                e = _pool(model(**inputs).last_hidden_state, inputs["attention_mask"], "mean", None, False)
            out.append(e)
        return torch.nn.functional.normalize(torch.cat(out), p=2, dim=1).float().numpy()
    qi = job["query_instruction"]
    q = [qi.format(t) for t in job["queries"]] if "{}" in qi else [[qi, t] for t in job["queries"]]
    return {"q": enc(q), "d": enc(_stripped(job["docs"])), "s": enc(_stripped(job["slice"]))}


HANDLERS = {"flag": flag, "st": st, "hf": hf, "hf-dual": hf_dual, "splade": splade, "colbert": colbert,
            "gritlm": gritlm, "peft": peft_biencoder, "llm2vec": llm2vec}


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("torch", "transformers", "sentence-transformers", "FlagEmbedding", "tokenizers", "peft",
                "colbert-ai", "gritlm", "llm2vec"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def main(jobs_file: str, out_dir: str, only: list[str]) -> None:
    jobs = json.loads(Path(jobs_file).read_text())
    shared = jobs.pop("_inputs")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, job in jobs.items():
        if only and name not in only:
            continue
        job = {**shared, **job}
        vecs = HANDLERS[job["library"]](job)
        if job["library"] in ("splade", "colbert"):
            np.savez_compressed(out / f"{name}.npz", **vecs)
            print(f"{name}: {', '.join(f'{k} {v.shape}' for k, v in vecs.items())}", flush=True)
            continue
        top, scores = top10(vecs["q"], vecs.pop("s"))
        np.savez_compressed(out / f"{name}.npz", q=vecs["q"], d=vecs["d"], top10=top, top10_scores=scores)
        print(f"{name}: q {vecs['q'].shape} d {vecs['d'].shape}", flush=True)
    # one file per reference environment (LLM2Vec's has its own transformers): IRGRID_ORACLE_ENV names it
    env = os.environ.get("IRGRID_ORACLE_ENV", "")
    (out / f"versions{'-' + env if env else ''}.json").write_text(json.dumps(versions(), indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
