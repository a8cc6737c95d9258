"""Issue 39 (5): every knob of every entry is declared with its type, range or choices and a description
(irgrid.core.options), `irgrid list NAME` documents each one, and values outside the declaration are refused."""

from __future__ import annotations

import pytest

from irgrid import cli
from irgrid.core import retrievers
from irgrid.core.options import Option, declared


def _variants():
    retrievers._load_entries()
    for name in retrievers.RETRIEVERS.names():
        entry = retrievers.get(name, tiny=False)
        yield from [entry] + [entry.with_profile(p) for p in entry.profiles]


def test_every_option_of_every_entry_and_profile_is_declared_and_described():
    seen = 0
    for entry in _variants():
        knobs = declared(entry.option_types)
        for name in entry.options:
            if name == "query_config":  # wiring kept under its old key, not a knob
                continue
            assert name in knobs and knobs[name].description, (entry.name, entry.profile, name)
            seen += 1
        for values in entry.per_dataset.values():
            assert all(k in knobs for k in values), (entry.name, values)
        assert retrievers.check_options(entry) is None, entry.name
    assert seen > 300


def test_irgrid_list_name_prints_every_knob_with_its_description(capsys):
    assert cli.main(["list", "splade-v3"]) == 0
    out = capsys.readouterr().out
    entry = retrievers.get("splade-v3", tiny=False)
    knobs = declared(entry.option_types)
    flat = " ".join(out.split())  # descriptions wrap to the terminal
    for name in entry.options:
        assert f"{name} = " in flat and " ".join(knobs[name].description.split()) in flat, name
    assert "(undocumented)" not in out


def test_an_entry_may_give_a_shared_name_its_own_meaning(capsys):
    assert cli.main(["list", "doct5query"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "top_k = 10 (int >= 0, None = the checkpoint's generation_config decides): sampling" in flat
    with pytest.raises(retrievers.OptionValueError, match="top_k: -1 is outside"):
        retrievers.get("doct5query").with_options(top_k=-1)
    assert retrievers.get("doct5query").with_options(top_k=0).options["top_k"] == 0  # 0 is allowed there
    with pytest.raises(retrievers.OptionValueError, match="top_k: 0 is outside"):
        retrievers.get("splade-v3").with_options(top_k=0)  # impact pruning keeps at least one term


@pytest.mark.parametrize("options, match", [
    ({"dtype": "fp17"}, r"dtype: 'fp17' is not one of \['fp32', 'fp16', 'bf16', 'fp16-autocast'\]"),
    ({"pooling": "means"}, r"pooling: 'means' is not one of .*Did you mean 'mean'"),
    ({"similarity": 1}, r"similarity: expected a str, got 1"),
    ({"normalize": "yes"}, r"normalize: expected a bool, got 'yes'"),
    ({"query_template": None}, r"query_template: expected a str, got None"),
])
def test_values_outside_the_declaration_are_refused_with_what_is_allowed(options, match):
    with pytest.raises(retrievers.OptionValueError, match=match):
        retrievers.get("contriever").with_options(**options)


def test_a_list_valued_knob_takes_yaml_lists_and_the_older_triple_still_declares():
    dpr = retrievers.get("dpr")
    assert dpr.with_options(doc_fields=["title", "text"]).key() == dpr.key()  # a YAML list is the same value
    with pytest.raises(retrievers.OptionValueError, match="doc_fields: expected a list, got 'title'"):
        dpr.with_options(doc_fields="title")
    assert declared({"batch_size": (int, 2, 8)})["batch_size"] == Option(
        declared({})["batch_size"].description, int, 2, 8)
