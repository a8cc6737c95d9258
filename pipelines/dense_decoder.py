"""Dense retrievers with encoder-decoder (T5 encoder) and decoder-only backbones (Table 1), as `EncoderSpec` data.

For the instruction-following models the paper uses one unified prompt for all datasets, based on each model's task
prompts (Section 3.3.3); ours is that prompt (from the paper code, src/configs/models.py), and the model card's
recommended retrieval prompt is kept beside it. Models larger than one GPU in bf16 are sharded over the visible GPUs,
never quantised (the paper code's 4/8-bit options are not used).
"""

from __future__ import annotations

from irgrid.dense_entry import dense_retriever
from irgrid.encoders import EncoderSpec
from irgrid.retrievers import ModelRef

UNVERIFIED = "revision unverified offline: left unpinned"

ENCODER_DECODER = [
    EncoderSpec(
        name="gtr-large",
        query_model=ModelRef("sentence-transformers/gtr-t5-large", "a2c8ac47f998531948d4cbe32a0b577a7037a5e3",
                             arch="t5-encoder", tiny=(("st_dense", (16,)),)),
        loader="t5-encoder", pooling="mean", normalize=True, similarity="cos", query_max_length=512,
        doc_max_length=512,
        citation="Ni et al., EMNLP 2022",
        notes="sentence-transformers folder: T5 encoder, mean pooling, Dense 1024->768 (no bias), Normalize",
    ),
    EncoderSpec(
        name="instructor-large",
        query_model=ModelRef("hkunlp/instructor-large", arch="t5-encoder", tiny=(("st_dense", (16,)),)),
        loader="t5-encoder", pooling="mean", pool_prompt=False, normalize=True, similarity="cos",
        query_max_length=512, doc_max_length=512,
        query_template="Represent the question: {text}", doc_template="Represent the document: {text}",
        card_query_template="Represent the Wikipedia question for retrieving supporting documents: {text}",
        card_doc_template="Represent the Wikipedia document for retrieval: {text}",
        citation="Su et al., Findings of ACL 2023",
        notes=f"INSTRUCTOR mean-pools over the text tokens only (instruction excluded), then Dense + Normalize; "
              f"unified prompts from the paper code; {UNVERIFIED}",
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
        card_query_template="Given a web search query, retrieve relevant passages that answer the query: {text}",
        citation="BehnamGhader et al., COLM 2024",
        notes="paper code (src/models/llm2vec.py): MNTP base at code revision 9d1613c4 + the supervised adapter "
              "McGill-NLP/LLM2Vec-Meta-Llama-31-8B-Instruct-mntp-supervised merged, bidirectional, mean pooling, "
              "max 512; stage the merged weights under this id (IRGRID_MODELS); LLM2Vec excludes the instruction "
              "from pooling (the paper code did not): we follow LLM2Vec",
    ),
    EncoderSpec(
        name="repllama",
        query_model=ModelRef("castorini/repllama-v1-7b-lora-passage", "6097554dfe6e7d93e92f55010b678bcca1e233a8",
                             arch="llama"),
        pooling="last", normalize=True, similarity="cos", query_max_length=512, doc_max_length=1024,
        query_template="query: {text}</s>", doc_template="passage: {text}</s>",
        card_query_template="query: {text}</s>", card_doc_template="passage: {text}</s>",
        citation="Ma et al., SIGIR 2024",
        notes="LoRA over meta-llama/Llama-2-7b-hf (base revision 01c7f73d per MTEB); stage the merged weights under "
              "this id; last-token pooling on the '</s>' the template appends; documents at 1,024 tokens (the "
              "paper's choice vs 2,048)",
    ),
    EncoderSpec(
        name="gritlm",
        query_model=ModelRef("GritLM/GritLM-7B", "13f00a0e36500c80ce12870ea513846a066004af", arch="mistral"),
        pooling="mean", pool_prompt=False, bidirectional=True, normalize=True, similarity="cos",
        query_max_length=512, doc_max_length=512,
        query_template="<|user|>\nGiven a question, retrieve passages that answer the question\n<|embed|>\n{text}",
        doc_template="<|embed|>\n{text}",
        card_query_template="<|user|>\n{instruction}\n<|embed|>\n{text}", card_doc_template="<|embed|>\n{text}",
        citation="Muennighoff et al., ICLR 2025",
        notes="GritLM embedding mode: bidirectional attention, mean pooling over the text after <|embed|>; unified "
              "instruction from the paper code; bf16",
    ),
    EncoderSpec(
        name="qwen3-embedding-0.6b",
        query_model=ModelRef("Qwen/Qwen3-Embedding-0.6B", "b22da495047858cce924d27d76261e96be6febc0", arch="qwen3"),
        pooling="last", append_eos=True, normalize=True, similarity="cos", query_max_length=8192,
        doc_max_length=8192,
        query_template="Instruct: Retrieve passages that answer this query\nQuery: {text}",
        card_query_template="Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                            "Query:{text}",
        citation="Zhang et al., 2025 (Qwen3 Embedding)",
        notes="last-token pooling on an appended <|endoftext|> (only if the tokenizer did not add it), normalised; "
              "unified instruction from the paper code (note its space after 'Query:', which the card has not)",
    ),
    EncoderSpec(
        name="nv-embed-v2",
        query_model=ModelRef("nvidia/NV-Embed-v2", "7604d305b621f14095a1aa23d351674c2859553a", arch="mistral",
                             tiny=(("latent_attention", (("num_latents", 8), ("heads", 2), ("dim_head", 16))),)),
        loader="nv-embed", pooling="latent-attention", pool_prompt=False, bidirectional=True, normalize=True,
        similarity="cos", query_max_length=32768, doc_max_length=32768,
        query_template="Instruct: Given a question, retrieve passages that answer the question\nQuery: {text}</s>",
        doc_template="{text}</s>",
        card_query_template="Instruct: Given a question, retrieve passages that answer the question\nQuery: {text}</s>",
        card_doc_template="{text}</s>",
        citation="Lee et al., ICLR 2025",
        notes="Mistral-7B made bidirectional + latent-attention pooling (512 latents), mean over the text tokens, "
              "EOS appended as in the card; weights are read from the checkpoint's embedding_model.* and "
              "latent_attention_model.* tensors by our own module (its remote code targets transformers 4)",
    ),
    EncoderSpec(
        name="embeddinggemma",
        query_model=ModelRef("google/embeddinggemma-300m", "64614b0b8b64f0c6c1e52b07e4e9a4e8fe4d2da2",
                             arch="gemma3-text", tiny=(("st_dense", (64, 16)),)),
        pooling="mean", bidirectional=True, normalize=True, similarity="cos", query_max_length=2048,
        doc_max_length=2048,
        card_query_template="task: search result | query: {text}", card_doc_template="title: none | text: {text}",
        citation="Vera et al., 2025 (EmbeddingGemma)",
        notes="disagreement: the card recommends task prompts; the paper code passes empty prompts (ours); "
              "bidirectional Gemma 3, mean pooling, Dense 768->3072->768, Normalize; bf16 or fp32 (no fp16)",
    ),
    EncoderSpec(
        name="kalm-embedding-v2.5",
        query_model=ModelRef("KaLM-Embedding/KaLM-embedding-multilingual-mini-instruct-v2.5",
                             "6a4cfc1084cb459ebd4729b53a8656a61448c720", arch="qwen2"),
        pooling="mean", bidirectional=True, normalize=True, similarity="cos", query_max_length=512,
        doc_max_length=512,
        query_template="Instruct: Given a query, retrieve documents that answer the query \n Query: {text}",
        card_query_template="Instruct: {instruction} \n Query: {text}",
        citation="Zhao et al., ICLR 2026",
        notes="Qwen2-0.5B, bidirectional, mean pooling, max 512 (MTEB); instruction template 'Instruct: ... \\n "
              "Query: ' on queries only; the unified instruction is ours (the paper code gives KaLM prompts only "
              "for Quora and CQADupStack)",
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
