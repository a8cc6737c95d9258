"""The encoding engine: equal to pyterrier-dr on real all-MiniLM-L6-v2 weights, out-of-memory back-off, length
batching, bidirectional decoders, prompt-excluded pooling, and exact search equal to brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid.dense.engine import Engine
from irgrid.dense.spec import ENCODERS


@pytest.fixture(scope="module")
def scifact_docs():
    from dense_helpers import scifact_slice

    return scifact_slice(n_queries=10, n_docs=100)


@pytest.fixture(scope="module")
def minilm_engine():
    from irgrid.models.resolver import resolve

    spec = ENCODERS.get("all-minilm-l6-v2")
    return Engine(spec, "d", resolve(spec.document_model), device="cpu", batch_size=32)


@pytest.mark.slow
@pytest.mark.heavy  # ~50 s; make test keeps MiniLM = MTEB on SciFact (test_scifact) through the same engine
def test_engine_equals_pyterrier_dr_on_real_minilm(scifact_docs, minilm_engine, tmp_path):
    from dense_helpers import ndcg10, run_entry
    from pyterrier_dr import FlexIndex, SBertBiEncoder

    docs, topics, qrels = scifact_docs
    vecs = np.concatenate([v for _, v in minilm_engine.stream(docs)])
    sbert = SBertBiEncoder(minilm_engine.replicas[0].resolved.location, batch_size=32, device="cpu")
    ref = np.stack(sbert.doc_encoder()(pd.DataFrame(docs))["doc_vec"])
    assert vecs.shape == ref.shape == (len(docs), 384)
    assert np.abs(vecs - ref).max() < 1e-5
    # the whole entry (engine + exact search) against pyterrier-dr's encoder + FlexIndex numpy retriever
    res, _ = run_entry("all-minilm-l6-v2", docs, topics, tmp_path / "engine")
    index = FlexIndex(str(tmp_path / "dr"))
    (sbert.doc_encoder() >> index.indexer()).index(docs)
    res_dr = (sbert.query_encoder() >> index.np_retriever(num_results=1000)).transform(topics)
    assert abs(ndcg10(res, qrels) - ndcg10(res_dr, qrels)) < 0.001
    top_engine = res[res["rank"] < 10].sort_values(["qid", "rank"])["docno"].tolist()
    top_dr = res_dr[res_dr["rank"] < 10].sort_values(["qid", "rank"])["docno"].tolist()
    assert top_engine == top_dr


def test_out_of_memory_halves_the_batch_and_is_recorded(minilm_engine, monkeypatch, scifact_docs):
    import torch

    texts = [d["text"] for d in scifact_docs[0][:40]]
    expected = minilm_engine.encode(texts)
    replica = minilm_engine.replicas[0]
    real = replica.forward
    sizes: list[int] = []

    def flaky(batch):
        sizes.append(len(batch))
        if len(batch) > 8:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
        return real(batch)

    monkeypatch.setattr(replica, "forward", flaky)
    before = minilm_engine.stats.oom_backoffs
    old_bs = minilm_engine.batch_size
    try:
        got = minilm_engine.encode(texts)
    finally:
        minilm_engine.batch_size = old_bs
    assert np.allclose(got, expected, atol=1e-5)  # same vectors, smaller batches
    last_failure = max(i for i, n in enumerate(sizes) if n > 8)
    assert sizes[last_failure + 1:] and max(sizes[last_failure + 1:]) <= 8  # backed off for good, not per batch
    assert minilm_engine.stats.oom_backoffs > before
    assert minilm_engine.stats.batch_size <= 8
    minilm_engine.stats.batch_size = old_bs


def test_other_errors_are_not_swallowed(minilm_engine, monkeypatch):
    def broken(batch):
        raise ValueError("not an OOM")

    monkeypatch.setattr(minilm_engine.replicas[0], "forward", broken)
    with pytest.raises(ValueError, match="not an OOM"):
        minilm_engine.encode(["a text"])


def test_batches_are_formed_by_length(minilm_engine):
    tokenized = [[1] * n for n in (5, 300, 7, 290, 6, 310)]
    batches = minilm_engine._batches(tokenized)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for b in batches:  # long texts never share a batch with short ones when that would mostly pad
        lengths = [len(tokenized[i]) for i in b]
        assert max(lengths) * len(lengths) <= minilm_engine.batch_size * 310


def test_bidirectional_decoder_sees_later_tokens(monkeypatch):
    """Decoders made bidirectional (GritLM, LLM2Vec, NV-Embed) change an early token's state when a later token
    changes; causal ones (RepLLaMA) do not."""
    import torch

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    def first_state(name):
        spec = ENCODERS.get(name)
        side = SideModel(spec, "d", resolve(spec.document_model.as_tiny()), "cpu")
        outs = []
        for last in (2000, 3000):
            ids = torch.tensor([[101, 1996, 2088, last]])
            with torch.inference_mode():
                outs.append(side.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0, 1])
        return torch.allclose(outs[0], outs[1], atol=1e-6)

    assert not first_state("gritlm") and not first_state("llm2vec")
    assert first_state("repllama")


def test_prompt_tokens_are_excluded_from_pooling(monkeypatch):
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    from irgrid.dense.model import SideModel
    from irgrid.models.resolver import resolve

    spec = ENCODERS.get("instructor-large")
    side = SideModel(spec, "q", resolve(spec.query_model.as_tiny()), "cpu")
    prompt = spec.query_template.split("{text}")[0]  # the card's instruction (the paper's final code sent none)
    n_prompt = len(side.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert side._prefix_tokens == n_prompt + 1  # [CLS] of the tiny model's WordPiece tokenizer + the instruction


def test_streaming_pins_glibc_mmap_threshold():
    """Streaming encoding pins glibc's mmap threshold (the dynamic one fragmented the heap: RSS grew per document)."""
    import platform

    from irgrid.dense import engine as encoders

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("only glibc has a dynamic mmap threshold")
    assert encoders._fixed_mmap_threshold() is True
    assert encoders.MMAP_THRESHOLD == 64 * 1024


def test_late_interaction_kmeans_trains_on_a_document_sample(tmp_path):
    """ColBERTv2's sample: min(n, 1 + 16 sqrt(120 n)) random documents' token vectors train the k-means."""
    from irgrid.dense.search import LateInteractionIndex, kmeans_sample_docs

    assert kmeans_sample_docs(1000).tolist() == list(range(1000))  # small corpora: every document
    big = kmeans_sample_docs(100_000)
    assert len(big) == 1 + int(16 * (120 * 100_000) ** 0.5) == 55_426
    assert (np.diff(big) > 0).all() and big[-1] < 100_000 and big.tolist() == kmeans_sample_docs(100_000).tolist()
    rng = np.random.default_rng(3)
    n = 40_000
    vecs = rng.standard_normal((2 * n, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    meta = LateInteractionIndex(tmp_path / "late").build([([f"d{i}" for i in range(n)],
                                                          [vecs[2 * i:2 * i + 2] for i in range(n)])])
    assert meta["kmeans_sample_docs"] == len(kmeans_sample_docs(n)) < n
    assert meta["kmeans_sample_tokens"] == 2 * meta["kmeans_sample_docs"] and meta["tokens"] == 2 * n
    assert np.load(tmp_path / "late" / "assign.npy").shape == (2 * n,)  # every token vector is still assigned
