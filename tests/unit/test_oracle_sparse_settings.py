"""The paper settings the sparse and expansion oracles showed were missing (issue 38; tests/oracles/oracles_sparse.py):
uniCOIL's `query_quantise: pyserini` and `keep_unk`, query2doc's and HyDE's `eos: tokenizer`. Each is on in `paper`
(sourced file@commit), absent in `card`, and enters a cache key only when on; a bad value is one clear error; the
uniCOIL tail-batch quirk refuses a corpus it would leave empty."""

from __future__ import annotations

import pytest

from irgrid.core.retrievers import EntryError, get

SETTINGS = {"unicoil": {"query_quantise": "pyserini", "keep_unk": True},
            "query2doc": {"eos": "tokenizer"}, "hyde": {"eos": "tokenizer"}}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_on_in_paper_with_a_release_source_absent_in_card(name):
    entry = get(name)
    paper, card = entry.with_profile("paper"), entry.with_profile("card")
    for option, value in SETTINGS[name].items():
        assert paper.options[option] == value
        setting = entry.profiles["paper"][option]
        assert "@4bedb75" in setting.source, setting.source
        assert option not in entry.profiles["card"]
        assert card.options[option] in (None, False)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_keyed_only_when_on(name):
    card = get(name).with_profile("card")
    off = {k: card.options[k] for k in SETTINGS[name]}
    on = SETTINGS[name]
    assert card.with_options(**off).key() == card.key()
    assert card.with_options(**on).key() != card.key()
    assert all(f"'{k}'" not in str(card.config()) for k in on)


def test_keep_unk_reaches_the_unicoil_document_stage():
    paper, card = get("unicoil").with_profile("paper"), get("unicoil").with_profile("card")
    assert paper.index.stage.params["keep_unk"] is True and card.index.stage.params["keep_unk"] is False
    assert "'keep_unk'" not in str(card.index.stage.config())


def test_unicoil_query_quantise_as_pyserini_and_a_bad_value_refused():
    from irgrid.sparse.impact import UniCoilEncoder

    model = (None, None, None)
    enc = UniCoilEncoder(model, "q", query_quantise="pyserini")
    # Pyserini's UniCoilQueryEncoder: round(w / 5 x 256), Python's round (half to even)
    assert enc.finish({"a": 1.0, "b": 0.0097656, "c": 5.0 * 2.5 / 256}) == {"a": 51.0, "b": 0.0, "c": 2.0}
    assert UniCoilEncoder(model, "q").finish({"a": 1.0}) == {"a": 1.0}
    with pytest.raises(EntryError, match="query_quantise must be 'pyserini'"):
        UniCoilEncoder(model, "q", query_quantise="lucene")


def test_keep_unk_keeps_unknown_word_pieces():
    import torch
    from transformers import AutoTokenizer

    from irgrid.models.tiny import tokenizer_source
    from irgrid.sparse.impact import SPECIAL, _per_token

    tok = AutoTokenizer.from_pretrained(str(tokenizer_source()))
    enc = tok(["a \u2603 b"], return_tensors="pt")
    assert "[UNK]" in tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    w = torch.ones(enc["input_ids"].shape)
    kept = _per_token(tok, enc["input_ids"], enc["attention_mask"], w, SPECIAL - {"[SEP]", "[UNK]"})[0]
    dropped = _per_token(tok, enc["input_ids"], enc["attention_mask"], w, SPECIAL - {"[SEP]"})[0]
    assert "[UNK]" in kept and "[UNK]" not in dropped


def test_eos_setting_is_validated_and_keyed_only_when_set():
    from irgrid.generation.spec import Decoding

    assert "eos" not in Decoding().config()
    assert Decoding(eos="tokenizer").config()["eos"] == "tokenizer"
    with pytest.raises(EntryError, match="eos must be 'tokenizer'"):
        Decoding(eos="generation_config")


def test_unicoil_tail_batches_refuse_a_corpus_they_would_empty():
    from irgrid.sparse.impact import tail_documents

    docs = [{"docno": str(i), "text": f"document {i}"} for i in range(4 * 31)]  # 31 per worker: every batch a tail
    with pytest.raises(EntryError, match=r"none of this corpus's 124 documents.*unicoil_tail_batches: null"):
        tail_documents(docs, 4, 32)
    assert tail_documents([{"docno": str(i), "text": "t"} for i in range(128)], 4, 32) == set()
    assert tail_documents([], 4, 32) == set()
