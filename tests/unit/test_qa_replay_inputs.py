"""QA replay without the released files: BLEU conventions, judge names, bad inputs. What reads the released files
(leave-one-reader-out folds, truncated files, the authors' flags) is in tests/integration/test_qa_released_inputs.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid.qa import judges, replay


def test_paper_conventions_by_hand():
    from irgrid.qa import answer_measures as measures

    # "BLEU-4" as the DisastQA authors computed it: the clipped 4-gram precision (2/2 here) times the linear
    # length ratio 5/6 (not BLEU's exp(1 - 6/5)), no smoothing
    assert measures.bleu4_paper("a b c d e", "a b c d e f") == pytest.approx(5 / 6)
    assert measures.bleu4_paper("a b c d e f g", "a b c d") == pytest.approx(1 / 4)  # longer: no length term
    assert measures.bleu4_paper("a a a a a a", "a a a a") == pytest.approx(1 / 3)  # clipped: 1 of 3 4-grams
    assert measures.bleu4_paper("A B C D", "a b c d") == 1.0  # lower-cased
    assert measures.bleu4_paper("a b c", "a b c") == 0.0  # below 4 candidate tokens
    assert measures.bleu4_paper("a b c d.", "a b c d .") == 0.0  # whitespace tokens: "d." is not "d"
    assert measures.bleu4_paper("", "a b") == 0.0 and measures.bleu4_paper("a b c d", "") == 0.0
    # ROUGE-L: LCS F1 of lower-cased whitespace tokens, no stemming, punctuation attached
    assert measures.rouge_l_paper("The cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    assert measures.rouge_l_paper("the cats sat", "the cat sat") == pytest.approx(2 / 3)  # no stemming
    assert measures.rouge_l_paper("the mat.", "the mat") == pytest.approx(1 / 2)
    assert measures.rouge_l_paper("", "the cat") == 0.0 and measures.rouge_l_paper("the cat", "") == 0.0
    # the standard pair keeps its own convention (stemmed, punctuation split off)
    assert measures.rouge_l("the cats sat", "the cat sat") == pytest.approx(1.0)
    # BERTScore's baseline rescaling (bert_score rescale_with_baseline): (F - b) / (1 - b)
    assert measures.rescale(0.9, 0.8) == pytest.approx(0.5) and measures.rescale(0.8, 0.8) == 0.0


def test_setting_only_baseline_by_hand():
    cells = pd.DataFrame({"model": ["a", "a", "b", "b", "c", "c"], "setting": ["base", "golden"] * 3,
                          "label_coverage": [70.0, 90.0, 80.0, 96.0, 60.0, 93.0]})
    b = judges.setting_baseline(cells)
    # a/base is predicted by the base mean of b and c (70), a/golden by (96 + 93) / 2, ...
    pred = np.array([70.0, 94.5, 65.0, 91.5, 75.0, 93.0])
    assert b["cell_mae"] == pytest.approx(np.abs(pred - cells["label_coverage"]).mean()) and b["n_cells"] == 6


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



# -- issue 32: one error line naming the file or the value, never a traceback or a silent score ------------------
@pytest.mark.parametrize("sample", [0, -1])
def test_sample_below_one_is_refused(sample):
    with pytest.raises(replay.ReplayError, match=rf"--sample {sample}: .* whole number >= 1"):
        replay.load("mcq_answers.csv.gz", sample=sample)  # refused before any file is read


def test_correlation_needs_three_points_and_spread():
    assert judges.correlation("pearson", [1, 2], [2, 1])[0] is None  # +-1 by construction with two
    assert "constant" in judges.correlation("spearman", [1, 1, 1], [1, 2, 3])[1]
    assert judges.correlation("kendall", [1, 2, 3], [1, 2, 3]) == (1.0, None)
