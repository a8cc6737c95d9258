"""The retriever entries, grouped like Table 1 of the paper. Importing this package registers them all."""

# order matters only where an entry wraps another (expansion's HyDE wraps the dense `contriever`)
from irgrid.pipelines import (  # noqa: F401
    dense_decoder,
    dense_encoder,
    expansion,
    late_interaction,
    learned_sparse,
    rerankers,
    sparse,
)
