"""Pipeline expressions: parsing, errors, cycles, item keys and the cache keys built from the parts (no data)."""

from __future__ import annotations

import pytest

from irgrid.runner.experiment import ExperimentError, from_dict

# --------------------------------------------------------------------------------------------------------------
# the parser: one clear message per kind of bad input

BAD = [
    ("bm52 % 10", ["retrievers[1]", "unknown retriever 'bm52'", "Did you mean", "'bm25'"]),
    ("bm25 - bm25-pisa", ["operator '-' is not allowed", ">> (re-rank)"]),
    ("bm25 ** bm25-pisa", ["'**' (PyTerrier's feature union)", "scorer(ds)"]),
    ("bm25 % 1.5", ["'% 1.5'", "whole number of results >= 1"]),
    ("bm25 % bm25-pisa", ["'% bm25-pisa'", "whole number"]),
    ("bm25 * bm25-pisa", ["* weights one pipeline by a number", "+ or rrf"]),
    ("bm25 + 2", ["+ combines two pipelines, not a number"]),
    ("rrf(bm25)", ["rrf() fuses at least 2 pipelines, got 1"]),
    ("rrf(bm25, bm25-pisa, k='x')", ["rrf(k='x')", "k must be a whole number > 0"]),
    ("rrf(bm25, bm25-pisa, k=0.5)", ["k must be a whole number > 0"]),
    ("rrf(bm25, 3)", ["takes pipelines as positional arguments, got 3"]),
    ("rrf(bm25, bm25-pisa, depth=3)", ["rrf() has no argument 'depth'", "k, num_results"]),
    ("combsum(bm25, bm25-pisa)", ["unknown function 'combsum'", "rrf("]),
    ("__import__('os').system('true')", ["unknown function"]),
    ("bm25.__class__", ["unknown retriever 'bm25.__class__'"]),
    ("bm25[0]", ["'bm25[0]' is not allowed"]),
    ("bm25 >>", ["not a valid expression"]),
    ("7", ["7 is a number where a pipeline is expected"]),
    ("bm25 >> splade-tiny", ["'splade-tiny' (a sparse entry) cannot re-rank", "re-rankers are dense bi-encoders"]),
    ("ce-ms-marco-minilm-l6-v2 % 10", ["is a re-ranker", "'bm25 % 100 >> ce-ms-marco-minilm-l6-v2'"]),
    ("bm25 | bm25-pisa", ["| gives a candidate set without scores", ">> all-minilm-l6-v2"]),
    ("rrf(bm25 & bm25-pisa, bm25)", ["& gives a candidate set without scores"]),
]


@pytest.mark.parametrize("text,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_expressions_get_one_clear_message(text, fragments):
    with pytest.raises(ExperimentError) as e:
        from_dict({"datasets": ["vaswani"], "retrievers": ["bm25", {"as": "p", "pipeline": text}]}, source="x.yaml")
    message = str(e.value)
    assert message.startswith("x.yaml: ")
    for fragment in fragments:
        assert fragment in message, message
    assert "Traceback" not in message and "\n" not in message


def test_cycles_are_refused_with_the_path():
    with pytest.raises(ExperimentError, match=r"pipeline 'a' refers to itself through a -> b -> a"):
        from_dict({"datasets": ["vaswani"], "retrievers": [
            "bm25", {"as": "a", "pipeline": "b % 10"}, {"as": "b", "pipeline": "rrf(a, bm25)"}]})
    with pytest.raises(ExperimentError, match=r"through a -> a"):
        from_dict({"datasets": ["vaswani"], "retrievers": ["bm25", {"as": "a", "pipeline": "rrf(a, bm25)"}]})


def test_pipeline_item_keys_are_checked():
    for item, fragment in [({"pipeline": "bm25 % 10"}, "a pipeline item is {as: NAME"),
                           ({"as": "x", "pipeline": "bm25", "options": {}}, "a pipeline item is {as: NAME"),
                           ({"as": "x", "pipeline": 3}, "a pipeline item is {as: NAME"),
                           ({"as": "Bad Name", "pipeline": "bm25 % 10"}, "must be kebab-case")]:
        with pytest.raises(ExperimentError, match=".*") as e:
            from_dict({"datasets": ["vaswani"], "retrievers": ["bm25", item]})
        assert fragment in str(e.value)


def test_names_resolve_to_the_files_items_with_their_options():
    spec = from_dict({"datasets": ["vaswani"], "retrievers": [
        "bm25-pisa", {"name": "bm25-pisa", "as": "k12", "options": {"k1": 1.2}},
        {"as": "late", "pipeline": "rrf(k12, early)"},  # refers to an item defined after it
        {"as": "early", "pipeline": "bm25-pisa % 10"}]})
    late = {r.name: r for r in spec.retrievers}["late"]
    assert late.parts["k12"].options["k1"] == 1.2
    assert late.parts["early"].family == "pipeline"
    assert [r.name for r in spec.retrievers] == ["bm25-pisa", "k12", "late", "early"]


def test_keys_are_built_from_the_parts_keys():
    def keys(k1):
        spec = from_dict({"datasets": ["vaswani"], "retrievers": [
            "bm25-pisa", {"name": "bm25-pisa", "as": "k12", "options": {"k1": k1}},
            {"as": "fuse", "pipeline": "rrf(bm25-pisa, k12)"}, {"as": "cut", "pipeline": "bm25-pisa % 10"},
            {"as": "cut20", "pipeline": "bm25-pisa % 20"}]})
        return {r.name: r.key() for r in spec.retrievers}

    a, b = keys(1.2), keys(1.5)
    assert a["fuse"] != b["fuse"] and a["cut"] == b["cut"]  # only expressions that use the changed part change
    assert a["cut"] != a["cut20"]

