"""QA replay without the released files: leave-one-reader-out folds, BLEU conventions, judge names, bad inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid.data import disastqa as data
from irgrid.qa import judges, replay

OUTPUTS = data.shared_root() / "datasets" / "disastqa-outputs"
MCQ, OE, HUMAN = (OUTPUTS / f for f in ("mcq_answers.csv.gz", "oe_answers.jsonl.gz", "oe_human_review.jsonl.gz"))


def test_cross_validation_is_leave_one_reader_out():
    h = pd.read_json(HUMAN, lines=True).rename(columns={"answer_coverage": "human_coverage"})
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


def test_bleu_conventions_by_hand():
    # the authors' BLEU-4: 4-gram precision only (2/2 here), brevity penalty exp(1 - 6/5), no smoothing
    assert replay.bleu4_paper("a b c d e", "a b c d e f") == pytest.approx(np.exp(1 - 6 / 5))
    # no matching 4-gram: NLTK returns its smallest float instead of 0 when unsmoothed
    assert replay.bleu4_paper("a b c", "a b c d") == pytest.approx(0.0, abs=1e-300)
    assert replay.bleu4_paper("", "a b") == 0.0
    # whitespace tokens: punctuation stays attached ("d." is not "d")
    assert replay.bleu4_paper("a b c d.", "a b c d .") == pytest.approx(0.0, abs=1e-300)


def test_judge_names_and_errors():
    j = judges.parse_judge("hybrid@0.5")
    assert (j.scorer, j.threshold, j.units) == ("hybrid", 0.5, "answer") and judges.parse_judge(j.name()) == j
    k = judges.parse_judge("lexical@0.325/model_keypoint")
    assert judges.parse_judge(k.name()) == k and k.model is None
    with pytest.raises(ValueError, match="did you mean 'hybrid'"):
        judges.parse_judge("hybird@0.5")
    with pytest.raises(ValueError, match="needs a capable judge model"):
        judges.parse_judge("llm@0.5")
    with pytest.raises(ValueError, match="number"):
        judges.parse_judge("lexical@high")


def test_bad_replay_inputs(tmp_path):
    with pytest.raises(replay.ReplayError, match="does not exist"):
        replay.load(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(replay.ReplayError, match="match no replay format"):
        replay.load(bad)
    with pytest.raises(replay.ReplayError, match="did you mean qwen-3-8b"):
        replay.load(MCQ, models=["qwen-3-8"])



# -- issue 32: one error line naming the file or the value, never a traceback or a silent score ------------------
@pytest.mark.parametrize("source, name", [(MCQ, "cut.csv.gz"), (OE, "cut.jsonl.gz")])
def test_truncated_gzip_is_named(tmp_path, source, name):
    cut = tmp_path / name
    cut.write_bytes(source.read_bytes()[:4000])
    with pytest.raises(replay.ReplayError, match=rf"{cut}: cannot be read \(truncated or damaged\?\)"):
        replay.load(cut)


@pytest.mark.parametrize("sample", [0, -1])
def test_sample_below_one_is_refused(sample):
    with pytest.raises(replay.ReplayError, match=rf"--sample {sample}: .* whole number >= 1"):
        replay.load(MCQ, sample=sample)


def test_rows_without_the_authors_flag_or_any_answer_are_refused(tmp_path, caplog):
    rows = pd.read_csv(MCQ, nrows=40)
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
