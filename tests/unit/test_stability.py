"""The stability audit's parts that need no model (irgrid.report.stability): comparing two runs, the bounds, the
batch-size rewrite of entries and expressions, cell selection, and `irgrid audit`'s bad-input errors. The audit
itself on real MiniLM weights: tests/integration/test_stability_audit.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from irgrid.cli import main
from irgrid.report import stability
from irgrid.runner.experiment import from_dict

ROOT = Path(__file__).resolve().parents[2]


def _run(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    res = pd.DataFrame(rows, columns=["qid", "docno", "score"])
    res = res.sort_values(["qid", "score"], ascending=[True, False], kind="mergesort").reset_index(drop=True)
    res["rank"] = res.groupby("qid").cumcount()
    return res


def test_identical_runs_compare_equal():
    run = _run([("1", f"d{i}", 1.0 - i / 20) for i in range(15)])
    assert stability.compare_runs(run, run.copy()) == {"max_abs_dscore": 0.0, "docs_changed": 0, "top10_flips": 0,
                                                       "queries_flipped": 0}


def test_a_swap_in_the_top_ten_counts_two_flips_and_a_score_change_its_size():
    ref = _run([("1", f"d{i}", 1.0 - i / 20) for i in range(15)] + [("2", "x", 0.5), ("2", "y", 0.4)])
    other = ref.copy()
    other.loc[(other["qid"] == "1") & (other["docno"] == "d3"), "score"] = 1.0 - 4 / 20 - 0.001  # below d4
    got = stability.compare_runs(ref, _run(list(other[["qid", "docno", "score"]].itertuples(index=False))))
    assert got["top10_flips"] == 2 and got["queries_flipped"] == 1
    assert got["max_abs_dscore"] == pytest.approx(0.051)
    assert got["docs_changed"] == 0


def test_a_document_in_one_run_only_is_counted():
    ref = _run([("1", "a", 0.9), ("1", "b", 0.8)])
    other = _run([("1", "a", 0.9), ("1", "c", 0.8)])
    got = stability.compare_runs(ref, other)
    assert got["docs_changed"] == 2 and got["top10_flips"] == 1 and got["max_abs_dscore"] == 0.0


def test_bounds():
    exact, half = stability.Variant("batch=1", "", batch=1), stability.Variant("dtype=fp32", "", dtype="fp32")
    same = {"max_abs_dscore": 0.0, "docs_changed": 0, "top10_flips": 0}
    assert stability.judge(exact, same, 0.0, 0.0, 0.0)[1]
    assert not stability.judge(exact, {**same, "max_abs_dscore": 1e-7}, 0.0, 0.0, 0.0)[1]  # any non-zero Δ
    assert stability.judge(exact, {**same, "max_abs_dscore": 1e-7}, 0.0, 0.0, 1e-6)[1]  # within a stated bound
    assert not stability.judge(exact, {**same, "top10_flips": 2}, 0.0, 0.0, 1e-6)[1]
    assert not stability.judge(exact, same, 1e-4, 0.01, 1e-6)[1]  # a measure that moved
    assert stability.judge(half, {**same, "top10_flips": 9}, 0.003, 0.4, 0.0)[1]
    assert not stability.judge(half, same, 0.01, 0.6, 0.0)[1]


def test_variants_skip_reduced_precision_without_a_gpu():
    cpu = stability.variants((1, 32, 256), gpu=False)
    assert [v.name for v in cpu] == ["warm", "cold", "batch=1", "batch=32", "batch=256", "shuffled", "dtype=fp32"]
    assert cpu[-1].dtype == "skipped" and "no GPU" in cpu[-1].what
    assert stability.variants((8,), gpu=True)[-1].dtype == "fp32"


COMPOSE = {"datasets": ["beir/scifact/test"],
           "retrievers": ["bm25", "all-minilm-l6-v2", {"as": "bm25-minilm", "pipeline": "bm25 % 100 >> all-minilm-l6-v2"}],
           "measures": ["nDCG@10"], "baseline": "bm25"}


def test_batch_size_reaches_queries_documents_and_re_ranking():
    spec = from_dict(COMPOSE)
    bm25, minilm, cascade = spec.retrievers
    assert not stability.is_neural(bm25) and stability.is_neural(minilm) and stability.is_neural(cascade)
    one = stability.with_batch(minilm, 1)
    assert one.options["batch_size"] == 1 and one.index.params["batch_size"] == 1  # query side and documents
    assert one.key() != minilm.key() and one.index.config() != minilm.index.config()
    assert stability.with_batch(bm25, 1) is bm25  # nothing to set
    inner = stability.with_batch(cascade, 256).parts["all-minilm-l6-v2"]
    assert inner.options["batch_size"] == 256 and inner.index.params["batch_size"] == 256
    assert stability.with_batch(cascade, 256).key() != cascade.key()
    assert [p.name for p in stability.neural_parts(cascade)] == ["all-minilm-l6-v2"]


def test_select_keeps_neural_cells_and_drops_the_baseline():
    spec = stability.select(from_dict(COMPOSE), queries=30, seed=1)
    assert [r.name for r in spec.retrievers] == ["all-minilm-l6-v2", "bm25-minilm"]
    assert spec.baseline is None and spec.datasets[0].sample == (30, 1)
    assert len(stability.select(from_dict(COMPOSE), cells=1).retrievers) == 1
    assert [r.name for r in stability.select(from_dict(COMPOSE), names=["bm25-minilm"]).retrievers] == ["bm25-minilm"]


@pytest.mark.parametrize("kwargs, expected", [
    ({"names": ["nope"]}, "--cell 'nope' is not a retriever"),
    ({"names": ["bm25"]}, "--cell 'bm25' runs no checkpoint"),
    ({"cells": 0}, "--cells must be a whole number >= 1"),
    ({"queries": 0}, "--queries must be a whole number >= 1"),
])
def test_select_refuses_bad_choices(kwargs, expected):
    with pytest.raises(stability.StabilityError, match=expected.replace("(", r"\(")):
        stability.select(from_dict(COMPOSE), **kwargs)


@pytest.mark.parametrize("argv, expected", [
    (["audit", "does-not-exist.yaml", "--stability"], "does-not-exist.yaml does not exist"),
    (["audit", str(ROOT / "experiments" / "vaswani.yaml"), "--stability"], "no neural cell to audit"),
    (["audit", str(ROOT / "experiments" / "compose.yaml")], "name the audit to run: --stability"),
    (["audit", str(ROOT / "experiments" / "compose.yaml"), "--stability", "--batch-sizes", "1,x"],
     "--batch-sizes takes whole numbers"),
    (["audit", str(ROOT / "experiments" / "compose.yaml"), "--stability", "--batch-sizes", "0,32"],
     "--batch-sizes takes whole numbers >= 1"),
    (["audit", str(ROOT / "experiments" / "compose.yaml"), "--stability", "--cells", "0"],
     "--cells must be a whole number >= 1"),
    (["audit", str(ROOT / "experiments" / "compose.yaml"), "--stability", "--score-bound", "-1"],
     "--score-bound must be >= 0"),
])
def test_audit_bad_input_is_one_error(argv, expected, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("irgrid: error:") and expected in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing was run or written


def test_audit_with_an_unknown_option_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as done:
        main(["audit", "compose.yaml", "--stability", "--colour", "blue"])
    assert done.value.code == 2 and "unrecognized arguments: --colour" in capsys.readouterr().err
