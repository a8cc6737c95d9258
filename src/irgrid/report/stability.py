"""Batch, order and cache invariance of an experiment's neural cells (issue 43 item 4; `irgrid audit --stability`).

Each sampled neural cell (an entry with a checkpoint, or a pipeline expression with one among its parts) is
computed once as the reference, in an empty cache and as the experiment declares it, then again under variants:

- `warm`: in the reference's cache with the cell's own stored run removed, its neural parts' indexes built first:
  the cell is recomputed from cached indexes and cached first stages (a re-ranker then reads the indexed vectors);
- `cold`: (expressions only) the cell alone in an empty cache: its neural re-rankers encode the candidates' texts,
  no index exists (a plain entry's reference is already computed cold);
- `batch=N`: in an empty cache with every neural stage's encoder batch size set to N (queries, documents,
  re-ranking);
- `shuffled`: in an empty cache with the corpus's documents and the queries in a seeded random order;
- `dtype=fp32` (GPU only): the entry's declared reduced precision (bf16 / fp16) against fp32; on CPU the model
  runs in fp32 anyway, and the row says it was skipped.

Per cell and variant: the largest |Δscore| over the (query, document) pairs both runs hold, the documents in one
run's ranking but not the other's, the top-10 rank flips (positions 1-10 holding another document), and per
measure the difference of the means with its ratio to the reference cell's bootstrap SE (irgrid.report.stats).
Bounds (stated in every output): fp32 variants must agree (|Δscore| <= `score_bound`: 0 with exact batches, else
PADDED_SCORE_BOUND; no flips;
Δmeasure = 0); the reduced-precision variant must stay within `REDUCED_PRECISION_SE` bootstrap SEs. Rows beyond a
bound say EXCEEDS, and the command exits 1.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.data.datasets import Dataset
from irgrid.util.errors import Error

log = logging.getLogger("irgrid")

BATCH_SIZES = (1, 32, 256)
# fp32 variants with padded batches (the default; IRGRID_EXACT_BATCHES off): a padded text's vector moves by up to
# 1.1e-7 (all-MiniLM-L6-v2, measured), a dot product of two unit vectors by about twice that: 1e-6 leaves margin
PADDED_SCORE_BOUND = 1e-6
REDUCED_PRECISION_SE = 0.5  # fp32 vs bf16/fp16: |Δmeasure| within half the reference cell's bootstrap SE
TOP = 10  # rank flips are counted over the first TOP positions
COLUMNS = ["dataset", "system", "variant", "what", "max_abs_dscore", "docs_changed", "top10_flips",
           "queries_flipped", "measure", "reference", "delta", "se", "delta_over_se", "bound", "status"]


class StabilityError(Error, ValueError):
    """An audit that cannot run as asked (no neural cell, a bad option); the message says what to change."""


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    batch: int | None = None
    shuffle: bool = False
    warm: bool = False
    alone: bool = False
    dtype: str | None = None

    @property
    def exact(self) -> bool:
        """Held to identity (fp32): everything but the reduced-precision comparison."""
        return self.dtype is None


def variants(batch_sizes: Sequence[int] = BATCH_SIZES, gpu: bool = False, dtype: str = "fp32") -> list[Variant]:
    out = [Variant("warm", "recomputed from the reference's cached indexes and first stages", warm=True),
           Variant("cold", "alone in an empty cache (re-rankers encode candidate texts)", alone=True)]
    out += [Variant(f"batch={b}", f"encoder batch size {b}, empty cache", batch=b) for b in batch_sizes]
    out.append(Variant("shuffled", "documents and queries in a seeded random order, empty cache", shuffle=True))
    out.append(Variant(f"dtype={dtype}", f"{dtype} against the declared precision" if gpu else
                       "skipped: no GPU (the model runs in fp32 on CPU)", dtype=dtype if gpu else "skipped"))
    return out


# -- cells ------------------------------------------------------------------------------------------------------
def is_neural(cell: Any) -> bool:
    """A cell that runs a checkpoint (its own or one of its parts')."""
    return bool(cell.all_models())


def neural_parts(cell: Any) -> list[Any]:
    """The neural entries an expression names (for a plain entry: itself when neural)."""
    parts = getattr(cell, "parts", None)
    if parts is None:
        return [cell] if is_neural(cell) else []
    return [p for part in parts.values() for p in neural_parts(part)]


def with_batch(cell: Any, batch: int) -> Any:
    """The cell with every neural stage's encoder batch size set to `batch` (the entry's option, which sets the
    query side and re-ranking, and its index recipe's, which sets document encoding); unchanged where a stage
    has no batch size."""
    parts = getattr(cell, "parts", None)
    if parts is not None:
        return dataclasses.replace(cell, parts={k: with_batch(v, batch) for k, v in parts.items()})
    if not is_neural(cell) or "batch_size" not in getattr(cell, "options", {}):
        return cell
    out = cell.with_options(batch_size=batch)
    if out.index is not None and "batch_size" in out.index.params and out.index.params["batch_size"] != batch:
        # an entry whose option leaves its documents' batch alone (a dense entry's sets both)
        out = dataclasses.replace(out, index=dataclasses.replace(out.index, params={**out.index.params,
                                                                                     "batch_size": batch}))
    return out


def has_batch(cell: Any) -> bool:
    return any("batch_size" in getattr(p, "options", {}) for p in neural_parts(cell))


def with_dtype(cell: Any, dtype: str) -> Any:
    parts = getattr(cell, "parts", None)
    if parts is not None:
        return dataclasses.replace(cell, parts={k: with_dtype(v, dtype) for k, v in parts.items()})
    if not is_neural(cell) or "dtype" not in getattr(cell, "options", {}):
        return cell
    return cell.with_options(dtype=dtype)


# -- shuffled datasets ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shuffled(Dataset):
    """A dataset whose documents and queries come in a seeded random order (same ids, texts and judgements)."""

    order_seed: int = 0

    def config(self) -> dict[str, Any]:
        return {**super().config(), "order_seed": self.order_seed}

    def docs(self) -> Iterator[dict[str, str]]:
        docs = list(super().docs())
        random.Random(self.order_seed).shuffle(docs)
        yield from docs

    def topics(self) -> pd.DataFrame:
        return super().topics().sample(frac=1.0, random_state=self.order_seed).reset_index(drop=True)


def shuffled(dataset: Dataset, seed: int) -> Dataset:
    def copy(d: Dataset) -> Shuffled:
        return Shuffled(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Dataset)}, order_seed=seed)

    corpus = dataset.corpus_dataset()
    out = copy(dataset)
    if corpus is not dataset:
        out = dataclasses.replace(out, corpus_entry=copy(corpus))
    return out


# -- comparing runs ---------------------------------------------------------------------------------------------
def compare_runs(ref: pd.DataFrame, other: pd.DataFrame, top: int = TOP) -> dict[str, Any]:
    """Largest |Δscore| over shared (qid, docno) pairs, documents in only one run, top-`top` flips (positions
    holding another document) and the queries with any flip."""
    key = ["qid", "docno"]
    a = ref.astype({"qid": str, "docno": str})
    b = other.astype({"qid": str, "docno": str})
    both = a[key + ["score"]].merge(b[key + ["score"]], on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    shared = both[both["_merge"] == "both"]
    delta = (shared["score_a"] - shared["score_b"]).abs()
    flips, queries = 0, 0
    tops_a = a[a["rank"] < top].sort_values(["qid", "rank"]).groupby("qid")["docno"].apply(list)
    tops_b = b[b["rank"] < top].sort_values(["qid", "rank"]).groupby("qid")["docno"].apply(list)
    for qid in sorted(set(tops_a.index) | set(tops_b.index)):
        x, y = tops_a.get(qid, []), tops_b.get(qid, [])
        n = sum(1 for i in range(max(len(x), len(y))) if (x[i] if i < len(x) else None) != (y[i] if i < len(y)
                                                                                           else None))
        flips += n
        queries += n > 0
    return {"max_abs_dscore": float(delta.max()) if len(delta) else 0.0,
            "docs_changed": int((both["_merge"] != "both").sum()), "top10_flips": flips, "queries_flipped": queries}


def judge(variant: Variant, diff: dict[str, Any], delta: float, ratio: float, score_bound: float) -> tuple[str, bool]:
    """(the bound as text, whether the row keeps it): fp32 variants identical up to `score_bound` on scores, with
    no flip, no changed document and no change of the measure; reduced precision within REDUCED_PRECISION_SE."""
    if variant.exact:
        ok = (diff["max_abs_dscore"] <= score_bound and diff["top10_flips"] == 0 and diff["docs_changed"] == 0
              and delta == 0)
        return f"|dscore|<={score_bound:g}, flips=0, changed=0, dmeasure=0", ok
    return f"|dmeasure|<={REDUCED_PRECISION_SE:g} SE", abs(ratio) <= REDUCED_PRECISION_SE


# -- the audit ------------------------------------------------------------------------------------------------------
def select(spec: Any, cells: int | None = None, queries: int | None = None, seed: int = 0,
           names: Sequence[str] = ()) -> Any:
    """The experiment restricted to its neural cells (`names`: those; `cells`: a seeded sample of them), on a
    seeded sample of `queries` per dataset; no baseline, claims or aggregates (the audit compares a cell with
    itself)."""
    neural = [r for r in spec.retrievers if is_neural(r)]
    if not neural:
        raise StabilityError(f"{spec.source}: no neural cell to audit (every retriever runs without a checkpoint: "
                             f"{', '.join(r.name for r in spec.retrievers)}); the audit re-encodes with checkpoints")
    if names:
        known = {r.name: r for r in spec.retrievers}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise StabilityError(f"--cell {unknown[0]!r} is not a retriever of {spec.source}; its retrievers: "
                                 f"{', '.join(known)}")
        plain = [n for n in names if not is_neural(known[n])]
        if plain:
            raise StabilityError(f"--cell {plain[0]!r} runs no checkpoint; neural cells of {spec.source}: "
                                 f"{', '.join(r.name for r in neural)}")
        neural = [known[n] for n in names]
    if cells is not None:
        if cells < 1:
            raise StabilityError(f"--cells must be a whole number >= 1, got {cells}")
        if cells < len(neural):
            picked = set(random.Random(seed).sample(range(len(neural)), cells))
            neural = [r for i, r in enumerate(neural) if i in picked]
    datasets = list(spec.datasets)
    if queries is not None:
        if queries < 1:
            raise StabilityError(f"--queries must be a whole number >= 1, got {queries}")
        datasets = [d.with_sample(queries, seed) if not d.sample else d for d in datasets]
    return dataclasses.replace(spec, datasets=datasets, retrievers=neural, baseline=None, claims=[], aggregates=[],
                               comparisons="baseline")


def _runs(spec: Any, store: Any) -> dict[tuple[str, str], pd.DataFrame]:
    out = {}
    for dataset in spec.datasets:
        for cell in spec.cells_on(dataset):
            loaded = store.runs.load(cell, dataset)
            if loaded is not None:
                out[dataset.name, cell.name] = loaded[0]
    return out


def _means(perq: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    if not len(perq):
        return {}
    return {k: float(v) for k, v in perq.groupby(["dataset", "system", "measure"])["value"].mean().items()}


def _grid(spec: Any, store: Any) -> Any:
    from irgrid import grid

    result = grid.run(spec, out=None, store=store)
    if result.failures:
        f = result.failures[0]
        raise StabilityError(f"{f.retriever} on {f.dataset} failed during the audit: {f.error.splitlines()[0]}")
    return result


@dataclass(frozen=True)
class Plan:
    """What to audit, as the command line chose it: every computation rebuilds the cells from this in its own
    process (entries hold closures, which do not pickle; the same seeds pick the same cells and queries)."""

    experiment: str
    cells: int | None = None
    queries: int | None = None
    seed: int = 0
    names: tuple[str, ...] = ()

    def spec(self) -> Any:
        from irgrid.runner.experiment import load

        return select(load(self.experiment), self.cells, self.queries, self.seed, self.names)


def compute(plan: Plan, variant: Variant | None, cache: str, cell: str | None = None
            ) -> tuple[dict[tuple[str, str], pd.DataFrame], pd.DataFrame]:
    """One computation of the audit (the reference when `variant` is None) in the cache at `cache`: the stored
    runs of its cells and their per-query values. Run in a fresh process by `audit`."""
    from irgrid.store import Store

    spec, store = plan.spec(), Store(cache)
    if variant is None:
        pass
    elif variant.warm:  # the neural parts' indexes (cached already), then the cells' own runs recomputed
        parts = {p.name: p for c in spec.retrievers for p in neural_parts(c) if p.index is not None}
        _grid(dataclasses.replace(spec, retrievers=list(parts.values())), store)
        for dataset in spec.datasets:
            for c in spec.cells_on(dataset):
                for path in (store.runs.path(c, dataset), store.runs.meta_path(c, dataset)):
                    path.unlink(missing_ok=True)
    elif variant.alone:
        spec = dataclasses.replace(spec, retrievers=[c for c in spec.retrievers if c.name == cell])
    elif variant.batch is not None:
        spec = dataclasses.replace(spec, retrievers=[with_batch(c, variant.batch) for c in spec.retrievers
                                                     if has_batch(c)])  # names unchanged
    elif variant.shuffle:
        spec = dataclasses.replace(spec, datasets=[shuffled(d, plan.seed) for d in spec.datasets])
    else:
        spec = dataclasses.replace(spec, retrievers=[with_dtype(c, str(variant.dtype)) for c in spec.retrievers])
    result = _grid(spec, store)
    perq = result.perquery
    if len(perq) and "name" in perq.columns and "system" not in perq.columns:
        perq = perq.rename(columns={"name": "system"})
    return _runs(spec, store), perq


def _isolated(plan: Plan, variant: Variant | None, cache: Path, cell: str | None = None) -> Any:
    """`compute` in a fresh interpreter: each computation starts without loaded models or a JVM, and a native
    crash in one (a JVM segfault was seen after several grids in one process) fails it by name."""
    import concurrent.futures
    import multiprocessing
    import os

    from irgrid.util.workers import exit_with_parent

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context, initializer=exit_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        try:
            return pool.submit(compute, plan, variant, str(cache), cell).result()
        except concurrent.futures.process.BrokenProcessPool as e:
            what = "the reference" if variant is None else f"variant {variant.name}"
            raise StabilityError(f"{what} of the stability audit died in its process ({e}); rerun, or run that "
                                 f"variant alone with -v to see why") from e


def audit(plan: Plan, work: Path, batch_sizes: Sequence[int] = BATCH_SIZES, score_bound: float = 0.0,
          n_resamples: int = 1000, gpu: bool | None = None, keep: bool = False) -> pd.DataFrame:
    """The audit of `plan` in `work` (one empty cache per variant, each computed in its own process, removed after
    unless `keep`); the rows of COLUMNS."""
    from irgrid.report.stats import bootstrap_table

    if gpu is None:
        from irgrid.models.devices import pick_device

        gpu = pick_device(None).startswith("cuda")
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise StabilityError(f"--batch-sizes takes whole numbers >= 1, got {b!r}")
    spec = plan.spec()
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    caches: list[Path] = []

    def fresh(name: str) -> Path:
        path = work / f"cache-{name}"
        if path.exists():
            shutil.rmtree(path)
        caches.append(path)
        return path

    log.info("stability audit: reference (%d cell(s) x %d dataset(s), empty cache)", len(spec.retrievers),
             len(spec.datasets))
    ref_cache = fresh("reference")
    ref_runs, ref_perq = _isolated(plan, None, ref_cache)
    ref_means = _means(ref_perq)
    se = {(r.dataset, r.system, r.measure): r.se for r in bootstrap_table(ref_perq, n_resamples, plan.seed).itertuples()}
    rows: list[dict[str, Any]] = []

    def record(variant: Variant, runs: dict, perq: pd.DataFrame) -> None:
        means = _means(perq)
        for (dataset, system), run in ref_runs.items():
            other = runs.get((dataset, system))
            if other is None:
                continue
            diff = compare_runs(run, other)
            for (d, s, measure), value in sorted(ref_means.items()):
                if (d, s) != (dataset, system):
                    continue
                delta = means[d, s, measure] - value
                cell_se = se.get((d, s, measure), math.nan)
                ratio = delta / cell_se if cell_se else (0.0 if delta == 0 else math.inf)
                bound, ok = judge(variant, diff, delta, ratio, score_bound)
                rows.append({"dataset": d, "system": s, "variant": variant.name, "what": variant.what, **diff,
                             "measure": measure, "reference": value, "delta": delta, "se": cell_se,
                             "delta_over_se": ratio, "bound": bound, "status": "ok" if ok else "EXCEEDS"})

    def skipped(variant: Variant, system: str, why: str) -> None:
        for dataset in spec.datasets:
            rows.append({**dict.fromkeys(COLUMNS, ""), "dataset": dataset.name, "system": system,
                         "variant": variant.name, "what": why, "status": "skipped"})

    for variant in variants(batch_sizes, gpu):
        log.info("stability audit: %s (%s)", variant.name, variant.what)
        if variant.dtype == "skipped":
            for cell in spec.retrievers:
                skipped(variant, cell.name, variant.what)
        elif variant.warm:
            record(variant, *_isolated(plan, variant, ref_cache))
        elif variant.alone:
            for cell in spec.retrievers:
                if getattr(cell, "parts", None) is None:
                    skipped(variant, cell.name, "not an expression: its reference is computed in an empty cache")
                else:
                    record(variant, *_isolated(plan, variant, fresh(f"cold-{cell.name}"), cell.name))
        elif variant.batch is not None:
            for cell in spec.retrievers:
                if not has_batch(cell):
                    skipped(variant, cell.name, "no encoder batch size to set")
            if any(has_batch(c) for c in spec.retrievers):
                record(variant, *_isolated(plan, variant, fresh(variant.name)))
        else:
            record(variant, *_isolated(plan, variant, fresh(variant.name)))
    if not keep:
        for path in caches:
            shutil.rmtree(path, ignore_errors=True)
        if work.is_dir() and not any(work.iterdir()):
            work.rmdir()
    return pd.DataFrame(rows, columns=COLUMNS)


def exceeded(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "EXCEEDS"]


def write(rows: pd.DataFrame, folder: Path, meta: dict[str, Any]) -> list[Path]:
    """stability.csv (every row) and stability.json (the bounds, the settings and the rows) in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = folder / "stability.csv", folder / "stability.json"
    rows.to_csv(csv_path, index=False)
    records = json.loads(rows.to_json(orient="records"))
    json_path.write_text(json.dumps({**meta, "reduced_precision_bound_se": REDUCED_PRECISION_SE,
                                     "exceeded": int(len(exceeded(rows))), "rows": records}, indent=2) + "\n")
    return [csv_path, json_path]


def table(rows: pd.DataFrame) -> list[dict[str, str]]:
    """Rows for the terminal: numbers in short form."""
    def num(value: Any, fmt: str) -> str:
        if value == "" or value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return format(value, fmt)

    return [{"dataset": r["dataset"], "system": r["system"], "variant": r["variant"],
             "max|dscore|": num(r["max_abs_dscore"], ".3g"), "docs_changed": num(r["docs_changed"], "d")
             if r["docs_changed"] != "" else "-", "top10_flips": num(r["top10_flips"], "d")
             if r["top10_flips"] != "" else "-", "measure": r["measure"] or "-",
             "delta": num(r["delta"], ".3g"), "delta/SE": num(r["delta_over_se"], ".3g"), "status": r["status"]}
            for r in rows.to_dict("records")]
