"""What loading each real checkpoint of the paper's grid needs (irgrid.core.needs): remote code, the transformers
the release ran it with, extra packages, licence gates, and its size for the GPU-memory estimate of `irgrid doctor`.

Sizes: parameter counts from the model cards (hidden size and layers from the architectures). "release:" names the
transformers the release's requirements pin for the environment that ran the checkpoint
(valentinsvelev/retriever-evaluation requirements/requirements_new.txt@0ed0bf9: transformers 4.57.1,
sentence-transformers 5.1.2, peft 0.17.1; requirements_llm2vec.txt@0ed0bf9: transformers 4.44.2, llm2vec 0.2.3;
requirements_nvembed.txt@0ed0bf9: transformers 4.42.4); irgrid runs every checkpoint with its own transformers
(5.x), through its own loaders where the checkpoint's remote code targets transformers 4.
"""

from __future__ import annotations

from irgrid.core.needs import Needs, declare

MAIN = "release: 4.57.1; in-library architecture"
# the release's batch sizes (src/encoders/dense_encoder.py@4bedb75 encode(): the generic transformer path 256,
# sentence-transformers 32, GTR 128, GritLM 8, RepLLaMA 8; src/encoders/sparse_encoder.py@4bedb75: each
# document worker 32, doc2query 16; src/models/llm2vec.py@4bedb75: 16; query expansion generation 64)
GENERIC, ST, WORKER = 256, 32, 32
BERT_BASE = Needs(110e6, 768, 12, transformers=MAIN, paper_batch=GENERIC)
BERT_LARGE = Needs(335e6, 1024, 24, transformers=MAIN, paper_batch=GENERIC)
SPARSE_BASE = Needs(110e6, 768, 12, transformers=MAIN, paper_batch=WORKER)
LLAMA_GATE = "accept the Llama licence on the hub for the base model ({})"

for model_id in ("macavaney/deepct", "castorini/unicoil-msmarco-passage", "castorini/unicoil-noexp-msmarco-passage"):
    declare(model_id, SPARSE_BASE)
for model_id in ("facebook/dpr-ctx_encoder-multiset-base",
                 "facebook/dpr-question_encoder-multiset-base", "colbert-ir/colbertv2.0", "Shitao/RetroMAE_BEIR",
                 "Luyu/co-condenser-marco-retriever", "facebook/contriever-msmarco",
                 "intfloat/simlm-base-msmarco-finetuned", "facebook/dragon-plus-context-encoder",
                 "facebook/dragon-plus-query-encoder"):
    declare(model_id, BERT_BASE)
declare("naver/splade-v3", Needs(110e6, 768, 12, transformers=MAIN + " (BertForMaskedLM)", licence="cc-by-nc-sa-4.0",
                                 paper_batch=WORKER,
                                 gated="accept the access conditions of naver/splade-v3 on the hub (gated repository; "
                                       "unverified offline)"))
for model_id in ("OpenMatch/cocodr-large-msmarco", "BAAI/bge-large-en-v1.5"):
    declare(model_id, BERT_LARGE)

declare("BeIR/sparta-msmarco-distilbert-base-v1", Needs(66e6, 768, 6, transformers=MAIN, paper_batch=WORKER))
declare("sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco", Needs(66e6, 768, 6, transformers=MAIN,
                                                                          paper_batch=GENERIC))
declare("castorini/ance-msmarco-passage", Needs(125e6, 768, 12, transformers=MAIN, paper_batch=GENERIC))
declare("princeton-nlp/unsup-simcse-roberta-large", Needs(355e6, 1024, 24, transformers=MAIN, paper_batch=GENERIC))
declare("intfloat/multilingual-e5-large-instruct", Needs(560e6, 1024, 24, transformers=MAIN, paper_batch=GENERIC))
declare("sentence-transformers/gtr-t5-large", Needs(335e6, 1024, 24, transformers=MAIN, paper_batch=128,
                                                     note="T5-large encoder + Dense 1024->768"))
declare("hkunlp/instructor-large", Needs(335e6, 1024, 24, transformers=MAIN, paper_batch=ST,
                                         note="T5-large encoder + Dense; the release loads it through "
                                              "sentence-transformers (InstructorEmbedding 1.0.1 is pinned but unused)"))
declare("doc2query/msmarco-t5-base-v1", Needs(223e6, 768, 24, transformers=MAIN, paper_batch=16,
                                              note="T5-base encoder-decoder"))
declare("Qwen/Qwen2.5-7B-Instruct", Needs(7.6e9, 3584, 28, transformers=MAIN + " (qwen2)", paper_batch=64,
                                          note="generation: prompts up to 768 tokens, fp16 (the release)"))
declare("Qwen/Qwen3-Embedding-0.6B", Needs(596e6, 1024, 28, transformers="release: 4.57.1; qwen3 needs >= 4.51",
                                           paper_batch=GENERIC,
                                           note="end of text: the tokenizer file's own post-processor (see the entry)"))
declare("KaLM-Embedding/KaLM-embedding-multilingual-mini-instruct-v2.5",
        Needs(494e6, 896, 24, transformers="release: 4.57.1 (qwen2)", paper_batch=ST))
declare("google/embeddinggemma-300m",
        Needs(308e6, 768, 24, transformers="release: 4.57.1; gemma3 text with bidirectional attention needs >= 4.56",
              paper_batch=ST,
              gated="accept Google's Gemma terms of use on the hub (google/embeddinggemma-300m)", licence="gemma"))

# remote code: the checkpoint's config names modeling code in another hub repository (auto_map 'repo--module.Class'),
# imported under trust_remote_code; offline it must be in the Hugging Face cache beside the weights
declare("jinaai/jina-embeddings-v3",
        Needs(572e6, 1024, 24, remote_code=("jinaai/xlm-roberta-flash-implementation",), packages=("einops",),
              paper_batch=32,  # the Jina branch passes no batch size: the remote encode's default, 32
              transformers="release: 4.57.1; remote XLMRobertaLoRA (task adapters via adapter_mask)",
              licence="cc-by-nc-4.0", note="flash-attn optional (the remote code falls back to torch attention)"))
# GTE and Nomic: their remote code, run on irgrid's tiny weights, equals irgrid's paper profile under transformers
# 4.57.1 but does not run under transformers 5.25 (docs/fidelity.md, measured on public copies of the code)
declare("Alibaba-NLP/gte-large-en-v1.5",
        Needs(434e6, 1024, 24, remote_code=("Alibaba-NLP/new-impl",), paper_batch=GENERIC,
              transformers="release: 4.57.1; remote NewModel, which fails under transformers 5.25 (position_ids "
                           "and RoPE buffers left uninitialised by the meta-device load)",
              licence="apache-2.0"))
declare("nomic-ai/nomic-embed-text-v1.5",
        Needs(137e6, 768, 12, remote_code=("nomic-ai/nomic-bert-2048",), packages=("einops",), paper_batch=GENERIC,
              transformers="release: 4.57.1; remote NomicBertModel, which fails under transformers 5.25 "
                           "(calls get_extended_attention_mask, removed in 5)", licence="apache-2.0"))

# 7-8B decoders, bf16/fp16: a GPU of >= 24 GB per replica, or sharded (never quantised)
declare("McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp",
        Needs(8.0e9, 4096, 32, paper_batch=16, transformers="release: 4.44.2 (llm2vec 0.2.3 pins <= 4.44.2); irgrid loads LlamaModel "
                                            "and removes the causal mask itself (no remote code)",
              gated=LLAMA_GATE.format("meta-llama/Meta-Llama-3.1-8B-Instruct"), licence="llama3.1",
              note="stage the assembled weights under this id: the release loads this repository "
                   "(AutoModel, trust_remote_code, code_revision 9d1613c4) and merges the PEFT adapter "
                   "McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp-supervised at load (peft 0.17.1), which "
                   "replaces the MNTP adapter AutoModel injected: base + supervised adapter; assemble the same once "
                   "with the release's calls on a connected machine (see docs/fidelity.md)"))
declare("castorini/repllama-v1-7b-lora-passage",
        Needs(6.7e9, 4096, 32, transformers="release: 4.57.1; LlamaModel", paper_batch=8,
              gated=LLAMA_GATE.format("meta-llama/Llama-2-7b-hf"), licence="llama2",
              note="a LoRA adapter: the release merges it into meta-llama/Llama-2-7b-hf (fp16) at load with peft; "
                   "stage the merged weights under this id"))
declare("GritLM/GritLM-7B", Needs(7.2e9, 4096, 32, transformers="release: 4.57.1 (gritlm 1.0.2), which loads the "
                                  "checkpoint's own modeling_gritlm7b.py (trust_remote_code); irgrid loads MistralModel "
                                  "and removes the causal mask itself (no remote code)",
                                  paper_batch=8,
                                  licence="apache-2.0"))
declare("nvidia/NV-Embed-v2",
        Needs(7.85e9, 4096, 32, transformers="release: 4.42.4 (its remote code targets transformers 4); irgrid reads "
                                             "the weights with its own module (no remote code)",
              licence="cc-by-nc-4.0 (non-commercial)"))
