"""Sparse, learned-sparse and expansion profiles without models: every setting names its source, quantised impacts
per profile, cache keys that follow values."""

from __future__ import annotations

import pytest
import torch

import irgrid
from irgrid.core.profiles import PROFILES
from irgrid.sparse.impact import impacts
from irgrid.sparse.splade import to_toks

LEARNED = ["splade-v3", "splade-tiny", "unicoil", "sparta", "deepct"]
MINE = ["bm25", *LEARNED, "doct5query", "query2doc", "hyde"]
REPO = "valentinsvelev/retriever-evaluation:src/"


def stage_params(name: str, profile: str) -> dict:
    return dict(irgrid.retriever(name).with_profile(profile).index.stage.params)


def quantise(name: str, profile: str, weights: dict[str, float]) -> dict[str, int]:
    p = stage_params(name, profile)
    return impacts(weights, p["scale"], p["top_k"], p["rounding"], skip=p.get("skip"))


# -- impact quantisation per profile ------------------------------------------------------------------------------
WEIGHTS = {"dna": 3.999, "cell": 1.2345, ".": 0.9, "cells": 0.8, "-": 0.05, "##ing": 0.0149, "the": 0.004}


# -- sources ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MINE)
def test_paper_settings_name_the_repo_file_and_card_settings_a_source(name):
    entry = irgrid.retriever(name)
    assert set(entry.profiles) == set(PROFILES)
    for key, setting in entry.profiles["paper"].items():
        assert setting.source.startswith(REPO) and ".py" in setting.source, (name, key, setting.source)
    for key, setting in entry.profiles["card"].items():
        assert not setting.source.startswith(REPO), (name, key, setting.source)  # the card is not the paper's code
    # the card's values are the entry's defaults: the card profile is the plain entry
    assert entry.with_profile("card").key() == entry.key()


def test_unicoil_impacts():
    # paper: ×100 rounded, punctuation / non-word tokens dropped, top 500 (src/encoders/sparse_encoder.py)
    assert quantise("unicoil", "paper", WEIGHTS) == {"dna": 400, "cell": 123, "cells": 80, "##ing": 1}
    assert quantise("unicoil", "card", WEIGHTS) == {"dna": 400, "cell": 123, ".": 90, "cells": 80, "-": 5, "##ing": 1}
    many = {f"t{i:03d}": (i + 1) / 100 for i in range(600)}
    paper, card = quantise("unicoil", "paper", many), quantise("unicoil", "card", many)
    assert len(paper) == 500 and min(paper.values()) == 101 and len(card) == 600


def test_sparta_impacts():
    # paper: top 512 unscaled weights, truncated to integers by Anserini's impact index
    assert quantise("sparta", "paper", WEIGHTS) == {"dna": 3, "cell": 1}
    assert quantise("sparta", "card", WEIGHTS) == {"dna": 400, "cell": 123, ".": 90, "cells": 80, "-": 5, "##ing": 1}
    many = {f"t{i:04d}": 1 + i / 1000 for i in range(2500)}
    paper, card = quantise("sparta", "paper", many), quantise("sparta", "card", many)
    assert len(paper) == 512 and set(paper.values()) == {2, 3}  # 1.988 .. 3.499 truncated
    assert len(card) == 2000 and min(card.values()) == round(100 * (1 + 500 / 1000))
    assert stage_params("sparta", "paper")["max_length"] == stage_params("sparta", "card")["max_length"] == 500


@pytest.mark.parametrize("name", ["splade-v3", "splade-tiny"])
def test_splade_impacts(name):
    vocab = {i: f"w{i}" for i in range(400)}
    row = torch.zeros(1, 400)
    row[0, :6] = torch.tensor([0.0, 123.5, 99.6, 0.4, 0.6, 250.2])  # already ×100, as the encoder passes them
    row[0, 6:306] = torch.linspace(1.0, 30.9, 300)
    for profile, rounding, expect in (("paper", "round", {"w1": 124, "w2": 100, "w4": 1, "w5": 250}),
                                      ("card", "trunc", {"w1": 123, "w2": 99, "w5": 250})):
        p = stage_params(name, profile)
        assert p["rounding"] == rounding and p["scale"] == 100.0
        head = to_toks(row[:, :6], vocab, integer=True, rounding=p["rounding"], top_k=p["top_k"])[0]
        assert head == expect
        full = to_toks(row, vocab, integer=True, rounding=p["rounding"], top_k=p["top_k"])[0]
        assert len(full) == (256 if profile == "paper" else 303)  # paper: top 256 (code; the text says 512)
    assert to_toks(row[:, :6], vocab, integer=False)[0] == pytest.approx(
        {"w1": 123.5, "w2": 99.6, "w3": 0.4, "w4": 0.6, "w5": 250.2})  # queries keep floats


def test_greedy_decoding_keeps_its_cache_key():
    """Greedy decoding's configuration is the one keys were made of before the sampling knobs existed (then a
    second `Decoding` class in `core`); sampling knobs enter the key only when set."""
    from irgrid.generation.spec import Decoding

    greedy = {"max_new_tokens": 128, "do_sample": False, "seed": 0}
    assert Decoding(max_new_tokens=128).config() == greedy
    assert Decoding(max_new_tokens=128, batch_size=32, top_p=None).config() == greedy  # batch size is no key part
    assert Decoding(do_sample=True, temperature=0.7).config() == {**greedy, "do_sample": True, "temperature": 0.7}


# -- cache keys ---------------------------------------------------------------------------------------------------
def test_profiles_that_agree_share_caches():
    bm25 = irgrid.retriever("bm25")
    assert bm25.with_profile("card").key() == bm25.key()
    # the paper profile differs only by its depth (1001, irgrid.core.profiles.COMMON): the index is shared
    assert dict(bm25.with_profile("paper").options) == {**bm25.options, "num_results": 1001}
    assert bm25.with_profile("paper").index.key() == bm25.index.key()
    deepct = irgrid.retriever("deepct")
    # a query-side-only change (BM25 k1/b) keeps the document stage and index
    assert deepct.with_options(k1=0.9, b=0.4).index.key() == deepct.index.key()
    assert deepct.with_profile("paper").index.key() != deepct.index.key()
    # query2doc searches the bm25 index under both profiles; HyDE keeps the contriever index
    for profile in PROFILES:
        assert irgrid.retriever("query2doc").with_profile(profile).index == bm25.index
        assert (irgrid.retriever("hyde").with_profile(profile).index
                == irgrid.retriever("contriever").with_profile(profile).index)
    for name in LEARNED:
        entry = irgrid.retriever(name)
        assert entry.with_profile("paper").with_profile("paper").key() == entry.with_profile("paper").key()
        assert entry.with_profile("paper").index.stage.key() != entry.index.stage.key(), name

