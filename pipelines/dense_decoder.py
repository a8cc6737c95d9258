"""Dense retrievers with encoder-decoder (T5 encoder) and decoder-only backbones (Table 1), as `EncoderSpec` data.

Defaults are the model cards' retrieval settings (`card` profile, with sources); the `paper` profile holds what the
paper's code ran (one unified prompt for all datasets, Section 3.3.3; every setting names its repository file).
Models larger than one GPU in bf16 are sharded over the visible GPUs, never quantised (the paper code's 4/8-bit
options are commented out there as well).
"""

from __future__ import annotations

from irgrid.core.modelref import ModelRef
from irgrid.core.paper_code import (
    ENCODER_PY,
    ENCODER_PY_F8,
    ENCODER_PY_OLD,
    GRITLM_PY,
    LLM2VEC_PY,
    LLM2VEC_PY_OLD,
    MODELS_PY,
    NVEMBED_PY,
    NVEMBED_PY_OLD,
    card_titles,
    code,
    generic,
    paper,
    release_titles,
)
from irgrid.core.profiles import Setting
from irgrid.dense.entry import dense_retriever
from irgrid.dense.spec import EncoderSpec

UNVERIFIED = "revision unverified offline: left unpinned"
ST_HANDLER = "_load_model(): SentenceTransformer handler (fp32, normalize_embeddings=True, no prompt)"
ST_TITLES = "encode(): sentence-transformers documents f'{title} {text}'"
ST_ROUTE = "_load_model(): 'instructor' in the name -> SentenceTransformer handler"
ST_NO_PROMPT = "encode(): SentenceTransformer.encode(texts, normalize_embeddings=True), no instruction or prompt"
ST_DEFAULT = ("encode(): SentenceTransformer.encode(texts_to_encode, ..., normalize_embeddings=True) names no prompt, "
              "so sentence-transformers prepends the checkpoint's default prompt wherever its "
              "config_sentence_transformers.json names one (default_prompt_name)")


KALM_CAUSAL = ("_load_model(): 'kalm' -> SentenceTransformer(model_name, trust_remote_code=True), no model_kwargs: "
               "sentence-transformers' Transformer module loads the qwen2 folder with AutoModel as a Qwen2Model, "
               "whose attention is causal (transformers 4.57.1, requirements_new.txt@0ed0bf9)")


def _st_default(on: bool = True) -> dict[str, Setting]:
    if on:
        return {"st_default_prompt": paper(True, ENCODER_PY, ST_DEFAULT)}
    return {"st_default_prompt": Setting(False, "model card / MTEB: the prompt is the template's (none by default)")}
GEMMA_Q = "task: search result | query: "
GEMMA_D = "title: none | text: "
# the checkpoint's config_sentence_transformers.json prompts (as transformers' convert_gemma3_weights.py writes them;
# the hub is not reachable here to re-read the file of revision 64614b0b)
GEMMA_PROMPTS = "google/embeddinggemma-300m config_sentence_transformers.json prompts, default_prompt_name null"
NO_CARD_DTYPE = "irgrid default (no card value): bf16 on GPU"


def _st_paper(**extra: Setting) -> dict[str, Setting]:
    return {"dtype": paper("fp32", ENCODER_PY, ST_HANDLER), **release_titles(where=ST_TITLES), **extra}


# src/models/{llm2vec,gritlm,nvembed}.py: f"{doc.get('title', '')} {doc.get('text', '')}".strip() over DataHandler
# records (title None on a title-less corpus; an empty title stripped away)
def _strip_titles(path: str) -> dict[str, Setting]:
    return release_titles(path, "run(): f\"{doc.get('title', '')} {doc.get('text', '')}\".strip()", keep_empty=False)


ENCODER_DECODER = [
    EncoderSpec(
        name="gtr-large",
        query_model=ModelRef("sentence-transformers/gtr-t5-large", "a2c8ac47f998531948d4cbe32a0b577a7037a5e3",
                             arch="t5-encoder", tiny=(("st_dense", (16,)),)),
        loader="t5-encoder", pooling="mean", normalize=True, similarity="cos", query_max_length=512,
        doc_max_length=512,
        profiles={"paper": _st_paper(**_st_default()),
                  "card": {"dtype": Setting("bf16", NO_CARD_DTYPE), **card_titles(), **_st_default(False)}},
        citation="Ni et al., EMNLP 2022",
        notes="sentence-transformers folder: T5 encoder, mean pooling, Dense 1024->768 (no bias), Normalize",
    ),
    EncoderSpec(
        name="instructor-large",
        query_model=ModelRef("hkunlp/instructor-large", arch="t5-encoder", tiny=(("st_dense", (16,)),)),
        loader="t5-encoder", pooling="mean", pool_prompt=False, normalize=True, similarity="cos",
        query_max_length=512, doc_max_length=512,
        query_template="Represent the Wikipedia question for retrieving supporting documents: {text}",
        doc_template="Represent the Wikipedia document for retrieval: {text}",
        profiles={
            "paper": {
                "query_template": Setting("{text}", code(ENCODER_PY, ST_ROUTE + "; " + ST_NO_PROMPT),
                                          text="unified instructions (Section 3.3.3): 'Represent the question: '"),
                "doc_template": Setting("{text}", code(ENCODER_PY, ST_ROUTE + "; " + ST_NO_PROMPT),
                                        text="'Represent the document: '"),
                "doc_fields": paper(("title", "text"), ENCODER_PY, ST_TITLES),
                "dtype": paper("fp32", ENCODER_PY, ST_HANDLER),
                "pool_prompt": paper(True, ENCODER_PY, ST_ROUTE + "; " + ST_NO_PROMPT + ": sentence-transformers' "
                                     "Pooling(mean) over the whole attention mask, leading tokens included"),
                **release_titles(where=ST_TITLES), **_st_default(),
            },
            "card": {"query_template": Setting("Represent the Wikipedia question for retrieving supporting "
                                               "documents: {text}", "INSTRUCTOR README / MTEB instructor_models"),
                     "doc_template": Setting("Represent the Wikipedia document for retrieval: {text}",
                                             "INSTRUCTOR README / MTEB instructor_models"),
                     "doc_fields": Setting(("title", "text"), "MTEB retrieval corpus: title + ' ' + text"),
                     "dtype": Setting("bf16", NO_CARD_DTYPE),
                     "pool_prompt": Setting(False, "INSTRUCTOR README: the instruction's tokens are excluded from "
                                                   "mean pooling"),
                     **card_titles(), **_st_default(False)},
        },
        citation="Su et al., Findings of ACL 2023",
        notes="INSTRUCTOR mean-pools over the text tokens only (instruction excluded), then Dense + Normalize; with "
              f"no instruction (the release) every token is pooled. The paper profile follows the release: {ENCODER_PY} "
              "routes 'instructor' to the SentenceTransformer handler (T5 encoder, mean pooling, Dense, Normalize "
              "from the checkpoint's sentence-transformers folder; no instruction; title + text; fp32). Older "
              f"version: {ENCODER_PY_OLD}'s INSTRUCTOR handler with models.py's unified instructions "
              "('Represent the question: ' / 'Represent the document: ') on the text alone, as the paper's text "
              f"(Section 3.3.3) describes; {UNVERIFIED}",
    ),
]

DECODER_ONLY = [
    EncoderSpec(
        name="llm2vec",
        query_model=ModelRef("McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp",
                             "9d1613c42e2f90050dc11daeb1a24919811fa2c5", arch="llama"),
        pooling="mean", pool_prompt=False, bidirectional=True, normalize=True, similarity="cos",
        query_max_length=512, doc_max_length=512,
        query_template="Given a web search query, retrieve relevant passages that answer the query: {text}",
        profiles={
            "paper": {
                "query_template": paper("Given a web search query, retrieve relevant passages that answer the "
                                        "query:{text}", MODELS_PY, "instruction_tuned_retrievers['llm2vec']"
                                        "['query_instruction']"),
                "query_pair": paper(True, LLM2VEC_PY, "encode(): payload [[instruction, text]] -> tokenizer(pairs)"),
                "pool_prompt": paper(True, LLM2VEC_PY, "encode(): _mean_pool over the whole attention mask"),
                "doc_fields": paper(("title", "text"), LLM2VEC_PY, "run(): f\"{doc.get('title', '')} "
                                                                   "{doc.get('text', '')}\".strip()"),
                **_strip_titles(LLM2VEC_PY),
            },
            "card": {"query_template": Setting("Given a web search query, retrieve relevant passages that answer "
                                               "the query: {text}", "LLM2Vec README / MTEB llm2vec_models "
                                                                    "(instruction joined to the query)"),
                     "query_pair": Setting(False, "LLM2Vec.encode: instruction and text joined into one sequence"),
                     "pool_prompt": Setting(False, "LLM2Vec.encode: embed_mask excludes the instruction"),
                     "doc_fields": Setting(("title", "text"), "MTEB retrieval corpus: title + ' ' + text"),
                     **card_titles(keep_empty=False)},
        },
        citation="BehnamGhader et al., COLM 2024",
        notes="paper code (src/models/llm2vec.py): AutoModel on the MNTP repository at code revision 9d1613c4, then "
              "the supervised adapter McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp-supervised merged, "
              "bidirectional (remote code), mean pooling, max 512, bf16. With peft installed that AutoModel call loads "
              "the base Llama and the MNTP LoRA as adapter 'default', which the supervised PeftModel replaces: the "
              "release merged the supervised adapter alone (oracle, transformers 4.44.2 + peft 0.17.1: 1.0e-7). Stage "
              "those merged weights under this id (IRGRID_MODELS; docs/fidelity.md). Older version: "
              f"{LLM2VEC_PY_OLD} encoded the document text without its title",
    ),
    EncoderSpec(
        name="repllama",
        query_model=ModelRef("castorini/repllama-v1-7b-lora-passage", "6097554dfe6e7d93e92f55010b678bcca1e233a8",
                             arch="llama"),
        pooling="last", normalize=True, similarity="cos", query_max_length=512, doc_max_length=1024,
        query_template="query: {text}</s>", doc_template="passage: {text}</s>",
        profiles={
            "paper": {
                "query_max_length": paper(1024, ENCODER_PY, "encode(): peft_biencoder tokenizer(max_length=1024)"),
                "doc_max_length": paper(1024, ENCODER_PY, "encode(): peft_biencoder tokenizer(max_length=1024)"),
                "dtype": paper("fp16", ENCODER_PY, "_load_peft_biencoder(): torch_dtype=float16 (+ fp16 autocast)"),
                **release_titles(),
            },
            "card": {"query_max_length": Setting(512, "irgrid default (no card length; unverified)"),
                     "doc_max_length": Setting(1024, "irgrid default (no card length; unverified)"),
                     "dtype": Setting("bf16", NO_CARD_DTYPE), **card_titles()},
        },
        citation="Ma et al., SIGIR 2024",
        notes=f"LoRA over meta-llama/Llama-2-7b-hf (base revision 01c7f73d per MTEB); stage the merged weights under "
              f"this id; last-token pooling on the '</s>' the template appends ({MODELS_PY} "
              f"instruction_tuned_retrievers['repllama'] has the same templates); documents title + text",
    ),
    EncoderSpec(
        name="gritlm",
        query_model=ModelRef("GritLM/GritLM-7B", "13f00a0e36500c80ce12870ea513846a066004af", arch="mistral",
                             tiny=(("tokenizer", "bos"),)),  # its tokenizer adds <s> only; gritlm counts it
        pooling="mean", pool_prompt=False, bidirectional=True, normalize=True, similarity="cos",
        query_max_length=512, doc_max_length=512,
        query_template="<|user|>\nGiven a question, retrieve passages that answer the question\n<|embed|>\n{text}",
        doc_template="<|embed|>\n{text}",
        profiles={
            "paper": {
                "query_template": paper("<|user|>\nGiven a question, retrieve passages that answer the question:\n"
                                        "<|embed|>\n{text}", GRITLM_PY, "_gritlm_instruction() with "
                                        "models.py generalist_embedders['gritlm']['query_instruction'] (ends with ':')"),
                "dtype": paper("fp16", GRITLM_PY, "_load_model(): GritLM(..., torch_dtype=torch.float16)"),
                **_strip_titles(GRITLM_PY),
            },
            "card": {"query_template": Setting("<|user|>\nGiven a question, retrieve passages that answer the "
                                               "question\n<|embed|>\n{text}",
                                               "GritLM README format <|user|>\\n{instruction}\\n<|embed|>\\n; "
                                               "instruction: irgrid's unified one"),
                     "dtype": Setting("bf16", "GritLM README: torch_dtype='auto' (bf16 weights)"),
                     **card_titles(keep_empty=False)},
        },
        citation="Muennighoff et al., ICLR 2025",
        notes="GritLM embedding mode: bidirectional attention, mean pooling over the text after <|embed|>, max 512 "
              "(gritlm 1.0.2 encode default); documents title + text (src/models/gritlm.py); that file does not "
              "normalise itself, the gritlm library's own default (normalized=True, unverified) applies to both",
    ),
    EncoderSpec(
        name="qwen3-embedding-0.6b",
        query_model=ModelRef("Qwen/Qwen3-Embedding-0.6B", "b22da495047858cce924d27d76261e96be6febc0", arch="qwen3"),
        pooling="last", append_eos=True, normalize=True, similarity="cos", query_max_length=8192,
        doc_max_length=8192,
        query_template="Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                       "Query:{text}",
        profiles={
            "paper": generic(
                query_template=paper("Instruct: Retrieve passages that answer this query\nQuery: {text}", MODELS_PY,
                                     "generalist_embedders['qwen']['query_instruction']"),
                append_eos=paper(False, ENCODER_PY, "encode(): plain tokenizer call, no EOS appended; last_token = "
                                                    "last attended token"),
                left_pad_last_token=paper(256, ENCODER_PY, "_load_manual_transformer(): tokenizer.padding_side = "
                                                           "'left' for Qwen; encode(): batch_size=256 in input order, "
                                                           "last_token pooling at attention_mask.sum(1) - 1")),
            "card": {"query_template": Setting("Instruct: Given a web search query, retrieve relevant passages that "
                                               "answer the query\nQuery:{text}", "model card Qwen/Qwen3-Embedding-0.6B"),
                     "append_eos": Setting(True, "model card: last-token pooling on <|endoftext|>"),
                     "left_pad_last_token": Setting(None, "irgrid (quirk off): right padding, the last attended "
                                                          "token of each text whatever its batch"),
                     "query_max_length": Setting(8192, "model card usage example max_length=8192"),
                     "doc_max_length": Setting(8192, "model card usage example max_length=8192"),
                     "dtype": Setting("bf16", NO_CARD_DTYPE), **card_titles()},
        },
        citation="Zhang et al., 2025 (Qwen3 Embedding)",
        notes="last-token pooling, normalised; the card's instruction has no space after 'Query:', the paper's has one. "
              "End of text (paper): the release tokenizes with a plain call under transformers 4.57.1, where "
              "Qwen2TokenizerFast has no add_bos_token (its `tokenizer.add_bos_token = True` is a no-op), so the "
              "checkpoint's tokenizer.json decides whether <|endoftext|> ends each text, and the last attended token "
              "is pooled: irgrid's paper profile makes the same call (append_eos false). Under transformers 5 the "
              "release's own line would rebuild the post-processor and drop that EOS (measured on a Qwen2Tokenizer "
              "layout: 5.25 drops it, 4.57.1 keeps it); irgrid never sets add_bos_token",
    ),
    EncoderSpec(
        name="nv-embed-v2",
        query_model=ModelRef("nvidia/NV-Embed-v2", "7604d305b621f14095a1aa23d351674c2859553a", arch="mistral",
                             tiny=(("latent_attention", (("num_latents", 8), ("heads", 2), ("dim_head", 16))),)),
        loader="nv-embed", pooling="latent-attention", pool_prompt=False, bidirectional=True, normalize=True,
        similarity="cos", query_max_length=32768, doc_max_length=32768,
        query_template="Instruct: Given a question, retrieve passages that answer the question\nQuery: {text}</s>",
        doc_template="{text}</s>",
        profiles={
            "paper": {
                "query_template": paper("Instruct: Given a question, retrieve passages that answer the question\n"
                                        "Query: {text}</s>", NVEMBED_PY,
                                        "encode(): instruction = _nv_instruction(models.py generalist_embedders"
                                        "['nvembed']['query_instruction']) = f'Instruct: {instr}\\nQuery: '; "
                                        "model.encode(texts, instruction=...) prepends it and appends the EOS"),
                "query_max_length": paper(512, NVEMBED_PY, "self.max_length = 512 #32768"),
                "doc_max_length": paper(512, NVEMBED_PY, "self.max_length = 512 #32768"),
                "doc_fields": paper(("title", "text"), NVEMBED_PY, "run(): f\"{doc.get('title', '')} "
                                                                   "{doc.get('text', '')}\".strip()"),
                "prompt_mask_specials": paper(False, NVEMBED_PY, "encode(): model.encode(texts, instruction=...): "
                                              "the checkpoint's encode masks len(tokenizer.tokenize(instruction)) "
                                              "positions from position 0 (BOS included) out of the pooling"),
                **_strip_titles(NVEMBED_PY),
            },
            "card": {"query_template": Setting("Instruct: Given a question, retrieve passages that answer the "
                                               "question\nQuery: {text}</s>", "model card nvidia/NV-Embed-v2 "
                                               "(query_prefix 'Instruct: ...\\nQuery: ', EOS added by encode)"),
                     "query_max_length": Setting(32768, "model card usage example max_length=32768"),
                     "doc_max_length": Setting(32768, "model card usage example max_length=32768"),
                     "doc_fields": Setting(("title", "text"), "MTEB retrieval corpus: title + ' ' + text"),
                     "prompt_mask_specials": Setting(True, "irgrid default kept: BOS and the instruction's tokens are "
                                                           "left out of the pooling"),
                     **card_titles(keep_empty=False)},
        },
        citation="Lee et al., ICLR 2025",
        notes="Mistral-7B made bidirectional + latent-attention pooling (512 latents), mean over the text tokens "
              "(instruction masked), bf16; weights are read from the checkpoint's embedding_model.* and "
              "latent_attention_model.* tensors by our own module (its remote code targets transformers 4). Older "
              f"version: {NVEMBED_PY_OLD} sent the raw instruction (no 'Instruct: ... Query: '), max_length 4096, "
              "documents text only",
    ),
    EncoderSpec(
        name="embeddinggemma",
        query_model=ModelRef("google/embeddinggemma-300m", "64614b0b8b64f0c6c1e52b07e4e9a4e8fe4d2da2",
                             arch="gemma3-text", tiny=(("st_dense", (64, 16)),)),
        pooling="mean", bidirectional="own", normalize=True, similarity="cos", query_max_length=2048,
        doc_max_length=2048,
        query_template="task: search result | query: {text}", doc_template="title: {text}",
        doc_sep=" | text: ", doc_empty="none",
        profiles={
            "paper": _st_paper(
                query_template=paper(GEMMA_Q + GEMMA_Q + "{text}", ENCODER_PY,
                                     "encode(): 'gemma' branch: encode_query([f'task: search result | query: {text}']), "
                                     "and sentence-transformers' encode_query prepends the checkpoint's 'query' "
                                     f"prompt {GEMMA_Q!r} again ({GEMMA_PROMPTS})"),
                doc_template=paper(GEMMA_D + "title: {text}", ENCODER_PY,
                                   "encode(): 'gemma' branch: encode_document([f\"title: {title if title is not None "
                                   "else 'none'} | text: {text}\"]), and encode_document prepends the checkpoint's "
                                   f"'document' prompt {GEMMA_D!r} again ({GEMMA_PROMPTS})"),
                doc_sep=paper(" | text: ", ENCODER_PY, "encode(): 'gemma' branch: 'title: {title} | text: {text}'"),
                doc_empty=paper("none", ENCODER_PY, "encode(): 'gemma' branch: title 'none' when None"),
                none_title=paper(None, ENCODER_PY, "encode(): 'gemma' branch: title 'none' when None (doc_empty), "
                                                   "not 'None'"),
                keep_empty_title=paper(True, ENCODER_PY, "encode(): 'gemma' branch: f\"title: {title if title is not "
                                                         "None else 'none'} | text: {text}\": an empty title stays "
                                                         "empty ('title:  | text: ...')")),
            "card": {"query_template": Setting("task: search result | query: {text}",
                                               "model card google/embeddinggemma-300m (prompts)"),
                     "doc_template": Setting("title: {text}", "MTEB google_embeddinggemma.py: 'title: {title} | text: "
                                                              "{text}'"),
                     "doc_sep": Setting(" | text: ", "MTEB google_embeddinggemma.py document format"),
                     "doc_empty": Setting("none", "MTEB google_embeddinggemma.py: title 'none' when absent"),
                     **card_titles(),
                     "dtype": Setting("bf16", "model card: bf16 or fp32 (no fp16)")},
        },
        citation="Vera et al., 2025 (EmbeddingGemma)",
        notes="bidirectional Gemma 3, mean pooling, Dense 768->3072->768, Normalize. The release formats queries and "
              "documents itself and calls encode_query / encode_document, which add the checkpoint's own prompts "
              "a second time (the 'query' prompt, and the first of 'document', 'passage', 'corpus', when no prompt "
              "is passed: read in sentence-transformers 6.3; the release pins 5.1.2 in "
              "requirements/requirements_new.txt@0ed0bf9, whose encode_query / encode_document, new in 5.0, are "
              "documented the same way): the paper profile sends both. doc_empty also stands for an empty (not None) "
              f"title or text, where the release writes it as is. Older version: {ENCODER_PY_F8} encoded without "
              "prompts (title + ' ' + text)",
    ),
    EncoderSpec(
        name="kalm-embedding-v2.5",
        query_model=ModelRef("KaLM-Embedding/KaLM-embedding-multilingual-mini-instruct-v2.5",
                             "6a4cfc1084cb459ebd4729b53a8656a61448c720", arch="qwen2"),
        pooling="mean", bidirectional=True, normalize=True, similarity="cos", query_max_length=512,
        doc_max_length=512,
        query_template="Instruct: Given a query, retrieve documents that answer the query. \n Query: {text}",
        profiles={
            "paper": _st_paper(
                query_template=paper("{text}", ENCODER_PY, "encode(): SentenceTransformer.encode without prompt "
                                                           "(models.py 'kalm' has no instruction)"),
                bidirectional=paper(False, ENCODER_PY, KALM_CAUSAL),
                **_st_default()),
            "card": {"query_template": Setting("Instruct: Given a query, retrieve documents that answer the query. "
                                               "\n Query: {text}", "MTEB kalm_models.py: KaLM_INSTRUCTION "
                                               "'Instruct: {instruction} \\n Query: ' with the KaLM generic "
                                               "retrieval instruction"),
                     "bidirectional": Setting(True, "KaLM-Embedding-V2 report (Zhao et al.): the causal mask removed, "
                                                    "bidirectional attention with mean pooling"),
                     "dtype": Setting("bf16", NO_CARD_DTYPE), **card_titles(), **_st_default(False)},
        },
        citation="Zhao et al., ICLR 2026",
        notes="Qwen2-0.5B, bidirectional, mean pooling, max 512 (MTEB; the paper sets max_seq_length 512 too). The "
              "paper's run loaded the checkpoint with a plain SentenceTransformer(name, trust_remote_code=True) under "
              "transformers 4.57.1, which builds a causal Qwen2Model for a qwen2 folder without remote code "
              "(pipelines/checkpoints.py declares none): the paper profile runs the backbone causally "
              "(bidirectional false); not verified offline: whether the checkpoint's own files change that",
    ),
]

PAPER_NAMES = {
    "gtr-large": "GTR (large)", "instructor-large": "InstructOR (large)", "llm2vec": "LLM2Vec",
    "repllama": "RepLLaMA", "gritlm": "GritLM", "qwen3-embedding-0.6b": "Qwen3 Embedding (0.6B)",
    "nv-embed-v2": "NV-Embed-v2", "embeddinggemma": "EmbeddingGemma", "kalm-embedding-v2.5": "KaLM-Embedding (v2.5)",
}
for spec in ENCODER_DECODER:
    dense_retriever(spec, architecture="encoder-decoder", paper_name=PAPER_NAMES[spec.name])
for spec in DECODER_ONLY:
    dense_retriever(spec, architecture="decoder-only", paper_name=PAPER_NAMES[spec.name], batch_size=8)
