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


# -- issue 40 item 12: one reader x one setting, wrongly typed fields ---------------------------------------------
def _one_cell(human, tmp_path, n=40):
    h = pd.read_json(human, lines=True)
    one = h[(h["model"] == h["model"].iloc[0]) & (h["setting"] == "base")].head(n).reset_index(drop=True)
    return one, tmp_path / "one.jsonl"


def test_one_reader_one_setting_writes_its_outputs_with_correlations_not_computable(human, tmp_path):
    """Was: everything scored, then scipy's pearsonr raised on one cell and nothing was written."""
    import json

    from irgrid.cli import main

    one, path = _one_cell(human, tmp_path)
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


@pytest.mark.parametrize("field, value, message", [
    ("answer_coverage", "high", "'high' is not a coverage in %"),
    ("answer_coverage", 250, "250 is not a coverage in %"),
    ("item", "seven", "'seven' is not a whole number"),
    ("golden_keypoint", "one key point", "'one key point' is not a list of key points"),
    ("model_answer", 42, "42 is not text"),
    ("setting", 3, "3 is not text"),
])
def test_wrongly_typed_fields_name_file_row_and_field(human, tmp_path, field, value, message):
    from irgrid.cli import main

    one, path = _one_cell(human, tmp_path, n=10)
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
