"""QA measures: multiple-choice accuracy, open-ended ROUGE-L / BLEU-4 / BERTScore-F1 and an AUTOMATIC key-point
coverage, plus per-group means with bootstrap confidence intervals and paired tests between settings (the statistics
are irgrid.core.significance's, as the report's are).

Key-point coverage here is automatic, not the paper's protocol (human judges decide, for each gold key point,
whether the answer entails it). Two automatic judges are offered:
* `embedding` (default offline): a key point counts as covered when its cosine similarity to some sentence of
  the answer reaches a threshold, with a sentence-embedding model (all-MiniLM-L6-v2 ships offline). A proxy for
  entailment: paraphrases pass, negations and wrong numbers can pass too.
* `judge`: a reader (any entry; an NLI-capable or larger model where one is available) is asked, per key point,
  whether the answer states it, and "yes" counts as covered.
No NLI model can be had offline here, hence the two proxies; results are labelled with the judge used.

Two conventions of the text-overlap measures, side by side: the standard ones (`rouge_l`: rouge_score with
Porter stemming and its word tokenizer; `bleu4`: NLTK sentence BLEU-4, uniform weights, smoothing 1) and the
DisastQA authors' (`rouge_l_paper`, `bleu4_paper`: see `PAPER_TEXT_CONVENTION`), which reproduce their published
per-cell values exactly.

BERTScore-F1 follows Zhang et al. (2020) with idf off: greedy cosine matching of contextual token embeddings
(special tokens excluded) from a configurable encoder layer (default: last), optionally rescaled with a baseline
as bert_score's `rescale_with_baseline` (the authors' published values are rescaled; see `irgrid.qa.replay`).
Offline we use all-MiniLM-L6-v2 unrescaled, so values are not comparable to numbers from roberta-large.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from irgrid.core import significance

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def accuracy(pred: str | None, gold: str) -> float:
    return float(pred is not None and pred == gold)


@functools.cache
def _rouge():
    """rouge_score's scorer with its own tokenizer, memoised per text: references recur in every reader and
    setting, and Porter stemming is most of ROUGE-L's cost."""
    from rouge_score import rouge_scorer, tokenizers

    class _Memo(tokenizers.Tokenizer):
        def __init__(self) -> None:
            self.inner = tokenizers.DefaultTokenizer(use_stemmer=True)
            self.memo = functools.lru_cache(maxsize=20_000)(self.inner.tokenize)

        def tokenize(self, text: str) -> list[str]:
            return self.memo(text)

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Memo())


def rouge_l(pred: str, ref: str) -> float:
    """ROUGE-L F-measure (Google's rouge_score, Porter stemming)."""
    return float(_rouge().score(ref, pred or "")["rougeL"].fmeasure)


class _Whitespace:
    """The DisastQA authors' tokens: lower-cased text split on whitespace (punctuation stays attached)."""

    def tokenize(self, text: str) -> list[str]:
        return (text or "").lower().split()


@functools.cache
def _rouge_paper():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Whitespace())


def rouge_l_paper(pred: str, ref: str) -> float:
    """ROUGE-L as the DisastQA authors computed it (`PAPER_TEXT_CONVENTION`): the LCS F-measure (beta 1) of
    lower-cased whitespace tokens (rouge_score's LCS with that tokenizer), 0 when either side is empty."""
    return float(_rouge_paper().score(ref or "", pred or "")["rougeL"].fmeasure)


def bleu4_paper(pred: str, ref: str) -> float:
    """"BLEU-4" as the DisastQA authors computed it (`PAPER_TEXT_CONVENTION`): NLTK's clipped 4-gram precision
    alone, times the linear length ratio min(1, candidate / reference length) (not BLEU's exp(1 - r/c) brevity
    penalty), no smoothing, 0 below 4 candidate tokens; tokens as `rouge_l_paper`."""
    from nltk.translate.bleu_score import modified_precision

    hyp, gold = _Whitespace().tokenize(pred), _Whitespace().tokenize(ref)
    if len(hyp) < 4 or not gold:
        return 0.0
    return float(modified_precision([gold], hyp, 4)) * min(1.0, len(hyp) / len(gold))


# Where the two `-paper` measures were verified: with the released answers (`model_answer` as is) and the items'
# `correct_answer` as released, they equal the authors' per-cell means (TamuChen18/DisastQA_open
# `oe_performance_data.json`@8234de1, `avg_rouge_l` / `avg_bleu_4`) in all 46 reader x setting cells with answers,
# to floating-point precision (tests/integration/test_qa_paper_measures.py). The authors' scoring script is not
# in their repository; this convention is inferred from those values.
PAPER_TEXT_CONVENTION = ("candidate = the raw answer, reference = correct_answer as released; lower-cased "
                         "whitespace tokens; ROUGE-L = LCS F1; BLEU-4 = clipped 4-gram precision x min(1, c/r), "
                         "no smoothing, 0 below 4 tokens; plain mean per cell")


def bleu4(pred: str, ref: str) -> float:
    """Sentence BLEU-4 (uniform weights, NLTK smoothing method 1) on lowercased word/punctuation tokens."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hyp, refs = _TOKEN.findall((pred or "").lower()), [_TOKEN.findall(ref.lower())]
    if not hyp:
        return 0.0
    return float(sentence_bleu(refs, hyp, weights=(0.25, 0.25, 0.25, 0.25),
                               smoothing_function=SmoothingFunction().method1))


class BERTScore:
    """BERTScore-F1 with any local encoder folder (AutoModel); idf off, no rescaling.

    Cost is the encoder's forward passes, so texts are deduplicated, sorted by token length (little padding) and
    batched; references' token embeddings are kept in memory (`remember`), since every reader and setting of
    DisastQA is scored against the same 1,000 references."""

    def __init__(self, location: str, layer: int | None = None, max_length: int = 256, device: str | None = None,
                 batch_size: int = 32, remember: int = 5000, baseline: float | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(location)
        self.model = AutoModel.from_pretrained(location).eval()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.layer = layer
        self.max_length = max_length
        self.batch_size = batch_size
        self.remember = remember
        self.baseline = baseline  # F baseline b: F -> (F - b) / (1 - b), bert_score's rescale_with_baseline
        self._memo: dict[str, Any] = {}
        self.encoded = 0  # texts through the encoder (for timing logs and tests)

    def _embed(self, texts: list[str], keep: bool = False) -> list[Any]:
        torch = self.torch
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        lengths = ([len(ids) for ids in self.tokenizer(todo, truncation=True, max_length=self.max_length)["input_ids"]]
                   if todo else [])
        todo = [t for _, t in sorted(zip(lengths, todo), key=lambda x: x[0])]
        fresh: dict[str, Any] = {}
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            batch = self.tokenizer(chunk, return_tensors="pt", padding=True, truncation=True,
                                   max_length=self.max_length, return_special_tokens_mask=True)
            special = batch.pop("special_tokens_mask")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with torch.inference_mode():
                hidden = self.model(**batch, output_hidden_states=self.layer is not None)
            states = hidden.last_hidden_state if self.layer is None else hidden.hidden_states[self.layer]
            mask = batch["attention_mask"].bool() & ~special.to(self.device).bool()
            for text, vecs, m in zip(chunk, states, mask):
                fresh[text] = torch.nn.functional.normalize(vecs[m].float(), dim=-1)
        self.encoded += len(todo)
        if keep:
            for text, v in fresh.items():
                if len(self._memo) < self.remember:
                    self._memo[text] = v
        return [self._memo[t] if t in self._memo else fresh[t] for t in texts]

    def f1(self, preds: Sequence[str], refs: Sequence[str]) -> list[float]:
        cands, gold = self._embed([p or "" for p in preds]), self._embed([r or "" for r in refs], keep=True)
        scores = []
        for c, r in zip(cands, gold):
            if len(c) == 0 or len(r) == 0:
                scores.append(0.0)
                continue
            sim = c @ r.T
            precision, recall = sim.max(dim=1).values.mean().item(), sim.max(dim=0).values.mean().item()
            scores.append(0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall))
        return [rescale(f, self.baseline) for f in scores] if self.baseline is not None else scores


def rescale(f1: float, baseline: float) -> float:
    """bert_score's baseline rescaling of one F1: (F - b) / (1 - b); b is the encoder layer's mean F1 of random
    sentence pairs (bert_score's `rescale_baseline/<lang>/<model>.tsv`)."""
    return (f1 - baseline) / (1.0 - baseline)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


class EmbeddingCoverage:
    """Automatic key-point coverage: a key point is covered when max cosine(key point, answer sentence) >=
    threshold (sentence-transformers model). Returns the covered share per item and the per-point decisions."""

    method = "embedding"

    def __init__(self, location: str, threshold: float = 0.6, device: str | None = None):
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(location, device=device)
        self.threshold = threshold

    def decisions(self, answer: str, key_points: Sequence[str]) -> list[bool]:
        sents = sentences(answer)
        if not sents or not key_points:
            return [False] * len(key_points)
        kp = self.model.encode(list(key_points), normalize_embeddings=True)
        an = self.model.encode(sents, normalize_embeddings=True)
        return [bool(v >= self.threshold) for v in (kp @ an.T).max(axis=1)]


class JudgeCoverage:
    """Automatic key-point coverage by a judge model: one yes/no question per key point, greedy decoding."""

    method = "judge"
    PROMPT = ("Answer: {answer}\n\nFact: {point}\n\nDoes the answer state the fact (in any wording)? "
              "Reply with yes or no.\nReply:")

    def __init__(self, generate: Callable[[list[str]], list[str]]):
        self.generate = generate

    def decisions(self, answer: str, key_points: Sequence[str]) -> list[bool]:
        if not answer or not key_points:
            return [False] * len(key_points)
        replies = self.generate([self.PROMPT.format(answer=answer, point=p) for p in key_points])
        return [r.strip().lower().startswith("yes") for r in replies]


def coverage(decisions: Sequence[bool]) -> float:
    return float(np.mean(decisions)) if len(decisions) else 0.0


# -- statistics ---------------------------------------------------------------------------------------------------
def paired_p(a: Sequence[float], b: Sequence[float], test: str, binary: bool) -> float | None:
    """p-value of a paired test between two settings on the same items (None when undefined): exact McNemar for
    binary outcomes, else `test` (t or wilcoxon), all from irgrid.core.significance as the grid's tests are."""
    if len(a) != len(b) or len(a) < 2:
        return None
    if binary:
        return significance.mcnemar_exact(a, b)
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if np.allclose(diff, 0):
        return 1.0
    p = significance.PairedTest(test)(a, b)[1]
    return None if np.isnan(p) else p  # not computable (e.g. every item differs by the same amount)


def summarize(df: pd.DataFrame, value: str, by: list[str], samples: int, seed: int) -> pd.DataFrame:
    """Mean, bootstrap CI and n of `value` per group."""
    rows = []
    for key, g in df.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        lo, hi = significance.bootstrap_ci(g[value].to_numpy(), samples, seed)
        rows.append({**dict(zip(by, key)), "value": float(g[value].mean()), "ci_low": lo, "ci_high": hi,
                     "n": int(len(g))})
    return pd.DataFrame(rows)
