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
    h = pd.read_json(HUMAN, lines=True).rename(columns={"answer_coverage": "label_coverage"})
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


# -- issue 40 item 12: one reader x one setting, wrongly typed fields ---------------------------------------------
def _one_cell(tmp_path, n=40):
    h = pd.read_json(HUMAN, lines=True)
    one = h[(h["model"] == h["model"].iloc[0]) & (h["setting"] == "base")].head(n).reset_index(drop=True)
    return one, tmp_path / "one.jsonl"


def test_one_reader_one_setting_writes_its_outputs_with_correlations_not_computable(tmp_path):
    """Was: everything scored, then scipy's pearsonr raised on one cell and nothing was written."""
    import json

    from irgrid.cli import main

    one, path = _one_cell(tmp_path)
    one.to_json(path, orient="records", lines=True)
    out = tmp_path / "out"
    assert main(["qa", "replay", str(path), "--out", str(out), "--judge", "lexical@0.325/model_keypoint",
                 "--measures", "coverage"]) == 0
    assert len(pd.read_csv(out / "answers.csv")) == 40
    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement["n_cells"] == 1 and agreement["cell_pearson"] is None and agreement["cell_kendall_tau"] is None
    assert "1 reader x setting cell, a correlation needs at least 3" in agreement["not_computable"]["cell_pearson"]
    assert agreement["cell_mae"] >= 0  # what one cell does support
    md = (out / "results.md").read_text()
    assert "| cell_pearson | not computable |" in md and "cell_pearson: not computable: 1 reader x setting" in md


def test_correlation_needs_three_points_and_spread():
    assert judges.correlation("pearson", [1, 2], [2, 1])[0] is None  # +-1 by construction with two
    assert "constant" in judges.correlation("spearman", [1, 1, 1], [1, 2, 3])[1]
    assert judges.correlation("kendall", [1, 2, 3], [1, 2, 3]) == (1.0, None)


@pytest.mark.parametrize("field, value, message", [
    ("answer_coverage", "high", "'high' is not a coverage in %"),
    ("answer_coverage", 250, "250 is not a coverage in %"),
    ("item", "seven", "'seven' is not a whole number"),
    ("golden_keypoint", "one key point", "'one key point' is not a list of key points"),
    ("model_answer", 42, "42 is not text"),
    ("setting", 3, "3 is not text"),
])
def test_wrongly_typed_fields_name_file_row_and_field(tmp_path, field, value, message):
    from irgrid.cli import main

    one, path = _one_cell(tmp_path, n=10)
    one[field] = one[field].astype(object)
    one.at[6, field] = value
    one.to_json(path, orient="records", lines=True)
    with pytest.raises(replay.ReplayError) as e:
        replay.load(path)
    assert str(e.value).startswith(f"{path}: data row 7 (model 'AceMath-1.5B-Instruct'), field '{field}': ")
    assert message in str(e.value)
    assert main(["qa", "replay", str(path), "--out", str(tmp_path / "o"), "--judge", "lexical@0.325/model_keypoint",
                 "--measures", "coverage"]) != 0
    assert not (tmp_path / "o").exists()
