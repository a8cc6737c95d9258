"""A disaster-domain retrieval collection DERIVED from DisastQA, as ir_datasets datasets (the catalog in
`irgrid.data.datasets` declares its entries; `irgrid.qa.grid.subset` makes per-experiment subsets).

What it is: the corpus is every distinct passage of DisastQA's Golden and Mix files (3,675 texts), the queries
are DisastQA's questions (2,000 multiple-choice `mcq-NNNN`, 1,000 open-ended `oe-NNNN`) and each question's
golden passage is its one relevant document (relevance 1). Passages of the Mix files that differ from the golden
one carry no judgement (they are unjudged, not non-relevant). This is our construction, not DisastIR: DisastIR's
own corpus and graded qrels (HF `DMIR01/DisastIR`) are not reachable here; the `disastir` entry below reads them
on machines that can.

ir_datasets ids: `disastqa/derived` (corpus, all queries), `disastqa/derived/mcq`, `disastqa/derived/oe`, and
`disastqa/derived/subset-<hash>` (see `subset_dataset`) for small runs (the sampled items' golden and Mix passages
plus a fixed-seed number of other passages). docnos are content hashes, so they do not depend on file order.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from irgrid.data import disastqa as data

ROOT = "disastqa/derived"
MEASURES = ("nDCG@10", "R@5", "RR@10")
NOTE = ("DERIVED from DisastQA (not DisastIR): corpus = distinct Golden+Mix passages, queries = DisastQA "
        "questions, qrels = each question's golden passage (rel 1); other passages unjudged")


def docno(text: str) -> str:
    return "dq-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


@cache
def passages() -> dict[str, str]:
    """docno -> text for every distinct Golden/Mix passage (multiple-choice first, then open-ended)."""
    out: dict[str, str] = {}
    for task in ("mcq", "oe"):
        df = data.items(task)
        for text in list(df["golden"]) + list(df["mix"]):
            key = docno(text)
            if out.setdefault(key, text) != text:
                raise data.DisastQAError(f"docno collision for {key}; lengthen the hash")
    return out


def queries(task: str | None = None) -> list[tuple[str, str, str]]:
    """(qid, question, golden docno) per item."""
    tasks = (task,) if task else ("mcq", "oe")
    return [(r.qid, r.question, docno(r.golden)) for t in tasks for r in data.items(t).itertuples()]


Rows = Callable[[], list[tuple[str, str, str]]]  # (qid, question, golden docno)
Docs = Callable[[], dict[str, str]]
Qrels = Callable[[], list[tuple[str, str, int]]]  # (qid, docno, relevance)
def _handlers(docs: Docs, rows: Rows, qrels: Qrels, qrels_defs: dict[int, str]) -> list[Any]:
    from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, GenericDoc, GenericQuery, TrecQrel

    class _Docs(BaseDocs):
        def docs_iter(self) -> Iterator[GenericDoc]:
            return (GenericDoc(k, v) for k, v in docs().items())

        def docs_count(self) -> int:
            return len(docs())

        def docs_cls(self) -> type:
            return GenericDoc

        def docs_namespace(self) -> str:
            return ROOT

        def docs_lang(self) -> str:
            return "en"

    class _Queries(BaseQueries):
        def queries_iter(self) -> Iterator[GenericQuery]:
            return (GenericQuery(r[0], r[1]) for r in rows())

        def queries_cls(self) -> type:
            return GenericQuery

        def queries_namespace(self) -> str:
            return ROOT

        def queries_lang(self) -> str:
            return "en"

    class _Qrels(BaseQrels):
        def qrels_iter(self) -> Iterator[TrecQrel]:
            return (TrecQrel(qid, doc, rel, "0") for qid, doc, rel in qrels())

        def qrels_cls(self) -> type:
            return TrecQrel

        def qrels_defs(self) -> dict[int, str]:
            return qrels_defs

    return [_Docs(), _Queries(), _Qrels()]


def irds_factory(docs: Docs, rows: Rows, qrels: Qrels | None = None,
                qrels_defs: dict[int, str] | None = None) -> Callable[[], Any]:
    """A catalog `irds_factory`: builds the ir_datasets Dataset on first use (ir_datasets must not be imported before
    irgrid has pointed it at its home). Without `qrels`, each query's golden passage is its one relevant document."""
    if qrels is None:
        def qrels() -> list[tuple[str, str, int]]:
            return [(qid, doc, 1) for qid, _, doc in rows()]
    defs = qrels_defs or {1: "the item's golden passage in DisastQA"}

    def load() -> Any:
        import ir_datasets

        return ir_datasets.Dataset(*_handlers(docs, rows, qrels, defs))

    return load


def subset_dataset(qids: Iterable[str], distractors: int, seed: int) -> tuple[str, str, Callable[[], Any]]:
    """(name, notes, irds_factory) of a small derived collection for the given items: their golden and Mix passages
    plus `distractors` other passages drawn with `seed`; queries and qrels restricted to the items."""
    qids = sorted(set(qids))
    key = hashlib.sha1(json.dumps([qids, distractors, seed]).encode()).hexdigest()[:10]
    wanted = set(qids)

    @cache
    def rows() -> list[tuple[str, str, str]]:
        found = [r for r in queries() if r[0] in wanted]
        if len(found) != len(wanted):
            missing = sorted(wanted - {r[0] for r in found})[:5]
            raise data.DisastQAError(f"unknown DisastQA qids {missing}")
        return found

    @cache
    def docs() -> dict[str, str]:
        everything = passages()
        keep: set[str] = set()
        for task in ("mcq", "oe"):
            df = data.items(task)
            df = df[df["qid"].isin(wanted)]
            keep.update(docno(t) for t in list(df["golden"]) + list(df["mix"]))
        others = sorted(set(everything) - keep)
        keep.update(random.Random(seed).sample(others, min(distractors, len(others))))
        return {k: v for k, v in everything.items() if k in keep}

    notes = f"{NOTE}; SUBSET for {len(qids)} items + {distractors} distractors (seed {seed})"
    return f"{ROOT}/subset-{key}", notes, irds_factory(docs, rows)


# -- DisastIR itself (HF dataset DMIR01/DisastIR), for machines that can reach it -------------------------------
DISASTIR_REPO = "DMIR01/DisastIR"


def disastir_dir() -> Path:
    """IRGRID_DISASTIR (a local copy of the HF dataset), else the Hugging Face cache / hub."""
    from irgrid.util import settings

    value = settings.variable("IRGRID_DISASTIR")
    if value:
        return Path(value).expanduser()
    try:
        from huggingface_hub import snapshot_download

        offline = (settings.variable("HF_HUB_OFFLINE") or "").lower() in ("1", "true", "yes")
        return Path(snapshot_download(DISASTIR_REPO, repo_type="dataset", local_files_only=offline))
    except Exception as e:  # not cached offline, or no network
        raise data.DisastQAError(
            f"DisastIR is not available here ({type(e).__name__}: {e}). On a connected machine run "
            f"`huggingface-cli download --repo-type dataset {DISASTIR_REPO}` and set IRGRID_DISASTIR to the folder "
            f"(corpus.jsonl, query/*.json, qrels/*.json)"
        ) from None


def _json_records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def _disastir() -> tuple[dict[str, str], list[tuple[str, str]], list[tuple[str, str, int]]]:
    folder = disastir_dir()
    corpus_file = folder / "corpus.jsonl"
    if not corpus_file.exists():
        raise data.DisastQAError(f"{folder}: no corpus.jsonl (expected the layout of HF {DISASTIR_REPO})")
    corpus = {str(r["corpus_id"]): r["text"] for r in _json_records(corpus_file)}
    by_text = {v: k for k, v in corpus.items()}
    qs = [(str(r["query_id"]), r["user_query"]) for f in sorted((folder / "query").glob("*.json"))
          for r in _json_records(f)]
    qid_of = {text: qid for qid, text in qs}
    qrels = []
    for f in sorted((folder / "qrels").glob("*.json")):
        for r in _json_records(f):
            qid, doc = qid_of.get(r["user_query"]), by_text.get(r["passage"])
            if qid is not None and doc is not None:  # qrels name queries and passages by text
                qrels.append((qid, doc, int(r["score"])))
    return corpus, qs, qrels


DISASTIR_QRELS = {0: "irrelevant", 1: "weakly relevant", 2: "relevant", 3: "highly relevant"}


def entries() -> list[dict[str, Any]]:
    """The catalog entries (Dataset keyword arguments) of the derived collection and of DisastIR."""
    common = {"fields": ("text",), "measures": MEASURES}
    return [
        {"name": ROOT, "corpus": ROOT, "notes": NOTE, "irds_factory": irds_factory(passages, cache(lambda: queries())),
         **common},
        {"name": f"{ROOT}/mcq", "corpus": ROOT, "notes": f"{NOTE}; multiple-choice questions",
         "irds_factory": irds_factory(passages, cache(lambda: queries("mcq"))), **common},
        {"name": f"{ROOT}/oe", "corpus": ROOT, "notes": f"{NOTE}; open-ended questions",
         "irds_factory": irds_factory(passages, cache(lambda: queries("oe"))), **common},
        {"name": "disastir", "corpus": "disastir", "fields": ("text",), "measures": ("nDCG@10", "R@100"),
         "notes": "DisastIR (EMNLP 2025 Findings), HF DMIR01/DisastIR: needs IRGRID_DISASTIR or the HF cache; "
                  "graded qrels 0-3",
         "irds_factory": irds_factory(lambda: _disastir()[0], lambda: [(q, t, "") for q, t in _disastir()[1]],
                               qrels=lambda: _disastir()[2], qrels_defs=DISASTIR_QRELS)},
    ]
