"""Zero-shot or not: the collections each registered checkpoint was trained on (supervised training queries), with
the source of that statement, so that every cell of a grid can be flagged in-domain or zero-shot and the paper's
claims and group aggregates can be checked twice, on all cells and on zero-shot cells only
(`irgrid claims --zero-shot`).

Sources, in order of preference: MTEB's model metadata (`training_datasets` of mteb 2.26.24,
mteb/models/model_implementations/<file>; MTEB task names mapped to the catalog's datasets by MTEB_TASKS), the
model's paper or card, the checkpoint's own name (`...-msmarco`). `complete=False` says the list may miss
collections (undisclosed data, an LLM in the pipeline): a dataset not listed is then "unknown", not zero-shot.
Training on MS MARCO's training queries makes every MS MARCO passage test set (dev, TREC-DL) in-domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MSMARCO = "msmarco"  # every msmarco-passage/* dataset
CQADUPSTACK = "cqadupstack"  # every beir/cqadupstack/* forum
# MTEB retrieval task names -> irgrid's names for the collections (their training splits)
MTEB_TASKS: dict[str, str] = {
    "MSMARCO": MSMARCO, "MSMARCOHardNegatives": MSMARCO, "NanoMSMARCORetrieval": MSMARCO,
    "NQ": "beir/nq/test", "NQHardNegatives": "beir/nq/test", "NanoNQRetrieval": "beir/nq/test",
    "HotpotQA": "beir/hotpotqa/test", "HotPotQA": "beir/hotpotqa/test", "HotpotQAHardNegatives": "beir/hotpotqa/test",
    "FEVER": "beir/fever/test", "FEVERHardNegatives": "beir/fever/test", "FiQA2018": "beir/fiqa/test",
    "ArguAna": "beir/arguana/test", "QuoraRetrieval": "beir/quora/test", "NanoQuoraRetrieval": "beir/quora/test",
    "SciFact": "beir/scifact/test", "NFCorpus": "beir/nfcorpus/test", "TRECCOVID": "beir/trec-covid/test",
    "DBPedia": "beir/dbpedia-entity/test", "CQADupstack": CQADUPSTACK,
}


@dataclass(frozen=True)
class Training:
    collections: tuple[str, ...]  # irgrid dataset names, MSMARCO or CQADUPSTACK
    source: str
    complete: bool = True  # False: other, unnamed collections may be in it

    def in_domain(self, dataset: str) -> bool | None:
        """True: trained on this collection; False: known not to be; None: unknown."""
        name = dataset.split("@")[0]  # a query subset (`@q16s0`) is its dataset's
        for c in self.collections:
            if (c == MSMARCO and name.startswith("msmarco-passage/")) or \
                    (c == CQADUPSTACK and name.startswith("beir/cqadupstack/")) or c in (name, f"{name}/test"):
                return True
        return False if self.complete else None


def _mteb(file: str, *collections: str) -> Training:
    return Training(tuple(collections), f"MTEB model metadata (mteb 2.26.24, models/model_implementations/{file})")


_MS = (MSMARCO,)
TRAINING: Mapping[str, Training] = {
    "bm25": Training((), "unsupervised: no training data"),
    "bm25-pisa": Training((), "unsupervised: no training data"),
    "bm25-lucene-pisa": Training((), "unsupervised: no training data"),
    "deepct": Training(_MS, "Dai & Callan (2020): term weights learned on MS MARCO passage ranking"),
    "sparta": Training(_MS, "checkpoint BeIR/sparta-msmarco-distilbert-base-v1 (trained on MS MARCO)"),
    "unicoil": Training(_MS, "checkpoint castorini/unicoil-noexp-msmarco-passage (Lin & Ma 2021: MS MARCO)"),
    "splade-v3": _mteb("splade_models.py", MSMARCO),
    "dpr": Training(("beir/nq/test",), "Karpukhin et al. (2020), multiset checkpoints: NQ, TriviaQA, WebQuestions, "
                                       "CuratedTREC (only NQ is one of the catalog's collections)"),
    "colbertv2": _mteb("pylate_models.py", MSMARCO),
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
    "me5-large": _mteb("e5_instruct.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test"),
    "gte-large-v1.5": Training((), "MTEB model metadata: training data not disclosed", complete=False),
    "bge-large-v1.5": _mteb("bge_models.py", "beir/nq/test"),
    "jina-embeddings-v3": _mteb("jina_models.py", MSMARCO, "beir/nq/test"),
    "nomic-embed-v1.5": _mteb("nomic_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                              "beir/quora/test"),
    "gtr-large": _mteb("sentence_transformers_models.py", MSMARCO, "beir/nq/test"),
    "instructor-large": Training((), "Su et al. (2023), MEDI: 330 datasets incl. retrieval sets; no per-collection "
                                     "list in MTEB's metadata", complete=False),
    "llm2vec": Training((), "the unsupervised MNTP checkpoint (MTEB lists the supervised variants' E5 data); which "
                            "adapter the entry loads decides", complete=False),
    "repllama": Training(_MS, "checkpoint castorini/repllama-v1-7b-lora-passage (Ma et al. 2024: MS MARCO passage)"),
    "gritlm": _mteb("gritlm_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test"),
    "qwen3-embedding-0.6b": _mteb("qwen3_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test",
                                  "beir/fever/test"),
    "nv-embed-v2": _mteb("nvidia_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                         "beir/fiqa/test", "beir/arguana/test"),
    "embeddinggemma": _mteb("google_text_embedding.py (GECKO_TRAINING_DATA)", "beir/nq/test", "beir/hotpotqa/test",
                            "beir/fever/test"),
    "kalm-embedding-v2.5": _mteb("kalm_models.py", MSMARCO, "beir/nq/test", "beir/hotpotqa/test", "beir/fever/test",
                                 "beir/fiqa/test", "beir/nfcorpus/test", "beir/quora/test", "beir/scifact/test",
                                 "beir/trec-covid/test", "beir/dbpedia-entity/test", CQADUPSTACK),
    "doct5query": Training(_MS, "Nogueira & Lin (2019): docTTTTTquery's T5 trained on MS MARCO; BM25 unsupervised"),
    "query2doc": Training((), "Qwen2.5-7B-Instruct (training data not disclosed) writes the pseudo-documents; BM25 "
                              "unsupervised", complete=False),
    "hyde": Training(_MS, "Contriever fine-tuned on MS MARCO (facebook/contriever-msmarco) encodes Qwen2.5-7B-"
                          "Instruct's hypothetical documents (training data not disclosed)", complete=False),
}


def in_domain(system: str, dataset: str) -> bool | None:
    """Whether the system's checkpoint was trained on this dataset's collection (None: unknown, or not a
    registered entry)."""
    t = TRAINING.get(system)
    return None if t is None else t.in_domain(dataset)


def flag(system: str, dataset: str) -> str:
    """'in-domain', 'zero-shot' or 'unknown'."""
    v = in_domain(system, dataset)
    return "unknown" if v is None else "in-domain" if v else "zero-shot"
