"""QA replay inputs read from the DisastQA authors' released files (<shared>/datasets/disastqa-outputs; skipped,
naming it, when absent): leave-one-reader-out folds of the coverage judges, a mistyped reader name, truncated
files and rows without the authors' flag or an answer."""

from __future__ import annotations

import pandas as pd
import pytest

from irgrid.qa import judges, replay

OUTPUTS = "datasets/disastqa-outputs"


@pytest.fixture
def released(shared_path):
    """The released answers' folder, or a skip naming it."""
    return shared_path(OUTPUTS)


@pytest.fixture
def mcq(released):
    return released / "mcq_answers.csv.gz"


@pytest.fixture
def human(released):
    return released / "oe_human_review.jsonl.gz"


@pytest.mark.slow  # ~50 s on a loaded 2-core machine: lexical scores of all 8,400 reviewed answers
def test_cross_validation_is_leave_one_reader_out(human):
    h = pd.read_json(human, lines=True).rename(columns={"answer_coverage": "label_coverage"})
    scores = judges.KeypointScorer().score([list(k) for k in h["model_keypoint"]], list(h["golden_keypoint"]),
                                           scorers=["lexical"])
    cv = judges.cross_validate(h, scores, "cell_mae")
    assert len(cv["folds"]) == 14 and {f["held_out"] for f in cv["folds"]} == set(h["model"])
    # each fold's choice is the best on the other 13 readers, never on the held-out one
    fold = cv["folds"][0]
    train = h[h["model"] != fold["held_out"]]
    best = min(judges.THRESHOLDS, key=lambda t: judges.agreement(
        train.assign(coverage=judges.coverage_pct([s for s, m in zip(scores["lexical"], h["model"])
                                                   if m != fold["held_out"]], t)))["cell_mae"])
    assert fold["threshold"] == best
    held = pd.Series(cv["held_out_coverage"])
    assert held.notna().all() and cv["held_out"]["cell_kendall_tau"] > 0.7


def test_a_mistyped_reader_is_named(mcq):
    with pytest.raises(replay.ReplayError, match="did you mean qwen-3-8b"):
        replay.load(mcq, models=["qwen-3-8"])


# -- issue 32: one error line naming the file or the value, never a traceback or a silent score ------------------
@pytest.mark.parametrize("source, name", [("mcq_answers.csv.gz", "cut.csv.gz"), ("oe_answers.jsonl.gz", "cut.jsonl.gz")])
def test_truncated_gzip_is_named(tmp_path, released, source, name):
    source = released / source  # the released file to cut
    cut = tmp_path / name
    cut.write_bytes(source.read_bytes()[:4000])
    with pytest.raises(replay.ReplayError, match=rf"{cut}: cannot be read \(truncated or damaged\?\)"):
        replay.load(cut)


def test_rows_without_the_authors_flag_or_any_answer_are_refused(tmp_path, caplog, mcq):
    rows = pd.read_csv(mcq, nrows=40)
    path = tmp_path / "mcq.csv"
    rows.assign(is_correct=rows["is_correct"].where(rows.index % 7 != 3)).to_csv(path, index=False)
    with pytest.raises(replay.ReplayError, match=r"6 of 40 row\(s\) have no is_correct .*first: data row 4"):
        replay.load(path)
    rows.assign(model_answer=None).to_csv(path, index=False)
    with pytest.raises(replay.ReplayError, match="no row has a model_answer"):
        replay.load(path)
    # some empty answers are what the released file has: scored as wrong, with a warning
    rows.assign(model_answer=rows["model_answer"].where(rows.index != 5)).to_csv(path, index=False)
    frame = replay.load(path)
    assert len(frame) == 40 and "1 of 40 row(s) have no model_answer (first: data row 6" in caplog.text
