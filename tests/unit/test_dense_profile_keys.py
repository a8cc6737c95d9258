"""Dense entry profiles as an experiment sees them: cache keys follow values, profile errors, corpus-size rules."""

from __future__ import annotations

import pytest

from irgrid.core.retrievers import RETRIEVERS
from irgrid.dense.entry import by_size
from irgrid.dense.spec import spec_of
from irgrid.runner import experiment


# -- keys follow values --------------------------------------------------------------------------------------------
def test_profiles_that_agree_share_every_cache_key():
    entry = RETRIEVERS.get("tas-b")
    paper, card = entry.with_profile("paper"), entry.with_profile("card")
    assert paper.key() != card.key() and paper.index.key() != card.index.key()  # dtype (and the paper's depth) differ
    # the differences (dtype, depth, the release's title and scoring quirks) set to the card's values
    differing = ("dtype", "num_results", "none_title", "keep_empty_title", "score_dtype")
    assert {k for k in paper.options if paper.options[k] != card.options[k]} == set(differing)
    agreed = paper.with_options(**{k: card.options[k] for k in differing})
    assert agreed.key() == card.key() and agreed.index.key() == card.index.key()


@pytest.mark.parametrize("name", ["bge-large-v1.5", "colbertv2"])
def test_batch_size_sets_the_documents_encoding_batch_too(name):
    """An experiment's `batch_size` reached only the queries of a dense entry; its documents were encoded at the
    entry's default, silently. The index recipe, keyed by its batch, now follows the option."""
    entry = RETRIEVERS.get(name)
    default = int(entry.options["batch_size"])
    changed = entry.with_options(batch_size=default * 2)
    assert changed.options["batch_size"] == changed.index.params["batch_size"] == default * 2
    assert changed.index.key() != entry.index.key() and changed.key() != entry.key()
    again = changed.with_options(batch_size=default)
    assert again.key() == entry.key() and again.index.key() == entry.index.key()
    paper = entry.with_profile("paper").with_options(batch_size=7)
    assert paper.index.params["batch_size"] == 7 and paper.profile == "paper"


def test_hyde_keeps_batch_size_as_its_own_knob():
    """HyDE takes its encoder entry's knobs but not the settings that re-derive it; batch_size re-derives a dense
    entry (its documents' batch) yet stays HyDE's query-side knob (it was dropped: KeyError at query time)."""
    hyde = RETRIEVERS.get("hyde")
    assert hyde.options["batch_size"] == RETRIEVERS.get("contriever").options["batch_size"]
    assert hyde.with_options(batch_size=4).options["batch_size"] == 4
    assert hyde.with_profile("paper").options["batch_size"] == hyde.options["batch_size"]


def test_a_query_side_difference_keeps_the_document_index():
    entry = RETRIEVERS.get("bge-large-v1.5")
    changed = entry.with_options(query_template="{text}")
    assert changed.index.key() == entry.index.key() and changed.key() != entry.key()
    assert spec_of(changed).render("q", "q") == "q"


def test_experiment_holds_both_profiles_of_one_entry():
    spec = experiment.from_dict({
        "datasets": ["beir/scifact/test"], "profile": "card",
        "retrievers": [{"name": "nv-embed-v2", "profile": "paper", "as": "nv-embed-v2-paper"},
                       {"name": "nv-embed-v2", "as": "nv-embed-v2-card"},
                       {"name": "nv-embed-v2", "profile": "paper", "as": "nv-embed-v2-paper-8k",
                        "options": {"query_max_length": 8192}},
                       "bm25"],
    }, source="exp.yaml")
    paper, card, longer, bm25 = spec.retrievers
    assert (paper.name, paper.profile, card.profile, bm25.profile) == ("nv-embed-v2-paper", "paper", "card", "card")
    # the release (nvembed.py@4bedb75) sends the card's prompt and fields, with 512 tokens and its own prompt mask
    assert spec_of(paper).render("q?", "q") == spec_of(card).render("q?", "q") == \
        "Instruct: Given a question, retrieve passages that answer the question\nQuery: q?</s>"
    assert (spec_of(paper).query_max_length, spec_of(card).query_max_length) == (512, 32768)
    assert (spec_of(paper).prompt_mask_specials, spec_of(card).prompt_mask_specials) == (False, True)
    assert spec_of(paper, "d").doc_fields == spec_of(card, "d").doc_fields == ("title", "text")
    assert paper.key() != card.key() and card.key() == RETRIEVERS.get("nv-embed-v2").key()
    # options apply on top of the profile: the paper's prompt is kept, the length is the item's
    assert longer.profile == "paper" and spec_of(longer).query_max_length == 8192
    assert spec_of(longer).query_template == spec_of(paper).query_template
    assert experiment.from_dict({"datasets": ["beir/scifact/test"], "profile": "paper",
                                 "retrievers": ["gte-large-v1.5"]}).retrievers[0].options["query_max_length"] == 512


def test_unknown_profile_names_file_and_key():
    with pytest.raises(experiment.ExperimentError, match=r"exp\.yaml: retrievers\[0\]: profile: .*'papr'.*"
                                                         r"Did you mean 'paper'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"],
                              "retrievers": [{"name": "dpr", "profile": "papr"}]}, source="exp.yaml")
    with pytest.raises(experiment.ExperimentError, match=r"exp\.yaml: profile: .*'crad'.*Did you mean 'card'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"], "profile": "crad", "retrievers": ["dpr"]},
                             source="exp.yaml")
    with pytest.raises(experiment.ExperimentError, match=r"retrievers\[0\]: .*no option\(s\) 'dtyp'"):
        experiment.from_dict({"datasets": ["beir/scifact/test"],
                              "retrievers": [{"name": "dpr", "options": {"dtyp": "fp32"}}]}, source="exp.yaml")


def test_corpus_size_rules():
    rule = [[4_999_999, 4], [0, 2]]
    assert (by_size(rule, 5_183, "ncells"), by_size(rule, 8_841_823, "ncells"), by_size(3, 10, "x")) == (2, 4, 3)
    with pytest.raises(ValueError, match="no row for 0 documents"):
        by_size([[0, 2]], 0, "ncells")



def test_every_declared_checkpoint_layout_has_one_loader():
    from irgrid.dense.checkpoints import CHECKPOINT_LOADERS
    from irgrid.dense.spec import LOADERS

    assert set(CHECKPOINT_LOADERS) == set(LOADERS)


def test_kalm_paper_profile_runs_the_backbone_causally_and_leaves_card_keys_alone():
    """The release's plain SentenceTransformer load of KaLM's qwen2 folder is causal (transformers 4.57.1): the
    paper profile sets `bidirectional: false`; the card keeps the entry's bidirectional backbone and, the option
    being at its late default there, no key of the card changes."""
    from irgrid.core.profiles import keyed
    from irgrid.core.retrievers import EntryError

    entry = RETRIEVERS.get("kalm-embedding-v2.5")
    paper, card = entry.with_profile("paper"), entry.with_profile("card")
    assert spec_of(paper).bidirectional is False and spec_of(card).bidirectional is True
    assert "bidirectional" not in keyed(card.keyed_options()) and keyed(paper.keyed_options())["bidirectional"] is False
    assert paper.index.key() != card.index.key()  # the document vectors differ, so does the index
    restored = paper.with_options(bidirectional=True)
    assert spec_of(restored).bidirectional is True and restored.index.key() != paper.index.key()
    with pytest.raises(EntryError, match="bidirectional is False, True or 'own'"):
        entry.with_options(bidirectional="sideways")
