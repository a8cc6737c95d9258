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


# -- issue 32: the Python door gets the YAML's checks -------------------------------------------------------------
def test_python_api_options_names_and_keys_are_checked():
    import irgrid
    from irgrid.core.retrievers import OptionValueError
    from irgrid.runner.grammar import ExpressionError
    from irgrid.util.registry import UnknownNameError

    entry = irgrid.retriever("bm25-pisa")
    for options, expected in (({"k1": -1}, "option k1: -1 is outside"), ({"num_results": 0}, "num_results: 0"),
                              ({"k1": "abc"}, "option k1: expected a number, got 'abc'")):
        with pytest.raises(OptionValueError, match=expected):
            entry.with_options(**options)
    assert entry.with_options(k1=1.2).options["k1"] == 1.2
    with pytest.raises(UnknownNameError, match="a retriever name is text, got None"):
        irgrid.retriever(None)
    with pytest.raises(ExpressionError, match=r"keys \['mine'\] name no extra pipeline"):
        irgrid.run({"datasets": ["vaswani"], "retrievers": ["bm25-pisa"], "measures": ["AP"]}, keys={"mine": "v1"})


@pytest.mark.parametrize("query", [None, 7, float("nan")])
def test_a_query_that_is_not_text_is_one_clear_error(query):
    import pandas as pd

    from irgrid.runner.transforms import CheckQueries

    topics = pd.DataFrame({"qid": ["q1", "q2"], "query": ["fine", query]})
    with pytest.raises(ValueError, match=r"\(qid 'q2'\) is not text: 1 of 2 queries are not str"):
        CheckQueries()(topics)
    assert len(CheckQueries()(topics.head(1))) == 1 and len(CheckQueries()(topics.head(0))) == 0


# -- issue 40 item 6: NaN and infinity are no option values --------------------------------------------------------
@pytest.mark.parametrize("text, shown", [(".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf"), (".NaN", "nan")])
def test_yaml_nan_and_inf_options_are_refused_at_validation(tmp_path, text, shown):
    """Was: validation passed, the grid died in PyTerrier, wrote nothing and cached the empty runs."""
    path = tmp_path / "exp.yaml"
    path.write_text(f"datasets: [vaswani]\nmeasures: [AP]\nretrievers:\n  - bm25-pisa\n"
                    f"  - {{name: bm25-pisa, as: odd, options: {{k1: {text}}}}}\n")
    with pytest.raises(ExperimentError) as e:
        load(path)
    message = str(e.value)
    assert message.startswith(f"{path}: retrievers[1] (odd): option k1: {shown} is not a finite number"), message
    assert "give a number such as" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_python_nan_and_inf_options_are_refused(value):
    """Was: `with_options(k1=nan)` built a retriever that returned 0 rows."""
    import irgrid
    from irgrid.core.retrievers import OptionValueError

    for options in ({"k1": value}, {"b": value}, {"num_results": value}):
        with pytest.raises(OptionValueError, match=rf"option {next(iter(options))}: {value} is not a finite number"):
            irgrid.retriever("bm25-pisa").with_options(**options)


# -- issue 40 item 7: the Python door's arguments -------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["bm25-pisa", "bm25-pisa % 5"])
@pytest.mark.parametrize("dataset", [5, 1.5, ["vaswani"]])
def test_pipeline_with_a_dataset_that_is_not_one(entry, dataset):
    """Was: AttributeError ('int' object has no attribute 'corpus_dataset'), or for an expression a pipeline that
    failed only when run."""
    import re

    import irgrid
    from irgrid.data.errors import InputError

    with pytest.raises(InputError, match=rf"dataset {re.escape(repr(dataset))} \({type(dataset).__name__}\): a dataset is a name "
                                         r"\('vaswani', 'beir/scifact/test', 'vaswani@q20s1' for a query sample\)"):
        irgrid.pipeline(entry, dataset)


@pytest.mark.parametrize("experiment", [None, 5, ["vaswani"]])
def test_run_with_something_that_is_not_an_experiment(experiment):
    """Was: TypeError: expected str, bytes or os.PathLike object, not NoneType."""
    import irgrid

    with pytest.raises(ExperimentError, match=rf"an experiment is an experiment file's path, a dict of its keys or "
                                              rf"an ExperimentSpec; got {type(experiment).__name__} "):
        irgrid.run(experiment)


def test_a_query_sample_of_no_queries_is_refused_like_queries_0():
    """Was: `vaswani@q0s1` an empty sample, silently, while `{name: vaswani, queries: 0}` was refused."""
    import irgrid
    from irgrid.data.errors import InputError

    for call in (lambda: irgrid.dataset("vaswani@q0s1"), lambda: irgrid.dataset({"name": "vaswani@q0s1"})):
        with pytest.raises(InputError, match=r"vaswani@q0s1: a query sample needs a whole number of queries >= 1 .*"
                                             r"e\.g\. vaswani@q20s1\); give the name alone"):
            call()
    with pytest.raises(ExperimentError, match=r"exp.yaml: .*vaswani@q0s1: a query sample needs"):
        from_dict({"datasets": ["vaswani@q0s1"], "retrievers": ["bm25-pisa"], "measures": ["AP"]}, source="exp.yaml")
    with pytest.raises(ExperimentError, match="queries: 0 selects no query"):
        irgrid.dataset({"name": "vaswani", "queries": 0})


def test_an_extra_function_that_returns_no_transformer(tmp_path):
    """Was: AttributeError: 'NoneType' object has no attribute 'transform', deep in the cell."""
    from irgrid.data.datasets import get
    from irgrid.runner.grammar import ExpressionError
    from irgrid.runner.python_pipeline import extra_pipeline
    from irgrid.store import Store

    cell = extra_pipeline("mine", lambda ds: None, "mine-v1")
    with pytest.raises(ExpressionError, match=r"extra pipeline 'mine': its function returned NoneType for dataset "
                                              r"'vaswani', not a PyTerrier transformer; it must return one"):
        cell.build(get("vaswani"), Store(tmp_path / "cache"))
