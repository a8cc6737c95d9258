"""Bad input gets one clear, actionable error and loses nothing."""

from __future__ import annotations

import pytest

from irgrid import grid
from irgrid.experiment import ExperimentError, from_dict, load
from irgrid.models import ModelUnavailableError


@pytest.mark.parametrize("patch, expected", [
    ({"measures": ["nDCG@ten"]}, "is not a measure ir_measures understands"),
    ({"baseline": "splade-tiny"}, "baseline 'splade-tiny' is not one of the retrievers"),
    ({"correction": "holmes"}, "correction 'holmes' is not one of"),
    ({"retrievers": ["bm25", "bm25"]}, "appear twice"),
    ({"retrievers": [{"name": "bm25", "options": {"k3": 1}}]}, "has no option(s) 'k3'"),
    ({"colour": "blue"}, "unknown key(s) ['colour']"),
])
def test_spec_errors(patch, expected):
    data = {"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "bm25"], "measures": ["AP"], **patch}
    with pytest.raises(ExperimentError) as e:
        from_dict(data, source="exp.yaml")
    assert expected in str(e.value) and str(e.value).startswith("exp.yaml")


def test_missing_file():
    with pytest.raises(ExperimentError, match="does-not-exist.yaml does not exist"):
        load("does-not-exist.yaml")


def test_unresolvable_model_offline_fails_before_any_work(fresh_store, tmp_path):
    """The registered `contriever` entry: its checkpoint is on no package, mapping or cache here."""
    spec = from_dict({"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "contriever"], "measures": ["AP"]})
    with pytest.raises(ModelUnavailableError, match="facebook/contriever-msmarco@abe8c14[0-9a-f]+ is not available "
                                                     "offline.*huggingface-cli download facebook/contriever-msmarco"):
        grid.run(spec, out=tmp_path / "out", store=fresh_store)
    assert not (tmp_path / "out").exists()
    assert not (fresh_store.root / "runs").exists()  # nothing computed, nothing half-written
