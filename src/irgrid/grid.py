"""The grid runner: an ExperimentSpec -> cached runs (`irgrid.runner.cell`) -> `pt.Experiment` per dataset ->
outputs; plans, preflight checks and projected hours for `--dry-run`.

Runs are handed to `pt.Experiment` as result frames, which then does the evaluation, paired tests and
multiple-testing correction.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from irgrid import measures as measures_mod
from irgrid import store as store_mod
from irgrid.core import needs
from irgrid.core.ties import canonical_order, for_evaluation
from irgrid.data.datasets import Dataset, DatasetError, is_download_failure
from irgrid.models import resolver as models_mod
from irgrid.runner import limits
from irgrid.runner.cell import Cell, Failure, disk_note, load_cell, resolve_models
from irgrid.runner.checks import beyond_depth, observed_depth, run_depth
from irgrid.runner.experiment import ExperimentSpec
from irgrid.runner.experiment import load as load_experiment
from irgrid.store import RUN_ORDER, Store
from irgrid.util import settings
from irgrid.util.files import write_text_atomic

if TYPE_CHECKING:
    from irgrid.cluster.executors import Ran

log = logging.getLogger("irgrid")


def _experiment_rows(spec: ExperimentSpec, dataset: Dataset, cells: list[Cell], topics, qrels):
    names = [c.retriever.name for c in cells]
    frames = [c.res for c in cells]
    if spec.self_matches == "paper":
        from irgrid.runner.transforms import drop_unjudged_self_matches

        frames = [drop_unjudged_self_matches(f, qrels) for f in frames]
    # every evaluator sees trec_eval's order with distinct scores (irgrid.core.ties): the stored run's order
    ranked = [for_evaluation(f) for f in frames]
    baseline = names.index(spec.baseline) if spec.baseline in names and len(names) > 1 else None
    # pt.Experiment, split by query unit (per query / per base query) so our grouped measures mix with
    # standard ones; a baseline excludes perquery output in pt.Experiment, hence a second (evaluation-only) call
    measures = spec.measures_for(dataset)
    # without its baseline (a failed cell) a dataset gets no tests: the failure is recorded by the caller
    agg = measures_mod.experiment(ranked, topics, qrels, measures, names=names, baseline=baseline,
                                  test=spec.paired_test().for_pyterrier(),
                                  correction=spec.correction if baseline is not None else None, verbose=False)
    perq = measures_mod.experiment(ranked, topics, qrels, measures, names=names, perquery=True, verbose=False)
    reach = max((observed_depth(c.res) for c in cells), default=0)
    depths = {c.retriever.name: run_depth(c.retriever, c.res, reach) for c in cells}
    # n: the queries each mean is over (its per-query values), so a reader can weigh a difference
    counts = perq[perq["value"].notna()].groupby(["name", "measure"]).size()
    notes = _test_notes(spec, perq, names, baseline)
    for c in cells:
        empty = c.meta.get("empty_queries") or []
        if empty:  # scored 0 by every measure: said here, in results.md and in manifest.json
            log.warning("%s on %s: %d of %d queries have no result (%s); they score 0", c.retriever.name,
                        dataset.name, len(empty), len(topics), ", ".join(map(str, empty[:5])))
    corrected = _corrected(spec, agg, names, baseline, measures)
    # ties, power and rank resolution (irgrid.runner.limits): extra columns per (system, measure)
    extra, mdes = limits.dataset_columns(dataset.name, names, frames, perq.rename(columns={"name": "system"}),
                                         qrels, measures, spec.baseline if baseline is not None else None,
                                         spec.correction)
    extra = extra.set_index(["system", "measure"])
    rows = []
    for _, row in agg.iterrows():
        cell = cells[names.index(row["name"])]
        for m in measures:
            m_name = str(m)
            p = row.get(f"{m_name} p-value") if baseline is not None else None
            pc = corrected.get((row["name"], m_name), p)
            is_base = row["name"] == spec.baseline
            rows.append({
                "dataset": dataset.name, "system": row["name"], "measure": m_name, "value": float(row[m_name]),
                "p_value": None if is_base or p is None or pd.isna(p) else float(p),
                "p_value_corrected": None if is_base or pc is None or pd.isna(pc) else float(pc),
                "significant": None if is_base or pc is None or pd.isna(pc) else bool(pc < 0.05),
                "baseline": spec.baseline, "n": int(counts.get((row["name"], m_name), 0)),
                "beyond_depth": beyond_depth(m, depths[row["name"]], reach),
                "p_note": None if is_base else notes.get((row["name"], m_name)),
                **(extra.loc[(row["name"], m_name)].to_dict() if (row["name"], m_name) in extra.index else {}),
            })
        rows.append({"dataset": dataset.name, "system": row["name"], "measure": "ms/query",
                     "value": float(cell.meta["ms_per_query"]), "p_value": None, "p_value_corrected": None,
                     "significant": None, "baseline": spec.baseline, "n": None, "p_note": None})
    perq = perq.rename(columns={"name": "system"})
    perq.insert(0, "dataset", dataset.name)
    return rows, perq, mdes


def _test_notes(spec: ExperimentSpec, perq: pd.DataFrame, names: list[str], baseline: int | None
                ) -> dict[tuple[str, str], str]:
    """(system, measure) -> why its test against the baseline has no p-value (too few queries, no variance):
    results.csv's `p_note`, shown under results.md's table instead of a ▲/▼."""
    if baseline is None or perq.empty:
        return {}
    test, base, out = spec.paired_test(), names[baseline], {}
    for m, block in perq.groupby("measure", sort=False):
        wide = block.pivot_table(index="qid", columns="name", values="value", sort=True)
        if base not in wide.columns:
            continue
        for name in names:
            if name != base and name in wide.columns:
                both = wide[[name, base]].dropna()
                why = test.why_not(both[name].to_numpy(), both[base].to_numpy())
                if why:
                    out[(name, str(m))] = why
    return out


def _corrected(spec: ExperimentSpec, agg: pd.DataFrame, names: list[str], baseline: int | None, measures: list
               ) -> dict[tuple[str, str], float]:
    """(system, measure) -> corrected p. PyTerrier's correction counts a NaN p (a test with too few queries) in
    the family and rejects it; `significance.correct` leaves it out (the same statsmodels numbers otherwise)."""
    from irgrid.core.significance import correct

    if baseline is None or not spec.correction:
        return {}
    out = {}
    others = agg[agg["name"] != names[baseline]]
    for m in measures:
        column = f"{m} p-value"
        if column not in others.columns:
            continue
        for name, pc in zip(others["name"], correct(list(others[column]), spec.correction)):
            out[(name, str(m))] = float(pc)
    return out


def run(spec: ExperimentSpec | str | Path, out: str | Path | None = None, store: Store | None = None,
        fail_fast: bool = False, executor: Any = None, resume: bool = False) -> GridResult:
    """Run a grid; returns a `GridResult`: the long-form results (one row per dataset, system, measure), the
    per-query values, the failures and the output folder.

    A cell that fails at run time (out of memory, a crash in a library) is recorded with its error in
    `failures` (and `failures.json`) and the grid goes on, unless `fail_fast`. Bad configuration fails before any
    work.

    `executor` (an `irgrid.cluster.config.ExecutorConfig`, an `Executor` or a name: local, ray, slurm) decides where
    the grid's jobs run (every missing index, encoding shard and cell is a job): in this process by default; with
    ray or slurm as jobs of that engine (state and logs in `out`). This process then evaluates the stored runs.
    `resume` resubmits only what is missing from an earlier submission to `out` (finished cells are never
    recomputed in any case).
    """
    if isinstance(spec, dict):  # the docstring's "a dict": validated like a file
        from irgrid.runner.experiment import from_dict

        spec = from_dict(spec)
    spec = spec if isinstance(spec, ExperimentSpec) else load_experiment(spec)
    store = store or store_mod.current()
    with store_mod.using(store):  # the caches below (tiny models, GGUF, generations) use this store too
        if out is None:
            preflight(spec, store)
            return _run(spec, None, store, fail_fast, executor, resume)
        out = Path(out)
        check_out(out)
        preflight(spec, store)
        with _out_lock(out):
            return _run(spec, out, store, fail_fast, executor, resume)


OUT_LOCK = ".irgrid-out.lock"


def check_out(out: Path) -> None:
    """--out must be a writable folder (or creatable): found before any cell runs, not after the last."""
    from irgrid.runner.outputs import OutputError

    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file, not a folder; give a folder path")
    probe_dir, e = _probe_write(out)
    if e is not None:
        raise OutputError(f"--out {out}: {probe_dir} is not writable ({e.strerror or e}); choose a folder you "
                          f"can write to")
    _refuse_foreign(out)


def _probe_write(folder: Path) -> tuple[Path, OSError | None]:
    """A real write into `folder` (or its nearest existing parent), not os.access: root passes os.access on a
    read-only mount or a chattr +i folder. Returns the folder probed and the error (None: writable)."""
    import tempfile

    probe_dir = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("/"))
    try:
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".irgrid-probe-"):
            pass
    except OSError as e:
        return probe_dir, e
    return probe_dir, None


def check_cache(store: Store) -> None:
    """The cache must be writable, even for a grid whose every cell is cached (locks, the staged collections'
    copies, query-time index files): a read-only cache is said as such before any cell, not as data that is
    "not staged"."""
    from irgrid.store import CacheError

    probe_dir, e = _probe_write(store.root)
    if e is not None:
        raise CacheError(f"the cache {store.root} is not writable ({probe_dir}: {e.strerror or e}): irgrid writes its "
                         f"locks, staged collection copies, indexes and runs there, cached cells included. Give a "
                         f"writable --cache (or IRGRID_CACHE); a read-only copy can be copied to a writable place")


# what a grid writes into --out: found in a folder without irgrid's manifest, they are someone else's files
OUTPUT_NAMES = ("results.csv", "perquery.csv", "results.md", "failures.json", "runs", "qrels", "latency.csv")


def _refuse_foreign(out: Path) -> None:
    """Never overwrite outputs irgrid did not write: a folder holding files of a grid's names needs irgrid's
    manifest.json (or the flag of an irgrid run stopped while writing it), as `irgrid report` needs one."""
    from irgrid.runner.outputs import WRITING, OutputError

    if not out.is_dir():
        return
    taken = [name for name in OUTPUT_NAMES if (out / name).exists()]
    if not taken or (out / WRITING).exists():
        return
    manifest = out / "manifest.json"
    why = "no manifest.json"
    if manifest.exists():
        try:
            data = json.loads(manifest.read_text())
            if isinstance(data, dict) and "experiment" in data:
                return
            why = "a manifest.json that is not irgrid's"
        except (OSError, ValueError):
            why = "an unreadable manifest.json"
    raise OutputError(f"--out {out} holds {', '.join(taken)} but {why}: not an irgrid output folder, and irgrid "
                      f"does not overwrite files it did not write. Choose another --out (a new or empty folder), or "
                      f"move those files away")


@contextlib.contextmanager
def _out_lock(out: Path):
    """One grid writes an output folder at a time (a second one is refused at once, naming the holder)."""
    from irgrid.runner.outputs import OutputError
    from irgrid.util import locks

    out.mkdir(parents=True, exist_ok=True)
    try:
        with locks.hold(out / OUT_LOCK, f"output folder {out}", timeout=0):
            yield
    except locks.LockTimeout:
        holder = locks.lock_holder(out / OUT_LOCK) or "another process"
        raise OutputError(f"--out {out} is being written by another irgrid run ({holder}); wait for it or choose "
                          f"another --out") from None


@dataclass(frozen=True, repr=False)
class GridResult:
    """What a grid returns: the long-form `results` (one row per dataset, system, measure: `RESULT_COLUMNS`), the
    `perquery` values behind them, the cells and steps that `failures` (also in `out/failures.json`), and the
    output folder (None without one). `to_frame()` is the results DataFrame, as `pt.Experiment` returns one."""

    experiment: str
    results: pd.DataFrame
    perquery: pd.DataFrame
    failures: list[Failure] = field(default_factory=list)
    out: Path | None = None

    @property
    def ok(self) -> bool:
        """No cell, dataset or aggregate failed."""
        return not self.failures

    def to_frame(self) -> pd.DataFrame:
        return self.results

    def __repr__(self) -> str:
        r = self.results
        head = (f"GridResult({self.experiment!r}: {r['dataset'].nunique()} dataset(s) x {r['system'].nunique()} "
                f"system(s), {len(r)} result rows, {len(self.failures)} failure(s)"
                + (f", out={str(self.out)!r}" if self.out is not None else "") + ")")
        failed = [f"  FAILED {f.retriever} on {f.dataset}: {f.error.splitlines()[0] if f.error else ''}"
                  for f in self.failures]
        return "\n".join([head, *failed])

    def _repr_html_(self) -> str:  # Jupyter: the header, then the results table
        import html

        return f"<pre>{html.escape(repr(self))}</pre>" + self.results._repr_html_()


def _run(spec: ExperimentSpec, out: Path | None, store: Store, fail_fast: bool, executor: Any,
         resume: bool) -> GridResult:
    """Read every dataset's queries and qrels, run the job graph of what is missing on the executor (in this
    process by default), then evaluate the stored runs: one path, whichever executor computed them."""
    from irgrid.cluster import executors as executors_mod

    ex = executor if isinstance(executor, executors_mod.Executor) else executors_mod.make(executor)
    ex.check(out)
    from irgrid.runner.planning import make_plan

    progress = _Progress(make_plan(spec, store).rows)
    failures: list[Failure] = []
    data: dict[str, tuple[Any, Any]] = {}  # dataset -> (topics, qrels)
    for dataset in spec.datasets:
        try:
            data[dataset.name] = dataset.topics(), dataset.qrels()
        except Exception as e:  # data not staged (a download attempt offline), unreadable files: every cell fails
            if fail_fast:
                raise
            error = _data_error(dataset, e)
            log.error("%s: %s; its %d cell(s) are skipped", dataset.name, error, len(spec.retrievers))
            failures.extend(Failure(dataset.name, r.name, error, traceback.format_exc()) for r in spec.retrievers)
            progress.skipped(len(spec.retrievers))
    grid = executors_mod.GridRun(spec, store, out, {name: topics for name, (topics, _) in data.items()},
                                 fail_fast=fail_fast, resume=resume, progress=progress)
    ran = ex.run_grid(grid)
    return evaluate(spec, store, out, data, ran, failures, fail_fast)


class _Progress:
    """The local executor's line per cell: done/total, cached or computed, and the time left estimated by the
    plan (irgrid.runner.planning.make_plan, the dry run's: this cache's measurements, then scale fits and
    per-parameter rates)."""

    def __init__(self, plan_rows: list[dict[str, Any]]):
        self.plan = {(p["dataset"], p["retriever"]): p for p in plan_rows}
        self.remaining = sum(p["est_seconds"] or 0 for p in self.plan.values() if not p["run_cached"])
        self.unknown = {k for k, p in self.plan.items() if not p["run_cached"] and p["est_seconds"] is None}
        self.total, self.done = len(self.plan), 0

    def skipped(self, cells: int) -> None:
        self.done += cells

    def cell_done(self, dataset: str, retriever: str, cached: bool, seconds: float) -> None:
        self.done += 1
        if not cached:
            self.remaining = max(0.0, self.remaining - (self.plan[(dataset, retriever)]["est_seconds"] or 0))
        self.unknown.discard((dataset, retriever))
        eta = _fmt_seconds(self.remaining) + (f" + {len(self.unknown)} cell(s) without an estimate"
                                              if self.unknown else "")
        log.info("[%d/%d] %s on %s: %s in %.1fs; remaining ≈ %s", self.done, self.total, retriever, dataset,
                 "cached" if cached else "computed", seconds, eta)

    def cell_failed(self, dataset: str, retriever: str, error: str) -> None:
        self.done += 1
        log.error("[%d/%d] %s on %s FAILED: %s", self.done, self.total, retriever, dataset, error)


def evaluate(spec: ExperimentSpec, store: Store, out: Path | None, data: dict[str, tuple[Any, Any]], ran: Ran,
             failures: list[Failure], fail_fast: bool = False) -> GridResult:
    """Evaluate the stored runs of a grid (every executor's last step): each cell's run loaded from the cache and
    checked, `pt.Experiment` per dataset, the aggregates, and the output folder. `ran`: what the executor did (its
    failed and computed cells); `failures`: what failed before (datasets whose queries or qrels could not be read)."""
    from irgrid.runner import outputs as report

    failed = ran.failures
    order = {r.name: i for i, r in enumerate(spec.retrievers)}
    datasets = {d.name: i for i, d in enumerate(spec.datasets)}

    def as_run(f: Failure) -> tuple[int, int]:  # cell failures retriever by retriever, as the local executor runs
        return order.get(f.retriever, 0), datasets.get(f.dataset, 0)

    if fail_fast and failed:  # an executor out of this process: its first failed cell, after every job finished
        failure = min(failed.values(), key=as_run)
        raise RuntimeError(f"{failure.retriever} on {failure.dataset}: {failure.error}\n{failure.traceback}")
    cell_failures = list(failed.values())
    cells_by_dataset: dict[str, list[Cell]] = {}
    for dataset in spec.datasets:
        cells_by_dataset[dataset.name] = []
        if dataset.name not in data:
            continue
        for retriever in spec.cells_on(dataset):
            if (dataset.name, retriever.name) in failed:
                continue
            try:
                cell = load_cell(retriever, dataset, store, data[dataset.name][0])
            except Exception as e:  # a stored run that fails its checks: recorded, the other cells evaluated
                if fail_fast:
                    raise
                log.error("%s on %s FAILED: %s", retriever.name, dataset.name, e)
                cell_failures.append(Failure(dataset.name, retriever.name, f"{type(e).__name__}: {e}",
                                             traceback.format_exc()))
                continue
            cell.cached = (dataset.name, retriever.name) not in ran.computed
            cells_by_dataset[dataset.name].append(cell)
    failures = failures + sorted(cell_failures, key=as_run)
    rows: list[dict[str, Any]] = []
    perquery: list[pd.DataFrame] = []
    mdes: dict[str, dict[str, Any]] = {}  # per dataset and measure: the MDE summary (manifest.json)
    for dataset in spec.datasets:
        cells = cells_by_dataset[dataset.name]
        if dataset.name not in data:
            continue
        topics, qrels = data[dataset.name]
        failed_here = {f.retriever for f in failures if f.dataset == dataset.name}
        if spec.baseline in failed_here and cells:
            failures.append(Failure(dataset.name, spec.baseline, f"baseline {spec.baseline} failed on {dataset.name}: "
                                    f"significance tests skipped for this dataset (values are still reported)", ""))
        if cells:
            dataset_rows, dataset_perq, mdes[dataset.name] = _experiment_rows(spec, dataset, cells, topics, qrels)
            rows.extend(dataset_rows)
            perquery.append(dataset_perq)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS).astype({"n": "Int64"})
    cells_only = results[results["measure"] != "ms/query"]  # every aggregate reads the cells, never another's rows
    for name in spec.aggregates if len(results) else []:
        try:
            extra = measures_mod.aggregate(cells_only, name)
        except Exception as e:  # a failed or missing cell: report it, keep every result computed so far
            failures.append(Failure(f"aggregate:{name}", "*", f"{type(e).__name__}: {e}", traceback.format_exc()))
            continue
        results = pd.concat([results, extra.assign(baseline=spec.baseline)], ignore_index=True)[RESULT_COLUMNS]
        results = results.astype({"n": "Int64"})
    perq = pd.concat(perquery, ignore_index=True) if perquery else pd.DataFrame()
    if out is not None:
        out = Path(out)
        with report.writing(out):  # one unit: a kill part-way leaves a folder `irgrid report` refuses
            report.write_outputs(spec, results, perq, cells_by_dataset, store, out, mdes)
            write_text_atomic(out / "failures.json", json.dumps([f.__dict__ for f in failures], indent=2))
            wanted = set()
            for dataset in spec.datasets:
                for cell in cells_by_dataset[dataset.name]:
                    target = out / "runs" / dataset.slug / f"{cell.retriever.name}.res.gz"
                    if cell.meta.get("run", {}).get("order") == RUN_ORDER:  # stored in trec_eval's tie order
                        _copy_atomic(store.runs.path(cell.retriever, dataset), target)
                    else:  # cached before: written in the order it was scored, ranks renumbered
                        _write_run_atomic(canonical_order(cell.res), cell.retriever.name, target)
                    wanted.add(target)
            for stale in (out / "runs").glob("*/*.res.gz"):  # runs of an earlier experiment in this folder
                if stale not in wanted:
                    stale.unlink()
    return GridResult(spec.name, results, perq, failures, out)


def _data_error(dataset: Dataset, e: Exception) -> str:
    """In words: an offline download attempt becomes irgrid's staging hint instead of ir_datasets' traceback."""
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:  # copying the staged home into a full cache
        return (f"no space left copying the staged collection of {dataset.name!r} into the cache "
                f"({settings.irds_home()}){disk_note(settings.irds_home())}")
    if isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"the data of {dataset.name!r} cannot be written into the cache ({e.strerror}: "
                f"{e.filename or settings.irds_home()}): the cache is read-only here; give a writable --cache (or "
                f"IRGRID_CACHE)")
    if is_download_failure(e):
        return (f"the queries/qrels of {dataset.name!r} are not staged and could not be downloaded "
                f"({type(e).__name__}). Stage the collection on a connected machine with ir_datasets and copy its "
                f"folder under IR_DATASETS_HOME ({settings.irds_home()}), or set IRGRID_IRDS_STAGED to a staged home; "
                f"`irgrid run ... --dry-run` lists what is staged")
    return f"{type(e).__name__}: {e}"


RESULT_COLUMNS = ["dataset", "system", "measure", "value", "p_value", "p_value_corrected", "significant", "baseline",
                  "beyond_depth",  # the measure looks deeper than the system returns (irgrid.runner.checks)
                  "n",
                  "p_note",  # why a comparison has no p-value (too few queries: not computable), else empty
                  *limits.COLUMNS]  # ties, power, rank resolution (irgrid.runner.limits)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def preflight(spec: ExperimentSpec, store: Store) -> None:
    """Fail before computing anything when the cache is not writable, a model that an uncached cell needs
    cannot be resolved, or a dataset's own measures do not parse."""
    check_cache(store)
    for dataset in spec.datasets:
        spec.measures_for(dataset)
        for retriever in spec.cells_on(dataset):
            try:
                cached = store.runs.has(retriever, dataset)
            except (OSError, DatasetError):  # the data itself (a full cache disk): that dataset's cells record it
                cached = False
            if not cached:
                resolve_models(retriever.all_models(), spec.models)
                # packages and remote code the entries declare for their real checkpoints (irgrid.core.needs)
                needs.check(retriever.all_models(), models_mod.find_remote_code)


def _write_run_atomic(res: pd.DataFrame, name: str, dst: Path) -> None:
    import pyterrier as pt

    from irgrid.util.files import atomic_path

    with atomic_path(dst, suffix=".res.gz") as tmp:
        pt.io.write_results(res, str(tmp), format="trec", run_name=name)


def _copy_atomic(src: Path, dst: Path) -> None:
    from irgrid.util.files import atomic_path

    with atomic_path(dst, suffix=".res.gz") as tmp:
        shutil.copyfile(src, tmp)
