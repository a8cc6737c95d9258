"""QA measures that embed with the shipped all-MiniLM-L6-v2: BERTScore and embedding coverage."""

from __future__ import annotations

import pytest

from irgrid.qa import answer_measures as measures


@pytest.fixture(scope="module")
def minilm() -> str:
    from irgrid.models.resolver import resolve

    return resolve("sentence-transformers/all-MiniLM-L6-v2").location


def test_bertscore(minilm):
    scorer = measures.BERTScore(minilm, device="cpu")
    same, para, other, empty = scorer.f1(
        ["Residents should evacuate before the hurricane makes landfall.",
         "People ought to leave before the hurricane reaches the coast.",
         "The quarterly revenue of the company grew by four percent.", ""],
        ["Residents should evacuate before the hurricane makes landfall."] * 4)
    assert same == pytest.approx(1.0, abs=1e-5)
    assert other < para < same and empty == 0.0


def test_embedding_coverage(minilm):
    judge = measures.EmbeddingCoverage(minilm, threshold=0.6, device="cpu")
    answer = "Residents should evacuate before landfall. Shelters open at local schools."
    decisions = judge.decisions(answer, ["Shelters are opened in local schools.",
                                         "The company's revenue grew four percent."])
    assert decisions == [True, False]
    assert measures.coverage(decisions) == 0.5 and measures.coverage([True, False, True]) == pytest.approx(2 / 3)
    assert judge.decisions("", ["anything"]) == [False]

