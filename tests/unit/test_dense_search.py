"""Exact dense search and late-interaction MaxSim against brute force on random vectors (no model, no data)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def test_exact_retriever_equals_brute_force(tmp_path):
    from pyterrier_dr import FlexIndex

    from irgrid.dense.search import ExactRetriever

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((500, 16)).astype(np.float32)
    FlexIndex(str(tmp_path / "f")).index([{"docno": f"d{i}", "doc_vec": v} for i, v in enumerate(vecs)])
    retr = ExactRetriever(FlexIndex(str(tmp_path / "f")), num_results=50, device="cpu")
    assert retr.backend == "faiss-cpu-flat"
    q = rng.standard_normal((3, 16)).astype(np.float32)
    scores, ids = retr.search(q)
    brute = q @ vecs.T
    for j in range(3):
        assert ids[j].tolist() == np.argsort(-brute[j], kind="stable")[:50].tolist()
        assert np.allclose(scores[j], np.sort(brute[j])[::-1][:50], atol=1e-4)
    s1, i1 = retr.search_one(q[1])
    assert i1.tolist() == ids[1].tolist()
    out = retr.transform(pd.DataFrame({"qid": ["1"], "query": ["x"], "query_vec": [q[0]]}))
    assert out["docno"].tolist()[:3] == [f"d{i}" for i in ids[0][:3]] and out["rank"].tolist()[:2] == [0, 1]


def test_late_interaction_maxsim_is_exact(tmp_path):
    from irgrid.dense.search import LateInteractionIndex

    rng = np.random.default_rng(1)

    def unit(n):
        v = rng.standard_normal((n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    docs = [unit(int(n)) for n in rng.integers(1, 30, 120)]
    index = LateInteractionIndex(tmp_path / "late")
    meta = index.build([([f"d{i}" for i in range(60)], docs[:60]), ([f"d{i}" for i in range(60, 120)], docs[60:])])
    assert meta["kmeans_niter"] == 4 and meta["docs"] == 120
    retr = index.retriever(num_results=10, ncells=10**6)  # all cells: every document is a candidate
    q = unit(32)
    cands = retr.candidates(q)
    assert cands.tolist() == list(range(120))
    naive = np.array([(q @ d.astype(np.float16).astype(np.float32).T).max(axis=1).sum() for d in docs])
    assert np.allclose(retr.maxsim(q, cands, block=7), naive, atol=1e-4)
    out = retr.transform(pd.DataFrame({"qid": ["1"], "query": ["x"], "query_embs": [q]}))
    assert out["docno"].tolist() == [f"d{i}" for i in np.argsort(-naive, kind="stable")[:10]]

