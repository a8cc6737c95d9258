"""Dense bi-encoders with an encoder-only backbone (Table 1), as data: each entry is an `EncoderSpec` run by the
one engine in `irgrid.encoders` (documents stream into a pyterrier-dr FlexIndex; exact search).

Checkpoints, pooling, normalisation and prompts follow the paper's code (valentinsvelev/retriever-evaluation,
src/configs/models.py) unless a note says why not. Revisions are pinned only where verified (MTEB's model
registry, embeddings-benchmark/mteb mteb/models/model_implementations/*); `None` means unverified, stated in notes.
"""

from __future__ import annotations

from irgrid.dense_entry import dense_retriever
from irgrid.encoders import EncoderSpec
from irgrid.retrievers import ModelRef

PAPER = "paper code: valentinsvelev/retriever-evaluation src/configs/models.py"
UNVERIFIED = "revision unverified offline (not in MTEB's registry): left unpinned"

MINILM = EncoderSpec(
    name="all-minilm-l6-v2",
    query_model=ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a",
                         arch="bert"),
    pooling="mean", normalize=True, similarity="cos", query_max_length=256, doc_max_length=256,
    citation="Reimers & Gurevych 2019; model card sentence-transformers/all-MiniLM-L6-v2",
    notes="sentence-transformers folder: mean pooling, Normalize, max_seq_length 256 (MTEB scifact nDCG@10 0.64508)",
)
dense_retriever(MINILM, architecture="encoder-only", paper_name=None)

SPECS = [
    EncoderSpec(
        name="dpr",
        query_model=ModelRef("facebook/dpr-question_encoder-multiset-base", arch="dpr-question"),
        doc_model=ModelRef("facebook/dpr-ctx_encoder-multiset-base", arch="dpr-context"),
        loader="dpr", pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Karpukhin et al., EMNLP 2020",
        notes=f"{PAPER}: multiset encoders (the single-nq pair is commented out there); CLS of the BERT encoder "
              f"(DPR's pooler_output, projection_dim 0); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="tas-b",
        query_model=ModelRef("sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco", arch="distilbert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Hofstätter et al., SIGIR 2021",
        notes="paper code uses the authors' checkpoint; its comment names sentence-transformers/msmarco-distilbert-"
              f"base-tas-b (same weights, CLS, dot): we keep the authors' id; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="ance",
        query_model=ModelRef("castorini/ance-msmarco-passage", arch="roberta", tiny=(("ance_head", True),)),
        loader="ance", pooling="cls", normalize=False, similarity="dot", query_max_length=64, doc_max_length=512,
        citation="Xiong et al., ICLR 2021; Pyserini AnceEncoder",
        notes="disagreement: the paper code loads this checkpoint with AutoModel (dropping its embeddingHead and "
              "LayerNorm) and L2-normalises; the checkpoint's own encoder (Pyserini AnceEncoder) is CLS -> linear "
              f"-> LayerNorm, dot product, query max 64: we follow the checkpoint; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="simcse",
        query_model=ModelRef("princeton-nlp/unsup-simcse-roberta-large", arch="roberta"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        citation="Gao et al., EMNLP 2021",
        notes=f"{PAPER}: unsupervised RoBERTa-large, CLS before the MLP pooler (SimCSE's cls_before_pooler for unsup "
              f"models), cosine; the paper's Table A.1 lists BERT and RoBERTa variants: we use the code's; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="retromae",
        query_model=ModelRef("Shitao/RetroMAE_BEIR", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Xiao et al., EMNLP 2022",
        notes=f"{PAPER}: RetroMAE_BEIR (MSMARCO-finetuned/distilled variants commented out there); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="cocondenser",
        query_model=ModelRef("Luyu/co-condenser-marco-retriever", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Gao & Callan, ACL 2022", notes=f"{PAPER}; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="contriever",
        query_model=ModelRef("facebook/contriever-msmarco", "abe8c1493371369031bcb1e02acb754cf4e162fa", arch="bert"),
        pooling="mean", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Izacard et al., TMLR 2022", notes=f"{PAPER}: the MS MARCO fine-tuned checkpoint, mean pooling, dot",
    ),
    EncoderSpec(
        name="coco-dr-large",
        query_model=ModelRef("OpenMatch/cocodr-large-msmarco", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Yu et al., EMNLP 2022", notes=f"{PAPER}; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="simlm",
        query_model=ModelRef("intfloat/simlm-base-msmarco-finetuned", arch="bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        citation="Wang et al., ACL 2023",
        notes=f"{PAPER}: CLS, L2-normalised; documents are flat title+text (the card encodes title/text as a pair); "
              f"{UNVERIFIED}",
    ),
    EncoderSpec(
        name="dragon-plus",
        query_model=ModelRef("facebook/dragon-plus-query-encoder", arch="bert"),
        doc_model=ModelRef("facebook/dragon-plus-context-encoder", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        citation="Lin et al., Findings of EMNLP 2023",
        notes=f"{PAPER}: separate query/context encoders, CLS, dot; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="me5-large",
        query_model=ModelRef("intfloat/multilingual-e5-large-instruct", "baa7be480a7de1539afce709c8f13f833a510e0a",
                             arch="xlm-roberta"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        query_template="Instruct: Retrieve passages that answer this question.\nQuery: {text}",
        doc_template="Passage: {text}",
        card_query_template="Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                            "Query: {text}",
        card_doc_template="{text}",
        citation="Wang et al., 2024 (mE5 technical report)",
        notes="disagreement: Table 1 says mE5 (large); the paper code uses multilingual-e5-large-instruct with a unified "
              "instruction and a 'Passage: ' prefix on documents (the card: no document prefix); we follow the code "
              "(the base intfloat/multilingual-e5-large@ab10c1a7 would use 'query: '/'passage: ')",
    ),
    EncoderSpec(
        name="gte-large-v1.5",
        query_model=ModelRef("Alibaba-NLP/gte-large-en-v1.5", arch="nomic-bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        trust_remote_code=True,
        citation="Li et al., 2023 (GTE)",
        notes="model card: CLS, normalised, no prompts, 8192 tokens; custom 'NewModel' code (trust_remote_code); the "
              f"tiny stand-in is NomicBert (RoPE + GLU like NewModel, which transformers lacks); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="bge-large-v1.5",
        query_model=ModelRef("BAAI/bge-large-en-v1.5", "d4aa6901d3a41ba39fb536a557fa166f842b0e09", arch="bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        query_template="Represent this sentence for searching relevant passages: {text}",
        card_query_template="Represent this sentence for searching relevant passages: {text}",
        citation="Xiao et al., SIGIR 2024 (C-Pack)",
        notes="paper code: FlagModel with the card's retrieval instruction on queries only; CLS, normalised",
    ),
    EncoderSpec(
        name="jina-embeddings-v3",
        query_model=ModelRef("jinaai/jina-embeddings-v3", "215a6e121fa0183376388ac6b1ae230326bfeaed",
                             arch="jina-embeddings-v3"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        adapters=("retrieval.query", "retrieval.passage"), trust_remote_code=True,
        query_template="Represent the query for retrieving evidence documents: {text}",
        doc_template="Represent the document for retrieval: {text}",
        card_query_template="Represent the query for retrieving evidence documents: {text}",
        card_doc_template="Represent the document for retrieval: {text}",
        citation="Sturua et al., ECIR 2025",
        notes="card: task LoRA adapters retrieval.query / retrieval.passage with their instructions, mean pooling; the "
              "paper code loads it through SentenceTransformer with no task (no adapter): we follow the card; the "
              "real checkpoint must expose `set_adapter` (PEFT adapters) or loading fails with a clear error",
    ),
    EncoderSpec(
        name="nomic-embed-v1.5",
        query_model=ModelRef("nomic-ai/nomic-embed-text-v1.5", "b0753ae76394dd36bcfb912a46018088bca48be0",
                             arch="nomic-bert"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        trust_remote_code=True,
        query_template="search_query: {text}", doc_template="search_document: {text}",
        card_query_template="search_query: {text}", card_doc_template="search_document: {text}",
        citation="Nussbaum et al., TMLR 2025", notes="card and paper code agree: task prefixes, mean, normalised, 768-d",
    ),
]
PAPER_NAMES = {
    "dpr": "DPR", "tas-b": "TAS-B", "ance": "ANCE", "simcse": "SimCSE", "retromae": "RetroMAE",
    "cocondenser": "coCondenser", "contriever": "Contriever", "coco-dr-large": "COCO-DR (large)", "simlm": "SimLM",
    "dragon-plus": "Dragon+", "me5-large": "mE5 (large)", "gte-large-v1.5": "GTE (large v1.5)",
    "bge-large-v1.5": "BGE (large v1.5)", "jina-embeddings-v3": "Jina Embeddings v3",
    "nomic-embed-v1.5": "Nomic Embed (v1.5)",
}
for spec in SPECS:
    dense_retriever(spec, architecture="encoder-only", paper_name=PAPER_NAMES[spec.name])
