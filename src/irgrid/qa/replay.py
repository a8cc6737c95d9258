"""Replay as a reader: score the DisastQA authors' released answers (`../shared/datasets/disastqa-outputs`)
through the same measures, CIs and paired tests as live readers.

`irgrid qa replay FILE --out DIR` reads one of the staged formats (detected by columns):
* multiple choice (`mcq_answers.csv.gz`): model, setting, item, question, correct_answer, model_answer,
  is_correct. Scored with our letter parser against our gold letter (`accuracy`); `accuracy-paper` scores as the
  authors did (see `authors_lookup`); the authors' flag is kept as `authors_correct`.
* open-ended (`oe_answers.jsonl.gz`): model, setting, item, question, model_answer, model_keypoint,
  answer_coverage (the authors' gpt-4o-mini coverage, mostly empty), difficulty.
* review file (`oe_human_review.jsonl.gz`): the same plus golden_keypoint; answer_coverage holds the authors'
  released gpt-4o-mini coverage labels (kept as `label_coverage`). The file is named "human review", but its only
  writer is the authors' gpt-4o-mini judge (`calculate_coverage.py`@8234de1), and it writes the i-th reply to
  finish onto row i (`enumerate(asyncio.as_completed(...))`), so labels are not attached to their answers: the
  alignment diagnostic (`judges.label_alignment`) is printed whenever such a file is read. Agreement of our judge
  with the labels is stated per reader x setting cell only (agreement.json), Yi-6B-Chat and gemma-7b excluded
  (`judges.EXCLUDED`).

Items are joined to the benchmark by question text (data.mcq / data.oe); the two repeated multiple-choice
questions are told apart by their gold letter, then by order. Per (model, setting, task) the scored answers are
cached under `$IRGRID_CACHE/qa/replay/`, keyed by the answers' content and the scoring configuration: a second
run recomputes nothing.

Conventions by name (`paper` vs `standard`):
* `ROUGE-L` and `BLEU-4` are the standard ones (`measures.rouge_l`: stemmed word tokens; `measures.bleu4`:
  cumulative sentence BLEU-4, smoothing 1) of the cleaned answer (`clean_open_answer`) against the reference
  without its "Corrected Answer:" label. `ROUGE-L-paper` and `BLEU-4-paper` are the authors' convention
  (`measures.PAPER_TEXT_CONVENTION`) of the raw answer against the reference as released; they reproduce the
  published `oe_performance_data.json`@8234de1 in all 46 cells with answers.
* BERTScore-F1: `paper` = roberta-large, layer 17, rescaled with bert_score's baseline (F 0.83122575 for that
  layer), up to 510 tokens: bert_score(lang="en", rescale_with_baseline=True), which the published
  `avg_bertscore_f1` (0.15-0.54) implies (unrescaled roberta-large F1 is ~0.85-0.92), where the weights resolve;
  otherwise the offline all-MiniLM-L6-v2 (last layer, unrescaled: no baseline exists for it) as a named
  fallback. The encoder used is recorded in manifest.json and results (`bertscore_encoder`).
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid.data import disastqa as data
from irgrid.qa import answer_measures as measures
from irgrid.qa import judges, tables
from irgrid.qa.readers import clean_open_answer, parse_letter
from irgrid.util import settings
from irgrid.util.errors import Error
from irgrid.util.hashing import config_hash
from irgrid.util.markdown import markdown_table

log = logging.getLogger("irgrid")

SETTINGS = ("base", "golden", "mix")
MCQ_COLUMNS = {"model", "setting", "item", "question", "correct_answer", "model_answer", "is_correct"}
OE_COLUMNS = {"model", "setting", "item", "question", "model_answer"}
OE_MEASURES = ("ROUGE-L", "ROUGE-L-paper", "BLEU-4", "BLEU-4-paper", "BERTScore-F1", "coverage")
PAPER_MEASURES = ("ROUGE-L-paper", "BLEU-4-paper")
CACHE_FORMAT = 2
BERTSCORE = {"paper": ("roberta-large", 17), "fallback": ("sentence-transformers/all-MiniLM-L6-v2", None)}
# bert_score's rescale baseline of roberta-large layer 17 (F column of rescale_baseline/en/roberta-large.tsv,
# Tiiiger/bert_score) and its truncation (the tokenizer's 512 minus the two special tokens)
PAPER_BERTSCORE = {"baseline": 0.83122575, "max_length": 510}


class ReplayError(Error, ValueError):
    pass


# -- loading ------------------------------------------------------------------------------------------------------
def _read(path: Path) -> pd.DataFrame:
    name = path.name.lower()
    try:
        if name.endswith((".csv", ".csv.gz")):
            return pd.read_csv(path)
        if name.endswith((".jsonl", ".jsonl.gz")):
            return pd.read_json(path, lines=True)
        if name.endswith((".json", ".json.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                return pd.DataFrame(json.load(f))
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as e:  # EOFError: a .gz cut short
        raise ReplayError(f"{path}: cannot be read (truncated or damaged?) as {name.rsplit('.', 2)[-2 if name.endswith('.gz') else -1]} "
                          f"({e}); expected the staged files of ../shared/datasets/disastqa-outputs") from None
    raise ReplayError(f"{path}: unknown format; expected .csv(.gz) for multiple choice or .jsonl(.gz) for "
                      f"open-ended answers (the files of ../shared/datasets/disastqa-outputs)")


def load(path: str | Path, models: list[str] | None = None, sample: int | None = None, seed: int = 0
         ) -> pd.DataFrame:
    """Released answers as one frame with `task` (mcq / oe), joined to benchmark qids.

    `models` keeps only those readers; `sample` keeps a fixed-seed sample of that many questions (the same
    questions for every reader and setting, so paired tests stay paired)."""
    path = Path(path)
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or sample < 1):
        raise ReplayError(f"--sample {sample!r}: the number of questions to sample must be a whole number >= 1 "
                          f"(leave it out to score every question)")
    if not path.exists():
        raise ReplayError(f"answers file {path} does not exist (the staged answers are in "
                          f"../shared/datasets/disastqa-outputs)")
    df = _read(path)
    cols = set(df.columns)
    if MCQ_COLUMNS <= cols:
        task = "mcq"
    elif OE_COLUMNS <= cols:
        task = "oe"
    else:
        raise ReplayError(f"{path}: columns {sorted(cols)} match no replay format; multiple choice needs "
                          f"{sorted(MCQ_COLUMNS)}, open-ended {sorted(OE_COLUMNS)}")
    _check_types(df, path)
    _check_answers(df, task, path)
    bad = sorted(set(df["setting"].astype(str)) - set(SETTINGS))
    if bad:
        raise ReplayError(f"{path}: unknown setting(s) {bad}; replayed answers must be base, golden or mix")
    if models:
        unknown = sorted(set(models) - set(df["model"]))
        if unknown:
            import difflib

            hints = {m: difflib.get_close_matches(m, sorted(set(df["model"])), n=1) for m in unknown}
            raise ReplayError(f"{path}: no reader(s) {unknown} (did you mean "
                              f"{', '.join(h[0] for h in hints.values() if h) or 'one of ' + str(sorted(set(df['model'])))}?)")
        df = df[df["model"].isin(models)]
    df = df.assign(task=task).reset_index(drop=True)
    df = _join(df, task, path)
    if task == "mcq":
        df["authors_lookup"] = authors_lookup(df)
    if sample is not None:
        qids = sorted(df["qid"].unique())
        rng = np.random.default_rng(seed)
        keep = set(rng.choice(qids, size=min(sample, len(qids)), replace=False))
        df = df[df["qid"].isin(keep)].reset_index(drop=True)
    return df


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _whole(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) or (
        isinstance(v, (float, np.floating)) and float(v).is_integer())


def _percent(v: Any) -> bool:
    return _missing(v) or (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                           and 0 <= float(v) <= 100)


def _texts(v: Any) -> bool:
    return isinstance(v, (list, tuple, np.ndarray)) and all(isinstance(x, str) for x in v)


# field -> (accepts, what it must be); fields a file does not have are not checked (load names missing columns)
FIELD_TYPES: dict[str, tuple[Any, str]] = {
    "model": (_text, "text (the reader's name)"),
    "setting": (_text, "text (base, golden or mix)"),
    "item": (_whole, "a whole number (the item's index in the reader's file)"),
    "question": (_text, "text (the benchmark question)"),
    "model_answer": (lambda v: _missing(v) or _text(v), "text (the reader's answer) or empty"),
    "correct_answer": (lambda v: _missing(v) or _text(v), "text (the gold letter)"),
    "answer_coverage": (_percent, "a coverage in % (a number from 0 to 100) or empty"),
    "golden_keypoint": (_texts, "a list of key points (texts)"),
    "model_keypoint": (lambda v: _missing(v) or _texts(v), "a list of key points (texts) or empty"),
}


def _check_types(df: pd.DataFrame, path: Path) -> None:
    """Every released field of the type replay reads it as, else one error naming the file, the data row and
    the field (a text where a number belongs used to fail after scoring, inside numpy or scipy)."""
    for field, (accepts, what) in FIELD_TYPES.items():
        if field not in df.columns:
            continue
        for i, v in enumerate(df[field].tolist()):
            if not accepts(v):
                raise ReplayError(f"{path}: data row {i + 1} (model {df['model'].iloc[i]!r}), field {field!r}: "
                                  f"{v!r} is not {what}; correct that row or use the released file as it is")


def _check_answers(df: pd.DataFrame, task: str, path: Path) -> None:
    """Empty cells that would score silently: a missing `is_correct` read as True (the authors' flag 1.0), a file
    with no answer at all scored 0. A missing `model_answer` on some rows is what the released file has (256
    multiple-choice rows, all flagged wrong by the authors): scored as wrong, with a warning."""
    def rows(mask: pd.Series) -> str:
        first = df[mask].iloc[0]
        return f"first: data row {int(mask.to_numpy().argmax()) + 1}, model {first['model']!r}, item {first['item']!r}"

    if task == "mcq":
        bad = ~df["is_correct"].map(lambda v: isinstance(v, (bool, np.bool_)) or v in (0, 1))
        if bad.any():
            raise ReplayError(f"{path}: {int(bad.sum())} of {len(df)} row(s) have no is_correct (or not True/False; "
                              f"{rows(bad)}); the authors' flag is needed on every row: use the released file as "
                              f"it is")
    missing = df["model_answer"].isna() | (df["model_answer"].astype(str).str.strip() == "")
    if missing.all():
        raise ReplayError(f"{path}: no row has a model_answer; nothing to score (use the released file as it is)")
    if missing.any():
        log.warning("%s: %d of %d row(s) have no model_answer (%s); they are scored as unanswered (wrong, no overlap)", path,
                    int(missing.sum()), len(df), rows(missing))


def _join(df: pd.DataFrame, task: str, path: Path) -> pd.DataFrame:
    items = data.items(task)
    by_q: dict[str, list[int]] = {}
    for i, q in enumerate(items["question"]):
        by_q.setdefault(q, []).append(i)
    missing = sorted(set(df["question"]) - set(by_q))
    if missing:
        raise ReplayError(f"{path}: {len(missing)} question(s) are not in the DisastQA {task} items "
                          f"(first: {missing[0][:80]!r}); replay needs answers to the released benchmark")
    gold = items["answer"].tolist() if task == "mcq" else None
    pos = df["question"].map(lambda q: by_q[q][0]).to_numpy().copy()
    repeated = df.index[df["question"].map(lambda q: len(by_q[q]) > 1)]
    # a repeated question: the copy with the row's gold letter, else the copies in order of the reader's file
    for (_, _), g in df.loc[repeated].groupby(["model", "setting"], sort=False):
        used: set[int] = set()
        for idx, r in g.sort_values("item").iterrows():
            cands = [i for i in by_q[r["question"]] if i not in used] or by_q[r["question"]]
            if task == "mcq" and len(cands) > 1:
                same = [i for i in cands if gold[i] == str(r["correct_answer"]).strip().upper()]
                cands = same or cands
            used.add(cands[0])
            pos[df.index.get_loc(idx)] = cands[0]
    out = df.assign(qid=items["qid"].to_numpy()[pos])
    keep = (["qid", "answer", "options"] if task == "mcq"
            else ["qid", "reference", "reference_released", "key_points", "difficulty"])
    out = out.drop(columns=[c for c in ("difficulty",) if c in out.columns and task == "oe"])
    return out.merge(items[keep], on="qid", how="left")


def authors_lookup(df: pd.DataFrame) -> list[str]:
    """Per multiple-choice row, the item whose gold letter the authors scored it against.

    Their Mix evaluation (`DATA/MCQ_evaluation/local_evaluation.py`@8234de1, `_load_golden_lookup`) reuses the
    reader's Golden result for every Mix item whose question + passage equals a Golden item's, from a dict keyed by
    question + passage (the later Golden row wins). The repeated Red Cross question (mcq-1289 gold B, mcq-1731
    gold D) has one passage for both copies, so both Mix copies get the later copy's answer and flag. Every other
    row is scored against its own item."""
    items = data.mcq().set_index("qid")
    out = df["qid"].astype(str).tolist()
    for _, g in df.groupby("model", sort=False):
        golden = g[g["setting"] == "golden"].sort_values("item")
        table = {(q, items.at[qid, "golden"]): qid for q, qid in zip(golden["question"], golden["qid"])}
        for idx, r in g[g["setting"] == "mix"].iterrows():
            found = table.get((r["question"], items.at[r["qid"], "mix"]))
            if found is not None:
                out[df.index.get_loc(idx)] = found
    return out


# -- measures -----------------------------------------------------------------------------------------------------
def bertscore_encoder(convention: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """The encoder a BERTScore convention resolves to here: paper (roberta-large, layer 17) where its weights
    exist, else the named offline fallback; `minilm` asks for the fallback directly; `off` for none."""
    from irgrid.models import resolver as models_mod

    if convention == "off":
        return {"convention": "off"}
    if convention not in ("paper", "minilm"):
        raise ReplayError(f"bertscore must be paper, minilm or off, got {convention!r}")
    if convention == "paper":
        model, layer = BERTSCORE["paper"]
        try:
            resolved = models_mod.resolve(model, extra)
            return {"convention": "paper", "model": model, "layer": layer, "location": resolved.location,
                    "source": resolved.source, "fallback": False,
                    "rescale_baseline": PAPER_BERTSCORE["baseline"], "max_length": PAPER_BERTSCORE["max_length"]}
        except Exception as e:  # noqa: BLE001 - any resolution failure means: weights not here
            reason = str(e).split(".")[0]
    model, layer = BERTSCORE["fallback"]
    resolved = models_mod.resolve(model, extra)
    out = {"convention": convention, "model": model, "layer": layer or "last", "location": resolved.location,
           "source": resolved.source, "fallback": convention == "paper"}
    if convention == "paper":
        out["why"] = f"roberta-large unavailable here ({reason}); values not comparable with the paper's"
    return out


def _cell_key(task: str, frame: pd.DataFrame, config: dict[str, Any]) -> str:
    content = frame[["qid", "model_answer"]].astype(str).to_numpy().tolist()
    return config_hash({"format": CACHE_FORMAT, "task": task, "answers": content, "config": config}, length=16)


def _score_mcq(g: pd.DataFrame) -> pd.DataFrame:
    out = g[["model", "setting", "item", "qid", "task"]].copy()
    raw = g["model_answer"]
    out["pred"] = [parse_letter(a, tuple(o)) if isinstance(a, str) else None for a, o in zip(raw, g["options"])]
    out["accuracy"] = [measures.accuracy(p, gold) for p, gold in zip(out["pred"], g["answer"])]
    gold = data.mcq().set_index("qid")["answer"]
    out["accuracy-paper"] = [measures.accuracy(p, gold[q]) for p, q in zip(out["pred"], g["authors_lookup"])]
    out["authors_lookup"] = g["authors_lookup"].to_numpy()
    out["unparseable"] = out["pred"].isna()
    out["authors_correct"] = g["is_correct"].astype(bool).astype(float).to_numpy()
    return out


# Open-ended measures are cached in groups, so changing the judge never re-runs the BERTScore encoder.
GROUPS = {"text": ("ROUGE-L", "ROUGE-L-paper", "BLEU-4", "BLEU-4-paper"), "bertscore": ("BERTScore-F1",),
          "coverage": ("coverage",)}
TEXT = {"ROUGE-L": measures.rouge_l, "ROUGE-L-paper": measures.rouge_l_paper, "BLEU-4": measures.bleu4,
        "BLEU-4-paper": measures.bleu4_paper}


def _score_oe(g: pd.DataFrame, group: str, judge: judges.Judge, scorer: judges.KeypointScorer, bert,
              wanted: tuple[str, ...] = OE_MEASURES) -> pd.DataFrame:
    """One measure group's columns for one (model, setting) cell, in the cell's row order."""
    preds = [clean_open_answer(a) if isinstance(a, str) else "" for a in g["model_answer"]]
    refs = list(g["reference"])
    out = pd.DataFrame(index=range(len(g)))
    if group == "text":
        # standard measures: the cleaned answer vs the reference; the authors': the raw answer vs the reference
        # as released (measures.PAPER_TEXT_CONVENTION)
        raw = [a if isinstance(a, str) else "" for a in g["model_answer"]]
        for name, fn in TEXT.items():
            cands, golds = (raw, list(g["reference_released"])) if name in PAPER_MEASURES else (preds, refs)
            out[name] = [fn(p, r) for p, r in zip(cands, golds)] if name in wanted else np.nan
    elif group == "bertscore":
        out["BERTScore-F1"] = bert.f1(preds, refs)
    else:
        kps = [list(k) for k in g["key_points"]]
        if judge.units == "model_keypoint":
            if "model_keypoint" not in g:
                raise ReplayError("judge units model_keypoint need the released `model_keypoint` field (open-ended "
                                  "answer files of disastqa-outputs)")
            units = [list(k) if isinstance(k, (list, tuple, np.ndarray)) else [] for k in g["model_keypoint"]]
            scores = scorer.score(units, kps, scorers=[judge.scorer])[judge.scorer]
        else:
            scores = scorer.score(preds, kps, scorers=[judge.scorer])[judge.scorer]
        out["coverage"] = judges.coverage_pct(scores, judge.threshold)
        out["keypoint_scores"] = [json.dumps([round(float(x), 4) for x in s]) for s in scores]
    return out


def _oe_base(g: pd.DataFrame) -> pd.DataFrame:
    out = g[["model", "setting", "item", "qid", "task", "difficulty"]].reset_index(drop=True)
    if "answer_coverage" in g:  # both are the authors' gpt-4o-mini labels; the review file's are `label_coverage`
        col = "label_coverage" if "golden_keypoint" in g else "authors_coverage"
        out[col] = pd.to_numeric(g["answer_coverage"], errors="coerce").to_numpy()
    return out


def _cached(key: str, compute, what: str, stats: dict[str, Any]) -> pd.DataFrame:
    """A cell part from the store's QA area (`qa/replay/`), or computed (by one job, under its lock), timed and
    published when absent."""
    from irgrid import store as store_mod

    start = time.perf_counter()
    # 15 significant digits (pandas' maximum; its default of 10 would move cached means by ~1e-12)
    part, computed = store_mod.current().qa.answers(key, compute, f"replay {what}", area="replay", precision=15,
                                                    dtype={"qid": str, "model": str, "setting": str})
    if not computed:
        log.info("replay %s: cached", what)
        stats["cached"] += 1
        return part
    took = time.perf_counter() - start
    stats["computed"] += 1
    stats["seconds"][what] = round(took, 1)
    log.info("replay %s: %d answers in %.1f s", what, len(part), took)
    return part


def score(frame: pd.DataFrame, judge: judges.Judge | None = None, bertscore: str = "paper",
          models_map: dict[str, str] | None = None, oe_measures: tuple[str, ...] = OE_MEASURES
          ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-answer scores of every (model, setting) cell. Each cell is cached by its answers' content and, for
    open-ended answers, per measure group (text overlap, BERTScore by encoder, coverage by judge)."""
    task = str(frame["task"].iloc[0])
    if judge is None:
        judge = judges.default_judge("model_keypoint" in frame)
    bad = sorted(set(oe_measures) - set(OE_MEASURES))
    if bad:
        raise ReplayError(f"unknown open-ended measure(s) {bad}; known: {list(OE_MEASURES)}")
    if "BERTScore-F1" not in oe_measures:
        bertscore = "off"
    info: dict[str, Any] = {}
    bert_cfg = bertscore_encoder(bertscore, models_map) if task == "oe" else {"convention": "n/a"}
    text_measures = sorted(set(oe_measures) & set(GROUPS["text"]))
    configs = {"text": {"measures": text_measures, **({"paper": measures.PAPER_TEXT_CONVENTION}
                                                      if set(text_measures) & set(PAPER_MEASURES) else {})},
               "bertscore": {**{k: bert_cfg.get(k) for k in ("model", "layer")},
                             **{k: bert_cfg[k] for k in ("rescale_baseline", "max_length") if k in bert_cfg}},
               "coverage": {"judge": judge.config()}}
    wanted = [g for g, ms in GROUPS.items() if set(ms) & set(oe_measures)
              and (g != "bertscore" or bert_cfg.get("location"))]
    if task == "oe":
        info["coverage_judge"] = judge.config()
        info["bertscore"] = bert_cfg
    scorer = judges.KeypointScorer(judge.model or "sentence-transformers/all-MiniLM-L6-v2", settings.device())
    bert: list[Any] = []

    def encoder():
        if not bert:
            layer = bert_cfg.get("layer")
            bert.append(measures.BERTScore(bert_cfg["location"], layer=layer if isinstance(layer, int) else None,
                                           device=settings.device(), max_length=bert_cfg.get("max_length", 256),
                                           baseline=bert_cfg.get("rescale_baseline")))
        return bert[0]

    stats: dict[str, Any] = {"computed": 0, "cached": 0, "seconds": {}}
    info["cells"] = stats
    parts = []
    for (model, setting), g in frame.groupby(["model", "setting"], sort=False):
        if task == "mcq":
            key = _cell_key(task, g, {'authors_lookup': g['authors_lookup'].tolist()})
            parts.append(_cached(key, lambda g=g: _score_mcq(g), f"{model} / {setting} / mcq",
                                 stats))
            continue
        cell = _oe_base(g)
        for group in wanted:
            key = _cell_key(task, g, {'group': group, **configs[group]})
            part = _cached(key, lambda g=g, group=group: _score_oe(
                g, group, judge, scorer, encoder() if group == "bertscore" else None, tuple(oe_measures)),
                f"{model} / {setting} / oe / {group}", stats)
            cell = pd.concat([cell, part.reset_index(drop=True)], axis=1)
        parts.append(cell)
    out = pd.concat(parts, ignore_index=True)
    if task == "oe":
        for m in OE_MEASURES:
            if m not in out:
                out[m] = np.nan
        if bert_cfg.get("convention") != "off":
            out["bertscore_encoder"] = bert_cfg["model"]
    return out, info


# -- summaries ----------------------------------------------------------------------------------------------------
def measure_columns(scored: pd.DataFrame) -> list[str]:
    if scored["task"].iloc[0] == "mcq":
        return ["accuracy", "accuracy-paper", "authors_correct"]
    cols = [m for m in OE_MEASURES if m in scored and scored[m].notna().any()]
    if "coverage" not in cols:  # the released labels are summarised beside our coverage, not on their own
        return cols
    return cols + [c for c in ("label_coverage", "authors_coverage") if c in scored and scored[c].notna().any()]


def summarize(scored: pd.DataFrame, samples: int = 1000, seed: int = 0) -> pd.DataFrame:
    return tables.summary(scored, str(scored["task"].iloc[0]), measure_columns(scored), ["model", "setting"],
                          samples, seed)


PAIRS = (("base", "golden"), ("base", "mix"), ("golden", "mix"))


def paired_tests(scored: pd.DataFrame, test: str = "t", correction: str | None = "holm") -> pd.DataFrame:
    """Golden vs Base and Mix vs Golden and Mix vs Base per reader and measure (exact McNemar for accuracy),
    corrected over the three pairs of each family, as for live readers."""
    columns = [c for c in measure_columns(scored) if c not in ("accuracy-paper", "authors_correct", "authors_coverage")]
    return tables.paired_tests(scored, str(scored["task"].iloc[0]), columns, "model", PAIRS, test, correction)


def mcq_differences(scored: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Answers where our accuracy and the authors' flag disagree, with the released fields to explain them."""
    diff = scored[scored["accuracy"] != scored["authors_correct"]]
    keep = frame.loc[:, ["model", "setting", "item", "question", "correct_answer", "model_answer", "is_correct"]]
    out = diff.merge(keep, on=["model", "setting", "item"], how="left")
    return out[["model", "setting", "item", "qid", "question", "correct_answer", "model_answer", "pred",
                "is_correct", "accuracy"]]


def label_alignment(frame: pd.DataFrame) -> dict[str, float]:
    """The alignment diagnostic of the released labels (`judges.label_alignment`), on every label of the file:
    needs only the labels and each item's gold key-point count, not a judge."""
    df = frame.dropna(subset=["answer_coverage"])
    kps = df["golden_keypoint"] if "golden_keypoint" in df else df["key_points"]
    return judges.label_alignment(df["answer_coverage"].to_numpy(float), kps.map(len).to_numpy(),
                                  df["model"].to_numpy(), df["setting"].to_numpy())


def label_agreement(scored: pd.DataFrame) -> dict[str, Any]:
    """Agreement of our coverage with the authors' released gpt-4o-mini labels at the level they support: reader x
    setting cell means (Kendall tau-b, Pearson, MAE in points) beside the setting-only baseline; readers in
    `judges.EXCLUDED` left out. Per-answer agreement is not computed: the labels are not attached to their
    answers (see the alignment diagnostic)."""
    df = scored.dropna(subset=["label_coverage", "coverage"])
    df = df[~df["model"].isin(list(judges.EXCLUDED))]
    a = judges.agreement(df, "coverage", "label_coverage")
    out = {"labels": judges.LABELS, "excluded": {m: r for m, r in judges.EXCLUDED.items() if m in set(scored["model"])},
           **{k: a[k] for k in ("n_answers", "mean_pred", "mean_labels", "n_cells", "cell_kendall_tau",
                                "cell_pearson", "cell_mae") if k in a}}
    cells_missing = {k: v for k, v in a.get("not_computable", {}).items() if k.startswith("cell_")}
    if cells_missing:  # e.g. one reader x one setting: no correlation over one cell
        out["not_computable"] = cells_missing
    if "n_cells" in a and a["n_cells"] > 2:
        out["setting_only_baseline"] = judges.setting_baseline(judges.cell_means(df))
    return out


# -- the command --------------------------------------------------------------------------------------------------
def markdown(results: pd.DataFrame, info: dict[str, Any], agreement: dict[str, Any] | None,
             differences: pd.DataFrame | None, source: str, alignment: dict[str, float] | None = None) -> str:
    task = results["task"].iloc[0]
    lines = [f"# Replay of {source}", ""]
    wide = results.pivot_table(index=["model", "setting"], columns="measure", values="value", sort=False)
    ms = list(wide.columns)
    rows = [[model, setting, *(f"{r[m]:.1f}" if "coverage" in m else f"{r[m]:.4f}" for m in ms)]
            for (model, setting), r in wide.iterrows()]
    lines += [markdown_table(["model", "setting", *ms], rows, "ll" + "r" * len(ms)), ""]
    if task == "oe":
        b = info.get("bertscore", {})
        lines += [f"BERTScore-F1 encoder: {b.get('model', 'off')} (layer {b.get('layer', '-')}"
                  + (f", rescaled with baseline F {b['rescale_baseline']}" if b.get("rescale_baseline") else "")
                  + ")" + (f" - FALLBACK: {b['why']}" if b.get("fallback") else "")]
        if "coverage" in ms:
            lines.append(f"Coverage (%): automatic judge {json.dumps(info.get('coverage_judge'))}; not the "
                         "paper's human protocol.")
        if set(ms) & set(GROUPS["text"]):
            lines.append(f"ROUGE-L-paper / BLEU-4-paper: the authors' convention ({measures.PAPER_TEXT_CONVENTION}); "
                         "ROUGE-L / BLEU-4: standard, on the cleaned answer.")
        lines.append("")
    if alignment:
        lines += [judges.alignment_line(alignment), ""]
    if agreement:
        values = {k: v for k, v in agreement.items() if not isinstance(v, dict) and k != "labels"}
        values.update({f"setting-only baseline {k}": v for k, v in agreement.get("setting_only_baseline", {}).items()
                       if not isinstance(v, dict)})
        missing = agreement.get("not_computable", {})
        lines += [f"## Agreement with {judges.LABELS} (reader x setting cells)", "",
                  f"Excluded: {', '.join(agreement['excluded']) or 'none'}.", "",
                  markdown_table(["measure", "value"], [[k, f"{v:.4f}" if isinstance(v, float) else
                                                         "not computable" if v is None else v]
                                                        for k, v in values.items()], "lr"), ""]
        lines += [f"{k}: {why}." for k, why in missing.items()] + ([""] if missing else [])
    if differences is not None:
        lines += [f"Answers where our accuracy differs from the authors' flag: {len(differences)} "
                  "(differences.csv); `accuracy-paper` scores the repeated Red Cross item as the authors did.", ""]
    return "\n".join(lines) + "\n"


def run(path: str | Path, out: str | Path | None = None, *, models: list[str] | None = None,
        sample: int | None = None, seed: int = 0, judge: judges.Judge | None = None, bertscore: str = "paper",
        bootstrap: dict[str, int] | None = None, test: str = "t", correction: str | None = "holm",
        oe_measures: tuple[str, ...] = OE_MEASURES) -> dict[str, Any]:
    """Score a released answers file; writes answers.csv, results.csv, tests.csv, results.md, manifest.json
    (+ differences.csv for multiple choice; agreement.json, with the label alignment diagnostic, for the file of
    the authors' released gpt-4o-mini coverage labels)."""
    from irgrid.runner.outputs import git_sha, package_versions

    b = {"samples": 1000, "seed": 0, **(bootstrap or {})}
    start = time.perf_counter()
    frame = load(path, models, sample, seed)
    scored, info = score(frame, judge, bertscore, oe_measures=tuple(oe_measures))
    cells = info.pop("cells")
    results = summarize(scored, b["samples"], b["seed"])
    tests = paired_tests(scored, test, correction)
    task = scored["task"].iloc[0]
    differences = mcq_differences(scored, frame) if task == "mcq" else None
    alignment = label_alignment(frame) if task == "oe" and "golden_keypoint" in frame else None
    if alignment:
        log.info("%s", judges.alignment_line(alignment))
    agreement = (label_agreement(scored) if alignment is not None and "coverage" in scored
                 and scored["coverage"].notna().any() else None)
    answers = scored.drop(columns=[c for c in ("unparseable",) if c in scored])
    if out is not None:
        manifest = {"source": str(path), "task": task, "models": sorted(scored["model"].unique()),
                    "sample": sample, "seed": seed, "answers": int(len(scored)), "scorers": info,
                    "bootstrap": b, "test": test, "correction": correction, "git": git_sha(),
                    "packages": package_versions(), "cache": str(settings.cache_root()),
                    "cells": cells, "wall_s": round(time.perf_counter() - start, 1)}
        files = {"answers": answers, "results": results, "tests": tests}
        if differences is not None:
            files["differences"] = differences
        extra = ({"agreement": {**agreement, "alignment": alignment}} if agreement is not None
                 else {"label_alignment": alignment} if alignment is not None else None)
        tables.write(out, files, markdown(results, info, agreement, differences, str(path), alignment), manifest,
                     extra)
    log.info("replay %s: %d cell parts computed, %d from the cache, %.1f s", path, cells["computed"],
             cells["cached"], time.perf_counter() - start)
    return {"answers": answers, "results": results, "tests": tests, "differences": differences,
            "agreement": agreement, "alignment": alignment, "info": info, "cells": cells}


# -- the replay reader in QA experiment files ----------------------------------------------------------------------
FILES = {"mcq": "mcq_answers.csv.gz", "oe": "oe_answers.jsonl.gz"}


def outputs_dir() -> Path:
    return data.shared_root() / "datasets" / "disastqa-outputs"


def reader_entry(raw: dict[str, Any], where: str):
    """`{replay: MODEL, dir: FOLDER}` in an experiment's readers: the released answers of MODEL as a reader."""
    from irgrid.core.modelref import ModelRef
    from irgrid.qa.readers import Reader

    extra = sorted(set(raw) - {"replay", "dir"})
    if extra:
        raise ReplayError(f"{where}: unknown key(s) {extra}; a replay reader is {{replay: MODEL, dir: FOLDER}}")
    folder = str(raw.get("dir") or outputs_dir())
    return Reader(f"replay-{raw['replay']}", ModelRef(str(raw["replay"])), backend="replay",
                  params={"dir": folder}, notes="released answers of the DisastQA authors, replayed")


class ReplayReader:
    """Answers of one released reader for the items of a cell: the frame a live reader's transform returns."""

    def __init__(self, entry):
        self.entry = entry
        self.model = entry.model.id
        self.folder = Path(entry.params["dir"])
        self._frames: dict[str, pd.DataFrame] = {}

    def _frame(self, task: str) -> pd.DataFrame:
        if task not in self._frames:
            self._frames[task] = load(self.folder / FILES[task], [self.model])
        return self._frames[task]

    def answer(self, df: pd.DataFrame, setting: str) -> pd.DataFrame:
        task = str(df["task"].iloc[0]) if "task" in df and len(df) else None
        if task is None:
            task = "mcq" if str(df["qid"].iloc[0]).startswith("mcq") else "oe"
        if setting not in SETTINGS:
            raise ReplayError(f"reader {self.entry.name}: released answers exist only for base, golden and mix, "
                              f"not for setting {setting!r}")
        rel = self._frame(task)
        rel = rel[rel["setting"] == setting].drop_duplicates("qid").set_index("qid")
        missing = sorted(set(df["qid"]) - set(rel.index))
        if missing:
            raise ReplayError(f"reader {self.entry.name}: no released {task} answer for {len(missing)} item(s) in "
                              f"setting {setting} (first {missing[0]}); the file "
                              f"{self.folder / FILES[task]} lacks them (see its README)")
        raw = [rel.at[q, "model_answer"] for q in df["qid"]]
        out = df[["qid"]].copy()
        out["prompt"] = None
        out["qanswer"] = [a if isinstance(a, str) else "" for a in raw]
        if task == "mcq":
            out["pred"] = [parse_letter(a, tuple(o)) if isinstance(a, str) else None
                           for a, o in zip(raw, df["options"])]
        else:
            out["pred"] = [clean_open_answer(a) if isinstance(a, str) else "" for a in raw]
        out["evidence_docnos"] = [[] for _ in range(len(out))]
        return out
