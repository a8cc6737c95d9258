"""The dry-run's plan (`irgrid run EXP --dry-run`): what is missing here and how to stage it, and what the grid
will cost in time and disk, with the source of every estimate.

- Missing checkpoints are listed once each with the exact staging command; missing corpora once each with where
  to stage them (the setting, IRGRID_IRDS_STAGED or IRGRID_SHARED, and the path; never the cache's copy).
- An index is built once per (recipe, corpus): datasets sharing a corpus (MS MARCO dev and TREC-DL, LoTTE search
  and forum) share its build, as `Store.indexes.dir` keys it.
- Costs come from this cache's measurements where it has them (indexing docs/s and ms/query of earlier runs),
  else from the bench-scale fits (`benchmarks/results/scale_fit.csv`: cost = a * docs^k per backend, fitted on
  10k-1M documents), and model work (encoding documents and queries, generating) from a per-parameter rate: a
  transformer pass costs 2 FLOPs per parameter per token, at an assumed effective GPU throughput (`GPU_FLOPS`).
  Cells blocked here (missing models or data) are costed too: the plan is for the machine they will run on.

No library offers such a planner (ir_datasets, PyTerrier and pyterrier-dr have no cost model), hence our own.
"""

from __future__ import annotations

import csv
import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irgrid.core.gridcell import GridCell
from irgrid.core.modelref import ModelRef
from irgrid.core.retrievers import IndexRecipe
from irgrid.data.datasets import Dataset, DatasetError
from irgrid.models import resolver as models_mod
from irgrid.store import Store
from irgrid.util import settings

# -- the cost model's assumptions (stated in the plan's footer) -----------------------------------------------------
GPU_FLOPS = 1.0e14  # effective FLOP/s of one GPU on bf16 transformer inference: ~30% of an A100's 312 TFLOP/s peak
DOC_TOKENS = 160  # tokens per document through an encoder (BEIR/MS MARCO passages; longer ones truncate at 512)
QUERY_TOKENS = 32
GENERATED_TOKENS = 64  # tokens a generator writes per output (a doc2query question, a query2doc/HyDE passage: 128)
PASSAGE_TOKENS = 128
RERANK_DEPTH = 100  # candidates a re-ranker scores per query (the `% 100` of the grammar's examples)
DECODE_PENALTY = 10.0  # autoregressive decoding runs at ~1/10 of the encoder's FLOP rate (memory-bound, batched)
DENSE_DIM = 768  # exact search is costed with the 768-d fit (384-d models search faster)

# parameter counts (model cards) of the checkpoints whose id does not say their size; others are read from the id
PARAMS: dict[str, float] = {
    "sentence-transformers/all-MiniLM-L6-v2": 22.7e6, "castorini/ance-msmarco-passage": 125e6,
    "Luyu/co-condenser-marco-retriever": 110e6, "facebook/contriever-msmarco": 110e6,
    "facebook/dpr-ctx_encoder-multiset-base": 110e6, "facebook/dpr-question_encoder-multiset-base": 110e6,
    "facebook/dragon-plus-context-encoder": 110e6, "facebook/dragon-plus-query-encoder": 110e6,
    "Alibaba-NLP/gte-large-en-v1.5": 434e6, "jinaai/jina-embeddings-v3": 572e6,
    "nomic-ai/nomic-embed-text-v1.5": 137e6, "Shitao/RetroMAE_BEIR": 110e6,
    "sebastian-hofstaetter/distilbert-dot-tas_b-b256-msmarco": 66e6, "colbert-ir/colbertv2.0": 110e6,
    "hkunlp/instructor-large": 335e6, "nvidia/NV-Embed-v2": 7.85e9,
    "KaLM-Embedding/KaLM-embedding-multilingual-mini-instruct-v2.5": 494e6, "naver/splade-v3": 110e6,
    "macavaney/deepct": 110e6, "BeIR/sparta-msmarco-distilbert-base-v1": 66e6, "rasyosef/splade-tiny": 4.4e6,
    "castorini/unicoil-noexp-msmarco-passage": 110e6, "castorini/repllama-v1-7b-lora-passage": 6.7e9,
    "doc2query/msmarco-t5-base-v1": 223e6,
}
SIZE_WORDS = {"tiny": 4.4e6, "mini": 33e6, "small": 33e6, "base": 110e6, "large": 335e6}
DEFAULT_PARAMS = 110e6

# which bench-scale backend an index builder is (data: the builder's function name -> scale.py's backend)
BUILDER_BACKEND = {"build_lucene": "lucene", "build_pisa": "pisa", "build_lucene_pisa": "lucene-pisa",
                   "build_impact_pisa": "impact", "build_dense": f"dense-{DENSE_DIM}-faiss", "build_late": "plaid"}
# fits trusted for time only inside a sane range: PLAID's build fit (500-2,000 synthetic documents, exponent 1.4)
# extrapolates to 1,000 h at MS MARCO; its size fit is kept, its build time is the encoding (GPU) alone
TIME_UNFIT = {"plaid"}
FIT_FILE = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "scale_fit.csv"


def params_of(ref: ModelRef) -> tuple[float, str]:
    """A checkpoint's parameter count and where it comes from (the table, the id, or the default)."""
    if ref.id in PARAMS:
        return PARAMS[ref.id], "model card"
    name = ref.id.split("/")[-1].lower()
    m = re.search(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)([bm])(?![a-z])", name.replace("_", "-"))
    if m:
        return float(m.group(1)) * (1e9 if m.group(2) == "b" else 1e6), "id"
    for word, n in SIZE_WORDS.items():
        if re.search(rf"(?<![a-z]){word}(?![a-z])", name.replace("_", "-")):
            return n, "id"
    return DEFAULT_PARAMS, "assumed"


@dataclass(frozen=True)
class Fit:
    exponent: float
    log_a: float

    def at(self, docs: float) -> float:
        return math.exp(self.log_a) * max(docs, 1.0) ** self.exponent


def load_fits(path: Path = FIT_FILE) -> dict[tuple[str, str], Fit]:
    """(backend, cost) -> cost = a * docs^k from `make bench-scale`'s fit file (empty when it is not here)."""
    if not path.is_file():
        return {}
    out = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            k, at = float(row["exponent"]), float(row["at_msmarco"])
            out[(row["backend"], row["cost"])] = Fit(k, math.log(max(at, 1e-12)) - k * math.log(8_841_823))
    return out


@dataclass
class Cost:
    cpu_s: float = 0.0
    gpu_s: float = 0.0
    disk: float = 0.0
    sources: set[str] = field(default_factory=set)
    unknown: bool = False
    why: set[str] = field(default_factory=set)  # what the estimate lacks, in words (said once per retriever)

    def add(self, other: Cost) -> None:
        self.cpu_s += other.cpu_s
        self.gpu_s += other.gpu_s
        self.disk += other.disk
        self.sources |= other.sources
        self.unknown |= other.unknown
        self.why |= other.why

    def lacks(self, why: str) -> None:
        self.unknown = True
        self.why.add(why)


def measured(store: Store) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """This cache's own measurements: indexing docs/s and index bytes/doc per recipe name (index markers), and
    ms/query per retriever name (run metadata)."""
    import json
    import logging

    def read(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else None
        except (OSError, ValueError) as e:  # estimates only: the cell that owns it verifies and recomputes it
            logging.getLogger("irgrid").warning("cache: %s is unreadable (%s); ignored for estimates", path, e)
            return None

    index_rate: dict[str, float] = {}
    index_bytes: dict[str, float] = {}
    for marker in (store.root / "indexes").glob("*/*/irgrid-index.json"):
        meta = read(marker)
        if meta and meta.get("docs") and meta.get("seconds"):
            name = meta["recipe"]["name"]
            index_rate[name] = meta["docs"] / max(meta["seconds"], 1e-6)
            size = sum(f.get("size", 0) for f in (meta.get("files") or {}).values())
            if size:
                index_bytes[name] = size / meta["docs"]
    query_ms: dict[str, float] = {}
    for meta_path in (store.root / "runs").glob("*/*.json"):
        meta = read(meta_path)
        if meta and "retriever" in meta:
            query_ms[meta["retriever"]] = meta.get("ms_per_query", 0.0)
    return index_rate, index_bytes, query_ms


def _model_seconds(ref: ModelRef, tokens: float, decode: bool = False) -> float:
    return 2 * params_of(ref)[0] * tokens / GPU_FLOPS * (DECODE_PENALTY if decode else 1.0)


class Estimator:
    """Costs of index builds and query runs: this cache's measurements first, then the scale fits, then the
    per-parameter rate for model work. Every cost says where it came from (`Cost.sources`)."""

    def __init__(self, store: Store, fits: dict[tuple[str, str], Fit] | None = None):
        self.index_rate, self.index_bytes, self.query_ms = measured(store)
        self.fits = load_fits() if fits is None else fits

    def _backend(self, recipe: IndexRecipe) -> str | None:
        return BUILDER_BACKEND.get(getattr(recipe.build, "__name__", ""))

    def index(self, recipe: IndexRecipe, docs: int | None) -> Cost:
        cost = Cost()
        if docs is None:
            cost.lacks("the corpus's document count (not staged, no published count)")
            return cost
        models = recipe.all_models()
        backend = self._backend(recipe)
        if recipe.name in self.index_rate:  # measured end to end here (encoding included)
            seconds = docs / self.index_rate[recipe.name]
            if models:
                cost.gpu_s += seconds
            else:
                cost.cpu_s += seconds
            cost.sources.add("cache")
        else:
            for role, ref in models.items():
                if role == "generator":  # doc2query: questions written per document
                    samples = float((recipe.stage.params if recipe.stage else {}).get("num_samples", 1))
                    cost.gpu_s += docs * (_model_seconds(ref, DOC_TOKENS)
                                          + _model_seconds(ref, samples * GENERATED_TOKENS, decode=True))
                else:
                    cost.gpu_s += docs * _model_seconds(ref, DOC_TOKENS)
                cost.sources.add("per-parameter rate")
            fit = self.fits.get((backend, "build_s")) if backend else None
            if fit is not None and backend not in TIME_UNFIT:
                cost.cpu_s += fit.at(docs)
                cost.sources.add("scale fit")
            elif not models:
                cost.lacks(f"an index build-time fit for {backend or recipe.name}")
        if recipe.name in self.index_bytes:
            cost.disk += docs * self.index_bytes[recipe.name]
        elif backend and (backend, "index_bytes") in self.fits:
            cost.disk += self.fits[(backend, "index_bytes")].at(docs)
        return cost

    def queries(self, retriever: GridCell, queries: int | None, docs: int | None) -> Cost:
        """Running the queries of one cell: query-side models, then the search itself."""
        cost = Cost()
        if queries is None:
            cost.lacks("the dataset's query count (not staged, no published count)")
            return cost
        if retriever.name in self.query_ms:
            cost.cpu_s += queries * self.query_ms[retriever.name] / 1000
            cost.sources.add("cache")
            return cost
        for role, ref in retriever.models.items():
            if role == "generator":  # query2doc, HyDE: a passage written per query
                cost.gpu_s += queries * _model_seconds(ref, PASSAGE_TOKENS, decode=True)
            elif retriever.index is None:  # a re-ranker: every (query, candidate) pair through the model
                cost.gpu_s += queries * RERANK_DEPTH * _model_seconds(ref, QUERY_TOKENS + DOC_TOKENS)
            else:
                cost.gpu_s += queries * _model_seconds(ref, QUERY_TOKENS)
            cost.sources.add("per-parameter rate")
        backend = self._backend(retriever.index) if retriever.index is not None else None
        fit = self.fits.get((backend, "qps")) if backend else None
        if fit is not None and docs is not None and backend not in TIME_UNFIT:
            cost.cpu_s += queries / max(fit.at(docs), 1e-9)
            cost.sources.add("scale fit")
        elif retriever.index is not None:
            cost.lacks(f"a search-time fit for {backend or retriever.index.name}")
        return cost


# -- what is missing here and where to stage it ------------------------------------------------------------------
def where_to_stage(dataset: Dataset, reason: str) -> tuple[str, str]:
    """Where the user stages a missing corpus, as (setting and path, how to get it): never the cache's copy, which
    is irgrid's own."""
    corpus = dataset.corpus_dataset()
    if corpus.irds_factory is None and not corpus.files:
        home = str(settings.irds_home())
        staged = settings.staged_irds_home()
        target = str(staged) if staged else "$IRGRID_IRDS_STAGED"
        m = re.search(re.escape(home) + r"/(\S+?)(?: is missing|\s|$)", reason)
        rel = m.group(1) if m else corpus.irds_id + "/"
        return (f"IRGRID_IRDS_STAGED: {target}/{rel}",
                f"ir_datasets' files of {corpus.irds_id} (an ir_datasets home's layout), fetched on a connected machine")
    shared = settings.shared_root()
    path = re.search(re.escape(str(shared)) + r"/\S+", reason) if shared is not None else None
    if path is None:
        return reason, ""
    how = ". ".join(part for part in reason.split(". ") if path.group(0) not in part)
    return f"IRGRID_SHARED ({shared}): {path.group(0)}", how


@dataclass
class Plan:
    rows: list[dict[str, Any]]  # one per cell
    models: dict[str, dict[str, Any]]  # missing checkpoint -> {command, retrievers, cells}
    corpora: dict[str, dict[str, Any]]  # missing corpus -> {where, datasets, docs}
    indexes: dict[str, dict[str, Any]]  # index to build (its folder) -> {recipe, corpus, family, cost}
    families: dict[str, Cost]
    cached_indexes: int


def _count(value: Any, fallback) -> int | None:
    if value:
        return int(value)
    try:
        return int(fallback())
    except Exception:  # counts unknown offline (no metadata, nothing staged): the cell's cost is unknown
        return None


def _queries_count(dataset: Dataset) -> int:
    """ir_datasets' query count; a collection of local files (bring-your-own) has none, so its topics are read:
    cheap, and never a download (its cells were "without an estimate" before, issue 41)."""
    if dataset.files:
        return len(dataset.topics())
    return int(dataset.irds().queries_count())


PLAN_PROGRESS_CELLS = 500  # from this many cells, checking the cache says so with a progress bar


def make_plan(spec: Any, store: Store) -> Plan:
    """Every cell's status and cost; missing models and corpora once each; index builds once per corpus. The one
    planner: `--dry-run` prints it, and a grid's progress lines count down its estimates (`est_seconds`, None when
    the estimate lacks something)."""
    import logging

    from irgrid.runner.cell import resolve_models
    from irgrid.util.console import Progress

    est = Estimator(store)
    missing_models: dict[str, dict[str, Any]] = {}
    model_ok: dict[str, list[str]] = {}  # retriever -> missing checkpoint keys
    for r in spec.retrievers:
        missing = []
        for ref in list(r.all_models().values()):
            try:
                resolve_models({"m": ref}, spec.models, check_only=True)
            except models_mod.ModelMappingError:
                raise  # the mapping is wrong (a missing IRGRID_MODELS file, a pickle): not a checkpoint to stage
            except models_mod.ModelUnavailableError as e:
                key = f"{ref.id}@{ref.revision}" if ref.revision else ref.id
                entry = missing_models.setdefault(key, {"command": models_mod.staging_command(ref), "retrievers": [],
                                                        "cells": 0, "why": str(e).split(". ")[0]})
                if r.name not in entry["retrievers"]:
                    entry["retrievers"].append(r.name)
                if key not in missing:
                    missing.append(key)
        model_ok[r.name] = missing
    corpora: dict[str, dict[str, Any]] = {}
    docs_ok: dict[str, tuple[bool, str]] = {}
    indexes: dict[str, dict[str, Any]] = {}
    families: dict[str, Cost] = {}
    rows, cached_indexes = [], set()
    total = sum(len(spec.cells_on(d)) for d in spec.datasets)
    bar = None
    if total >= PLAN_PROGRESS_CELLS:  # a big grid: say what is happening before the first cell (issue 32)
        logging.getLogger("irgrid").info("checking the cache for %d cells (%d dataset(s))", total,
                                         len(spec.datasets))
        bar = Progress(total, "checking the cache", unit="cell")
    for dataset in spec.datasets:
        corpus = dataset.corpus_dataset()
        docs = _count(corpus.counts.docs or dataset.counts.docs, corpus.docs_count)
        queries = _count(dataset.sample[0] if dataset.sample else dataset.counts.queries,
                         lambda d=dataset: _queries_count(d))
        for r in spec.cells_on(dataset):  # bound to the dataset: the keys and folders the grid uses
            if bar is not None:
                bar.on_read()
            row: dict[str, Any] = {"dataset": dataset.name, "retriever": r.name, "family": r.family,
                                   "status": "cached", "index": "-", "missing_models": " ".join(model_ok[r.name]),
                                   "missing_data": "", "cpu_s": 0.0, "gpu_s": 0.0, "disk_bytes": 0.0, "source": "",
                                   "lacks": "", "run_cached": True, "index_cached": True, "est_seconds": 0.0}
            rows.append(row)
            row["corpus"] = corpus.corpus
            try:  # keys read the staged copy (verified, copied again when damaged): a full cache disk fails here
                if store.runs.has(r, dataset):
                    continue
                row["run_cached"] = False
                row["index_cached"] = r.index is None or store.indexes.ready(r.index, dataset)
            except (OSError, DatasetError) as e:
                row.update(status="blocked here", missing_data=corpus.corpus, run_cached=False, index_cached=False,
                           est_seconds=None, lacks=f"data: {str(e).splitlines()[0]}")
                continue
            cost = est.queries(r, queries, docs)
            if r.index is not None:
                folder = str(store.indexes.dir(r.index, dataset))
                if folder in indexes:
                    row["index"] = f"shared ({indexes[folder]['first']})"
                elif row["index_cached"]:
                    row["index"] = "cached"
                    cached_indexes.add(folder)
                else:
                    row["index"] = "build"
                    index_cost = est.index(r.index, docs)
                    indexes[folder] = {"recipe": r.index.name, "corpus": corpus.corpus, "family": r.family,
                                       "first": f"{dataset.name} × {r.name}", "docs": docs}
                    cost.add(index_cost)
                if row["index"] != "cached":
                    ok, why = docs_ok.setdefault(corpus.corpus, dataset.docs_available())
                    if not ok:
                        where, how = where_to_stage(dataset, why)
                        entry = corpora.setdefault(corpus.corpus, {"where": where, "how": how, "datasets": [],
                                                                   "docs": docs, "cells": 0})
                        if dataset.name not in entry["datasets"]:
                            entry["datasets"].append(dataset.name)
                        entry["cells"] += 1
                        row["missing_data"] = corpus.corpus
            for key in model_ok[r.name]:
                missing_models[key]["cells"] += 1
            row["status"] = "blocked here" if row["missing_models"] or row["missing_data"] else "to run"
            row.update(cpu_s=cost.cpu_s, gpu_s=cost.gpu_s, disk_bytes=cost.disk,
                       source="+".join(sorted(cost.sources)) + ("+unknown" if cost.unknown else ""),
                       lacks="; ".join(sorted(cost.why)),
                       est_seconds=None if cost.unknown else cost.cpu_s + cost.gpu_s)
            families.setdefault(r.family, Cost()).add(cost)
    if bar is not None:
        bar.close()
    return Plan(rows, missing_models, corpora, indexes, families, len(cached_indexes))


def _duration(seconds: float) -> str:
    """A projected time a person reads at a glance: seconds, minutes, then hours (0.1 h was the finest before,
    so a small grid read "0 GPU-hours + 0 CPU-hours")."""
    if seconds <= 0:
        return "–"
    if seconds < 1:
        return "<1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:,.1f} h"


def _total_time(seconds: float, kind: str) -> str:
    """'1,263 GPU-hours', '1.4 GPU-hours', '12 GPU-minutes', '40 GPU-seconds'."""
    if seconds >= 36_000:
        return f"{seconds / 3600:,.0f} {kind}-hours"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} {kind}-hours"
    if seconds >= 60:
        return f"{seconds / 60:.0f} {kind}-minutes"
    if seconds >= 1:
        return f"{seconds:.0f} {kind}-seconds"
    return f"<1 {kind}-second" if seconds > 0 else f"0 {kind}-hours"


def _bytes(n: float) -> str:
    if n <= 0:
        return "–"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / 1e6:.2f} MB"


def _listed(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" +{len(items) - n} more" if len(items) > n else "")


LINE = 160  # the widest line of the summary's tables


def retriever_lines(plan: Plan) -> list[str]:
    """One line per retriever, every one (BM25 too, which needs no checkpoint): its cells still to run, their
    projected GPU and CPU time and disk, and what is missing here before they can run."""
    names = list(dict.fromkeys(r["retriever"] for r in plan.rows))
    width = max([len(n) for n in names] + [9])
    out = [f"  {'retriever':<{width}} {'cells':>6} {'GPU':>8} {'CPU':>8} {'disk':>10}  missing here",]
    for name in names:
        mine = [r for r in plan.rows if r["retriever"] == name]
        todo = [r for r in mine if r["status"] != "cached"]
        gpu, cpu, disk = (sum(r[k] for r in todo) for k in ("gpu_s", "cpu_s", "disk_bytes"))
        models = list(dict.fromkeys(m.split("@")[0] for r in todo for m in r["missing_models"].split()))
        corpora = list(dict.fromkeys(r["missing_data"] for r in todo if r["missing_data"]))
        missing = []
        if corpora:
            n_corpora = len({r["corpus"] for r in todo})
            missing.append(f"corpus {corpora[0]}" if len(corpora) == 1 == n_corpora
                           else f"{len(corpora)} of {n_corpora} corpora")
        if models:  # ids only: the staging commands (with revisions) are listed once above
            missing.append(f"checkpoint{'s' if len(models) > 1 else ''} {_listed(models, 2)}")
        lacks = list(dict.fromkeys(w for r in todo for w in r["lacks"].split("; ") if w))
        unknown = sum("unknown" in r["source"] for r in todo)
        text = "; ".join(missing) or ("nothing (all cached)" if not todo else "nothing")
        if todo and mine[0]["family"] == "pipeline" and not lacks:
            text += " (its first stages are cells of their own, costed on their lines)"
        cells = f"{len(todo)}" + (f"+{len(mine) - len(todo)}c" if len(todo) < len(mine) else "")
        line = f"  {name:<{width}} {cells:>6} {_duration(gpu):>8} {_duration(cpu):>8} {_bytes(disk):>10}  {text}"
        out.append(line if len(line) <= LINE else line[:LINE - 1] + "…")  # every detail: --format csv
        if lacks:  # why a cost is partial, on its own line: never cut off
            out += textwrap.wrap(f"no estimate for {unknown} of its cells: it lacks {'; '.join(lacks)}", LINE - 8,
                                 initial_indent=" " * (width + 8), subsequent_indent=" " * (width + 10))
    return out


def format_summary(plan: Plan, source: str = "") -> str:
    """The compact view: counts, what to stage (once each), index builds, cost per family and per retriever, and
    the total."""
    rows = plan.rows
    status = {s: sum(r["status"] == s for r in rows) for s in ("cached", "to run", "blocked here")}
    n_ds, n_r = len({r["dataset"] for r in rows}), len({r["retriever"] for r in rows})
    out = [f"plan{' for ' + source if source else ''}: {n_ds} datasets × {n_r} retrievers = {len(rows)} cells: "
           f"{status['cached']} cached, {status['to run']} to run here, {status['blocked here']} blocked here "
           f"(models or data missing)",
           f"what loading each real checkpoint needs (remote code, transformers, packages, licence gates, GPU memory): "
           f"irgrid doctor {source or 'EXP.yaml'}", ""]
    if plan.models:
        out.append(f"missing checkpoints ({len(plan.models)}), each once; run on a connected machine, then copy its "
                   f"Hugging Face cache (HF_HOME) here or map the folder with IRGRID_MODELS=models.yaml "
                   f"('id: /path'):")
        for m in sorted(plan.models.values(), key=lambda m: m["command"]):
            users = ", ".join(m["retrievers"][:3]) + (", ..." if len(m["retrievers"]) > 3 else "")
            out.append(f"  {m['command']}  # {users}: {m['cells']} cells")
        out.append("")
    if plan.corpora:
        out.append(f"missing corpora ({len(plan.corpora)}), each once: where to stage them")
        for name, c in sorted(plan.corpora.items()):
            docs = f"{c['docs']:,} docs" if c["docs"] else "? docs"
            ds = ", ".join(c["datasets"][:2]) + (f" +{len(c['datasets']) - 2} more" if len(c["datasets"]) > 2 else "")
            out.append(f"  {name} ({docs}; {ds})")
            for text in (c["where"], c["how"]):
                out += textwrap.wrap(text, 112, initial_indent="      ", subsequent_indent="        ")
        out.append("")
    out.append(f"index builds: {len(plan.indexes)} to build (one per index recipe and corpus; datasets sharing a "
               f"corpus share it), {plan.cached_indexes} cached")
    out.append("")
    header = f"  {'family':<17} {'cells':>6} {'builds':>6} {'GPU':>9} {'CPU':>9} {'disk':>10}  source"
    out += ["projected cost of the cells still to run (blocked ones included, as once staged):", header]
    total = Cost()
    for fam in sorted(plan.families):
        c = plan.families[fam]
        cells = sum(r["family"] == fam and r["status"] != "cached" for r in rows)
        builds = sum(i["family"] == fam for i in plan.indexes.values())
        unknown = sum(r["family"] == fam and "unknown" in r["source"] for r in rows)
        src = " + ".join(sorted(c.sources)) or ("nothing to estimate" if not unknown else "")
        if unknown:
            src += f"{'; ' if src else ''}{unknown} of {cells} cells without an estimate (see the retrievers below)"
        out.append(f"  {fam:<17} {cells:>6} {builds:>6} {_duration(c.gpu_s):>9} {_duration(c.cpu_s):>9} "
                   f"{_bytes(c.disk):>10}  {src}")
        total.add(c)
    out.append(f"  {'total':<17} {sum(r['status'] != 'cached' for r in rows):>6} {len(plan.indexes):>6} "
               f"{_duration(total.gpu_s):>9} {_duration(total.cpu_s):>9} {_bytes(total.disk):>10}")
    out += ["", "per retriever (cells still to run, +Nc: cached; the cost includes the index builds it is first to "
                "need):", *retriever_lines(plan)]
    out += ["", f"total: {_total_time(total.gpu_s, 'GPU')} + {_total_time(total.cpu_s, 'CPU')}, "
            f"{_bytes(total.disk)} of indexes", "", *textwrap.wrap(ASSUMPTIONS, 116), "",
            "every cell: --format csv"]
    return "\n".join(out) + "\n"


ASSUMPTIONS = (
    "assumptions: measured throughputs of this cache first; else bench-scale fits (benchmarks/results/scale_fit.csv, "
    f"cost = a*docs^k fitted on 10k-1M docs on this project's CPU machine; dense search: the {DENSE_DIM}-d exact "
    "fit, counted as CPU time); model work at 2 FLOPs per parameter per token on one GPU at "
    f"{GPU_FLOPS / 1e12:.0f} TFLOP/s effective (bf16, ~30% of an A100's peak), {DOC_TOKENS} tokens per document, "
    f"{QUERY_TOKENS} per query, generation {GENERATED_TOKENS} tokens per doc2query sample and {PASSAGE_TOKENS} per "
    f"query2doc/HyDE passage at 1/{DECODE_PENALTY:.0f} of that rate; parameter counts from model cards or the id "
    f"({DEFAULT_PARAMS / 1e6:.0f}M when neither says). PLAID's fits come from <=2k synthetic docs: its build time "
    "is the encoding alone, its search has no estimate, its size is the fit's (likely high)."
)

CSV_COLUMNS = ["dataset", "retriever", "family", "status", "index", "missing_models", "missing_data", "cpu_s",
               "gpu_s", "disk_bytes", "source", "lacks", "corpus"]


def format_csv(plan: Plan) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")  # progress fields
    writer.writeheader()
    for r in plan.rows:
        writer.writerow({**r, "cpu_s": f"{r['cpu_s']:.1f}", "gpu_s": f"{r['gpu_s']:.1f}",
                         "disk_bytes": f"{r['disk_bytes']:.0f}"})
    return buf.getvalue()
