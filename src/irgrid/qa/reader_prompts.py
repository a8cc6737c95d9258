"""Reader prompts as data (DisastQA Appendix H/I).

The paper shows its templates only as images; their structure and wording follow the released evaluation code
(TamuChen18/DisastQA_open, DATA/MCQ_evaluation/local_evaluation.py and DATA/OE_evaluation/
local_evaluation_with_difficulty.py): "Passage: ... Question: ... Options: ... Answer:" zero-shot for multiple
choice, and for open-ended questions the difficulty shown to the model with a complexity-adaptive word limit
(Appendix I). Two deliberate differences: the multiple-choice prompt asks for the letter explicitly (the released
prompt ends at "Answer:" and relied on a first-capital-letter parser), and options are printed once with their
letter (the released code printed "A. A. ..." for the staged files, whose options already carry the letter).
Templates are `str.format` strings; the QA grid stores them in each cell's configuration, so editing one
recomputes exactly the cells that use it.
"""

from __future__ import annotations

from collections.abc import Sequence

from irgrid.data.errors import InputError

# Appendix I: the word limit follows the item's difficulty (i.e. its number of gold key points).
WORD_LIMITS: dict[str, str] = {"easy": "10-100", "medium": "20-200", "hard": "60-350",
                               "extremely_complex": "120-500"}
# The released code's generation budgets per difficulty (tokens); experiments may cap them.
OE_MAX_NEW_TOKENS: dict[str, int] = {"easy": 80, "medium": 180, "hard": 300, "extremely_complex": 400}

TEMPLATES: dict[str, str] = {
    # multiple choice, no passage (Base)
    "mcq/none": (
        "Question: {question}\nOptions:\n{options}\n\n"
        "Answer with the letter of the correct option (A, B, C or D).\nAnswer:"
    ),
    # multiple choice, one passage (Golden, Mix as released)
    "mcq/one": (
        "Passage: {passage}\n\nQuestion: {question}\nOptions:\n{options}\n\n"
        "Answer with the letter of the correct option (A, B, C or D).\nAnswer:"
    ),
    # multiple choice, several passages (Retrieved top-k; the paper's 1 gold + 4 distractors Mix)
    "mcq/many": (
        "You are given {k} passages (some may be irrelevant).\n\n{passages}\n\nQuestion: {question}\n"
        "Options:\n{options}\n\nAnswer with the letter of the correct option (A, B, C or D).\nAnswer:"
    ),
    "oe/none": (
        "Question: {question}\n\nDifficulty Level: {difficulty}\n\n"
        "Instructions: Provide a comprehensive answer within {word_limit} words. Ensure you cover all important "
        "aspects and key points related to the question. Be thorough but concise.\n\nAnswer:"
    ),
    "oe/one": (
        "Passage: {passage}\n\nQuestion: {question}\nDifficulty Level: {difficulty}\n\n"
        "Instructions: Provide a comprehensive answer within {word_limit} words. Ensure you cover all important "
        "aspects and key points related to the question. Be thorough but concise.\n\nAnswer:"
    ),
    # Appendix H.2 (Mix): the model names its source passage first; the QA grid strips that line before scoring
    "oe/many": (
        "You are given {k} passages (some may be irrelevant). You must select ONLY ONE passage that is most "
        "relevant to answer the question. First output the passage number you selected in the format "
        "\"Passage: <single number between 1 and {k}>\", then provide a comprehensive answer based on that "
        "passage.\n\n{passages}\n\nQuestion: {question}\nDifficulty Level: {difficulty}\n\n"
        "Instructions: Provide a comprehensive answer within {word_limit} words. Ensure you cover all important "
        "aspects and key points related to the question. Be thorough but concise.\n\nAnswer:"
    ),
}


def truncate_words(text: str, max_words: int | None) -> str:
    if max_words is None:
        return text
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words]) + " ..."


def render(task: str, question: str, passages: Sequence[str], *, options: Sequence[str] = (),
           difficulty: str | None = None, templates: dict[str, str] | None = None,
           max_passage_words: int | None = None) -> str:
    """The prompt text for one item; the template is chosen by the number of passages (0, 1, several)."""
    templates = {**TEMPLATES, **(templates or {})}
    shape = "none" if not passages else "one" if len(passages) == 1 else "many"
    template = templates[f"{task}/{shape}"]
    texts = [truncate_words(p, max_passage_words) for p in passages]
    fields = {
        "question": question, "k": len(texts), "passage": texts[0] if texts else "",
        "passages": "\n\n".join(f"Passage {i}: {t}" for i, t in enumerate(texts, 1)),
        "options": "\n".join(f"{letter}. {o}" for letter, o in zip("ABCD", options)),
    }
    if task == "oe":
        if difficulty not in WORD_LIMITS:
            raise InputError(f"open-ended item without a known difficulty ({difficulty!r}; one of "
                             f"{', '.join(WORD_LIMITS)}): its word limit comes from it")
        fields.update(difficulty=difficulty.upper(), word_limit=WORD_LIMITS[difficulty])
    return template.format(**fields)
