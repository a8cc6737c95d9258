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


# -- issue 32: fusion weights range-checked; a huge expression is one error, not a RecursionError ----------------
@pytest.mark.parametrize("pipeline, expected", [
    ("1e999 * bm25 + 0.3 * bm25-pisa", "weight 1e309 is outside (0, 1e+06]"),
    ("-0.5 * bm25 + bm25-pisa", "weight -0.5 is outside (0, 1e+06]"),
    ("0 * bm25 + 0 * bm25-pisa", "weight 0 is outside (0, 1e+06]"),
    (" + ".join(["bm25-pisa"] * 3000), "3000 pipeline names in one expression; at most 200"),
    ("(" * 300 + "bm25" + ")" * 300, "is not a valid expression"),
])
def test_bad_fusion_weights_and_huge_expressions(pipeline, expected):
    with pytest.raises(ExperimentError) as e:
        from_dict({"datasets": ["vaswani"], "measures": ["AP"],
                   "retrievers": ["bm25-pisa", {"as": "fused", "pipeline": pipeline}]}, source="exp.yaml")
    assert expected in str(e.value) and len(str(e.value)) < 600, str(e.value)[:600]
