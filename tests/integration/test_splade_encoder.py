"""Our max-first SPLADE encoder must give pyterrier-splade's vectors (real tiny SPLADE weights)."""

from __future__ import annotations

import itertools

import pandas as pd

from irgrid.data.datasets import get
from irgrid.models.resolver import resolve
from irgrid.pipelines.learned_sparse import load_splade
from irgrid.sparse.splade import MaxFirstSpladeEncoder


def test_matches_pyterrier_splade_on_scifact():
    splade = load_splade(resolve("rasyosef/splade-tiny").location, None, 256, "cpu")
    docs = pd.DataFrame(itertools.islice(get("beir/scifact/test").docs(), 48))
    ours = MaxFirstSpladeEncoder(splade, "d", batch_size=16)(docs)["toks"].tolist()
    theirs = splade.doc_encoder(batch_size=16)(docs)["toks"].tolist()
    assert len(ours) == len(theirs) == 48
    differing = 0
    for a, b in zip(ours, theirs):
        assert len(a) > 20
        for term in set(a) | set(b):
            diff = abs(a.get(term, 0) - b.get(term, 0))
            assert diff <= 1  # int truncation of a weight within float rounding of an integer boundary
            differing += diff
    total = sum(len(a) for a in ours)
    assert differing <= 0.001 * total, (differing, total)

    queries = pd.DataFrame({"qid": ["1", "2"], "query": ["0-dimensional biomaterials", "white matter"]})
    q_ours = MaxFirstSpladeEncoder(splade, "q")(queries)["query_toks"].tolist()
    q_theirs = splade.query_encoder()(queries)["query_toks"].tolist()
    for a, b in zip(q_ours, q_theirs):
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-3 for k in a)
    assert len(MaxFirstSpladeEncoder(splade, "q")(queries.head(0))) == 0
