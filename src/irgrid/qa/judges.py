"""Key-point coverage judges, their agreement with the authors' released gpt-4o-mini coverage labels, and the
cross-validated choice.

The paper describes its coverage as human-verified: for each gold key point whether the answer entails it,
coverage = covered / all (%). What the authors released (`oe_human_review.jsonl.gz` in
../shared/datasets/disastqa-outputs, "Final_Human_Review") are the labels of their automatic judge
(`calculate_coverage.py`@8234de1 in TamuChen18/DisastQA_open: gpt-4o-mini matches LLM-extracted answer key points
against the gold ones; it is the files' only writer), written in completion order: lines ~158-164 run
`enumerate(asyncio.as_completed(...))` and store the i-th reply to finish on row i, so a label is not attached to
its answer (`label_alignment` shows it). They are called "the authors' released gpt-4o-mini coverage labels"
here, never human labels; gpt-4o-mini is not reachable here. A judge here is a *scorer* (one number in
[0, 1] per gold key point: how well the answer states it) plus a *threshold*: a key point counts as covered when its score reaches the threshold.

Scorers (ours: none of the reused libraries scores key-point recall):
* `lexical`: share of the key point's content words (lowercased, Porter-stemmed, English stop words removed)
  that occur in the answer.
* `embedding`: max cosine between the key point and any answer sentence (sentence-transformers model,
  all-MiniLM-L6-v2 offline). Embeddings are cached on disk (`EmbeddingCache`), keyed by model and text.
* `hybrid`: the mean of the two (paraphrases lift the embedding score, exact facts and numbers the lexical one).
* `llm`: a yes/no judge model (`measures.JudgeCoverage`); needs a capable model, none ships offline (see
  README: SmolLM2-135M, the only offline one, answered "no" to every key point, positive controls included).

Agreement with the labels is claimed per reader x setting cell only (the cell means survive the misattachment;
per-answer figures are computed for the objectives but carry only between-file differences): Kendall tau-b,
Pearson and mean absolute error (points) of the cell means, beside a setting-only baseline (each held-out cell
predicted by its setting's mean over the other readers, `setting_baseline`). The default judge and threshold are
chosen by leave-one-reader-out cross-validation (`cross_validate`) over the 12 labelled readers that are not
`EXCLUDED`: for each, the (scorer, threshold) with the best training objective on the other 11 scores the
held-out one; the held-out predictions of all folds give the reported estimate. Nothing is ever fitted on all
readers at once except the final default (fitted on all 12, as any CV-selected model).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid.qa import arguments
from irgrid.qa.answer_measures import sentences
from irgrid.util.errors import Error
from irgrid.util.markdown import markdown_table

SCORERS = arguments.SCORERS
JUDGES = SCORERS + ("llm",)
UNITS = ("answer", "model_keypoint")
LABELS = "the authors' released gpt-4o-mini coverage labels"
# Readers whose review labels are not a separate labelling of the 200 reviewed questions: for these two, all 600
# labels equal, question by question, the automatic labels of the same readers' 1,000-question files
# (oe_answers.jsonl.gz `answer_coverage`), i.e. drawn from the other pool's completion order (checked by
# tests/integration/test_qa_paper_measures.py). They are left out of judge validation.
EXCLUDED = {m: "review labels equal the automatic labels of the 1,000-question file question by question (drawn "
               "from another pool's completion order), not a separate labelling" for m in ("Yi-6B-Chat", "gemma-7b")}
THRESHOLDS = tuple(round(float(t), 3) for t in np.arange(0.20, 0.951, 0.025))
_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")


@functools.cache
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@functools.cache
def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def content_words(text: str) -> set[str]:
    stop = _stop_words()
    return {_stem(w) for w in _WORD.findall((text or "").lower()) if w not in stop}


def lexical_scores(answer: str, key_points: Sequence[str]) -> np.ndarray:
    words = content_words(answer)
    out = []
    for kp in key_points:
        kw = content_words(kp)
        out.append(len(kw & words) / len(kw) if kw else 0.0)
    return np.asarray(out, dtype=float)


class JudgeError(Error, ValueError):
    """A coverage judge, its units, threshold or objective that irgrid cannot use; the message says what can be."""


class EmbeddingCache:
    """Normalised sentence embeddings, one sqlite file per model in the store's `qa/embeddings/` area: each text
    is encoded once, whichever judge, replay or test asks for it; each chunk is one transaction."""

    def __init__(self, location: str, model_key: str, device: str | None = None, batch_size: int = 64):
        from irgrid import store as store_mod

        self.location = location
        self.device = device
        self.batch_size = batch_size
        self._model = None
        store = store_mod.current()
        self.path = store.qa.embeddings_db(model_key)
        self.db = store.open_sqlite(self.path, "CREATE TABLE IF NOT EXISTS emb (h TEXT PRIMARY KEY, v BLOB)")

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.location, device=self.device)
        return self._model

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 900):
            chunk = unique[start:start + 900]
            rows = self.db.execute(f"SELECT h, v FROM emb WHERE h IN ({','.join('?' * len(chunk))})", chunk)
            found.update({h: np.frombuffer(v, dtype=np.float32) for h, v in rows})
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        for start in range(0, len(missing), 4096):
            chunk = missing[start:start + 4096]
            vecs = self.model.encode(chunk, batch_size=self.batch_size, normalize_embeddings=True,
                                     convert_to_numpy=True).astype(np.float32)
            self.db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)",
                                [(self._key(t), v.tobytes()) for t, v in zip(chunk, vecs)])
            self.db.commit()
            found.update({self._key(t): v for t, v in zip(chunk, vecs)})
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])


@dataclass
class Judge:
    """One coverage judge: a scorer and the threshold at which a key point counts as covered."""

    scorer: str
    threshold: float
    model: str | None = None  # embedding / hybrid: the sentence-embedding model id
    # what a gold key point is matched against: the answer's sentences, or (replay only) the answer key points
    # the authors extracted with an LLM (`model_keypoint`), the inputs of their own automatic coverage
    units: str = "answer"

    def name(self) -> str:
        return f"{self.scorer}@{self.threshold:g}" + ("" if self.units == "answer" else f"/{self.units}")

    def config(self) -> dict[str, Any]:
        return {"scorer": self.scorer, "threshold": self.threshold, "model": self.model, "units": self.units,
                "automatic": True, "note": "automatic; NOT the paper's human key-point protocol"}


# The defaults, chosen by leave-one-reader-out cross-validation over the 12 labelled readers (EXCLUDED left out) with the
# objective reader x setting MAE (`make qa-judges`; held-out figures in README.md). DEFAULT matches gold key
# points against the answer's sentences (any reader, live or replayed); DEFAULT_ANSWER_KEYPOINTS against the
# answer key points the authors extracted (released files that carry `model_keypoint`).
DEFAULT = Judge("lexical", 0.35)
DEFAULT_ANSWER_KEYPOINTS = Judge("lexical", 0.325, units="model_keypoint")


def default_judge(has_answer_keypoints: bool) -> Judge:
    return DEFAULT_ANSWER_KEYPOINTS if has_answer_keypoints else DEFAULT


class KeypointScorer:
    """Per-key-point scores of every scorer for many (answer, key points) pairs, embeddings batched and cached."""

    def __init__(self, model: str = "sentence-transformers/all-MiniLM-L6-v2", device: str | None = None):
        self.model_id = model
        self.device = device
        self._cache: EmbeddingCache | None = None

    @property
    def cache(self) -> EmbeddingCache:
        if self._cache is None:
            from irgrid.models import resolver as models_mod

            resolved = models_mod.resolve(self.model_id)
            key = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model_id)
            self._cache = EmbeddingCache(resolved.location, key, self.device)
        return self._cache

    def score(self, answers: Sequence[str | Sequence[str]], key_points: Sequence[Sequence[str]],
              scorers: Sequence[str] = SCORERS) -> dict[str, list[np.ndarray]]:
        """`answers`: texts (split into sentences) or lists of units (e.g. the answer's extracted key points)."""
        out: dict[str, list[np.ndarray]] = {}
        sents = [[u for u in a if u and u.strip()] if isinstance(a, (list, tuple, np.ndarray)) else sentences(a)
                 for a in answers]
        lex = [lexical_scores(" ".join(ss), k) for ss, k in zip(sents, key_points)]
        if "lexical" in scorers:
            out["lexical"] = lex
        if {"embedding", "hybrid"} & set(scorers):
            flat_s = [s for ss in sents for s in ss]
            flat_k = [k for ks in key_points for k in ks]
            es = self.cache.encode(flat_s) if flat_s else np.zeros((0, 1), dtype=np.float32)
            ek = self.cache.encode(flat_k) if flat_k else np.zeros((0, 1), dtype=np.float32)
            emb, i, j = [], 0, 0
            for ss, ks in zip(sents, key_points):
                a, b = es[i:i + len(ss)], ek[j:j + len(ks)]
                i, j = i + len(ss), j + len(ks)
                emb.append(np.clip((b @ a.T).max(axis=1), 0.0, 1.0) if len(ss) and len(ks)
                           else np.zeros(len(ks)))
            if "embedding" in scorers:
                out["embedding"] = emb
            if "hybrid" in scorers:
                out["hybrid"] = [(x + y) / 2 for x, y in zip(lex, emb)]
        return out


class JudgeAdapter:
    """A Judge behind the `decisions(answer, key_points)` interface of the live QA grid's coverage judges."""

    def __init__(self, judge: Judge, device: str | None = None):
        self.judge = judge
        self.scorer = KeypointScorer(judge.model or "sentence-transformers/all-MiniLM-L6-v2", device)

    def decisions(self, answer: str, key_points: Sequence[str]) -> list[bool]:
        if not key_points:
            return []
        s = self.scorer.score([answer], [list(key_points)], scorers=[self.judge.scorer])[self.judge.scorer][0]
        return [bool(x >= self.judge.threshold - 1e-12) for x in s]


def coverage_pct(scores: Sequence[np.ndarray], threshold: float) -> np.ndarray:
    """Coverage in % per answer: the share of key points whose score reaches the threshold."""
    return np.array([100.0 * float(np.mean(s >= threshold - 1e-12)) if len(s) else 0.0 for s in scores])


# -- agreement ----------------------------------------------------------------------------------------------------
MIN_CORRELATION = 3  # points a correlation needs: with 2 it is +-1 by construction, with 1 undefined


def correlation(kind: str, x: Any, y: Any, what: str = "points") -> tuple[float | None, str | None]:
    """(value, None), or (None, why it is not computable): fewer than `MIN_CORRELATION` pairs, or a constant
    side (scipy raises on fewer than 2 and warns and returns NaN on a constant input)."""
    from scipy import stats

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < MIN_CORRELATION:
        return None, f"not computable: {len(a)} {what}, a correlation needs at least {MIN_CORRELATION}"
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, f"not computable: one side is constant over the {len(a)} {what}"
    f = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}[kind]
    return float(f(a, b).statistic), None


def _with_correlations(out: dict[str, Any], pairs: dict[str, tuple[str, Any, Any, str]]) -> dict[str, Any]:
    """Adds each named correlation to `out`: its value, or None with the reason under `not_computable`."""
    for key, (kind, x, y, what) in pairs.items():
        value, why = correlation(kind, x, y, what)
        out[key] = value
        if why:
            out.setdefault("not_computable", {})[key] = why
    return out


def agreement(frame: pd.DataFrame, pred: str = "coverage", labels: str = "label_coverage",
              label_cells: pd.Series | None = None) -> dict[str, Any]:
    """Per answer Spearman / Pearson / MAE, and reader x setting Kendall tau-b / Pearson / MAE of the means; a
    correlation on too few answers or cells is None, with the reason under `not_computable`.

    `label_cells` (indexed by model, setting) replaces the label cell means, e.g. the full file's means when
    `frame` holds a sample of the questions (the released per-answer labels are not aligned with the answers,
    so a sample's own label mean is a random subset of its cell's labels, not these questions' labels)."""
    df = frame[[c for c in ("model", "setting", pred, labels) if c in frame]].dropna(subset=[pred, labels])
    p, h = df[pred].to_numpy(float), df[labels].to_numpy(float)
    out: dict[str, Any] = {"n_answers": int(len(df)), "mean_pred": float(p.mean()), "mean_labels": float(h.mean())}
    _with_correlations(out, {"answer_spearman": ("spearman", p, h, "answers"),
                             "answer_pearson": ("pearson", p, h, "answers")})
    out["answer_mae"] = float(np.abs(p - h).mean())
    if {"model", "setting"} <= set(df.columns):
        cells = df.groupby(["model", "setting"])[[pred, labels]].mean()
        if label_cells is not None:
            cells[labels] = label_cells.reindex(cells.index).to_numpy(float)
        out["n_cells"] = int(len(cells))
        what = "reader x setting cell" + ("" if len(cells) == 1 else "s")
        _with_correlations(out, {"cell_kendall_tau": ("kendall", cells[pred], cells[labels], what),
                                 "cell_pearson": ("pearson", cells[pred], cells[labels], what)})
        out["cell_mae"] = float((cells[pred] - cells[labels]).abs().mean())
    return out


def setting_baseline(cells: pd.DataFrame, labels: str = "label_coverage") -> dict[str, float]:
    """The reference any judge must beat at the cell level: each reader x setting cell (rows of `cells`, columns
    model, setting, `labels` = the cell's mean label) predicted by the mean label of its setting over the OTHER
    readers. Returns Kendall tau-b, Pearson and MAE (points) of those predictions."""
    pred = np.array([cells.loc[(cells["setting"] == r.setting) & (cells["model"] != r.model), labels].mean()
                     for r in cells.itertuples()])
    truth = cells[labels].to_numpy(float)
    out: dict[str, Any] = {"n_cells": int(len(cells))}
    _with_correlations(out, {"cell_kendall_tau": ("kendall", pred, truth, "reader x setting cells"),
                             "cell_pearson": ("pearson", pred, truth, "reader x setting cells")})
    out["cell_mae"] = float(np.abs(pred - truth).mean())
    return out


def cell_means(frame: pd.DataFrame, labels: str = "label_coverage",
               label_cells: pd.Series | None = None) -> pd.DataFrame:
    cells = frame.groupby(["model", "setting"])[labels].mean()
    if label_cells is not None:
        cells = label_cells.reindex(cells.index)
    return cells.rename(labels).reset_index()


def _consistent(values: np.ndarray, n_kp: np.ndarray) -> np.ndarray:
    """Whether each coverage value (%) is a multiple of 100/n for its key-point count n (0 and 100 always are)."""
    k = values * n_kp / 100.0
    return (np.abs(k - np.round(k)) < 0.06) | np.isin(np.round(values, 2), [0.0, 100.0])


def label_alignment(values: np.ndarray, n_kp: np.ndarray, model: np.ndarray, setting: np.ndarray,
                    permutations: int = 20, seed: int = 0) -> dict[str, float]:
    """Are the released labels attached to the right answers? A label other than 0 and 100 must be a
    multiple of 100/n for its own item's key-point count n. Returns that share as released, the same share after
    shuffling labels within each reader x setting file (what misattached labels give), and the share of all
    labels that some one-to-one assignment to the file's own items makes consistent (1.0 when a file's labels
    are valid coverages of its items, only written to the wrong rows)."""
    from scipy.optimize import linear_sum_assignment

    def share(v: np.ndarray) -> float:
        return float(_consistent(v, n_kp)[~np.isin(np.round(v, 2), [0.0, 100.0])].mean())

    rng = np.random.default_rng(seed)
    cells = pd.Series(list(zip(model, setting)))
    files = list(cells.groupby(cells).indices.values())
    shuffled = []
    for _ in range(permutations):
        v = values.copy()
        for idx in files:
            v[idx] = rng.permutation(v[idx])
        shuffled.append(share(v))
    matched = 0.0
    for idx in files:
        fits = _consistent(values[idx][:, None], n_kp[idx][None, :]).astype(float)
        rows, cols = linear_sum_assignment(-fits)
        matched += fits[rows, cols].sum()
    # what per-answer agreement the between-file differences alone give: every answer predicted by its file's
    # mean label (no judge can add within-file signal to labels that are not attached to their answers)
    file_mean = pd.Series(values).groupby(cells).transform("mean").to_numpy()
    out: dict[str, Any] = {"labels_consistent_with_keypoint_count": share(values),
                           "labels_consistent_if_shuffled_within_file": float(np.mean(shuffled)),
                           "labels_consistent_after_best_reassignment_within_file": float(matched / len(values))}
    # one file: every answer's file mean is the same, so these are not computable (None, with the reason)
    return _with_correlations(out, {"answer_spearman_of_file_means": ("spearman", file_mean, values, "answers"),
                                    "answer_pearson_of_file_means": ("pearson", file_mean, values, "answers")})


OBJECTIVES = ("answer_pearson", "answer_spearman", "answer_mae", "cell_kendall_tau", "cell_pearson", "cell_mae")


class _Objective:
    """A fast objective over subsets of rows: cell objectives need only the reader x setting means (bincount)."""

    def __init__(self, frame: pd.DataFrame, objective: str, labels: str, label_cells: pd.Series | None = None):
        if objective not in OBJECTIVES:
            raise JudgeError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.objective = objective
        self.labels = frame[labels].to_numpy(float)
        keys = pd.Series(list(zip(frame["model"], frame["setting"])))
        self.cells, uniques = pd.factorize(keys)
        self.ref = (None if label_cells is None else
                    np.array([label_cells.loc[k] for k in uniques], dtype=float))

    def __call__(self, cov: np.ndarray, mask: np.ndarray) -> float:
        """Higher is better (MAE is negated)."""
        from scipy import stats

        p, h = cov[mask], self.labels[mask]
        if self.objective.startswith("answer"):
            if self.objective == "answer_mae":
                return -float(np.abs(p - h).mean())
            f = stats.spearmanr if self.objective == "answer_spearman" else stats.pearsonr
            v = f(p, h).statistic
            return float(v) if np.isfinite(v) else -np.inf
        c = self.cells[mask]
        n = np.bincount(c)
        keep = n > 0
        mp, mh = (np.bincount(c, p)[keep] / n[keep]), (np.bincount(c, h)[keep] / n[keep])
        if self.ref is not None:
            mh = self.ref[:len(n)][keep]
        if self.objective == "cell_mae":
            return -float(np.abs(mp - mh).mean())
        f = stats.kendalltau if self.objective == "cell_kendall_tau" else stats.pearsonr
        v = f(mp, mh).statistic
        return float(v) if np.isfinite(v) else -np.inf


def sweep(frame: pd.DataFrame, scores: dict[str, list[np.ndarray]], thresholds: Sequence[float] = THRESHOLDS,
          labels: str = "label_coverage", label_cells: pd.Series | None = None) -> pd.DataFrame:
    """Agreement of every (scorer, threshold) on the rows of `frame` (aligned with the score lists)."""
    rows = []
    for scorer, per_answer in scores.items():
        for t in thresholds:
            f = frame.assign(coverage=coverage_pct(per_answer, t))
            rows.append({"scorer": scorer, "threshold": float(t), **agreement(f, "coverage", labels, label_cells)})
    return pd.DataFrame(rows)


def cross_validate(frame: pd.DataFrame, scores: dict[str, list[np.ndarray]], objective: str = "cell_kendall_tau",
                   thresholds: Sequence[float] = THRESHOLDS, labels: str = "label_coverage",
                   scorers: Sequence[str] | None = None, label_cells: pd.Series | None = None) -> dict[str, Any]:
    """Leave-one-reader-out choice of (scorer, threshold): per fold, the best candidate on the other readers by
    `objective` scores the held-out reader; returns the folds, the pooled held-out agreement and the choice
    on all readers (the default judge). Ties go to the earlier candidate (scorer order, then lower threshold)."""
    frame = frame.reset_index(drop=True)
    obj = _Objective(frame, objective, labels, label_cells)
    scorers = list(scorers or scores)
    cand = [(s, float(t)) for s in scorers for t in thresholds]
    cov = {c: coverage_pct(scores[c[0]], c[1]) for c in cand}
    held = np.full(len(frame), np.nan)
    folds = []

    def best_on(mask: np.ndarray) -> tuple[tuple[str, float], float]:
        values = [obj(cov[c], mask) for c in cand]
        i = int(np.argmax(values))
        return cand[i], values[i]

    for r in sorted(frame["model"].unique()):
        train = (frame["model"] != r).to_numpy()
        best, value = best_on(train)
        held[~train] = cov[best][~train]
        folds.append({"held_out": r, "scorer": best[0], "threshold": best[1],
                      "train_objective": -value if objective.endswith("mae") else value})
    best, _ = best_on(np.ones(len(frame), dtype=bool))
    return {"objective": objective, "scorers": scorers, "thresholds": [float(t) for t in thresholds],
            "folds": folds, "held_out": agreement(frame.assign(coverage=held), "coverage", labels, label_cells),
            "held_out_coverage": held.tolist(), "default": {"scorer": best[0], "threshold": best[1]},
            "default_in_sample": agreement(frame.assign(coverage=cov[best]), "coverage", labels, label_cells)}


def write_json(path: Path, obj: Any) -> None:
    import json

    from irgrid.util.files import write_text_atomic

    write_text_atomic(path, json.dumps(obj, indent=2, default=float))


def parse_judge(text: str, model: str = "sentence-transformers/all-MiniLM-L6-v2") -> Judge:
    """`hybrid@0.5` -> Judge("hybrid", 0.5), `lexical@0.3/model_keypoint` matches against the authors' answer
    key points; the printed form `Judge.name()` parses back."""
    text, _, units = text.partition("/")
    units = units or "answer"
    if units not in UNITS:
        raise JudgeError(f"judge units {units!r} unknown; use one of {UNITS}")
    scorer, _, threshold = text.partition("@")
    if scorer == "llm":
        raise JudgeError("the llm judge needs a capable judge model; none is available offline here (SmolLM2-135M, the only "
                         "offline one, answers no to every key point): use lexical, embedding or hybrid")
    if scorer not in SCORERS:
        import difflib

        hint = difflib.get_close_matches(scorer, SCORERS, n=1)
        raise JudgeError(f"unknown coverage judge {scorer!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
                         + f"; use SCORER@THRESHOLD with SCORER one of {SCORERS}, e.g. hybrid@0.5")
    try:
        t = float(threshold)
    except ValueError:
        raise JudgeError(f"judge {text!r}: the threshold after '@' must be a number in [0, 1], e.g. "
                         f"{scorer}@0.5") from None
    if not 0.0 <= t <= 1.0:
        raise JudgeError(f"judge {text!r}: the threshold must be in [0, 1]")
    return Judge(scorer, t, None if scorer == "lexical" else model, units)


# -- validation against the released labels (make qa-judges) -------------------------------------------------------
def question_sample(questions: Sequence[str], n: int | None, seed: int = 0) -> set[str]:
    qs = sorted(set(questions))
    if n is None or n >= len(qs):
        return set(qs)
    return set(np.random.default_rng(seed).choice(qs, n, replace=False))


def validate(labels_path: str | Path, out: str | Path | None = None, *, scorers: Sequence[str] = SCORERS,
             units: Sequence[str] = UNITS, questions: int | None = None, seed: int = 0,
             objectives: Sequence[str] = ("cell_mae", "cell_kendall_tau", "cell_pearson"),
             model: str = "sentence-transformers/all-MiniLM-L6-v2") -> dict[str, Any]:
    """Every judge against the authors' released gpt-4o-mini coverage labels: the label-alignment check on all
    labels, then (readers in `EXCLUDED` left out) threshold sweeps, leave-one-reader-out CV per objective and the
    setting-only baseline. `questions` restricts to a fixed-seed sample of the 200 questions (cell-level figures
    then compare with the full file's label means)."""
    h = pd.read_json(labels_path, lines=True).rename(columns={"answer_coverage": "label_coverage"})
    alignment = label_alignment(h["label_coverage"].to_numpy(float), h["golden_keypoint"].map(len).to_numpy(),
                                h["model"].to_numpy(), h["setting"].to_numpy())
    h = h[~h["model"].isin(list(EXCLUDED))]
    label_cells = h.groupby(["model", "setting"])["label_coverage"].mean()
    keep = question_sample(h["question"], questions, seed)
    h = h[h["question"].isin(keep)].reset_index(drop=True)
    ks = KeypointScorer(model)
    scores: dict[str, list[np.ndarray]] = {}
    for u in units:
        texts = list(h["model_answer"]) if u == "answer" else [list(k) for k in h["model_keypoint"]]
        for name, s in ks.score(texts, list(h["golden_keypoint"]), scorers=scorers).items():
            scores[name if u == "answer" else f"{name}/{u}"] = s
    ref = None if questions is None else label_cells
    sweep_df = sweep(h, scores, label_cells=ref)
    cv = {}
    for objective in objectives:
        for group, names in {"answer": [n for n in scores if "/" not in n],
                             "model_keypoint": [n for n in scores if n.endswith("/model_keypoint")],
                             "all": list(scores)}.items():
            if names:
                res = cross_validate(h, scores, objective, scorers=names, label_cells=ref)
                res.pop("held_out_coverage")
                cv[f"{objective}|{group}"] = res
    result = {"source": str(labels_path), "labels": LABELS, "answers": int(len(h)), "questions": len(keep),
              "readers": int(h["model"].nunique()), "excluded": EXCLUDED, "embedding_model": model,
              "alignment": alignment, "cv": cv,
              "setting_baseline": setting_baseline(cell_means(h, label_cells=label_cells))}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        from irgrid.util.files import write_text_atomic

        write_text_atomic(out / "sweep.csv", sweep_df.to_csv(index=False))
        write_json(out / "cv.json", result)
        write_text_atomic(out / "report.md", validation_markdown(result))
    result["sweep"] = sweep_df
    return result


def alignment_line(al: dict[str, float]) -> str:
    """The label diagnostic in one sentence (printed whenever the released label file is read)."""
    return (f"Label alignment ({LABELS}): {al['labels_consistent_with_keypoint_count']:.3f} of the labels other "
            f"than 0/100 fit their item's key-point count n (a multiple of 100/n), "
            f"{al['labels_consistent_if_shuffled_within_file']:.3f} after shuffling within each reader x setting "
            f"file, {al['labels_consistent_after_best_reassignment_within_file']:.3f} of all labels after the best "
            "reassignment within each file: the labels are valid coverages of their file's items, written to the "
            "wrong rows (completion order), so agreement is stated per reader x setting cell only.")


def validation_markdown(result: dict[str, Any]) -> str:
    excluded = ", ".join(result["excluded"])
    lines = [f"# Coverage judges vs {result['labels']} ({result['answers']} answers, {result['readers']} readers, "
             f"{result['questions']} questions)", "",
             f"Excluded: {excluded} ({next(iter(result['excluded'].values()))}).", "",
             "Held-out (leave-one-reader-out) agreement of reader x setting cell means: the judge chosen on the "
             "other readers, per objective, and the setting-only baseline (each held-out cell predicted by its "
             "setting's mean label over the other readers). Per-answer agreement is not claimed.",
             ""]
    rows = []
    for key, r in result["cv"].items():
        objective, group = key.split("|")
        d, a = r["default"], r["held_out"]
        scorer, _, units = d["scorer"].partition("/")
        name = Judge(scorer, d["threshold"], units=units or "answer").name()
        rows.append([objective, group, name, f"{a['cell_kendall_tau']:.3f}", f"{a['cell_pearson']:.3f}",
                     f"{a['cell_mae']:.2f}"])
    b = result["setting_baseline"]
    rows.append(["setting-only baseline", "-", "-", f"{b['cell_kendall_tau']:.3f}", f"{b['cell_pearson']:.3f}",
                 f"{b['cell_mae']:.2f}"])
    lines += [markdown_table(["objective", "candidates", "default (all readers)", "cell Kendall tau", "cell Pearson",
                              "cell MAE (pp)"], rows, "lllrrr"), "", alignment_line(result["alignment"])]
    return "\n".join(lines) + "\n"


def run_validation(args: Any) -> int:
    """`irgrid qa judges` (make qa-judges): validate, print the report."""
    result = validate(args.labels, args.out, scorers=args.scorers.split(","), questions=args.questions)
    print(validation_markdown(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m irgrid.qa.judges`: an alias of `irgrid qa judges` (same arguments)."""
    import argparse
    import logging

    p = argparse.ArgumentParser(prog="python -m irgrid.qa.judges", description="the same as `irgrid qa judges`")
    arguments.judges_arguments(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return run_validation(args)


if __name__ == "__main__":
    raise SystemExit(main())
