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

