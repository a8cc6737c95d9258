"""The per-text vocabulary head (irgrid.sparse.splade._pooled_batch, issue 41 item 10) gives exactly what the
former path gave: the full [batch, tokens, vocabulary] logits, padding masked to -inf, max-pooled. Real tiny SPLADE
weights on SciFact texts: pooled floats bit-identical, the impacts after quantisation identical, and a run over a
small slice (PISA impact index, the entry's own query side) identical to the one from the former encoder."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
import torch

from irgrid.data.datasets import get
from irgrid.models.resolver import resolve
from irgrid.pipelines.learned_sparse import load_splade
from irgrid.sparse.splade import MaxFirstSpladeEncoder, encode_max_first, to_toks


def reference_max_first(splade, texts: list[str], batch_size: int, scale: float) -> torch.Tensor:
    """The former implementation, verbatim: full logits over every position, masked, max-pooled."""
    model, tokenizer = splade.model, splade.tokenizer
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.zeros(len(texts), model.config.vocab_size)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = order[start: start + batch_size]
            enc = tokenizer([texts[i] for i in idx], add_special_tokens=True, padding="longest", truncation=True,
                            max_length=splade.max_length, return_tensors="pt").to(splade.device)
            logits = model(**enc).logits
            logits.masked_fill_(~enc["attention_mask"].bool().unsqueeze(-1), float("-inf"))
            out[idx] = (torch.log1p(torch.relu(logits.amax(dim=1))) * scale).float().cpu()
    return out


def reference_to_toks(reps: torch.Tensor, reverse_vocab: dict[int, str], integer: bool, rounding: str,
                      top_k: int | None) -> list[dict]:
    """The former per-row sparsification, verbatim."""
    result = []
    for row in reps:
        cols = torch.nonzero(row).squeeze(1)
        weights = row[cols]
        if integer:
            ints = weights.trunc() if rounding == "trunc" else torch.round(weights)
            keep = ints > 0
            cols, weights, ints = cols[keep], weights[keep], ints[keep]
            if top_k and len(cols) > top_k:
                order = sorted(range(len(cols)), key=lambda i: (-float(weights[i]), int(cols[i])))[:top_k]
                order.sort()
                cols, ints = cols[order], ints[order]
            result.append({reverse_vocab[int(c)]: int(w) for c, w in zip(cols.tolist(), ints.tolist())})
        else:
            keep = weights > 0
            result.append({reverse_vocab[int(c)]: float(w) for c, w in zip(cols[keep].tolist(), weights[keep].tolist())})
    return result


@pytest.fixture(scope="module")
def splade():
    return load_splade(resolve("rasyosef/splade-tiny").location, None, 256, "cpu")


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return list(itertools.islice(get("beir/scifact/test").docs(), 96))


def test_pooled_weights_bit_identical_to_full_logits(splade, docs):
    texts = [d["text"] for d in docs] + ["", "a", "short one"]  # lengths from 2 tokens (specials) to 256
    for batch_size in (1, 7, 32):
        new = encode_max_first(splade, texts, batch_size, 100.0)
        old = reference_max_first(splade, texts, batch_size, 100.0)
        assert torch.equal(new, old), (batch_size, (new - old).abs().max())
    assert (new > 0).sum(dim=1).min() > 0


@pytest.mark.parametrize("rounding,top_k", [("trunc", None), ("round", 64), ("trunc", 16)])
def test_impacts_identical_after_quantisation(splade, docs, rounding, top_k):
    reverse = {v: k for k, v in splade.tokenizer.get_vocab().items()}
    texts = [d["text"] for d in docs[:48]]
    reps = reference_max_first(splade, texts, 16, 100.0)
    new = MaxFirstSpladeEncoder(splade, "d", batch_size=16, rounding=rounding, top_k=top_k)(pd.DataFrame(docs[:48]))
    old = reference_to_toks(reps, reverse, True, rounding, top_k)
    assert new["toks"].tolist() == old
    assert [list(t) for t in new["toks"]] == [list(t) for t in old]  # same term order
    assert to_toks(reps, reverse, False) == reference_to_toks(reps, reverse, False, rounding, top_k)
    if top_k:
        assert max(len(t) for t in old) == top_k


def test_run_on_a_slice_identical(splade, docs, tmp_path):
    from pyterrier_pisa import PisaIndex

    from irgrid.sparse.pisa_writer import write_impact_index

    reverse = {v: k for k, v in splade.tokenizer.get_vocab().items()}
    texts = [d["text"] for d in docs]
    old_toks = reference_to_toks(reference_max_first(splade, texts, 64, 100.0), reverse, True, "trunc", None)
    new_toks = MaxFirstSpladeEncoder(splade, "d", batch_size=64)(pd.DataFrame(docs))["toks"].tolist()
    queries = get("beir/scifact/test").topics().head(40)[["qid", "query"]]
    old_queries = queries.assign(query_toks=reference_to_toks(
        reference_max_first(splade, queries["query"].tolist(), 64, 100.0), reverse, False, "trunc", None))
    new_queries = MaxFirstSpladeEncoder(splade, "q", batch_size=64, scale=100.0)(queries)
    runs = []
    for name, toks, topics in (("old", old_toks, old_queries), ("new", new_toks, new_queries)):
        write_impact_index(tmp_path / name, ({"docno": d["docno"], "toks": t} for d, t in zip(docs, toks)),
                           scale=1.0)
        index = PisaIndex(str(tmp_path / name), stemmer="none", stops="none")
        runs.append(index.quantized(num_results=100)(topics))
    old_run, new_run = runs
    assert len(old_run) > 100
    pd.testing.assert_frame_equal(old_run.reset_index(drop=True), new_run.reset_index(drop=True))
