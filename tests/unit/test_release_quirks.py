"""The release's quirks as named settings of the `paper` profile (irgrid.core.profiles.QUIRKS): on there, off in
`card`, keyed only when on; and the document text each dense entry builds from a title that is absent (a
title-less corpus: MS MARCO, LoTTE, FiQA, Quora), empty or present, against the line of the release that formats it
(src/encoders/dense_encoder.py@4bedb75 `f'{title} {text}'`, DPR's `f'{title} {sep} {text}'`, EmbeddingGemma's
`f"title: {title if title is not None else 'none'} | text: {text}"`, src/models/*.py
`f"{doc.get('title', '')} {doc.get('text', '')}".strip()`), with DataHandler's None for a missing title."""

from __future__ import annotations

import pytest

from irgrid.core.profiles import QUIRKS, keyed
from irgrid.core.retrievers import RETRIEVERS, EntryError, OptionValueError, get
from irgrid.dense.spec import spec_of

TEXT = "Floods rise. Ünïcode"
# the irgrid record of a document (irgrid.data.doc_fields: no 'title' key on a title-less corpus) -> the release's
# title value for it (DataHandler: None when the corpus has no titles)
RECORDS = [({"docno": "d", "text": TEXT}, None), ({"docno": "d", "title": "", "text": TEXT}, ""),
           ({"docno": "d", "title": "River", "text": TEXT}, "River")]


def _fstring(title, text):  # dense_encoder.py encode(): generic, flag_embedding, sentence-transformers, Jina branches
    return f"{title} {text}"


def _stripped(title, text):  # src/models/{llm2vec,gritlm,nvembed}.py run(): doc.get('title', '') is None when absent
    return f"{title} {text}".strip()


RELEASE = {
    **{name: _fstring for name in ("tas-b", "ance", "simcse", "retromae", "cocondenser", "contriever", "coco-dr-large",
                                   "simlm", "dragon-plus", "me5-large", "gte-large-v1.5", "bge-large-v1.5",
                                   "jina-embeddings-v3", "nomic-embed-v1.5", "gtr-large", "instructor-large",
                                   "repllama", "qwen3-embedding-0.6b", "kalm-embedding-v2.5")},
    "dpr": lambda title, text: f"{title} [SEP] {text}",  # sep = context_tokenizer.sep_token
    "llm2vec": _stripped, "gritlm": _stripped, "nv-embed-v2": _stripped,
    "embeddinggemma": lambda title, text: f"{title if title is not None else 'none'} | text: {text}",  # after 'title: '
}


@pytest.mark.parametrize("name", sorted(RELEASE))
def test_paper_documents_are_the_release_text_for_every_title(name):
    paper, card = spec_of(get(name).with_profile("paper"), "d"), spec_of(get(name).with_profile("card"), "d")
    for record, title in RECORDS:
        assert paper.document(record) == RELEASE[name](title, TEXT), (name, title)
    # the card: no 'None', an empty title left out (EmbeddingGemma's card writes 'none' for both, as MTEB)
    if name != "embeddinggemma":
        assert [card.document(r) for r, _ in RECORDS] == [TEXT, TEXT, card.doc_sep.join(["River", TEXT])]


def test_none_title_reaches_24_paper_entries_and_no_card():
    on = sorted(r.name for r in RETRIEVERS if r.profiles.get("paper", {}).get("none_title") is not None
                and r.profiles["paper"]["none_title"].value == "None")
    hyde = get("hyde").with_options(encoder_profile="paper")  # HyDE encodes with Contriever as the paper ran it
    assert len(on) == 23 and spec_of(hyde, "d").none_title == "None"
    assert all(get(n).with_profile("card").options["none_title"] is None for n in on)


# -- quirks: named, paper on, card off, keyed only when on -----------------------------------------------------------
def test_every_quirk_is_on_in_paper_and_off_in_card_with_sources():
    seen = set()
    for entry in RETRIEVERS:
        paper, card = entry.with_profile("paper"), entry.with_profile("card")
        for name, quirk in QUIRKS.items():
            if name not in entry.options:
                continue
            seen.add(name)
            assert card.options[name] == quirk.off, (entry.name, name)
            assert name not in keyed(card.options)
            if paper.options[name] == quirk.off:  # only where the entry's paper profile says why (EmbeddingGemma's 'none')
                assert entry.profiles["paper"][name].value == quirk.off, (entry.name, name)
                continue
            assert name in keyed(paper.options)
    assert seen == set(QUIRKS)


def test_a_quirk_off_leaves_every_card_key_as_the_entry_default():
    for entry in RETRIEVERS:
        quirks_off = {k: QUIRKS[k].off for k in QUIRKS if k in entry.options}
        assert entry.with_options(**quirks_off).key() == entry.key(), entry.name


def test_keyed_drops_only_values_equal_to_off():
    assert keyed({"score_dtype": "fp16", "none_title": None, "k1": 0.9}) == {"k1": 0.9}
    assert keyed({"score_dtype": "fp32", "none_title": "None", "unicoil_tail_batches": {"workers": 4,
                                                                                       "batch_size": 32}}) == {
        "score_dtype": "fp32", "none_title": "None", "unicoil_tail_batches": {"workers": 4, "batch_size": 32}}
    assert keyed({"keep_empty_title": 0}) == {"keep_empty_title": 0}  # not False: a different value is keyed


# -- the release's document workers ------------------------------------------------------------------------------------
def test_release_batches_stride_skip_blank_and_mark_tails():
    from irgrid.sparse.impact import release_batches, tail_documents

    texts = [f"t{i}" for i in range(11)]
    texts[4] = "  "  # worker 0 skips it
    batches = list(release_batches(texts, workers=2, batch_size=2))
    assert batches == [([0, 2], False), ([6, 8], False), ([10], True), ([1, 3], False), ([5, 7], False),
                       ([9], True)]
    docs = [{"docno": f"d{i}", "text": t} for i, t in enumerate(texts)]
    assert tail_documents(docs, 2, 2) == {"d10", "d9"}
    # at most workers x (batch - 1) documents: 4 x 31 = 124 with the release's 4 workers of 32
    many = [{"docno": str(i), "text": "x"} for i in range(4 * 32 * 10 + 4 * 31)]
    assert len(tail_documents(many, 4, 32)) == 124


@pytest.mark.parametrize("value", [None, {"workers": 4}, {"workers": 0, "batch_size": 32}, {"workers": 4, "batch_size": True},
                                   [4, 32]])
def test_release_setting_rejects_bad_values(value):
    from irgrid.sparse.impact import release_setting

    with pytest.raises(EntryError, match=r"sparta_pad_max takes \{workers: W, batch_size: B\}"):
        release_setting(value, "sparta_pad_max")


def test_unicoil_paper_profile_drops_its_tail_in_the_document_stage():
    paper, card = get("unicoil").with_profile("paper"), get("unicoil").with_profile("card")
    assert paper.index.stage.params["unicoil_tail_batches"] == {"workers": 4, "batch_size": 32}
    assert card.index.stage.params["unicoil_tail_batches"] is None
    assert paper.index.stage.key() != card.index.stage.key()
    assert get("sparta").with_profile("paper").index.stage.params["sparta_pad_max"] == {"workers": 4, "batch_size": 32}


@pytest.mark.parametrize("value", [0, True, "256", 256.0])
def test_left_pad_last_token_rejects_what_is_not_a_batch_size(value):
    # refused where the option is set (its declaration: irgrid.core.options), or by the spec for a value that
    # passes the declaration's type and range
    with pytest.raises((EntryError, OptionValueError), match="left_pad_last_token"):
        spec_of(get("qwen3-embedding-0.6b").with_options(left_pad_last_token=value), "q")


def test_left_pad_last_token_needs_last_token_pooling_and_keys_only_when_on():
    paper = spec_of(get("qwen3-embedding-0.6b").with_profile("paper"), "d")
    assert paper.left_pad_last_token == 256 and paper.side_config("d")["left_pad_last_token"] == 256
    assert "left_pad_last_token" not in spec_of(get("qwen3-embedding-0.6b").with_profile("card"), "d").side_config("d")
    with pytest.raises(EntryError, match="with pooling 'mean'"):
        spec_of(get("contriever").with_options(left_pad_last_token=256), "q")


def test_embeddinggemma_declares_its_own_bidirectional_masks_in_its_key():
    """The mask choice (Gemma 3 keeps its sliding-window bidirectional masks) is the entry's declaration, so an
    index built with the generic masks is never reused; any other value is refused."""
    import dataclasses

    from irgrid.core.retrievers import EntryError
    from irgrid.dense.spec import ENCODERS

    spec = ENCODERS.get("embeddinggemma")
    assert spec.bidirectional == "own" and spec.side_config("d")["bidirectional"] == "own"
    assert dataclasses.replace(spec, bidirectional=True).side_config("d") != spec.side_config("d")
    with pytest.raises(EntryError, match="bidirectional is False, True or 'own'"):
        dataclasses.replace(spec, bidirectional="sideways")
