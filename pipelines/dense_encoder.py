"""Dense bi-encoders with an encoder-only backbone (Table 1), as data: each entry is an `EncoderSpec` run by the
one engine in `irgrid.dense.engine` (documents stream into a pyterrier-dr FlexIndex; exact search).

An entry's defaults are the model card's / MTEB's values (its `card` profile says where each comes from); its
`paper` profile holds what the paper's code (valentinsvelev/retriever-evaluation) ran where that differs, each
setting naming the repository file it comes from (`irgrid.core.paper_code`). Revisions are pinned only where verified
(MTEB's model registry); `None` means unverified, stated in notes.
"""

from __future__ import annotations

from irgrid.core.modelref import ModelRef
from irgrid.core.paper_code import (
    ENCODER_PY,
    ENCODER_PY_F8,
    GENERIC_TITLES,
    MODELS_PY,
    REQUIREMENTS_OLD,
    card_titles,
    code,
    generic,
    paper,
    release_titles,
)
from irgrid.core.profiles import Setting
from irgrid.dense.entry import dense_retriever
from irgrid.dense.spec import EncoderSpec

UNVERIFIED = "revision unverified offline (not in MTEB's registry): left unpinned"
JINA_Q = "Represent the query for retrieving evidence documents: {text}"
JINA_D = "Represent the document for retrieval: {text}"
JINA_TASK = ("encode(): if dataset_id == 'irds:beir/arguana': model.encode(texts) (no task); else "
             "model.encode(texts, task='retrieval.query' | 'retrieval.passage')")
NO_CARD_DTYPE = "irgrid default (no card value): bf16 on GPU"
POOLER = ("*pooler.*",)  # BERT-family pooler heads: unused by CLS/mean pooling; some checkpoints ship none

MINILM = EncoderSpec(
    name="all-minilm-l6-v2",
    query_model=ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a",
                         arch="bert"),
    pooling="mean", normalize=True, similarity="cos", query_max_length=256, doc_max_length=256,
    citation="Reimers & Gurevych 2019; model card sentence-transformers/all-MiniLM-L6-v2",
    notes="sentence-transformers folder: mean pooling, Normalize, max_seq_length 256 (MTEB scifact nDCG@10 0.64508); "
          "not in the paper",
)
dense_retriever(MINILM, architecture="encoder-only", paper_name=None)


def _dtype_card() -> dict[str, Setting]:
    """The card's dtype, and the release's title quirks off (`irgrid.core.paper_code.release_titles`)."""
    return {"dtype": Setting("bf16", NO_CARD_DTYPE), **card_titles()}


def _generic_card(q_len: int = 512, d_len: int = 512, source: str = "model card max_seq_length") -> dict[str, Setting]:
    return {"query_max_length": Setting(q_len, source), "doc_max_length": Setting(d_len, source), **_dtype_card()}


SPECS = [
    EncoderSpec(
        name="dpr",
        query_model=ModelRef("facebook/dpr-question_encoder-multiset-base", arch="dpr-question"),
        doc_model=ModelRef("facebook/dpr-ctx_encoder-multiset-base", arch="dpr-context"),
        loader="dpr", pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        profiles={
            "paper": generic(
                doc_sep=paper(" [SEP] ", ENCODER_PY, "encode(): DPR documents f'{title} {sep} {text}', "
                                                     "sep = context_tokenizer.sep_token")),
            "card": {"doc_sep": Setting(" ", "irgrid flat title + text (the DPR card passes title/text as a pair; "
                                             "unverified offline)"), **_generic_card()},
        },
        citation="Karpukhin et al., EMNLP 2020",
        notes=f"{MODELS_PY}: multiset encoders (the single-nq pair is commented out there); CLS of the BERT encoder "
              f"(DPR's pooler_output, projection_dim 0); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="tas-b",
        query_model=ModelRef("sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco", arch="distilbert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Hofstätter et al., SIGIR 2021",
        notes="paper code uses the authors' checkpoint; its comment names sentence-transformers/msmarco-distilbert-"
              f"base-tas-b (same weights, CLS, dot): we keep the authors' id; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="ance",
        query_model=ModelRef("castorini/ance-msmarco-passage", arch="roberta", tiny=(("ance_head", True),)),
        loader="ance", pooling="cls", normalize=False, similarity="dot", query_max_length=64, doc_max_length=512,
        allow_missing=POOLER, allow_unexpected=("embeddingHead.*", "norm.*"),
        profiles={
            "paper": generic(
                loader=paper("auto", ENCODER_PY, "_load_manual_transformer(): AutoModel (RobertaModel: the "
                                                 "checkpoint's embeddingHead and norm are not loaded)"),
                normalize=paper(True, MODELS_PY, "dense_models['ance']['normalize']"),
                similarity=paper("cos", MODELS_PY, "dense_models['ance']['normalize'] (L2 + inner product)")),
            "card": {"loader": Setting("ance", "Pyserini AnceQueryEncoder/AnceDocumentEncoder: CLS -> embeddingHead "
                                               "-> LayerNorm"),
                     "normalize": Setting(False, "Pyserini AnceEncoder: dot product"),
                     "similarity": Setting("dot", "Pyserini AnceEncoder: dot product"),
                     **_generic_card(64, 512, "Pyserini AnceQueryEncoder max_length 64, documents 512")},
        },
        citation="Xiong et al., ICLR 2021; Pyserini AnceEncoder",
        notes=f"paper: plain RoBERTa CLS, L2-normalised, 512 (the head is dropped); card: the checkpoint's own encoder; "
              f"{UNVERIFIED}",
    ),
    EncoderSpec(
        name="simcse",
        query_model=ModelRef("princeton-nlp/unsup-simcse-roberta-large", arch="roberta"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={
            "paper": generic(pooling=paper("pooler", ENCODER_PY, "_pooling('cls'): pooler_output when 'simcse' is in "
                                                                 "the name (RoBERTa pooler: the MLP head)")),
            "card": {"pooling": Setting("cls", "SimCSE README: unsupervised models are evaluated with "
                                               "cls_before_pooler"), **_generic_card()},
        },
        citation="Gao et al., EMNLP 2021",
        notes=f"unsupervised RoBERTa-large ({MODELS_PY}; the paper's Table A.1 lists BERT and RoBERTa variants); the "
              f"paper profile needs the checkpoint's pooler weights (strict loading fails if it has none); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="retromae",
        query_model=ModelRef("Shitao/RetroMAE_BEIR", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Xiao et al., EMNLP 2022",
        notes=f"{MODELS_PY}: RetroMAE_BEIR (MSMARCO-finetuned/distilled variants commented out there); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="cocondenser",
        query_model=ModelRef("Luyu/co-condenser-marco-retriever", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Gao & Callan, ACL 2022", notes=f"{MODELS_PY}; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="contriever",
        query_model=ModelRef("facebook/contriever-msmarco", "abe8c1493371369031bcb1e02acb754cf4e162fa", arch="bert"),
        pooling="mean", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Izacard et al., TMLR 2022", notes=f"{MODELS_PY}: the MS MARCO fine-tuned checkpoint, mean pooling, dot",
    ),
    EncoderSpec(
        name="coco-dr-large",
        query_model=ModelRef("OpenMatch/cocodr-large-msmarco", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Yu et al., EMNLP 2022", notes=f"{MODELS_PY}; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="simlm",
        query_model=ModelRef("intfloat/simlm-base-msmarco-finetuned", arch="bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Wang et al., ACL 2023",
        notes=f"{MODELS_PY}: CLS, L2-normalised; documents are flat title+text (the card encodes title/text as a pair, "
              f"unverified offline); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="dragon-plus",
        query_model=ModelRef("facebook/dragon-plus-query-encoder", arch="bert"),
        doc_model=ModelRef("facebook/dragon-plus-context-encoder", arch="bert"),
        pooling="cls", normalize=False, similarity="dot", query_max_length=512, doc_max_length=512,
        allow_missing=POOLER,
        profiles={"paper": generic(), "card": _generic_card()},
        citation="Lin et al., Findings of EMNLP 2023",
        notes=f"{MODELS_PY}: separate query/context encoders, CLS, dot; {UNVERIFIED}",
    ),
    EncoderSpec(
        name="me5-large",
        query_model=ModelRef("intfloat/multilingual-e5-large-instruct", "baa7be480a7de1539afce709c8f13f833a510e0a",
                             arch="xlm-roberta"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        query_template="Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                       "Query: {text}",
        allow_missing=POOLER,
        profiles={
            "paper": generic(
                query_template=paper("Instruct: Retrieve passages that answer this question.\nQuery: {text}",
                                     MODELS_PY, "generalist_embedders['e5']['query_instruction']"),
                doc_template=paper("Passage: {text}", MODELS_PY, "generalist_embedders['e5']['doc_instruction']")),
            "card": {"query_template": Setting("Instruct: Given a web search query, retrieve relevant passages that "
                                               "answer the query\nQuery: {text}",
                                               "model card multilingual-e5-large-instruct / MTEB e5_instruct"),
                     "doc_template": Setting("{text}", "model card: no instruction on documents"),
                     **_generic_card()},
        },
        citation="Wang et al., 2024 (mE5 technical report)",
        notes="Table 1 says mE5 (large); the paper code uses multilingual-e5-large-instruct (the base "
              "intfloat/multilingual-e5-large@ab10c1a7 would use 'query: '/'passage: ')",
    ),
    EncoderSpec(
        name="gte-large-v1.5",
        query_model=ModelRef("Alibaba-NLP/gte-large-en-v1.5", arch="nomic-bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        trust_remote_code=True,
        profiles={"paper": generic(), "card": _generic_card(8192, 8192, "model card: 8192-token context")},
        citation="Li et al., 2023 (GTE)",
        notes="model card: CLS, normalised, no prompts, 8192 tokens; custom 'NewModel' code (trust_remote_code); the "
              f"tiny stand-in is NomicBert (RoPE + GLU like NewModel, which transformers lacks); {UNVERIFIED}",
    ),
    EncoderSpec(
        name="bge-large-v1.5",
        query_model=ModelRef("BAAI/bge-large-en-v1.5", "d4aa6901d3a41ba39fb536a557fa166f842b0e09", arch="bert"),
        pooling="cls", normalize=True, similarity="cos", query_max_length=512, doc_max_length=512,
        query_template="Represent this sentence for searching relevant passages: {text}",
        allow_missing=POOLER,
        profiles={
            "paper": {
                "query_template": paper("{text}", ENCODER_PY, "encode(): FlagModel.encode(texts) for queries too — the "
                                                              "retrieval instruction is only added by encode_queries"),
                "doc_fields": paper(("title", "text"), ENCODER_PY, "encode(): flag_embedding branch, documents "
                                                                   "f'{title} {text}' when titles are given"),
                "dtype": paper("fp16", REQUIREMENTS_OLD, "FlagEmbedding==1.3.5, whose FlagModel defaults to "
                                                         "use_fp16=True (dense_encoder.py passes none)"),
                **release_titles(where="encode(): flag_embedding branch, documents f'{title} {text}'"),
            },
            "card": {"query_template": Setting("Represent this sentence for searching relevant passages: {text}",
                                               "model card BAAI/bge-large-en-v1.5 / MTEB bge_models"),
                     "doc_fields": Setting(("title", "text"), "MTEB retrieval corpus: title + ' ' + text"),
                     **_dtype_card()},
        },
        citation="Xiao et al., SIGIR 2024 (C-Pack)",
        notes="CLS, normalised, 512 (FlagModel defaults); the paper code's FlagModel is built with the retrieval "
              f"instruction but plain encode() never adds it. Older version: {ENCODER_PY_F8} encoded the text "
              "without its title",
    ),
    EncoderSpec(
        name="jina-embeddings-v3",
        query_model=ModelRef("jinaai/jina-embeddings-v3", "215a6e121fa0183376388ac6b1ae230326bfeaed",
                             arch="jina-embeddings-v3"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        adapters=("retrieval.query", "retrieval.passage"), trust_remote_code=True,
        query_template=JINA_Q, doc_template=JINA_D,
        profiles={
            "paper": {"dtype": paper("fp32", ENCODER_PY, "_load_manual_transformer(): fp32 AutoModel; the Jina "
                                                         "branch calls model.encode(task=...) without autocast"),
                      **release_titles(where="encode(): Jina v3 branch, documents f'{title} {text}'"),
                      # on ArguAna the release calls model.encode(texts) with no task: no LoRA adapter, no
                      # task instruction (the checkpoint's encode adds an instruction only for a task)
                      **{k: Setting(v, code(ENCODER_PY, JINA_TASK), per_dataset={"beir/arguana": none})
                         for k, v, none in (("adapters", ("retrieval.query", "retrieval.passage"), None),
                                            ("query_template", JINA_Q, "{text}"),
                                            ("doc_template", JINA_D, "{text}"))}},
            "card": {**_dtype_card(),
                     "adapters": Setting(("retrieval.query", "retrieval.passage"), "model card jinaai/jina-embeddings"
                                         "-v3: encode(task='retrieval.query' | 'retrieval.passage')"),
                     "query_template": Setting(JINA_Q, "jina-embeddings-v3 custom_st.py / config_sentence_"
                                                       "transformers: retrieval.query instruction"),
                     "doc_template": Setting(JINA_D, "jina-embeddings-v3: retrieval.passage instruction")},
        },
        citation="Sturua et al., ECIR 2025",
        notes="card and paper code agree except on ArguAna: task LoRA adapters retrieval.query / retrieval.passage "
              f"with their instructions ({ENCODER_PY}: encode(task='retrieval.query'|'retrieval.passage')), mean "
              "pooling, documents title + text; on beir/arguana the release passes no task (no adapter, no "
              f"instruction; {ENCODER_PY_F8} used the retrieval tasks everywhere). The adapter is selected as the "
              "checkpoint's own encode(task=...) selects it: adapter_mask = the task's index in "
              "config.lora_adaptations, passed to its remote XLMRobertaLoRA forward (irgrid.dense.model."
              "task_adapter_id); a checkpoint loaded without that remote code fails, naming it",
    ),
    EncoderSpec(
        name="nomic-embed-v1.5",
        query_model=ModelRef("nomic-ai/nomic-embed-text-v1.5", "b0753ae76394dd36bcfb912a46018088bca48be0",
                             arch="nomic-bert"),
        pooling="mean", normalize=True, similarity="cos", query_max_length=8192, doc_max_length=8192,
        trust_remote_code=True,
        query_template="search_query: {text}", doc_template="search_document: {text}",
        profiles={"paper": generic(), "card": _generic_card(8192, 8192, "model card: 8192-token context")},
        citation="Nussbaum et al., TMLR 2025",
        notes=f"card and paper code agree on the task prefixes ({MODELS_PY} generalist_embedders['nomic']), mean, "
              f"normalised, 768-d; {GENERIC_TITLES}",
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
