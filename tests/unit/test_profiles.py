"""Profiles: named, sourced settings applied as options, so cache keys follow values, not names."""

from __future__ import annotations

import dataclasses

import pytest

from irgrid.core import profiles, retrievers
from irgrid.core.profiles import Setting


def _entry(**profile_settings):
    base = retrievers.get("bm25-pisa")
    return dataclasses.replace(base, name="bm25-pisa-profiled", profiles=profile_settings)


def test_profile_applies_values_and_key_follows_them():
    entry = _entry(paper={"k1": Setting(1.2, "somewhere/run.py")}, card={"k1": Setting(0.9, "model card")})
    paper, card = entry.with_profile("paper"), entry.with_profile("card")
    assert paper.options["k1"] == 1.2 and paper.profile == "paper"
    assert card.options["k1"] == 0.9 and card.profile == "card"
    assert paper.key() != card.key()
    # the card values are the entry's defaults: the card profile shares the plain entry's caches
    assert card.key() == entry.key()


def test_profiles_that_agree_share_keys_and_entries_without_settings_have_one_configuration():
    entry = _entry(paper={"k1": Setting(0.9, "a"), "num_results": Setting(1000, "a")},
                   card={"k1": Setting(0.9, "b")})
    assert entry.with_profile("paper").key() == entry.with_profile("card").key()
    plain = retrievers.get("bm25-pisa")  # no settings of its own: the paper profile only adds the common depth
    assert plain.with_profile("card").key() == plain.key()
    assert dict(plain.with_profile("paper").options) == {**plain.options, "num_results": 1001}


def test_unknown_profile_and_bad_setting_are_clear_errors():
    with pytest.raises(profiles.ProfileError, match="Did you mean 'paper'"):
        _entry().with_profile("papr")
    bad = _entry(paper={"k3": Setting(1, "x")})
    with pytest.raises(ValueError, match=r"'bm25-pisa-profiled', profile 'paper'.*no option\(s\) 'k3'"):
        bad.with_profile("paper")
    with pytest.raises(ValueError, match="needs a source"):
        Setting(1, "")


def test_differences_lists_only_disagreements_with_sources():
    rows = profiles.differences({"paper": {"a": Setting(1, "p.py"), "b": Setting(2, "p.py")},
                                 "card": {"a": Setting(1, "card"), "b": Setting(3, "card")}})
    assert rows == [{"setting": "b", "paper": 2, "paper_source": "p.py", "card": 3, "card_source": "card", "note": ""}]


def test_every_registered_profile_applies():
    """Each entry's profiles name real options (a typo in an entry fails here, not in the middle of a grid)."""
    for entry in retrievers.RETRIEVERS:
        for name in entry.profiles:
            assert name in profiles.PROFILES, (entry.name, name)
            applied = entry.with_profile(name)
            assert retrievers.check_options(applied) is None, (entry.name, name, retrievers.check_options(applied))
            for key, setting in entry.profiles[name].items():
                assert applied.options.get(key, setting.value) == setting.value or key in applied.all_models()


def test_paper_profile_retrieves_1001_on_every_entry_with_a_depth():
    """The paper's run.py retrieves top_k=1001; the card keeps each entry's 1000. An entry's own setting wins."""
    for entry in retrievers.RETRIEVERS:
        if "num_results" not in entry.options:
            continue
        own = entry.profiles.get("paper", {}).get("num_results")
        assert entry.with_profile("paper").options["num_results"] == (own.value if own else 1001), entry.name
        assert entry.with_profile("card").options["num_results"] == entry.options["num_results"], entry.name
    rows = profiles.differences({"paper": profiles.for_entry("paper", {}, {"num_results": 1000}), "card": {}})
    assert rows[0]["setting"] == "num_results" and "src/run.py" in rows[0]["paper_source"]


def test_self_match_rule_of_the_paper_keeps_judged_self_matches():
    import pandas as pd

    from irgrid.runner.transforms import drop_unjudged_self_matches

    res = pd.DataFrame({"qid": ["q1", "q1", "q1", "q2", "q2"], "docno": ["q1", "d1", "d2", "q2", "d3"],
                        "score": [9.0, 8.0, 7.0, 9.0, 8.0], "rank": [0, 1, 2, 0, 1]})
    qrels = pd.DataFrame({"qid": ["q2", "q1"], "docno": ["q2", "d1"], "label": [1, 1]})
    out = drop_unjudged_self_matches(res, qrels)
    assert list(zip(out["qid"], out["docno"])) == [("q1", "d1"), ("q1", "d2"), ("q2", "q2"), ("q2", "d3")]
    assert list(out[out["qid"] == "q1"]["rank"]) == [0, 1]


def test_paper_experiment_uses_the_paper_profile_and_rules():
    from pathlib import Path

    from irgrid.runner.experiment import ExperimentError, from_dict, load

    spec = load(Path(__file__).resolve().parents[2] / "experiments" / "paper.yaml")
    assert spec.self_matches == "paper"
    assert {r.profile for r in spec.retrievers} == {"paper"}
    assert spec.retrievers[0].options["num_results"] == 1001
    base = {"datasets": ["vaswani"], "retrievers": ["bm25-pisa"]}
    assert from_dict(base).self_matches == "catalog" and from_dict(base).retrievers[0].profile == "card"
    with pytest.raises(ExperimentError, match="self_matches: 'papr' is not one of"):
        from_dict({**base, "self_matches": "papr"})


def test_every_paper_setting_cites_the_release(capsys):
    """`irgrid list --profiles --check`: each entry's paper settings (shared depth included) cite a file of the
    paper's code at the release commit (or an older commit named with the release); it exits 0 only then."""
    from irgrid.cli import fidelity, main
    from irgrid.core.paper_code import RELEASE

    rows = fidelity(list(retrievers.RETRIEVERS))
    assert len(rows) == 34 and all(r["status"] == "ok" and RELEASE in r["commit"].split(",") for r in rows), \
        [r for r in rows if r["status"] != "ok"]
    assert main(["list", "--profiles", "--check"]) == 0
    assert f"34/34 entries: every paper setting cites valentinsvelev/retriever-evaluation@{RELEASE}" in \
        capsys.readouterr().out


def test_a_paper_setting_without_a_commit_is_refused(capsys):
    from irgrid.cli import cmd_fidelity, fidelity

    release = "valentinsvelev/retriever-evaluation:src/run.py@4bedb75 run()"
    bad = [_entry(paper={"k1": Setting(1.2, "valentinsvelev/retriever-evaluation:src/run.py: set_bm25"),
                         "b": Setting(0.5, release)}),
           dataclasses.replace(_entry(paper={"k1": Setting(1.2, "valentinsvelev/retriever-evaluation:src/run.py@"
                                                                "f8a7b63 set_bm25")}), name="older-commit"),
           dataclasses.replace(_entry(paper={"k1": Setting(1.2, "somewhere.py")}), name="not-the-paper")]
    rows = fidelity(bad)
    assert [(r["name"], r["status"], r["unsourced"]) for r in rows] == [
        ("bm25-pisa-profiled", "MISSING", "k1"), ("older-commit", "MISSING", "k1"), ("not-the-paper", "MISSING", "k1")]
    assert cmd_fidelity(bad, "table") == 1
    assert "0/3 entries" in capsys.readouterr().out


def test_paper_text_note_and_per_dataset_rows():
    """Where the paper's text differs from the code, the row carries it as a note; per-dataset values are rows."""
    rows = profiles.differences({
        "paper": {"k": Setting(32, "code.py@4bedb75", per_dataset={"beir/arguana": 300}, text="16")},
        "card": {"k": Setting(32, "card")}}, agreeing=True)
    assert [(r["setting"], r["paper"], r["card"], r["note"]) for r in rows] == [
        ("k", 32, 32, "the paper's text: 16"), ("k [beir/arguana]", 300, 32, "")]
    assert profiles.matches("beir/arguana", "beir/arguana/test") and profiles.matches("beir/arguana", "beir/arguana")
    assert not profiles.matches("beir/arguana", "beir/arguana-x", None)
