"""The retriever entries, grouped like Table 1 of the paper. Importing this package registers them all."""

# any order: an entry that wraps another by name (HyDE over `contriever`) resolves it on first lookup
# (irgrid.core.retrievers.register_lazy); this order is the listing's (`irgrid list`)
from irgrid.pipelines import (  # noqa: F401
    checkpoints,
    dense_decoder,
    dense_encoder,
    expansion,
    late_interaction,
    learned_sparse,
    rerankers,
    sparse,
    training,
)
