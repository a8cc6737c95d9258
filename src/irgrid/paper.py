"""One description of *A Systematic Multi-Domain Evaluation of Document Retrievers* (Velev & Spitz): its datasets,
its table columns, its aggregate columns, its published tables and the conventions where it and the official tools
differ. The catalog (`irgrid.data.datasets`), the aggregates (`irgrid.measures`), Δσ (`irgrid.report.failures`), the reports
and `experiments/paper.yaml` read this module; nothing else writes the paper's constants.

Pure data and small functions (no pandas, no ir_datasets): `irgrid list` / `irgrid datasets` import it cheaply.

Every convention cites the paper's code, GitHub valentinsvelev/retriever-evaluation (paths below are in that
repository), or the paper's text (`/work/shared/papers/retriever-evaluation.txt`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# -- datasets ---------------------------------------------------------------------------------------------------------
MSMARCO_DEV = "msmarco-passage/dev/small"
DL19 = "msmarco-passage/trec-dl-2019/judged"
DL20 = "msmarco-passage/trec-dl-2020/judged"

CQADUPSTACK_FORUMS = ("android", "english", "gaming", "gis", "mathematica", "physics", "programmers", "stats",
                      "tex", "unix", "webmasters", "wordpress")
CQADUPSTACK = tuple(f"beir/cqadupstack/{f}" for f in CQADUPSTACK_FORUMS)

# Table A.5's columns -> the catalog datasets averaged into each (src/analysis/aggregator.py BEIR_ORDER;
# src/configs/datasets.py). Touché is v2 only: the paper removes v1 (Section 3.2.2).
BEIR: dict[str, tuple[str, ...]] = {
    "trec-covid": ("beir/trec-covid/test",), "nfcorpus": ("beir/nfcorpus/test",), "nq": ("beir/nq/test",),
    "hotpotqa": ("beir/hotpotqa/test",), "fiqa": ("beir/fiqa/test",), "arguana": ("beir/arguana/test",),
    "webis-touche2020": ("beir/webis-touche2020/v2",), "cqadupstack": CQADUPSTACK,
    "quora": ("beir/quora/test",), "dbpedia-entity": ("beir/dbpedia-entity/test",),
    "scidocs": ("beir/scidocs/test",), "fever": ("beir/fever/test",), "climate-fever": ("beir/climate-fever/test",),
    "scifact": ("beir/scifact/test",),
}
# ir_datasets names these test sets without a split; results may carry either name
ALIASES: dict[str, str] = {f"beir/{n}": f"beir/{n}/test" for n in ("trec-covid", "nq", "arguana", "scidocs",
                                                                    "climate-fever")}

# LoTTE pooled test (aggregator.py LOTTE_SEARCH_ID / LOTTE_FORUM_ID; Table A.2 and A.6 "Pooled")
LOTTE: dict[str, str] = {"search": "lotte/pooled/test/search", "forum": "lotte/pooled/test/forum"}
INSTRUCTIR = "instructir"
FOLLOWIR: dict[str, str] = {"robust04": "followir/robust04", "news21": "followir/news21", "core17": "followir/core17"}

# -- measures and conventions -----------------------------------------------------------------------------------------
# FollowIR's effectiveness measure per collection (MAP@1000 on Robust04 and Core17, nDCG@5 on News21) ...
FOLLOWIR_MEASURE = {"robust04": "AP@1000", "news21": "nDCG@5", "core17": "AP@1000"}
# ... measured on the changed-instruction queries with the changed qrels (the paper: table_generator.py
# `_average_score('followir_score')` reads the `*_changed.json` scores) or on the original instructions with the
# original qrels (official FollowIR / MTEB, which report the original-instruction score).
FOLLOWIR_PAPER_VARIANT, FOLLOWIR_OFFICIAL_VARIANT = "changed", "og"
PMRR_PAPER, PMRR_MTEB = "p-MRR-paper", "p-MRR"
# TREC-DL R@1000: the paper's code takes ir_measures' R@1000 (relevance >= 1: src/evaluator.py measure_objs for
# 'trec-dl'); TREC and Pyserini count only relevance >= 2 for the passage task.
DL_RECALL_PAPER, DL_RECALL_TREC = "R@1000", "R(rel=2)@1000"
# InstructIR query text: kaistAI/InstructIR data_creation/format_data.after_filtering.py writes queries.jsonl as
# '<instruction> [SEP] <query>' (the HF dataset the paper loads: src/data_handler.py, hf:kaist-ai/InstructIR)
INSTRUCTIR_QUERY_TEMPLATE = "{instruction} [SEP] {text}"
# FollowIR query text: query + " " + instruction (src/data_handler.py `_load_one`, "FollowIR default")
FOLLOWIR_QUERY_FIELDS = ("text", "instruction")


@dataclass(frozen=True)
class Convention:
    """A point where the paper's code and the official tools (or the paper's text) differ."""

    name: str
    paper: str  # what the paper's code does (what the paper grid uses)
    official: str  # what the official tool / benchmark does
    source: str  # where this was verified
    text: str = ""  # what the paper's text says, where it differs from its code


CONVENTIONS: tuple[Convention, ...] = (
    Convention("followir-instructions",
               f"Score and Table A.7 MAP/nDCG@5 on the changed instructions with the changed qrels "
               f"(`{FOLLOWIR_PAPER_VARIANT}:<measure>`), x100",
               f"original instructions with the original qrels (`{FOLLOWIR_OFFICIAL_VARIANT}:<measure>`)",
               "src/analysis/table_generator.py _average_score('followir_score'), create_instructir_followir_table",
               "Section 3.2.5 and Table 2: 'MAP@1000, nDCG@5', as the code: src/evaluator.py@4bedb75 measures "
               "Robust04 and Core17 with ir_measures MAP@1000 (over 1001-deep runs); the paper grid uses AP@1000"),
    Convention("p-mrr",
               f"`{PMRR_PAPER}`: a changed document absent from the original run is skipped, one absent from the "
               f"changed run scores +1 (a base query without a changed run therefore scores +1)",
               f"`{PMRR_MTEB}` (MTEB / FollowIR): an absent document ranks len(run) + 1; a base query without both "
               f"runs is skipped",
               "src/evaluator.py Evaluator.p_mrr; mteb evaluate_p_mrr_change / get_rank_from_dict"),
    Convention("trec-dl-recall",
               f"`{DL_RECALL_PAPER}` (relevance >= 1)", f"`{DL_RECALL_TREC}` (TREC, Pyserini: relevance >= 2)",
               "src/evaluator.py (trec-dl measure_objs R@1000)"),
    Convention("instructir-query",
               "'<instruction> [SEP] <query>' (the benchmark's queries.jsonl)", "the same (MTEB's InstructIR task)",
               "kaistAI/InstructIR data_creation/format_data.after_filtering.py; src/data_handler.py",
               "Section 3.2: instructions 'are appended to the query' (true of FollowIR only); the paper grid "
               "follows the code"),
    Convention("self-matches",
               "every dataset: a document whose id equals the query id is removed unless judged relevant "
               "(skip_self_matches='auto'); irgrid's catalog drops them on ArguAna and Quora only (BEIR, Pyserini "
               "--remove-query), where they occur",
               "BEIR / Pyserini: ArguAna and Quora", "src/evaluator.py Evaluator.evaluate, src/analysis/aggregator.py",
               "Section 3.1: self-matches excluded on ArguAna; the paper grid applies the code's rule "
               "(experiment key `self_matches: paper`, at evaluation: cached runs are shared)"),
    Convention("depth",
               "1001 documents retrieved per query (so 1000 remain after a self-match is removed)",
               "1000", "src/run.py@4bedb75 run(top_k=1001)",
               "not stated; the `paper` profile sets num_results 1001 on every entry (irgrid.core.profiles.COMMON), "
               "the `card` profile keeps 1000"),
    Convention("bootstrap",
               "SE of an averaged column: every component's per-query vector resampled independently, the "
               "column's nested mean taken per replicate (B = 1000, seed 42); irgrid combines the components' "
               "bootstrap SEs with the same weights (Var = Σ w² SE²), which that bootstrap estimates",
               "-", "src/analysis/table_generator.py _se_for_cell, _se_followir_pmrr"),
)


# -- columns and aggregates -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One unit of an averaged column: the mean of `measure` over `members` (CQADupStack: 12 forums)."""

    name: str
    members: tuple[str, ...]
    measure: str


@dataclass(frozen=True)
class Column:
    """A column of one of the paper's tables: `scale` x the mean over `parts` of each part's mean over its members
    (table_generator.py `_components_and_agg`: BEIR 'macro' = CQADupStack's forums averaged first)."""

    table: str
    column: str
    label: str
    parts: tuple[Part, ...]
    scale: float = 1.0

    @property
    def components(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """Flat (accepted dataset names, measure) per member cell, in order."""
        return tuple((_names(d), p.measure) for p in self.parts for d in p.members)

    def weights(self) -> list[tuple[str, str, float]]:
        """(dataset, measure, weight) of every member cell: the column is Σ weight · value."""
        n = len(self.parts)
        return [(d, p.measure, self.scale / n / len(p.members)) for p in self.parts for d in p.members]

    def cells(self, available: Mapping[tuple[str, str], object] | set) -> list[tuple[str, str]] | None:
        """The keys of `available` that fill every member (an alias counts), or None when one is missing."""
        found = []
        for names, measure in self.components:
            hit = next(((d, measure) for d in names if (d, measure) in available), None)
            if hit is None:
                return None
            found.append(hit)
        return found

    def value(self, values: Mapping[tuple[str, str], float]) -> float | None:
        keys = self.cells(values)
        if keys is None:
            return None
        return sum(w * float(values[k]) for k, (_, _, w) in zip(keys, self.weights()))

    def se(self, ses: Mapping[tuple[str, str], float]) -> float | None:
        """SE of the column from its members' SEs as independent samples: sqrt(Σ w² SE²) — the variance that the
        paper's per-replicate bootstrap of the nested mean estimates (table_generator.py `_se_for_cell`)."""
        keys = self.cells(ses)
        if keys is None:
            return None
        return math.sqrt(sum((w * float(ses[k])) ** 2 for k, (_, _, w) in zip(keys, self.weights())))


def _names(dataset: str) -> tuple[str, ...]:
    return (dataset,) + tuple(a for a, c in ALIASES.items() if c == dataset)


def _p(name: str, members: tuple[str, ...] | str, measure: str) -> Part:
    return Part(name, (members,) if isinstance(members, str) else members, measure)


def _followir(measure_of: Mapping[str, str] | str) -> tuple[Part, ...]:
    return tuple(_p(k, d, measure_of if isinstance(measure_of, str) else measure_of[k]) for k, d in FOLLOWIR.items())


_CHANGED = {k: f"{FOLLOWIR_PAPER_VARIANT}:{m}" for k, m in FOLLOWIR_MEASURE.items()}
_ORIGINAL = {k: f"{FOLLOWIR_OFFICIAL_VARIANT}:{m}" for k, m in FOLLOWIR_MEASURE.items()}
_BEIR_PARTS = tuple(_p(k, v, "nDCG@10") for k, v in BEIR.items())
_LOTTE_PARTS = tuple(_p(k, v, "Success@5") for k, v in LOTTE.items())

TABLE2 = (
    Column("2", "msmarco_dev_mrr@10", "MS MARCO MRR@10", (_p("dev", MSMARCO_DEV, "RR@10"),)),
    Column("2", "dl19_ndcg@10", "TREC-DL 19 nDCG@10", (_p("dl19", DL19, "nDCG@10"),)),
    Column("2", "dl20_ndcg@10", "TREC-DL 20 nDCG@10", (_p("dl20", DL20, "nDCG@10"),)),
    Column("2", "beir_ndcg@10", "BEIR nDCG@10", _BEIR_PARTS),
    Column("2", "lotte_success@5", "LoTTE S@5", _LOTTE_PARTS),
    Column("2", "instructir_robustness@10", "InstructIR R@10", (_p("instructir", INSTRUCTIR, "Robustness@10"),)),
    Column("2", "instructir_ndcg@10", "InstructIR nDCG@10", (_p("instructir", INSTRUCTIR, "nDCG@10"),)),
    Column("2", "followir_score", "FollowIR Score", _followir(_CHANGED), 100.0),
    Column("2", "followir_p-mrr", "FollowIR p-MRR", _followir(PMRR_PAPER), 100.0),
)
TABLE_A4 = (
    Column("A.4", "msmarco_dev_mrr@10", "MS MARCO MRR@10", (_p("dev", MSMARCO_DEV, "RR@10"),)),
    Column("A.4", "msmarco_dev_r@1000", "MS MARCO R@1000", (_p("dev", MSMARCO_DEV, "R@1000"),)),
    Column("A.4", "dl19_ndcg@10", "DL19 nDCG@10", (_p("dl19", DL19, "nDCG@10"),)),
    Column("A.4", "dl19_r@1000", "DL19 R@1000", (_p("dl19", DL19, DL_RECALL_PAPER),)),
    Column("A.4", "dl20_ndcg@10", "DL20 nDCG@10", (_p("dl20", DL20, "nDCG@10"),)),
    Column("A.4", "dl20_r@1000", "DL20 R@1000", (_p("dl20", DL20, DL_RECALL_PAPER),)),
)
TABLE_A5 = tuple(Column("A.5", p.name, p.name, (p,)) for p in _BEIR_PARTS)
TABLE_A6 = tuple(Column("A.6", p.name, f"LoTTE {p.name} S@5", (p,)) for p in _LOTTE_PARTS)
TABLE_A7 = (
    Column("A.7", "instructir_robustness@10", "InstructIR R@10", (_p("instructir", INSTRUCTIR, "Robustness@10"),)),
    Column("A.7", "instructir_ndcg@10", "InstructIR nDCG@10", (_p("instructir", INSTRUCTIR, "nDCG@10"),)),
    *(c for k in FOLLOWIR for c in (
        Column("A.7", f"{k}_{'map' if FOLLOWIR_MEASURE[k].startswith('AP') else 'ndcg@5'}",
               f"{k} {'MAP' if FOLLOWIR_MEASURE[k].startswith('AP') else 'nDCG@5'}",
               (_p(k, FOLLOWIR[k], _CHANGED[k]),), 100.0),
        Column("A.7", f"{k}_p-mrr", f"{k} p-MRR", (_p(k, FOLLOWIR[k], PMRR_PAPER),), 100.0))),
)
COLUMNS: tuple[Column, ...] = TABLE2 + TABLE_A4 + TABLE_A5 + TABLE_A6 + TABLE_A7


def column(table: str, name: str) -> Column:
    return next(c for c in COLUMNS if c.table == table and c.column == name)


@dataclass(frozen=True)
class Aggregate:
    """A named aggregate row of results.csv (`aggregates:` in an experiment file): one of the paper's averaged
    columns, on the paper's scale."""

    name: str
    column: Column
    description: str

    @property
    def measure(self) -> str:
        measures = "/".join(dict.fromkeys(p.measure for p in self.column.parts))
        return measures + (f" x{self.column.scale:g}" if self.column.scale != 1 else "")


AGGREGATES: dict[str, Aggregate] = {a.name: a for a in (
    Aggregate("BEIR", column("2", "beir_ndcg@10"),
              "Table 2: mean nDCG@10 over BEIR's 14 public datasets, CQADupStack as the mean of its 12 forums"),
    Aggregate("CQADupStack", column("A.5", "cqadupstack"), "Table A.5: mean nDCG@10 over the 12 CQADupStack forums"),
    Aggregate("LoTTE", column("2", "lotte_success@5"), "Table 2: mean Success@5 of LoTTE pooled search and forum"),
    Aggregate("FollowIR-Score", column("2", "followir_score"),
              "Table 2 (the paper's): x100 mean of Robust04 MAP@1000, News21 nDCG@5, Core17 MAP@1000 on the "
              "changed instructions with the changed qrels"),
    Aggregate("FollowIR-p-MRR", column("2", "followir_p-mrr"),
              "Table 2 (the paper's p-MRR): x100 mean p-MRR over Robust04, News21, Core17"),
    Aggregate("FollowIR-Score-original",
              Column("-", "followir_score_original", "FollowIR Score (original)", _followir(_ORIGINAL), 100.0),
              "official FollowIR: x100 mean of the same measures on the original instructions and qrels"),
    Aggregate("FollowIR-p-MRR-MTEB",
              Column("-", "followir_p-mrr_mteb", "FollowIR p-MRR (MTEB)", _followir(PMRR_MTEB), 100.0),
              "MTEB's p-MRR, x100 mean over Robust04, News21, Core17"),
)}
PAPER_AGGREGATES = ("BEIR", "CQADupStack", "LoTTE", "FollowIR-Score", "FollowIR-p-MRR")


# -- the datasets' own measures (the paper's first, then the official convention where they differ) -------------
def dataset_measures() -> dict[str, tuple[str, ...]]:
    """Catalog measures of the paper's datasets (src/evaluator.py measure_objs, plus named official variants)."""
    out: dict[str, tuple[str, ...]] = {
        MSMARCO_DEV: ("RR@10", "R@1000"),
        DL19: ("nDCG@10", DL_RECALL_PAPER, DL_RECALL_TREC),
        DL20: ("nDCG@10", DL_RECALL_PAPER, DL_RECALL_TREC),
        INSTRUCTIR: ("nDCG@10", "Robustness@10"),
    }
    for d in LOTTE.values():
        out[d] = ("Success@5",)
    for k, d in FOLLOWIR.items():
        out[d] = (_CHANGED[k], _ORIGINAL[k], PMRR_PAPER, PMRR_MTEB)
    return out


def conventions_of(dataset: str) -> list[str]:
    """Which measures of a catalog dataset follow which convention (for `irgrid datasets`)."""
    d = canonical(dataset)
    if d in (DL19, DL20):
        return [f"{DL_RECALL_PAPER}=paper (rel>=1)", f"{DL_RECALL_TREC}=TREC/Pyserini"]
    if d in FOLLOWIR.values():
        return [f"{FOLLOWIR_PAPER_VARIANT}:=paper", f"{FOLLOWIR_OFFICIAL_VARIANT}:=FollowIR", f"{PMRR_PAPER}=paper",
                f"{PMRR_MTEB}=MTEB"]
    if d == INSTRUCTIR:
        return ["query='<instruction> [SEP] <query>' (benchmark, paper)"]
    return []


_SAMPLE = re.compile(r"@q\d+s\d+$")


def canonical(dataset: str) -> str:
    """A result row's dataset as the paper names it: query-subset suffix (`@q16s0`) dropped, aliases resolved."""
    d = _SAMPLE.sub("", dataset)
    return ALIASES.get(d, d)


def is_subset(dataset: str) -> bool:
    return bool(_SAMPLE.search(dataset))


def datasets() -> list[str]:
    """Every dataset of the paper's grid, in Table 2's order (experiments/paper.yaml lists exactly these)."""
    out = [MSMARCO_DEV, DL19, DL20]
    for members in BEIR.values():
        out += list(members)
    return out + list(LOTTE.values()) + [INSTRUCTIR] + list(FOLLOWIR.values())


# -- the published tables -----------------------------------------------------------------------------------------
TABLE_FILES = {
    "2": "paper_table2.csv", "A.3": "paper_tableA3_zscores.csv", "A.4": "paper_tableA4_msmarco_dl.csv",
    "A.5": "paper_tableA5_beir_ndcg@10.csv", "A.6": "paper_tableA6_lotte_success@5.csv",
    "A.7": "paper_tableA7_instructir_followir.csv",
}
TABLE_TITLES = {"2": "Table 2", "A.4": "Table A.4 (MS MARCO, TREC-DL)", "A.5": "Table A.5 (BEIR nDCG@10)",
                "A.6": "Table A.6 (LoTTE Success@5)", "A.7": "Table A.7 (InstructIR, FollowIR; FollowIR x100)"}


def reference_dir(path: str | Path | None = None) -> Path:
    """The folder of the paper's tables as CSV (shipped with irgrid, copies of /work/shared/reference)."""
    if path is not None:
        return Path(path)
    return Path(str(resources.files("irgrid") / "paper_tables"))
