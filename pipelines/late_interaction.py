"""Late interaction: ColBERTv2 (Santhanam et al., NAACL 2022).

The paper runs the official ColBERT code with the authors' hyper-parameters and k-means fixed to 4 iterations.
The official package (colbert-ai 0.2.22) fails on transformers 5 (`all_tied_weights_keys`, see
../shared/notes/offline-stack.md), and the rest of the stack (sentence-transformers 6, pyterrier-dr 0.8) is on
transformers 5, so ColBERTv2 runs through irgrid's engine: the checkpoint's BERT + its 128-d projection, ColBERT's
query ([unused0], [MASK]-augmented to 32 tokens) and document ([unused1], punctuation skiplist, 180 tokens)
encoding, and a PLAID-structured index (k-means centroids with niter=4, candidate generation from the 4 nearest
centroids per query token as in ColBERT's search for k >= 1000, exact MaxSim over fp16 token vectors). It does not
apply PLAID's 2-bit residual compression, so its scores are exact MaxSim rather than PLAID's approximation.
"""

from __future__ import annotations

from irgrid.dense_entry import dense_retriever
from irgrid.encoders import EncoderSpec
from irgrid.retrievers import ModelRef

COLBERTV2 = EncoderSpec(
    name="colbertv2",
    query_model=ModelRef("colbert-ir/colbertv2.0", "c1e84128e85ef755c096a95bdb06b47793b13acf", arch="bert",
                         tiny=(("colbert_dim", 8),)),
    loader="colbert", pooling="colbert", normalize=True, similarity="dot", query_max_length=32, doc_max_length=180,
    colbert={"q_marker": "[unused0]", "d_marker": "[unused1]", "mask_punctuation": True},
    citation="Santhanam et al., NAACL 2022; colbert-ir/colbertv2.0 (revision from MTEB's registry)",
    notes="query_maxlen 32 with [MASK] augmentation, doc_maxlen 180 (MTEB max_tokens), 128-d normalised token "
          "vectors, MaxSim; k-means 4 iterations as in the paper",
)

dense_retriever(COLBERTV2, architecture="encoder-only", paper_name="ColBERTv2", family="late-interaction",
                index_params={"kmeans_niter": 4}, options={"ncells": 4, "ndocs": 4096})
