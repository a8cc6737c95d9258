"""What each entry's checkpoints were trained on (supervised training queries), with the source of that statement:
the zero-shot flag of every cell (irgrid.core.training, `irgrid claims --zero-shot`). MTEB's model metadata first,
then the model's paper or card, then the checkpoint's own name; `complete=False` where the list may miss
collections (undisclosed data, an LLM in the pipeline)."""

from __future__ import annotations

from irgrid.core.training import CQADUPSTACK, MSMARCO, Training, declare, mteb

_MS = (MSMARCO,)
for _name, _training in {
    "bm25": Training((), "unsupervised: no training data"),
    "bm25-pisa": Training((), "unsupervised: no training data"),
    "bm25-lucene-pisa": Training((), "unsupervised: no training data"),
    "deepct": Training(_MS, "Dai & Callan (2020): term weights learned on MS MARCO passage ranking"),
    "sparta": Training(_MS, "checkpoint BeIR/sparta-msmarco-distilbert-base-v1 (trained on MS MARCO)"),
    "unicoil": Training(_MS, "checkpoint castorini/unicoil-noexp-msmarco-passage (Lin & Ma 2021: MS MARCO)"),
    "splade-v3": mteb("splade_models.py", MSMARCO),
    "dpr": Training(("beir/nq/test",), "Karpukhin et al. (2020), multiset checkpoints: NQ, TriviaQA, WebQuestions, "
                                       "CuratedTREC (only NQ is one of the catalog's collections)"),
    "colbertv2": mteb("pylate_models.py", MSMARCO),
    "tas-b": Training(_MS, "checkpoint sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco (Hofstätter et al. "
                           "2021: MS MARCO)"),
    "ance": Training(_MS, "checkpoint castorini/ance-msmarco-passage (Xiong et al. 2021: MS MARCO)"),
    "simcse": Training((), "Gao et al. (2021), unsupervised SimCSE: one million Wikipedia sentences, no retrieval "
                           "labels"),
    "retromae": Training((), "checkpoint Shitao/RetroMAE_BEIR: the paper (Section 4.1.2) says fine-tuned 'on the BEIR "
                             "datasets' without naming them", complete=False),
    "cocondenser": Training(_MS, "checkpoint Luyu/co-condenser-marco-retriever (Gao & Callan 2022: MS MARCO)"),
    "contriever": Training(_MS, "checkpoint facebook/contriever-msmarco (Izacard et al. 2022: fine-tuned on MS "
                                "MARCO)"),
    "coco-dr-large": Training(_MS, "checkpoint OpenMatch/cocodr-large-msmarco (Yu et al. 2022: MS MARCO labels; "
                                   "continued pretraining on the BEIR corpora without labels)"),
    "simlm": Training(_MS, "checkpoint intfloat/simlm-base-msmarco-finetuned (Wang et al. 2023: MS MARCO)"),
    "dragon-plus": Training(_MS, "Lin et al. (2023): MS MARCO queries with augmented supervision"),
    "me5-large": mteb("e5_instruct.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test"),
    "gte-large-v1.5": Training((), "MTEB model metadata: training data not disclosed", complete=False),
    "bge-large-v1.5": mteb("bge_models.py", "beir/nq/test"),
    "jina-embeddings-v3": mteb("jina_models.py", MSMARCO, "beir/nq/test"),
    "nomic-embed-v1.5": mteb("nomic_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                              "beir/quora/test"),
    "gtr-large": mteb("sentence_transformers_models.py", MSMARCO, "beir/nq/test"),
    "instructor-large": Training((), "Su et al. (2023), MEDI: 330 datasets incl. retrieval sets; no per-collection "
                                     "list in MTEB's metadata", complete=False),
    "llm2vec": Training((), "the unsupervised MNTP checkpoint (MTEB lists the supervised variants' E5 data); which "
                            "adapter the entry loads decides", complete=False),
    "repllama": Training(_MS, "checkpoint castorini/repllama-v1-7b-lora-passage (Ma et al. 2024: MS MARCO passage)"),
    "gritlm": mteb("gritlm_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test"),
    "qwen3-embedding-0.6b": mteb("qwen3_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test",
                                  "beir/fever/test"),
    "nv-embed-v2": mteb("nvidia_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                         "beir/fiqa/test", "beir/arguana/test"),
    "embeddinggemma": mteb("google_text_embedding.py (GECKO_TRAINING_DATA)", "beir/nq/test", "beir/hotpotqa/test",
                            "beir/fever/test"),
    "kalm-embedding-v2.5": mteb("kalm_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                                 "beir/fiqa/test", "beir/nfcorpus/test", "beir/quora/test", "beir/scifact/test",
                                 "beir/trec-covid/test", "beir/dbpedia-entity/test", CQADUPSTACK),
    "doct5query": Training(_MS, "Nogueira & Lin (2019): docTTTTTquery's T5 trained on MS MARCO; BM25 unsupervised"),
    "query2doc": Training((), "Qwen2.5-7B-Instruct (training data not disclosed) writes the pseudo-documents; BM25 "
                              "unsupervised", complete=False),
    "hyde": Training(_MS, "Contriever fine-tuned on MS MARCO (facebook/contriever-msmarco) encodes Qwen2.5-7B-"
                          "Instruct's hypothetical documents (training data not disclosed)", complete=False),
}.items():
    declare(_name, _training)
