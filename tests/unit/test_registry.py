"""The registry contract, applied to every entry (as pyterrier-dr applies one conformance test to every model)."""

from __future__ import annotations

import json

import pytest

from irgrid.core.retrievers import FAMILIES, RETRIEVERS, Retriever, get
from irgrid.util.hashing import config_hash
from irgrid.util.registry import DuplicateNameError, Registry, UnknownNameError

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


def _experiment_error(options: dict, name: str = "contriever") -> str:
    from irgrid.runner.experiment import ExperimentError, from_dict

    with pytest.raises(ExperimentError) as e:
        from_dict({"datasets": ["vaswani"], "retrievers": [{"name": name, "options": options}]}, source="exp.yaml")
    return str(e.value)


def test_options_refuse_wiring_keys_naming_the_entry_the_key_and_what_to_do():
    """`{name: contriever, options: {encoder: bge-large-v1.5}}` would pair contriever's prompt and pooling with
    another entry's name (and its query spec with nothing): refused, pointing at the entry to list instead."""
    error = _experiment_error({"encoder": "bge-large-v1.5"})
    assert error.startswith("exp.yaml: retrievers[0]: ") and "retriever 'contriever'" in error
    assert "option 'encoder' wires the entry" in error and "{name: bge-large-v1.5}" in error
    assert "'query_config' wires the entry" in _experiment_error({"query_config": "x"})
    assert "set those" in _experiment_error({"query_config": "x"})
    assert "option 'kind' wires" in _experiment_error({"kind": "monot5"}, "ce-ms-marco-minilm-l6-v2")
    # HyDE encodes with its encoder entry's spec: that entry's settings are chosen through encoder/encoder_profile
    hyde = _experiment_error({"query_max_length": 64}, "hyde")
    assert "'query_max_length' wires" in hyde and "encoder / encoder_profile" in hyde
    assert get("hyde").with_options(encoder="bge-large-v1.5").options["encoder"] == "bge-large-v1.5"


def test_options_refuse_model_roles_unless_the_entry_lets_them_be_swapped():
    error = _experiment_error({"query": "facebook/contriever"})
    assert "retriever 'contriever': 'query' is a model role, not an option" in error and "irgrid list" in error
    # declared swappable (a generator) or set by a profile (uniCOIL's document checkpoint): an option may swap it
    swapped = get("query2doc").with_options(generator="HuggingFaceTB/SmolLM2-135M-Instruct@abc")
    assert (swapped.models["generator"].id, swapped.models["generator"].revision) == \
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "abc")
    unicoil = get("unicoil").with_options(doc="castorini/unicoil-msmarco-passage")
    assert unicoil.index.key() != get("unicoil").index.key()
    assert "'query' is a model role" in _experiment_error({"query": "castorini/unicoil-msmarco-passage"}, "unicoil")


def test_options_that_do_nothing_are_not_options():
    """ColBERTv2's `ndocs` (PLAID's candidate cap) changed the run key and nothing else: irgrid scores every
    candidate exactly. It is gone from the options and both profiles; setting it is an unknown option."""
    colbert = get("colbertv2")
    assert "ndocs" not in colbert.options
    assert all("ndocs" not in settings for settings in colbert.profiles.values())
    error = _experiment_error({"ndocs": 4096}, "colbertv2")
    assert "has no option(s) 'ndocs'" in error and "ncells" in error and "query_config" not in error


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


def test_closed_sets_are_enums_that_read_and_print_as_their_names():
    from irgrid.core.profiles import PROFILES, ProfileName
    from irgrid.core.retrievers import Family
    from irgrid.data.datasets import GROUPS, Dataset, Group

    assert FAMILIES == ("sparse", "expansion", "dense", "late-interaction", "reranker", "pipeline")
    assert Family("late-interaction") is Family.LATE_INTERACTION and f"{Family.DENSE}|{Family.DENSE!r}" == "dense|'dense'"
    assert json.dumps({"family": Family.DENSE}) == '{"family": "dense"}'
    assert PROFILES == ("paper", "card") and ProfileName("card") is ProfileName.CARD
    assert "byo" in GROUPS and Group.BEIR == "beir"
    with pytest.raises(ValueError, match=r"family 'densse' is not one of \('sparse', 'expansion', 'dense'"):
        Retriever(name="x", family="densse", architecture="-", query=print)
    with pytest.raises(ValueError, match="dataset 'mine': group 'beirr' is not one of msmarco, beir, lotte"):
        Dataset("mine", corpus="mine", group="beirr")
    assert {e.family for e in ENTRIES} <= set(Family)


def test_names_a_pyterrier_user_types_point_at_the_entry_that_implements_them():
    """Issue 41: the design card's `doc2query >> BM25` was refused without naming `doct5query`; paper names and
    other cases of a name get the entry to write; a collection put under `datasets:` is sent to `collections:`."""
    from irgrid.runner.experiment import ExperimentError, from_dict

    def refusal(pipeline: str) -> str:
        with pytest.raises(ExperimentError) as e:
            from_dict({"datasets": ["vaswani"], "retrievers": [{"as": "x", "pipeline": pipeline}]})
        return str(e.value)

    assert "It is the entry 'doct5query' here" in refusal("doc2query >> BM25")
    assert "'doc2query >> BM25' is written 'doct5query'" in refusal("doc2query >> BM25")
    assert "Names are lower case: write 'bm25'" in refusal("doct5query >> BM25")
    assert "write 'splade-v3'" in refusal("SPLADE-v3")
    assert "Did you mean 'bm25'" in refusal("bm25x")  # spelling still suggests
    with pytest.raises(ExperimentError) as e:
        from_dict({"datasets": [{"name": "mine", "docs": "d.jsonl", "topics": "t.tsv", "qrels": "q.txt"}],
                   "retrievers": ["bm25"]})
    assert "declare it under `collections:`" in str(e.value) and "datasets: [mine]" in str(e.value)
    assert "Did you mean 'queries'" not in str(e.value)
