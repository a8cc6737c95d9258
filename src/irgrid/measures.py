"""The paper's measures that ir_measures lacks, and its aggregate columns.

They are ir_measures measures (`ir_measures.measures.Measure` subclasses served by a small ir_measures provider
placed first in `ir_measures.DefaultPipeline`), so `ir_measures.calc*` and `pt.Experiment` evaluate them and paired
tests apply. `ir_measures.define()` does not fit: it hides the measure's parameters (the cutoff of Robustness@k,
the wrapped measure of og:...) from the implementation, and its evaluator fills every *qrels* query id that got
no value with a default, which is wrong for values keyed by base query.

Query id conventions (set by the loaders in `irgrid.loaders`):
* InstructIR: `<base>_<n>` is instruction variant n of query `<base>`; Robustness@k groups by `<base>`.
* FollowIR: `<base>-og` / `<base>-changed` are one topic under its original / changed instruction; p-MRR and
  og:<measure> report one value per `<base>`.
Measures keyed by base query (`unit(m) == "base"`) cannot share a `pt.Experiment` call with per-query measures
(PyTerrier averages over the union of query ids): `experiment()` evaluates each unit separately.

Aggregates (BEIR mean over 14, CQADupStack macro mean over 12 forums, LoTTE mean, FollowIR Score and p-MRR) are
functions over the long-form results that `irgrid.run` returns (columns dataset, system, measure, value).
"""

from __future__ import annotations

import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import ir_measures
import pandas as pd
from ir_measures.measures.base import Measure, ParamInfo
from ir_measures.providers import Evaluator, Provider

INSTRUCTIR_SEP = "_"
FOLLOWIR_OG, FOLLOWIR_CHANGED = "-og", "-changed"


def instructir_base(qid: str) -> str:
    """`7865137_3` -> `7865137` (the last `_n` suffix is the instruction variant)."""
    return qid.rsplit(INSTRUCTIR_SEP, 1)[0]


def _cut(run: pd.DataFrame, cutoff: int | None) -> pd.DataFrame:
    """The top `cutoff` of each query (the runtime provider hands the run sorted by query, then score)."""
    return run if cutoff is None else run.groupby("query_id", sort=False).head(cutoff)


class Robustness(Measure):
    """Robustness@k (Oh et al. 2024, InstructIR): per base query, the minimum nDCG@k over its instruction variants;
    the mean over base queries. A variant with no retrieved documents counts as nDCG 0."""

    NAME = __name__ = "Robustness"
    SUPPORTED_PARAMS = {"cutoff": ParamInfo(dtype=int, required=True, desc="nDCG cutoff")}
    RUN_INPUTS = ["query_id", "doc_id", "score"]
    QREL_INPUTS = ["query_id", "doc_id", "relevance"]
    UNIT = "base"

    def grouped_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[ir_measures.Metric]:
        ndcg = ir_measures.nDCG @ self["cutoff"]
        per_variant = {m.query_id: m.value for m in ndcg.iter_calc(qrels, run)}  # ir_measures' own nDCG@k
        groups: dict[str, list[float]] = defaultdict(list)
        for qid in qrels["query_id"].unique():
            groups[instructir_base(str(qid))].append(per_variant.get(qid, 0.0))
        for base, values in groups.items():
            yield ir_measures.Metric(base, self, min(values))


def _ranks(run: pd.DataFrame) -> dict[str, dict[str, int]]:
    """query -> doc -> 1-based rank by descending score (the order the runtime provider sorted)."""
    out: dict[str, dict[str, int]] = {}
    for qid, group in run.groupby("query_id", sort=False):
        out[str(qid)] = {str(d): i for i, d in enumerate(group["doc_id"], start=1)}
    return out


def pmrr_pair(og_rank: int, new_rank: int) -> float:
    """Paper Eq. 5 for one document: how far it moved when the instruction changed (negative: it rose although
    the changed instruction made it non-relevant)."""
    if og_rank > new_rank:
        return new_rank / og_rank - 1  # RR_og / RR_new - 1
    return 1 - og_rank / new_rank  # 1 - RR_new / RR_og


class PairwiseMRR(Measure):
    """p-MRR (Weller et al. 2025, FollowIR; paper Eq. 5), as FollowIR evaluates it: for each base query, the
    documents relevant under the original instruction but not under the changed one ("changed" documents: judged
    > 0 for `<base>-og` and not > 0 for `<base>-changed`) are looked up in both rankings (1-based; a document
    not retrieved ranks one past the end of that ranking); the per-document scores are averaged per base query,
    then over base queries. FollowIR prints it x100."""

    NAME = __name__ = "p-MRR"
    SUPPORTED_PARAMS = {"cutoff": ParamInfo(dtype=int, required=False, desc="ranking depth considered")}
    RUN_INPUTS = ["query_id", "doc_id", "score"]
    QREL_INPUTS = ["query_id", "doc_id", "relevance"]
    UNIT = "base"

    def __repr__(self) -> str:
        return "p-MRR" if "cutoff" not in self.params else f"p-MRR@{self.params['cutoff']}"

    def grouped_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[ir_measures.Metric]:
        ranks = _ranks(_cut(run, self.params.get("cutoff")))
        rel: dict[str, dict[str, int]] = defaultdict(dict)
        for qid, doc, label in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"]):
            rel[str(qid)][str(doc)] = int(label)
        bases = sorted({q[: -len(FOLLOWIR_OG)] for q in rel if q.endswith(FOLLOWIR_OG)})
        for base in bases:
            og, changed = rel[base + FOLLOWIR_OG], rel.get(base + FOLLOWIR_CHANGED, {})
            docs = [d for d, r in og.items() if r > 0 and changed.get(d, 0) <= 0]
            if not docs:
                continue  # no document changed relevance: the query says nothing about instruction following
            og_run, new_run = ranks.get(base + FOLLOWIR_OG, {}), ranks.get(base + FOLLOWIR_CHANGED, {})
            scores = [pmrr_pair(og_run.get(d, len(og_run) + 1), new_run.get(d, len(new_run) + 1)) for d in docs]
            yield ir_measures.Metric(base, self, sum(scores) / len(scores))


class OnOriginal(Measure):
    """`og:<measure>`: a standard measure on FollowIR's original-instruction queries only (`<base>-og`, with the
    original qrels), reported per base query, as FollowIR reports MAP@1000 / nDCG@5."""

    NAME = __name__ = "og"
    SUPPORTED_PARAMS = {"measure": ParamInfo(desc="the wrapped ir_measures measure")}
    RUN_INPUTS = ["query_id", "doc_id", "score"]
    QREL_INPUTS = ["query_id", "doc_id", "relevance"]
    UNIT = "base"

    def __repr__(self) -> str:
        return f"og:{self.params['measure']}"

    def grouped_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[ir_measures.Metric]:
        inner: Measure = self.params["measure"]
        og_qrels = qrels[qrels["query_id"].astype(str).str.endswith(FOLLOWIR_OG)]
        og_run = run[run["query_id"].astype(str).str.endswith(FOLLOWIR_OG)]
        seen = set()
        for m in inner.iter_calc(og_qrels, og_run):
            seen.add(m.query_id)
            yield ir_measures.Metric(m.query_id[: -len(FOLLOWIR_OG)], self, m.value)
        for qid in set(og_qrels["query_id"].astype(str)) - seen:  # judged but nothing retrieved
            yield ir_measures.Metric(qid[: -len(FOLLOWIR_OG)], self, inner.DEFAULT)


class _GroupedEvaluator(Evaluator):
    def __init__(self, measures: Iterable[Measure], qrels: pd.DataFrame):
        super().__init__(measures, set())  # no default values for qrels ids: ours are keyed by base query
        self.qrels = qrels

    def _iter_calc(self, run: Any) -> Iterator[ir_measures.Metric]:
        run = ir_measures.util.RunConverter(run, strict=False).as_pd_dataframe()
        run = run.sort_values(["query_id", "score"], ascending=[True, False], kind="stable")
        for measure in self.measures:
            yield from measure.grouped_impl(self.qrels, run)


class GroupedProvider(Provider):
    """Serves irgrid's measures (those with `grouped_impl`)."""

    NAME = "irgrid"

    def supports(self, measure: Any) -> bool:
        measure.validate_params()
        return hasattr(measure, "grouped_impl")

    def _evaluator(self, measures: Iterable[Measure], qrels: Any) -> Evaluator:
        qrels = ir_measures.util.QrelsConverter(qrels, strict=False).as_pd_dataframe()
        return _GroupedEvaluator(list(measures), qrels)


def _install() -> None:
    """Put the provider first, so its evaluator leads any mixed evaluation (ir_measures' FallbackEvaluator fills
    defaults for the first evaluator's query ids only, and ours has none)."""
    pipeline = ir_measures.DefaultPipeline.providers
    if not any(isinstance(p, GroupedProvider) for p in pipeline):
        pipeline.insert(0, GroupedProvider())


_install()


# -- names --------------------------------------------------------------------------------------------------------
_OURS: dict[str, Callable[[str], Measure]] = {
    r"Robustness@(\d+)": lambda k: Robustness(cutoff=int(k)),
    r"p-MRR": lambda: PairwiseMRR(),
    r"p-MRR@(\d+)": lambda k: PairwiseMRR(cutoff=int(k)),
    r"og:(.+)": lambda inner: OnOriginal(measure=parse(inner)),
}
NAMES = ("Robustness@k", "p-MRR", "og:<measure>")


def parse(text: str) -> Measure:
    """One of our measures by name, else any measure ir_measures parses (nDCG@10, RR@10, R@1000, AP@1000...)."""
    text = text.strip()
    for pattern, make in _OURS.items():
        match = re.fullmatch(pattern, text)
        if match:
            return make(*match.groups())
    return ir_measures.parse_measure(text)


def unit(measure: Any) -> str:
    """'base' for measures with one value per base query (InstructIR / FollowIR groups), else 'query'."""
    return getattr(measure, "UNIT", "query")


def experiment(frames: list[pd.DataFrame], topics: pd.DataFrame, qrels: pd.DataFrame, measures: list[Any],
               perquery: bool = False, **kwargs: Any) -> pd.DataFrame:
    """`pt.Experiment`, once per query unit, merged: per-query and per-base-query measures in one grid.

    Corrections and tests are per measure in PyTerrier, so splitting the calls changes no number.
    """
    import pyterrier as pt

    by_unit: dict[str, list[Any]] = defaultdict(list)
    for m in measures:
        by_unit[unit(m)].append(m)
    parts = []
    for u, ms in by_unit.items():
        with warnings.catch_warnings():
            if u == "base":  # PyTerrier warns that the variant ids have no value: by design, they are grouped
                warnings.filterwarnings("ignore", message=".*topic\\(s\\) not found in qrels")
            df = pt.Experiment(frames, topics, qrels, ms, perquery=perquery, **kwargs)
        if perquery and u == "base":
            df = df[df["value"].notna()]  # PyTerrier backfills every topic id with NaN; ours are keyed by base
        parts.append(df)
    if perquery:
        return pd.concat(parts, ignore_index=True)
    out = parts[0]
    for df in parts[1:]:
        out = out.merge(df, on="name", how="outer", sort=False)
    return out


# -- aggregates over the long-form results -----------------------------------------------------------------------
class AggregateError(ValueError):
    pass


@dataclass(frozen=True)
class Aggregate:
    """A column of the paper computed from other rows: `members` maps a part to the datasets averaged into it,
    `measures` says which measure each part contributes; the value is the mean over parts."""

    name: str
    members: dict[str, tuple[str, ...]]
    measures: dict[str, str]
    description: str = ""

    def __call__(self, results: pd.DataFrame) -> pd.DataFrame:
        """Rows (dataset=name, system, measure, value) for every system that has all members."""
        from irgrid.datasets import get

        irds = {n: get(n).irds_id for n in results["dataset"].unique()}  # aliases (beir/arguana/test) match too
        wanted = {p: {get(d).irds_id for d in ds} for p, ds in self.members.items()}
        rows = []
        for system, sys_rows in results.groupby("system", sort=False):
            parts: dict[str, float] = {}
            missing: list[str] = []
            for part, members in wanted.items():
                sel = sys_rows[sys_rows["dataset"].map(irds).isin(members)
                               & (sys_rows["measure"] == self.measures[part])]
                found = {irds[d] for d in sel["dataset"]}
                if found != members:
                    missing += sorted(f"{d} ({self.measures[part]})" for d in members - found)
                    continue
                parts[part] = float(sel.groupby("dataset")["value"].mean().mean())  # macro: per dataset first
            if missing:
                raise AggregateError(
                    f"{self.name} for {system!r} needs results on {len(missing)} more dataset(s): "
                    f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}. Add them to the experiment's "
                    f"datasets (and the measure to its measures), or compute the parts you have with pandas."
                )
            measure = "/".join(sorted(set(self.measures.values())))
            rows.append({"dataset": self.name, "system": system, "measure": measure,
                         "value": sum(parts.values()) / len(parts)})
        return pd.DataFrame(rows, columns=["dataset", "system", "measure", "value"])


def aggregates() -> dict[str, Aggregate]:
    """The paper's aggregate columns by name."""
    from irgrid.datasets import BEIR_PAPER, FOLLOWIR_PAPER, LOTTE_PAPER

    cqa = BEIR_PAPER["cqadupstack"]
    return {a.name: a for a in (
        Aggregate("BEIR", BEIR_PAPER, {p: "nDCG@10" for p in BEIR_PAPER},
                  "mean nDCG@10 over BEIR's 14 public datasets (CQADupStack as the mean of its 12 forums)"),
        Aggregate("CQADupStack", {"cqadupstack": cqa}, {"cqadupstack": "nDCG@10"},
                  "macro mean nDCG@10 over the 12 CQADupStack forums"),
        Aggregate("LoTTE", {d: (d,) for d in LOTTE_PAPER}, {d: "Success@5" for d in LOTTE_PAPER},
                  "mean Success@5 of LoTTE pooled search and forum"),
        Aggregate("FollowIR-Score", {d: (d,) for d in FOLLOWIR_PAPER}, dict(FOLLOWIR_PAPER),
                  "mean of Robust04 MAP@1000, News21 nDCG@5, Core17 MAP@1000 (original instructions)"),
        Aggregate("FollowIR-p-MRR", {d: (d,) for d in FOLLOWIR_PAPER}, {d: "p-MRR" for d in FOLLOWIR_PAPER},
                  "mean p-MRR over Robust04, News21, Core17"),
    )}


def aggregate(results: pd.DataFrame, names: Iterable[str] | str) -> pd.DataFrame:
    """The named aggregates as long-form rows, ready to `pd.concat` to the results."""
    from irgrid.registry import UnknownNameError, did_you_mean

    known = aggregates()
    out = []
    for name in [names] if isinstance(names, str) else names:
        if name not in known:
            raise UnknownNameError(f"unknown aggregate {name!r}.{did_you_mean(name, list(known))} "
                                   f"Known: {', '.join(known)}")
        out.append(known[name](results))
    return pd.concat(out, ignore_index=True)
