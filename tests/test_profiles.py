"""Profiles: named, sourced settings applied as options, so cache keys follow values, not names."""

from __future__ import annotations

import dataclasses

import pytest

from irgrid import profiles, retrievers
from irgrid.profiles import Setting


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
    entry = _entry(paper={"k1": Setting(0.9, "a")}, card={"k1": Setting(0.9, "b")})
    assert entry.with_profile("paper").key() == entry.with_profile("card").key()
    plain = retrievers.get("bm25-pisa")
    assert plain.with_profile("paper").key() == plain.key()


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
    assert rows == [{"setting": "b", "paper": 2, "paper_source": "p.py", "card": 3, "card_source": "card"}]


def test_every_registered_profile_applies():
    """Each entry's profiles name real options (a typo in an entry fails here, not in the middle of a grid)."""
    for entry in retrievers.RETRIEVERS:
        for name in entry.profiles:
            assert name in profiles.PROFILES, (entry.name, name)
            applied = entry.with_profile(name)
            assert retrievers.check_options(applied) is None, (entry.name, name, retrievers.check_options(applied))
            for key, setting in entry.profiles[name].items():
                assert applied.options.get(key, setting.value) == setting.value or key in applied.all_models()
