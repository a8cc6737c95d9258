"""Training data declared with the entries (pipelines/training.py), not keyed by name in the engine: every
declaration names a registered entry, every paper entry has one, and a conflicting second one is refused."""

from __future__ import annotations

import pytest

from irgrid.core import entries, training
from irgrid.core.retrievers import RETRIEVERS


def test_every_declaration_names_an_entry_and_every_paper_entry_has_one():
    entries.load()
    names = {r.name for r in RETRIEVERS}
    assert set(training.TRAINING.values) <= names, set(training.TRAINING.values) - names  # a typo flags nothing
    paper = {r.name for r in RETRIEVERS if r.paper_name}
    assert len(paper) == 33 and all(training.of(n) and training.of(n).source for n in paper)
    assert training.of("no-such-entry") is None and training.flag("no-such-entry", "beir/nq/test") == "unknown"


def test_a_second_different_declaration_is_refused(monkeypatch):
    monkeypatch.setattr(training.TRAINING, "values", dict(training.TRAINING.values))
    same = training.TRAINING.values["tas-b"]
    assert training.declare("tas-b", same) is same  # the same declaration again (a module imported twice): fine
    with pytest.raises(training.TrainingError, match=r"'tas-b': training data declared twice.*"
                                                     r"pipelines/training\.py"):
        training.declare("tas-b", training.Training((), "another source"))
    assert training.TRAINING.values["tas-b"] is same  # nothing replaced


def test_checkpoint_needs_share_the_declaration_rules(monkeypatch):
    """pipelines/checkpoints.py declares through the same Declarations: again the same is fine, differently not."""
    from irgrid.core import needs

    entries.load()
    monkeypatch.setattr(needs.NEEDS, "values", dict(needs.NEEDS.values))
    model_id, declared = next(iter(needs.NEEDS.values.items()))
    assert needs.declare(model_id, declared) is declared and needs.of(model_id) is declared
    other = needs.Needs(1.0, 1, 1)
    with pytest.raises(needs.CheckpointNeedsError, match="checkpoint loading needs declared twice.*checkpoints"):
        needs.declare(model_id, other)
    assert needs.of(model_id) is declared and needs.of("no/such-model") is None
