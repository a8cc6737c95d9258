"""The registry contract, applied to every entry (as pyterrier-dr applies one conformance test to every model)."""

from __future__ import annotations

import json

import pytest

from irgrid.core.hashing import config_hash
from irgrid.core.registry import DuplicateNameError, Registry, UnknownNameError
from irgrid.core.retrievers import FAMILIES, RETRIEVERS, Retriever, get

ENTRIES = list(RETRIEVERS)


def test_first_grid_entries_are_registered():
    assert {"bm25", "bm25-pisa", "all-minilm-l6-v2", "splade-tiny"} <= set(RETRIEVERS.names())


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_entry_contract(entry: Retriever):
    assert entry.family in FAMILIES
    assert entry.name == entry.name.lower() and " " not in entry.name and "/" not in entry.name
    config = entry.config()
    # fully serialisable, and the key is the hash of exactly what manifests record: no state outside config()
    assert config_hash(json.loads(json.dumps(config))) == entry.key()
    assert (entry.index is None) == (config["index"] is None)
    for ref in entry.all_models().values():
        assert "/" in ref.id, f"{entry.name}: checkpoint ids are Hugging Face ids (org/name): {ref.id}"
    if entry.index is not None:
        assert config["index"] == entry.index.config() and entry.index.key() == config_hash(entry.index.config())
        assert entry.index.name.replace("-", "").replace(".", "").isalnum()


def test_index_recipes_with_one_name_are_one_recipe():
    """Entries that index the same way share the recipe; one name must never stand for two configurations."""
    by_name: dict[str, str] = {}
    for entry in ENTRIES:
        if entry.index is not None:
            assert by_name.setdefault(entry.index.name, entry.index.key()) == entry.index.key(), entry.index.name


def test_bm25_is_the_papers_setup():
    bm25 = get("bm25")
    assert (bm25.options["k1"], bm25.options["b"], bm25.index.name) == (0.9, 0.4, "lucene-flat")
    assert get("bm25-pisa").options == bm25.options


def test_options_change_the_key_and_unknown_options_raise():
    bm25 = get("bm25")
    variant = bm25.with_options(k1=1.2)
    assert variant.key() != bm25.key() and variant.index.key() == bm25.index.key()
    assert bm25.with_options(k1=0.9).key() == bm25.key()
    with pytest.raises(ValueError, match="has no option.*'k2'.*options are: b, k1, num_results"):
        bm25.with_options(k2=1.0)


def test_duplicates_raise_and_unknown_names_suggest():
    reg: Registry[int] = Registry("thing")
    reg.register("bm25", 1)
    with pytest.raises(DuplicateNameError, match="already registered"):
        reg.register("bm25", 2)
    with pytest.raises(UnknownNameError, match="unknown retriever 'bm52'.*Did you mean 'bm25'"):
        get("bm52")
    with pytest.raises(UnknownNameError, match="Did you mean 'all-minilm-l6-v2'"):
        get("all-minilm")


def test_names_must_be_filename_safe():
    with pytest.raises(ValueError, match="kebab-case"):
        Retriever(name="BM25 Lucene", family="sparse", architecture="lexical", query=lambda a, c: None)
