"""Training data declared with the entries (pipelines/training.py), not keyed by name in the engine: every
declaration names a registered entry, every paper entry has one, and a conflicting second one is refused."""

from __future__ import annotations

import pytest

from irgrid.core import entries, training
from irgrid.core.retrievers import RETRIEVERS


def test_every_declaration_names_an_entry_and_every_paper_entry_has_one():
    entries.load()
    names = {r.name for r in RETRIEVERS}
    assert set(training.TRAINING) <= names, set(training.TRAINING) - names  # a typo would flag nothing
    paper = {r.name for r in RETRIEVERS if r.paper_name}
    assert len(paper) == 33 and all(training.of(n) and training.of(n).source for n in paper)
    assert training.of("no-such-entry") is None and training.flag("no-such-entry", "beir/nq/test") == "unknown"


def test_a_second_different_declaration_is_refused(monkeypatch):
    monkeypatch.setattr(training, "TRAINING", dict(training.TRAINING))
    same = training.TRAINING["tas-b"]
    assert training.declare("tas-b", same) is same  # the same declaration again (a module imported twice): fine
    with pytest.raises(training.TrainingError, match=r"entry 'tas-b': training data declared twice.*"
                                                     r"pipelines/training\.py"):
        training.declare("tas-b", training.Training((), "another source"))
    assert training.TRAINING["tas-b"] is same  # nothing replaced
