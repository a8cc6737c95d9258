"""The retriever entries, grouped like Table 1 of the paper. Importing this package registers them all."""

from irgrid.pipelines import dense_encoder, learned_sparse, sparse  # noqa: F401
