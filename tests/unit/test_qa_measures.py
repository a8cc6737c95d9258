"""QA measures on hand-checked examples, the letter parser on real reader outputs, prompts and settings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irgrid.core import significance
from irgrid.qa import answer_measures as measures
from irgrid.qa import evidence
from irgrid.qa import reader_prompts as prompts
from irgrid.qa.readers import READERS, clean_open_answer, parse_letter

# Outputs of SmolLM2-135M-Instruct (greedy, bf16) on DisastQA multiple-choice prompts of this package.
REAL_OUTPUTS = [
    ("A", "A"),
    ("C. It provides detailed scientific explanations of", "C"),
    ("A. 150 m/", "A"),
    ("A. Once every two years on average", "A"),
    ("B. Establish a forum for", "B"),
    ("B. 20%", "B"),
    ("B", "B"),
    ("C. Indirect transmission via", "C"),
    ("A. Payment is based on", "A"),
]


@pytest.mark.parametrize(("text", "letter"), REAL_OUTPUTS)
def test_parse_letter_real_outputs(text, letter):
    assert parse_letter(text) == letter


@pytest.mark.parametrize(("text", "letter"), [
    ("(B)", "B"), ("**D**", "D"), ("B) Ensure proper ventilation", "B"), ("Answer: C", "C"),
    ("The correct answer is D.", "D"), ("Option B is correct", "B"), ("I think it is C.", "C"),
    ("A major impact is the loss of power.", None),  # an article, not a choice
    ("", None), ("I cannot tell.", None),
])
def test_parse_letter_formats(text, letter):
    assert parse_letter(text) == letter


def test_parse_letter_by_option_text():
    options = ("Store the device in direct sunlight", "Ensure proper ventilation and wear protective equipment",
               "Dispose of it in regular trash", "Only use it outdoors")
    assert parse_letter("You should ensure proper ventilation and wear protective equipment.", options) == "B"
    assert parse_letter("Store the device in direct sunlight or only use it outdoors", options) is None


def test_clean_open_answer():
    assert clean_open_answer("Passage: 3\nThe flood gauge rose.") == "The flood gauge rose."
    assert clean_open_answer("Answer: Evacuate early.") == "Evacuate early."


def test_rouge_bleu_by_hand():
    # LCS of "the cat sat on the mat" / "the cat is on the mat" has 5 of 6 tokens: P = R = F = 5/6
    assert measures.rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    assert measures.rouge_l("", "the cat") == 0.0
    # all n-gram precisions 1, brevity penalty exp(1 - 5/4)
    assert measures.bleu4("a b c d", "a b c d e") == pytest.approx(0.7788007831, abs=1e-6)
    assert measures.bleu4("flood warning issued today", "flood warning issued today") == pytest.approx(1.0)
    assert measures.bleu4("", "anything") == 0.0
    assert measures.accuracy("B", "B") == 1.0 and measures.accuracy(None, "B") == 0.0


def test_statistics_by_hand():
    assert significance.mcnemar_exact([1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0]) == pytest.approx(2 * 0.5 ** 5)
    assert significance.mcnemar_exact([1, 0], [1, 0]) == 1.0
    assert significance.bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    lo, hi = significance.bootstrap_ci([0, 1] * 50, samples=500, seed=1)
    assert lo < 0.5 < hi and significance.bootstrap_ci([0, 1] * 50, samples=500, seed=1) == (lo, hi)
    corrected = significance.correct([0.01, 0.04, None], "holm")  # no test (None): NaN, outside the family
    assert corrected[:2].tolist() == [pytest.approx(0.02), pytest.approx(0.04)] and np.isnan(corrected[2])
    assert measures.paired_p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], "t", binary=False) == 1.0


def test_prompts_and_word_limits():
    mcq = prompts.render("mcq", "Which?", ["P1"], options=("x", "y", "z", "w"))
    assert mcq.startswith("Passage: P1\n\nQuestion: Which?\nOptions:\nA. x\nB. y\nC. z\nD. w")
    oe = prompts.render("oe", "Why?", [], difficulty="hard")
    assert "Difficulty Level: HARD" in oe and "within 60-350 words" in oe
    many = prompts.render("oe", "Why?", ["one two three", "four"], difficulty="easy", max_passage_words=2)
    assert "Passage 1: one two ..." in many and "between 1 and 2" in many and "10-100 words" in many
    with pytest.raises(ValueError):
        prompts.render("oe", "Why?", [], difficulty=None)


def test_fixed_settings():
    frame = pd.DataFrame({"qid": ["q1"], "query": ["Q"], "golden": ["gold text"], "mix": ["mix text"]})
    assert evidence.fixed("base").transform(frame)["qcontext"].tolist() == [[]]
    assert evidence.fixed("golden").transform(frame)["qcontext"].tolist() == [["gold text"]]
    assert evidence.fixed("mix").transform(frame)["qcontext"].tolist() == [["mix text"]]
    with pytest.raises(ValueError):
        evidence.fixed("oracle")


def test_reader_registry_covers_table_17():
    papers = {r.paper_name for r in READERS if r.paper_name}
    assert len(papers) == 19 and {"Qwen3-8B", "Phi-2", "AceMath-1.5B", "GPT-4o", "Gemini-3 Pro"} <= papers
    assert all(r.model.id for r in READERS) and "smollm2-135m-instruct" in READERS
