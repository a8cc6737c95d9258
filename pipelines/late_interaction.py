"""Late interaction: ColBERTv2 (Santhanam et al., NAACL 2022).

The official package (colbert-ai 0.2.22) fails on transformers 5 (`all_tied_weights_keys`, see
../shared/notes/offline-stack.md), and the rest of the stack (sentence-transformers 6, pyterrier-dr 0.8) is on
transformers 5, so ColBERTv2 runs through irgrid's engine: the checkpoint's BERT + its 128-d projection, ColBERT's
query ([unused0], [MASK]-augmented to the query length) and document ([unused1], punctuation skiplist) encoding, and
a PLAID-structured index (k-means centroids, candidate generation from the `ncells` nearest centroids per query
token, exact MaxSim over fp16 token vectors). It does not apply PLAID's residual compression (2 bits in the paper),
so its scores are exact MaxSim rather than PLAID's approximation.

Defaults follow ColBERT's own settings for k >= 1000 (card profile); the paper profile follows the release's
`src/models/colbert.py@4bedb75` (the official ColBERT), which the release's README names as what reproduces
ColBERTv2. The release's `src/run.py` still has a `colbert` branch importing src/models/colbert_ragatouille.py
(RAGatouille, queries prefixed "query: ", text only), but no run script of the release reaches it for the tables:
the README sends ColBERTv2 to colbert.py, whose per-dataset query lengths and PLAID settings the profile follows.
`ncells` may be a rule on the corpus size ([[more_than_docs, value], ...]), resolved against the opened index.

PLAID's `ndocs` (how many candidates its centroid-interaction stage keeps before exact scoring) is no option here:
irgrid scores every candidate of the probed cells exactly, so it would change cache keys and nothing else. The
paper's values, not reproduced: ndocs = ncells · 2^13 above 5M documents, else ncells · 2^12 (GET_ARGS), and
MS MARCO's ncells · 2^14; ColBERT's own default for k >= 1000: 4096 (SEARCHER).
"""

from __future__ import annotations

from irgrid.core.modelref import ModelRef
from irgrid.core.paper_code import COLBERT_PY, RUN_PY, code, paper
from irgrid.core.profiles import Setting
from irgrid.dense.entry import dense_retriever
from irgrid.dense.spec import EncoderSpec

GET_ARGS = "_get_args(): ncells 4 if >= 5M docs else 2; ndocs = ncells * 2^13 if >= 5M docs else ncells * 2^12"
SEARCHER = "colbert-ai Searcher.configure defaults for k >= 1000 (stanford-futuredata/ColBERT colbert/searcher.py)"

COLBERTV2 = EncoderSpec(
    name="colbertv2",
    query_model=ModelRef("colbert-ir/colbertv2.0", "c1e84128e85ef755c096a95bdb06b47793b13acf", arch="bert",
                         tiny=(("colbert_dim", 8),)),
    loader="colbert", pooling="colbert", normalize=True, similarity="dot", query_max_length=32, doc_max_length=180,
    colbert={"q_marker": "[unused0]", "d_marker": "[unused1]", "mask_punctuation": True},
    allow_unexpected=("linear.*", "*pooler.*"),  # the projection is loaded apart; the pooler is unused
    profiles={
        "paper": {
            "doc_max_length": paper(300, COLBERT_PY, "run_colbert(): ColBERTConfig(doc_maxlen=300)"),
            "ncells": paper([[4_999_999, 4], [0, 2]], COLBERT_PY, GET_ARGS),
            "query_max_length": Setting(32, code(COLBERT_PY, "run_colbert(): query_maxlen = 32; 300 if 'arguana' in "
                                                              "dataset_label; 64 if 'climate-fever' in dataset_label"),
                                        per_dataset={"beir/arguana": 300, "beir/climate-fever": 64}),
        },
        "card": {
            "query_max_length": Setting(32, "colbert-ir/colbertv2.0 artifact query_maxlen 32 (ColBERT's default)"),
            "doc_max_length": Setting(180, "MTEB colbert_models max_tokens 180 / colbertv2.0 artifact doc_maxlen"),
            "ncells": Setting(4, SEARCHER),
        },
    },
    citation="Santhanam et al., NAACL 2022; colbert-ir/colbertv2.0 (revision from MTEB's registry)",
    notes="query_maxlen 32 with [MASK] augmentation, 128-d normalised token vectors, MaxSim, k-means 4 iterations "
          f"(paper and ours, {COLBERT_PY} ColBERTConfig(kmeans_niters=4)); documents title + text; the paper profile "
          "runs the release's per-dataset query_maxlen (ArguAna 300, Climate-FEVER 64, else 32). Not followed: "
          f"{RUN_PY}'s colbert branch (src/models/colbert_ragatouille.py, 'query: ' prefix; the README names "
          "colbert.py). Not reproduced: the paper's 2-bit residual compression (nbits=2) and PLAID's ndocs "
          "candidate cap (paper: ncells * 2^13 above 5M documents, else "
          f"ncells * 2^12, MS MARCO ncells * 2^14, {COLBERT_PY} {GET_ARGS}): every candidate of the probed cells "
          "is scored exactly",
)

dense_retriever(COLBERTV2, architecture="encoder-only", paper_name="ColBERTv2", family="late-interaction",
                index_params={"kmeans_niter": 4}, options={"ncells": 4})
