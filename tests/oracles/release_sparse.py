"""The release's sparse and expansion calls, run inside the reference environment (`make oracles` builds it, with
Pyserini 1.2.0 installed without its dependencies): no irgrid import.

Each function re-states, in our own words, what release 4bedb75 of the paper's code (GitHub
valentinsvelev/retriever-evaluation, `src/encoders/sparse_encoder.py`, `src/models/sparta.py`,
`src/encoders/dense_encoder.py`) does for one entry, and makes the library calls it makes:
- uniCOIL: Pyserini's `UniCoilDocumentEncoder.encode` (documents, batches of 32 per worker, each worker's last
  partial batch never encoded), its `prune_scale` (punctuation and ^\\W+$ tokens dropped, int(round(w x 100)),
  top 500), and `UniCoilQueryEncoder.encode` (queries: integer weights); scores: the integer dot product Lucene's
  impact search computes.
- SPARTA: the release's own SPARTA class (AutoModel; max over every position of the padded batch, padding too;
  log(1 + ReLU); special tokens zeroed; top 512), batches of 32 per worker; queries: word-piece counts; Anserini
  casts the float weights to integers (impacts).
- DeepCT: the release's `_worker_deepct` rewrite (sigmoid, tf = min(round(100 p), 20), each occurrence repeated).
- docT5query: `generate(max_length=64, do_sample, top_k=10, num_return_sequences=3)` on inputs cut at 320 tokens.
- query2doc, HyDE: the chat template of the system and user messages, left padding, truncation at 768,
  `generate(max_new_tokens, do_sample, temperature, eos_token_id=tokenizer.eos_token_id)`, the new tokens decoded
  without special tokens and stripped.
Sampling is seeded per batch (torch.manual_seed(seed) before each generate call) with irgrid's batches, so that a
sampled output can be compared at all (the release itself does not seed).

Run as `python release_sparse.py JOBS.json OUT_DIR [ENTRY ...]` with the reference environment's interpreter."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

WORKERS, BATCH = 4, 32  # SparseEncoder.encode: min(4, GPUs) workers (4 assumed), batch_size 32
PUNCT = set(".,;:!?()[]{}'\"“”‘’—–-/%")  # the release's _PUNC
BAD = re.compile(r"^\W+$")


def strided(texts: list[str], workers: int = WORKERS, batch: int = BATCH) -> list[tuple[list[int], bool]]:
    """(positions, is_tail) of the release's batches: worker r takes the lines i % workers == r with non-blank
    stripped text, in batches of `batch`; a worker's last batch is a tail when shorter."""
    out = []
    for r in range(workers):
        own = [i for i in range(r, len(texts), workers) if texts[i].strip()]
        for s in range(0, len(own), batch):
            part = own[s:s + batch]
            out.append((part, len(part) < batch))
    return out


def write(out: Path, name: str, data: dict[str, Any]) -> None:
    with gzip.GzipFile(out / f"{name}.json.gz", "wb", mtime=0) as f:
        f.write(json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def top10(scores: list[dict[int, float]] | Any, n_docs: int) -> tuple[list[list[int]], list[list[float]]]:
    """Per query, the 20 best slice positions by score (ties: slice order) and their scores."""
    tops, vals = [], []
    for row in scores:
        order = sorted(range(n_docs), key=lambda i: (-row[i], i))[:20]
        tops.append(order)
        vals.append([float(row[i]) for i in order])
    return tops, vals


def dot(q: dict[str, float], d: dict[str, float]) -> float:
    return float(sum(w * d[t] for t, w in q.items() if t in d))


# -- uniCOIL (Pyserini 1.2.0) ----------------------------------------------------------------------------------------
def _prune_scale(enc: dict[str, float], scale: int = 100, min_after: int = 1, topn: int = 500) -> dict[str, int]:
    items = []
    for tok, w in enc.items():
        if w <= 0 or tok in PUNCT or BAD.match(tok):
            continue
        iw = int(round(w * scale))
        if iw >= min_after:
            items.append((tok, iw))
    if topn and len(items) > topn:
        items.sort(key=lambda x: x[1], reverse=True)
        items = items[:topn]
    return dict(items)


def _pyserini_unicoil() -> Any:
    """Pyserini's encode/_unicoil.py and encode/_base.py as the release imports them, without the package's
    __init__ modules (they start the JVM through pyjnius, which the encoders never use): the two packages and
    pyserini.util (which _base.py imports for a download helper) are stand-in modules."""
    import importlib
    import importlib.util
    import types

    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pyserini is not installed in the reference environment: run `make oracles`")
    root = spec.submodule_search_locations[0]
    for name, path in (("pyserini", root), ("pyserini.encode", f"{root}/encode")):
        module = types.ModuleType(name)
        module.__path__ = [path]
        sys.modules[name] = module
    util = types.ModuleType("pyserini.util")
    util.download_encoded_queries = None  # type: ignore[attr-defined]
    sys.modules["pyserini.util"] = util
    base = importlib.import_module("pyserini.encode._base")
    sys.modules["pyserini.encode"].DocumentEncoder = base.DocumentEncoder  # type: ignore[attr-defined]
    sys.modules["pyserini.encode"].QueryEncoder = base.QueryEncoder  # type: ignore[attr-defined]
    return importlib.import_module("pyserini.encode._unicoil")


def unicoil(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    pyserini = _pyserini_unicoil()
    UniCoilDocumentEncoder, UniCoilQueryEncoder = pyserini.UniCoilDocumentEncoder, pyserini.UniCoilQueryEncoder  # noqa: N806

    doc_enc = UniCoilDocumentEncoder(job["folder_d"], device="cpu")
    q_enc = UniCoilQueryEncoder(job["folder_q"], device="cpu")
    with torch.no_grad():
        queries = [q_enc.encode(q) for q in job["queries"]]
        # the raw float weights behind them (the encoder's own steps, unquantised)
        raw_q = []
        for q in job["queries"]:
            ids = q_enc.tokenizer([q], max_length=128, padding="longest", truncation=True, add_special_tokens=True,
                                  return_tensors="pt")["input_ids"]
            raw_q.append(q_enc._output_to_weight_dicts(ids.numpy(), q_enc.model(ids).numpy())[0])

        def encode(texts: list[str], flow: bool) -> list[dict[str, float] | None]:
            """Documents as the release encodes them (`flow`: its batches, tails never encoded) or one batch of
            32 after another in order (probe documents: every one encoded)."""
            out: list[dict[str, float] | None] = [None] * len(texts)
            batches = strided(texts) if flow else [(list(range(s, min(s + BATCH, len(texts)))), False)
                                                   for s in range(0, len(texts), BATCH)]
            for part, tail in batches:
                if flow and tail:
                    continue
                for i, enc in zip(part, doc_enc.encode([texts[i].strip() for i in part])):
                    out[i] = enc
            return out
        probe = encode(job["docs"], flow=False)
        slice_ = encode(job["slice"], flow=True)
    impacts = [_prune_scale(e) if e is not None else None for e in slice_]
    scores = [[dot(q, d) if d else 0.0 for d in impacts] for q in queries]
    tops, vals = top10(scores, len(impacts))
    return {"q": queries, "q_raw": raw_q, "d_raw": probe, "d_quant": [_prune_scale(e) for e in probe],
            "slice_dropped": [i for i, e in enumerate(slice_) if e is None], "top10": tops, "top10_scores": vals,
            "slice_quant_sha": [_sha(d) for d in impacts]}


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


# -- SPARTA (the release's src/models/sparta.py) ---------------------------------------------------------------------
def sparta(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(job["folder"]).eval()
    tok = AutoTokenizer.from_pretrained(job["folder"])
    table = model.embeddings.word_embeddings.weight
    special = torch.tensor(list(tok.all_special_ids))

    def batch(texts: list[str]) -> list[dict[str, float]]:
        enc = tok(texts, padding=True, truncation=True, return_tensors="pt", max_length=500)
        with torch.no_grad():
            hidden = model(**enc).last_hidden_state
            s = torch.log(torch.relu(torch.einsum("bsh,vh->bvs", hidden, table).max(dim=-1).values) + 1)
            s[:, special] = 0.0
            vals, idx = torch.topk(s, k=512, dim=-1)
        return [{tok.convert_ids_to_tokens(int(i)): float(v) for i, v in zip(ri, rv) if float(v) > 0}
                for ri, rv in zip(idx, vals)]

    def encode(texts: list[str]) -> list[dict[str, float] | None]:
        out: list[dict[str, float] | None] = [None] * len(texts)
        for part, _ in strided(texts):  # every batch, the tail too (_worker_sparta flushes it)
            for i, w in zip(part, batch([texts[i].strip() for i in part])):
                out[i] = w
        return out

    def query(q: str) -> dict[str, int]:
        tf: dict[str, int] = {}
        for tid in tok(q, add_special_tokens=False)["input_ids"]:
            if tid not in set(tok.all_special_ids):
                t = tok.convert_ids_to_tokens(tid)
                tf[t] = tf.get(t, 0) + 1
        return tf

    probe, slice_ = encode(job["docs"]), encode(job["slice"])
    queries = [query(q) for q in job["queries"]]
    # Anserini (JsonVectorCollection --impact --pretokenized) casts each float weight to an integer
    trunc = [{t: int(w) for t, w in (d or {}).items() if int(w) > 0} for d in slice_]
    scores = [[dot(q, d) for d in trunc] for q in queries]
    tops, vals = top10(scores, len(trunc))
    head = [dict(sorted((d or {}).items(), key=lambda x: -x[1])[:128]) for d in probe]
    return {"q": queries, "d_head": head, "d_quant": [{t: int(w) for t, w in (d or {}).items() if int(w) > 0}
                                                      for d in probe],
            "top10": tops, "top10_scores": vals, "slice_quant_sha": [_sha(d) for d in trunc]}


# -- DeepCT (the release's _worker_deepct) -----------------------------------------------------------------------------
def deepct(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(job["folder"])
    model = AutoModelForTokenClassification.from_pretrained(job["folder"]).eval()
    special = set(tok.all_special_tokens)

    def rewrite(texts: list[str]) -> list[str]:
        stripped = [t.strip() for t in texts]
        enc = tok(stripped, truncation=True, max_length=512, padding=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits.squeeze(-1)
        out = []
        for i, text in enumerate(stripped):
            n = int(enc["attention_mask"][i].sum())
            words: list[tuple[str, float]] = []
            cur, score = None, 0.0
            for t, s in zip(tok.convert_ids_to_tokens(enc["input_ids"][i])[:n], logits[i][:n].tolist()):
                if t in special:
                    continue
                if t.startswith("##"):
                    cur, score = (t[2:], s) if cur is None else (cur + t[2:], score)
                else:
                    if cur is not None:
                        words.append((cur, score))
                    cur, score = t, s
            if cur is not None:
                words.append((cur, score))
            toks = []
            for w, s in words:
                tf = min(int(round(100.0 / (1.0 + math.exp(-s)))), 20)
                toks += [w] * tf if tf > 0 else []
            out.append(" ".join(toks) if toks else text)
        return out

    def encode(texts: list[str]) -> list[str]:
        out = [""] * len(texts)
        for part, _ in strided(texts):
            for i, r in zip(part, rewrite([texts[i] for i in part])):
                out[i] = r
        return out

    probe, slice_ = encode(job["docs"]), encode(job["slice"])
    return {"d_sha": [_sha(t) for t in probe], "d_text": probe[:6], "slice_sha": [_sha(t) for t in slice_]}


# -- docT5query (the release's _worker_doc2query) --------------------------------------------------------------------
def doct5query(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import T5ForConditionalGeneration, T5TokenizerFast

    # the release loads T5Tokenizer (SentencePiece); the tiny stand-in has only a fast Unigram tokenizer
    tok = T5TokenizerFast.from_pretrained(job["folder"])
    model = T5ForConditionalGeneration.from_pretrained(job["folder"]).eval()
    texts, b = job["docs"], int(job["batch_size"])

    def run(do_sample: bool, n: int) -> list[list[str]]:
        out = []
        for s in range(0, len(texts), b):
            part = texts[s:s + b]
            enc = tok(part, max_length=320, truncation=True, padding=True, return_tensors="pt")
            torch.manual_seed(int(job["seed"]))
            with torch.no_grad():
                gen = model.generate(**enc, max_length=64, do_sample=do_sample, top_k=10, num_return_sequences=n)
            dec = tok.batch_decode(gen, skip_special_tokens=True)
            out += [dec[i * n:(i + 1) * n] for i in range(len(part))]
        return out

    return {"greedy": run(False, 1), "sampled": run(True, 3)}


# -- query2doc / HyDE (the release's generate_*docs_for_query_expansion) ----------------------------------------------
def generation(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(job["folder"])
    model = AutoModelForCausalLM.from_pretrained(job["folder"], torch_dtype=torch.float32).eval()
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    b = int(job["batch_size"])

    def run(do_sample: bool) -> tuple[list[str], list[str]]:
        outs, prompts = [], []
        for s in range(0, len(job["queries"]), b):
            msgs = [[{"role": "system", "content": job["system"]},
                     {"role": "user", "content": job["user"].format(query=q)}] for q in job["queries"][s:s + b]]
            texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in msgs]
            prompts += texts
            enc = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=768)
            kw: dict[str, Any] = {"max_new_tokens": int(job["max_new_tokens"]), "do_sample": do_sample,
                                  "eos_token_id": tok.eos_token_id}
            if do_sample:
                kw["temperature"] = float(job["temperature"])
            torch.manual_seed(int(job["seed"]))
            with torch.no_grad():
                gen = model.generate(**enc, **kw)
            outs += [d.strip() for d in tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)]
        return outs, prompts

    greedy, prompts = run(False)
    sampled, _ = run(True)
    return {"greedy": greedy, "sampled": sampled, "prompts": prompts}


RUNNERS = {"unicoil": unicoil, "sparta": sparta, "deepct": deepct, "doct5query": doct5query,
           "query2doc": generation, "hyde": generation}


def main() -> None:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[3:])
    data = jobs.pop("_inputs")
    versions = {}
    for name, job in jobs.items():
        if only and name not in only:
            continue
        job = {**job, "queries": data["queries"],
               "docs": [" ".join(x for x in (d.get("title"), d["text"]) if x) for d in data["docs"]],
               "slice": [" ".join(x for x in (d.get("title"), d["text"]) if x) for d in data["slice"]]}
        write(out, name, RUNNERS[name](job))
        print(f"{name}: written", flush=True)
    from importlib.metadata import version

    for pkg in ("pyserini", "transformers", "torch", "tokenizers"):
        versions[pkg] = version(pkg)
    (out / "versions.json").write_text(json.dumps(versions, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
