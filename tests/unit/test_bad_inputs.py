"""Bad input gets one clear, actionable error and loses nothing."""

from __future__ import annotations

import pytest

from irgrid.runner.experiment import ExperimentError, from_dict, load


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
