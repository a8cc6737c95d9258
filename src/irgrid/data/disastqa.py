"""Loaders for the staged DisastQA release (MIT, TamuChen18/DisastQA_open, files from commit 1667416b).

Where the files are: `IRGRID_DISASTQA` (the folder holding `final_mcq/` and `final_OE/`), else
`$IRGRID_SHARED/datasets/disastqa`, else `../shared/datasets/disastqa` next to the repository. Nothing is ever
written there.

Quirks of the release, checked by tests/integration/test_qa_data.py (counts are for the full files):

* Multiple choice (`final_mcq/{base,golden,mix}_2000.json`): 2,000 items, the three files in the same order.
  Options are stored with their letter ("A. ..."), always A-D in order; the gold letters are balanced (500 each).
  1,998 distinct questions: two questions occur twice (same golden passage, different `original_query`; one of
  the pairs has different gold letters), so items are keyed by position (`mcq-0000`...), never by text.
  `original_query` is the DisastIR query the item was drawn from; the question was written from the passage and
  is sometimes about another topic than the query (item 0: a query on POPs, a question on a hepatitis test).
* The Mix file holds ONE passage per item, not the paper's "1 gold + 4 distractors" (the upstream evaluation
  rebuilt those five from DisastIR files that were not released). In the multiple-choice Mix file 1,417 of 2,000
  passages equal the golden one; the other 583 are a different passage that does not contain the golden text.
  In the open-ended Mix file 700 of 1,000 equal the golden passage (after alignment).
* Open-ended (`final_OE/*_oe_with_difficulty.json`): 1,000 items. Base and Mix are in the same order; the Golden
  file is in another order (3 of 1,000 positions agree), so items are aligned by question text (the 1,000
  questions are distinct and identical across the three files). Key points are only in the Golden file, but
  there for all 1,000 items (the paper describes a 200-item human subset; 1 to 14 points, mean 4.4).
  `difficulty` bins the key-point count: easy 1-2 (109 items), medium 3-5 (684), hard 6-7 (181),
  extremely_complex 8-14 (26). `llm_answer` is always empty. One reference answer starts with the annotation
  label "Corrected Answer: ", which the loader strips (`reference`); `reference_released` keeps the text as
  released (the three files agree), which the authors' own ROUGE-L / BLEU-4 were computed against.
* No field gives the disaster (event) type, so breakdowns by event type are not possible from these files.
* Passages: 3,675 distinct texts over the four Golden/Mix files (2,462 in the multiple-choice pair, 1,280 in the
  open-ended pair, 49 golden passages shared between the tasks); none is empty.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid.util.errors import Error

if TYPE_CHECKING:
    import pandas as pd

FILES: dict[str, dict[str, str]] = {
    "mcq": {"base": "final_mcq/base_2000.json", "golden": "final_mcq/golden_2000.json",
            "mix": "final_mcq/mix_2000.json"},
    "oe": {"base": "final_OE/base_oe_with_difficulty.json", "golden": "final_OE/golden_oe_with_difficulty.json",
           "mix": "final_OE/mix_oe_with_difficulty.json"},
}
COUNTS = {"mcq": 2000, "oe": 1000}
LETTERS = ("A", "B", "C", "D")
DIFFICULTIES = ("easy", "medium", "hard", "extremely_complex")
_CORRECTED = "Corrected Answer:"


class DisastQAError(Error, RuntimeError):
    pass


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def shared_root() -> Path:
    """IRGRID_SHARED, else ../shared beside the repository (read only)."""
    from irgrid.util import settings

    return settings.shared_root() or repo_root().parent / "shared"


def data_dir() -> Path:
    from irgrid.util import settings

    value = settings.variable("IRGRID_DISASTQA")
    path = Path(value).expanduser() if value else shared_root() / "datasets" / "disastqa"
    if not (path / "final_mcq").is_dir() or not (path / "final_OE").is_dir():
        raise DisastQAError(
            f"DisastQA data not found at {path} (expected final_mcq/ and final_OE/ from TamuChen18/DisastQA_open, "
            f"commit 1667416b). Set IRGRID_DISASTQA to that folder or IRGRID_SHARED to the folder holding "
            f"datasets/disastqa"
        )
    return path


def _read(task: str, setting: str) -> list[dict[str, Any]]:
    path = data_dir() / FILES[task][setting]
    if not path.exists():
        raise DisastQAError(f"missing DisastQA file {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or len(data) != COUNTS[task]:
        raise DisastQAError(f"{path}: expected a list of {COUNTS[task]} items, got {type(data).__name__} "
                            f"of {len(data) if isinstance(data, list) else '?'}")
    return data


def _mcq_content(item: dict[str, Any]) -> dict[str, Any]:
    return item["multiple_choice"]["gpt40"]["content"]


def _oe_content(item: dict[str, Any]) -> dict[str, Any]:
    return item["open_ended"]["gpt40"]["content"]


def _strip_letter(option: str, letter: str) -> str:
    for prefix in (f"{letter}. ", f"{letter}) ", f"{letter}."):
        if option.startswith(prefix):
            return option[len(prefix):].strip()
    raise DisastQAError(f"option {option!r} does not start with its letter {letter}")


@cache
def mcq() -> pd.DataFrame:
    """The 2,000 multiple-choice items with their Golden and Mix passages (one row per item, file order)."""
    import pandas as pd

    base, golden, mix = (_read("mcq", s) for s in ("base", "golden", "mix"))
    rows = []
    for i, (b, g, m) in enumerate(zip(base, golden, mix)):
        cb, cg, cm = _mcq_content(b), _mcq_content(g), _mcq_content(m)
        if not (cb["question"] == cg["question"] == cm["question"]):
            raise DisastQAError(f"multiple-choice files disagree at position {i}: the files are expected in one order")
        options = cb["options"]
        if len(options) != 4:
            raise DisastQAError(f"multiple-choice item {i} has {len(options)} options, expected 4")
        rows.append({
            "qid": f"mcq-{i:04d}", "task": "mcq", "question": cb["question"],
            "options": tuple(_strip_letter(o, letter) for o, letter in zip(options, LETTERS)),
            "answer": cb["correct_option"].strip().upper(), "reason": cb.get("reason", ""),
            "golden": g["passage"], "mix": m["passage"], "original_query": b["original_query"],
        })
    return pd.DataFrame(rows)


def _reference(text: str) -> str:
    text = text.strip()
    return text[len(_CORRECTED):].strip() if text.startswith(_CORRECTED) else text


@cache
def oe() -> pd.DataFrame:
    """The 1,000 open-ended items, in the Base file's order; Golden aligned by question text."""
    import pandas as pd

    base, golden, mix = (_read("oe", s) for s in ("base", "golden", "mix"))
    by_question = {}
    for g in golden:
        q = _oe_content(g)["question"]
        if q in by_question:
            raise DisastQAError(f"open-ended Golden file repeats the question {q[:80]!r}")
        by_question[q] = g
    rows = []
    for i, (b, m) in enumerate(zip(base, mix)):
        cb, cm = _oe_content(b), _oe_content(m)
        if cb["question"] != cm["question"]:
            raise DisastQAError(f"open-ended Base and Mix files disagree at position {i}")
        g = by_question.get(cb["question"])
        if g is None:
            raise DisastQAError(f"open-ended question {i} of the Base file is not in the Golden file")
        cg = _oe_content(g)
        key_points = tuple(k.strip() for k in cg.get("key_points") or [] if k.strip())
        if not key_points:
            raise DisastQAError(f"open-ended item {i} has no key points")
        rows.append({
            "qid": f"oe-{i:04d}", "task": "oe", "question": cb["question"],
            "reference": _reference(cb["correct_answer"]), "reference_released": cb["correct_answer"],
            "key_points": key_points,
            "difficulty": b["difficulty"], "golden": g["passage"], "mix": m["passage"],
            "original_query": b["original_query"],
        })
    df = pd.DataFrame(rows)
    unknown = sorted(set(df["difficulty"]) - set(DIFFICULTIES))
    if unknown:
        raise DisastQAError(f"unknown open-ended difficulty value(s) {unknown}")
    return df


def items(task: str) -> pd.DataFrame:
    if task == "mcq":
        return mcq()
    if task == "oe":
        return oe()
    raise DisastQAError(f"unknown DisastQA task {task!r}; use 'mcq' or 'oe'")


def stratified_sample(df: pd.DataFrame, n: int | None, seed: int, by: str | None) -> pd.DataFrame:
    """A fixed-seed sample of n rows, allocated to the strata of `by` in proportion to their size (largest
    remainders; every stratum gets one row first when n allows it). n=None or n >= len(df) keeps every row."""
    if n is None or n >= len(df):
        return df.reset_index(drop=True)
    if n <= 0:
        raise DisastQAError(f"sample size must be positive, got {n}")
    if by is None:
        return df.sample(n=n, random_state=seed).sort_index().reset_index(drop=True)
    sizes = df.groupby(by, sort=True).size()
    alloc = {k: 0 for k in sizes.index}
    remaining = n
    if n >= len(sizes):
        for k in alloc:
            alloc[k] = 1
        remaining -= len(sizes)
    quotas = {k: remaining * (sizes[k] - alloc[k]) / max(1, len(df) - sum(alloc.values())) for k in sizes.index}
    for k in sizes.index:
        alloc[k] += int(quotas[k])
    left = n - sum(alloc.values())
    for k in sorted(sizes.index, key=lambda k: (-(quotas[k] - int(quotas[k])), str(k)))[:left]:
        alloc[k] += 1
    import pandas as pd

    parts = [df[df[by] == k].sample(n=min(alloc[k], int(sizes[k])), random_state=seed) for k in sizes.index]
    return pd.concat(parts).sort_index().reset_index(drop=True)
