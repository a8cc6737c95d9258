"""The paper's measures that ir_measures lacks, and its aggregate columns.

They are ir_measures measures (`ir_measures.measures.Measure` subclasses served by a small ir_measures provider
placed first in `ir_measures.DefaultPipeline`), so `ir_measures.calc*` and `pt.Experiment` evaluate them and paired
tests apply. `ir_measures.define()` does not fit: it hides the measure's parameters (the cutoff of Robustness@k,
the wrapped measure of og:...) from the implementation, and its evaluator fills every *qrels* query id that got
no value with a default, which is wrong for values keyed by base query.

Query id conventions (set by the loaders in `irgrid.data.formats`):
* InstructIR: `<base>_<n>` is instruction variant n of query `<base>`; Robustness@k groups by `<base>`.
* FollowIR: `<base>-og` / `<base>-changed` are one topic under its original / changed instruction; p-MRR,
  p-MRR-paper, og:<measure> and changed:<measure> report one value per `<base>`.
Measures keyed by base query (`unit(m) == "base"`) cannot share a `pt.Experiment` call with per-query measures
(PyTerrier averages over the union of query ids): `experiment()` evaluates each unit separately.

Aggregates (the paper's averaged columns, defined once in `irgrid.paper`: BEIR over 14 parts with CQADupStack's 12
forums averaged first, LoTTE pooled, FollowIR Score and p-MRR x100) are functions over the long-form results that
`irgrid.run` returns (columns dataset, system, measure, value).
"""

from __future__ import annotations

import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ir_measures
import pandas as pd
from ir_measures.measures.base import Measure, ParamInfo
from ir_measures.providers import Evaluator, Provider

from irgrid import paper
from irgrid.util.errors import Error

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
    """p-MRR (Weller et al. 2025, FollowIR; paper Eq. 5): for each base query, the documents relevant under the
    original instruction but not under the changed one ("changed" documents: judged > 0 for `<base>-og` and not
    > 0 for `<base>-changed`) are looked up in both rankings (1-based); the per-document scores are averaged per
    base query, then over base queries. FollowIR and the paper print it x100.

    Two conventions, by name (they differ only on documents or rankings that are missing):
    * `p-MRR` (MTEB / FollowIR, `evaluate_p_mrr_change`, `get_rank_from_dict`): a document not retrieved ranks one
      past the end of that ranking; a base query without both rankings is skipped.
    * `p-MRR-paper` (the paper's code, valentinsvelev/retriever-evaluation src/evaluator.py `Evaluator.p_mrr`): a
      changed document absent from the original ranking is skipped; one absent from the changed ranking scores
      +1 (RR_new = 0), so a base query whose changed ranking is missing scores +1.
    """

    NAME = __name__ = "p-MRR"
    SUPPORTED_PARAMS = {"cutoff": ParamInfo(dtype=int, required=False, desc="ranking depth considered"),
                        "convention": ParamInfo(dtype=str, required=False, desc="'mteb' (default) or 'paper'")}
    RUN_INPUTS = ["query_id", "doc_id", "score"]
    QREL_INPUTS = ["query_id", "doc_id", "relevance"]
    UNIT = "base"

    def __repr__(self) -> str:
        name = "p-MRR-paper" if self.params.get("convention") == "paper" else "p-MRR"
        return name if "cutoff" not in self.params else f"{name}@{self.params['cutoff']}"

    def grouped_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[ir_measures.Metric]:
        paper = self.params.get("convention") == "paper"
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
            og_run, new_run = ranks.get(base + FOLLOWIR_OG), ranks.get(base + FOLLOWIR_CHANGED)
            if paper:
                og_run, new_run = og_run or {}, new_run or {}
                scores = [1.0 if d not in new_run else pmrr_pair(og_run[d], new_run[d]) for d in docs if d in og_run]
                if not scores:
                    continue  # every changed document is absent from the original run
            else:
                if og_run is None or new_run is None:
                    continue  # MTEB skips a base query without both rankings
                scores = [pmrr_pair(og_run.get(d, len(og_run) + 1), new_run.get(d, len(new_run) + 1)) for d in docs]
            yield ir_measures.Metric(base, self, sum(scores) / len(scores))


class OnVariant(Measure):
    """`og:<measure>` / `changed:<measure>`: a standard measure on FollowIR's original- (`<base>-og`) or changed-
    instruction queries (`<base>-changed`) only, with that variant's qrels, reported per base query. FollowIR
    reports the original (`og:`); the paper's Score and Table A.7 use the changed (`changed:`;
    valentinsvelev/retriever-evaluation src/analysis/table_generator.py reads the `*_changed` scores)."""

    NAME = __name__ = "og"
    SUPPORTED_PARAMS = {"measure": ParamInfo(desc="the wrapped ir_measures measure"),
                        "variant": ParamInfo(dtype=str, required=False, desc="'og' (default) or 'changed'")}
    RUN_INPUTS = ["query_id", "doc_id", "score"]
    QREL_INPUTS = ["query_id", "doc_id", "relevance"]
    UNIT = "base"

    @property
    def suffix(self) -> str:
        return FOLLOWIR_CHANGED if self.params.get("variant") == "changed" else FOLLOWIR_OG

    def __repr__(self) -> str:
        return f"{self.suffix[1:]}:{self.params['measure']}"

    def grouped_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[ir_measures.Metric]:
        inner: Measure = self.params["measure"]
        suffix = self.suffix
        v_qrels = qrels[qrels["query_id"].astype(str).str.endswith(suffix)]
        v_run = run[run["query_id"].astype(str).str.endswith(suffix)]
        seen = set()
        for m in inner.iter_calc(v_qrels, v_run):
            seen.add(m.query_id)
            yield ir_measures.Metric(m.query_id[: -len(suffix)], self, m.value)
        for qid in set(v_qrels["query_id"].astype(str)) - seen:  # judged but nothing retrieved
            yield ir_measures.Metric(qid[: -len(suffix)], self, inner.DEFAULT)


OnOriginal = OnVariant  # the name before `changed:` existed


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
    r"p-MRR-paper": lambda: PairwiseMRR(convention="paper"),
    r"p-MRR-paper@(\d+)": lambda k: PairwiseMRR(cutoff=int(k), convention="paper"),
    r"og:(.+)": lambda inner: OnVariant(measure=parse(inner)),
    r"changed:(.+)": lambda inner: OnVariant(measure=parse(inner), variant="changed"),
}
NAMES = ("Robustness@k", "p-MRR", "p-MRR-paper", "og:<measure>", "changed:<measure>")


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
class AggregateError(Error, ValueError):
    pass


def _aggregate_rows(agg: paper.Aggregate, results: pd.DataFrame) -> pd.DataFrame:
    """Rows (dataset=name, system, measure, value) for every system that has all of the column's cells.

    Result rows are matched by `paper.canonical` (aliases such as beir/arguana, query subsets such as
    beir/scifact/test@q16s0); rows of other datasets (including earlier aggregates' rows) are ignored.
    """
    col = agg.column
    wanted = {(d, p.measure) for p in col.parts for d in p.members}
    rows = []
    for system, sys_rows in results.groupby("system", sort=False):
        values: dict[tuple[str, str], list[float]] = defaultdict(list)
        for d, m, v in zip(sys_rows["dataset"], sys_rows["measure"], sys_rows["value"]):
            key = (paper.canonical(str(d)), str(m))
            if key in wanted:
                values[key].append(float(v))
        missing = sorted(f"{d} ({m})" for d, m in wanted - set(values))
        if missing:
            raise AggregateError(
                f"{agg.name} for {system!r} needs results on {len(missing)} more dataset(s): "
                f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}. Add them to the experiment's "
                f"datasets (and the measure to its measures), or compute the parts you have with pandas."
            )
        value = col.value({k: sum(v) / len(v) for k, v in values.items()})
        rows.append({"dataset": agg.name, "system": system, "measure": agg.measure, "value": value})
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "value"])


def aggregates() -> dict[str, paper.Aggregate]:
    """The paper's aggregate columns (and the official conventions' variants) by name (`irgrid.paper`)."""
    return dict(paper.AGGREGATES)


def aggregate(results: pd.DataFrame, names: Iterable[str] | str) -> pd.DataFrame:
    """The named aggregates as long-form rows, ready to `pd.concat` to the results. Every aggregate reads only
    its own datasets' rows, so rows of other aggregates in `results` do no harm."""
    from irgrid.util.registry import UnknownNameError, did_you_mean

    known = aggregates()
    out = []
    for name in [names] if isinstance(names, str) else names:
        if name not in known:
            raise UnknownNameError(f"unknown aggregate {name!r}.{did_you_mean(name, list(known))} "
                                   f"Known: {', '.join(known)}")
        out.append(_aggregate_rows(known[name], results))
    return pd.concat(out, ignore_index=True)
