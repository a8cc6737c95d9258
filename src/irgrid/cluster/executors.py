"""Where a grid's cells run: in this process (the default), or as jobs of an existing cluster engine.

- `local`: today's in-process runner (`irgrid.grid.run`), cell after cell.
- `ray`: every job is a Ray task (`ray.init(address=...)`: an existing cluster, or a local one when no address
  is given); dependencies are object references passed as arguments, so Ray starts a job only after the jobs
  it needs; a task whose worker dies is retried by Ray (`max_retries`).
- `slurm`: every job is a Slurm job submitted through submitit, with `--dependency=afterok:...`; submitit's
  `local` cluster runs the same jobs as local processes (for machines without Slurm), submitted in dependency
  order. A job that dies without a result (killed, preempted, node failure) is resubmitted up to
  `max_retries` times.

The job graph (`build_graph`): one index job per (index recipe, corpus) that an uncached cell needs, shared by
every cell using it; a dense index of the engine is encoded as several shard jobs and one merge job
(`irgrid.cluster.sharding`); one job per uncached cell, after its index. Jobs write only to the shared cache (under its
locks, see `irgrid.core.locks`); evaluation stays in the submitting process after every job finished, so results are
those of the local runner.

The submitting process keeps `OUT/grid-state.json` (jobs and cells: pending, running, done, failed, cached,
with log paths); jobs write `OUT/jobs/<id>.json` (running/done/failed, attempt, host, pid) and `OUT/logs/<id>.log`.
`irgrid status OUT` reads them, and `irgrid run --resume` submits only what is missing.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from irgrid.core.files import write_text_atomic
from irgrid.core.hashing import config_hash

if TYPE_CHECKING:
    from irgrid.core.retrievers import IndexRecipe, Retriever
    from irgrid.data.datasets import Dataset
    from irgrid.runner.cell import Failure
    from irgrid.runner.experiment import ExperimentSpec
    from irgrid.store import Store

log = logging.getLogger("irgrid")

EXECUTORS = ("local", "ray", "slurm")
STATE = "grid-state.json"
STATE_FORMAT = 1
FINAL = ("done", "failed", "blocked", "cached")
# environment that decides what a job computes and where it finds data and models: handed to every job
ENV_PREFIXES = ("IRGRID_", "IR_DATASETS_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TOKENIZERS_",
                "JAVA_", "JVM_", "PYSERINI_", "TORCH_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class ExecutorError(RuntimeError):
    """Bad executor configuration, an engine that is not installed or not reachable, or a bad --resume."""


# -------------------------------------------------------------------------------------------------------------
# configuration


@dataclass
class ExecutorConfig:
    """Options of the cluster engines, from a small YAML file (`--executor-config`) and command-line flags.

    ```yaml
    executor: slurm              # the default --executor
    shards: 8                    # corpus-encoding shards per dense index (jobs on different GPUs)
    slurm:  {partition: gpu, gpus_per_job: 1, cpus_per_job: 8, mem_gb: 64, time_min: 240, account: lab,
             qos: normal, max_retries: 1, folder: /shared/irgrid-slurm, setup: ["module load cuda"],
             additional: {constraint: h100}, cluster: slurm}   # cluster: slurm | local
    ray:    {address: auto, gpus_per_job: 1, cpus_per_job: 1, max_retries: 3}
    ```
    """

    executor: str = "local"
    shards: int = 1
    gpus_per_job: float = 0  # for jobs that run a neural model (encoders, SPLADE); BM25 jobs get none
    cpus_per_job: int = 1
    mem_gb: float | None = None
    time_min: int = 240
    max_retries: int = 2  # resubmissions of a job whose process died without a result
    poll_seconds: float = 2.0
    # slurm (submitit)
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    cluster: str | None = None  # submitit cluster: slurm (default where sbatch exists), or local (no Slurm)
    folder: str | None = None  # submitit's job folder (default OUT/slurm); on the shared filesystem
    setup: list[str] = field(default_factory=list)  # shell lines run before each job (module load, venv)
    additional: dict[str, Any] = field(default_factory=dict)  # any other sbatch option
    max_parallel: int | None = None  # submitit's local cluster: jobs running at once
    # ray
    address: str | None = None  # an existing cluster ("auto", "ray://head:10001"); None starts a local one
    num_cpus: int | None = None  # CPUs of a local Ray cluster (default: all)

    SECTIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "slurm": ("gpus_per_job", "cpus_per_job", "mem_gb", "time_min", "max_retries", "poll_seconds", "partition",
                  "account", "qos", "cluster", "folder", "setup", "additional", "max_parallel"),
        "ray": ("gpus_per_job", "cpus_per_job", "mem_gb", "max_retries", "poll_seconds", "address", "num_cpus"),
    }

    @classmethod
    def load(cls, path: str | Path | None, executor: str | None = None, **overrides: Any) -> ExecutorConfig:
        """The config file's top level and the section of the chosen executor, then non-None overrides."""
        import yaml

        data: dict[str, Any] = {}
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise ExecutorError(f"executor config {path} does not exist")
            data = yaml.safe_load(path.read_text()) or {}
            if not isinstance(data, dict):
                raise ExecutorError(f"{path}: expected a mapping with keys executor, shards, slurm, ray")
            unknown = sorted(set(data) - {"executor", "shards", *cls.SECTIONS})
            if unknown:
                raise ExecutorError(f"{path}: unknown key(s) {unknown}; allowed: executor, shards, slurm, ray")
        chosen = executor or data.get("executor") or "local"
        if chosen not in EXECUTORS:
            raise ExecutorError(f"executor {chosen!r} is not one of {EXECUTORS}")
        values: dict[str, Any] = {"executor": chosen}
        if "shards" in data:
            values["shards"] = data["shards"]
        section = data.get(chosen) or {}
        if chosen in cls.SECTIONS:
            if not isinstance(section, dict):
                raise ExecutorError(f"{path}: '{chosen}' must be a mapping")
            bad = sorted(set(section) - set(cls.SECTIONS[chosen]))
            if bad:
                raise ExecutorError(f"{path}: {chosen}: unknown key(s) {bad}; allowed: {list(cls.SECTIONS[chosen])}")
            values.update(section)
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if not isinstance(self.shards, int) or self.shards < 1:
            raise ExecutorError(f"shards must be a whole number >= 1, got {self.shards!r}")
        if self.max_retries < 0 or self.cpus_per_job < 1 or self.gpus_per_job < 0 or self.time_min < 1:
            raise ExecutorError("max_retries >= 0, cpus_per_job >= 1, gpus_per_job >= 0 and time_min >= 1 are required")
        if self.cluster not in (None, "slurm", "local"):
            raise ExecutorError(f"slurm cluster {self.cluster!r} is not one of slurm, local (submitit's clusters)")


# -------------------------------------------------------------------------------------------------------------
# jobs


@dataclass
class Task:
    """What a job needs to run anywhere: picklable (cloudpickle), with the datasets to register there."""

    job_id: str
    kind: str  # index | shard | merge | cell
    store_root: str
    out: str
    env: dict[str, str]
    dataset: Dataset
    datasets: list[Dataset]  # the dataset and its corpus entry (local collections are not in a worker's catalog)
    retriever: Retriever | None = None
    recipe: IndexRecipe | None = None
    model_map: dict[str, str] = field(default_factory=dict)
    latency_sample: int = 50
    span: tuple[int, int] | None = None  # shard: documents [start, stop)
    ranges: list[tuple[int, int]] = field(default_factory=list)  # merge: every shard's span


@dataclass
class Job:
    id: str
    kind: str
    label: str
    deps: list[str]
    task: Task
    accelerator: bool  # runs a neural model: gets the configured GPUs
    cells: list[tuple[str, str]] = field(default_factory=list)  # (dataset, retriever) of a cell job


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "-" for c in text)


def cell_id(dataset: Dataset, retriever: Retriever) -> str:
    return f"cell--{dataset.slug}--{retriever.name}"


def build_graph(spec: ExperimentSpec, store: Store, config: ExecutorConfig, out: Path) -> tuple[list[Job], list[dict[str, Any]]]:
    """Jobs for everything not in the cache, in dependency order, and one record per cell of the grid."""
    from irgrid.cluster import sharding

    env = {**_env(), "IRGRID_CACHE": str(store.root)}
    jobs: dict[str, Job] = {}
    cells: list[dict[str, Any]] = []

    def task(job_id: str, kind: str, dataset: Dataset, **kw: Any) -> Task:
        corpus = dataset.corpus_dataset()
        return Task(job_id=job_id, kind=kind, store_root=str(store.root), out=str(out), env=env, dataset=dataset,
                    datasets=[dataset] + ([corpus] if corpus is not dataset else []), model_map=dict(spec.models),
                    latency_sample=spec.latency_sample, **kw)

    for dataset in spec.datasets:
        for retriever in spec.retrievers:
            cid = cell_id(dataset, retriever)
            record = {"dataset": dataset.name, "retriever": retriever.name, "job": cid,
                      "run": str(store.run_path(retriever, dataset)), "meta": str(store.meta_path(retriever, dataset))}
            cells.append(record)
            if store.has_run(retriever, dataset):
                record["cached"] = True
                continue
            deps: list[str] = []
            recipe = retriever.index
            if recipe is not None and not store.index_ready(recipe, dataset):
                index_dir = store.index_dir(recipe, dataset)
                iid = _safe(f"index--{index_dir.parent.name}--{index_dir.name}")
                if iid not in jobs:
                    neural = bool(recipe.all_models())
                    ranges = [(0, 0)]
                    if config.shards > 1 and sharding.shardable(recipe):
                        ranges = sharding.shard_ranges(dataset.corpus_dataset().docs_count(), config.shards,
                                                       sharding.chunk_size())
                    if len(ranges) > 1:
                        shard_ids = []
                        for start, stop in ranges:
                            sid = f"{iid}--docs-{start}-{stop}"
                            shard_ids.append(sid)
                            if sharding.shard_ready(store, recipe, dataset, start, stop):
                                continue
                            jobs[sid] = Job(sid, "shard", f"encode {recipe.name} docs {start}-{stop} of {dataset.corpus}",
                                            [], task(sid, "shard", dataset, recipe=recipe, span=(start, stop)), True)
                        jobs[iid] = Job(iid, "merge", f"merge {len(ranges)} shards of {recipe.name} on {dataset.corpus}",
                                        [s for s in shard_ids if s in jobs],
                                        task(iid, "merge", dataset, recipe=recipe, ranges=ranges), False)
                    else:
                        jobs[iid] = Job(iid, "index", f"index {recipe.name} of {dataset.corpus}", [],
                                        task(iid, "index", dataset, recipe=recipe), neural)
                deps.append(iid)
            jobs[cid] = Job(cid, "cell", f"{retriever.name} on {dataset.name}", deps,
                            task(cid, "cell", dataset, retriever=retriever), bool(retriever.all_models()),
                            cells=[(dataset.name, retriever.name)])
    return list(jobs.values()), cells


# -------------------------------------------------------------------------------------------------------------
# the job itself (runs in a Ray worker, a Slurm job or a local process)


def execute(task: Task, *dependencies: Any) -> dict[str, Any]:
    """Run one job. `dependencies` are the results of the jobs it waited for (Ray passes them; unused)."""
    os.environ.update(task.env)
    out = Path(task.out)
    status_path = out / "jobs" / f"{task.job_id}.json"
    log_path = out / "logs" / f"{task.job_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    previous = _read_json(status_path) or {}
    attempt = int(previous.get("attempt", 0)) + 1
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger("irgrid")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    started = time.time()
    base = {"job": task.job_id, "kind": task.kind, "attempt": attempt, "host": socket.gethostname(),
            "pid": os.getpid(), "started": round(started, 3), "log": str(log_path)}
    try:
        log.info("job %s (%s), attempt %d, on %s pid %d", task.job_id, task.kind, attempt, base["host"], base["pid"])
        write_text_atomic(status_path, json.dumps({**base, "status": "running"}, indent=2))
        _run_task(task)
    except BaseException as e:
        tb = traceback.format_exc()
        log.error("job %s FAILED: %s: %s\n%s", task.job_id, type(e).__name__, e, tb)
        write_text_atomic(status_path, json.dumps({**base, "status": "failed", "error": f"{type(e).__name__}: {e}",
                                                   "traceback": tb, "finished": round(time.time(), 3)}, indent=2))
        raise
    finally:
        root.removeHandler(handler)
        handler.close()
    seconds = round(time.time() - started, 3)
    write_text_atomic(status_path, json.dumps({**base, "status": "done", "seconds": seconds,
                                               "finished": round(time.time(), 3)}, indent=2))
    return {"job": task.job_id, "seconds": seconds}


def _run_task(task: Task) -> None:
    from irgrid.cluster import sharding
    from irgrid.core import settings
    from irgrid.data import datasets as ds_mod
    from irgrid.runner import cell as cell_mod
    from irgrid.store import Store

    for ds in task.datasets:  # local (bring-your-own) collections exist only in the submitting process's catalog
        if ds.name not in ds_mod.DATASETS:
            ds_mod.register(ds)
    store = Store(task.store_root)
    if task.kind == "index":
        assert task.recipe is not None
        cell_mod.ensure_index(task.recipe, task.dataset, store, task.model_map)
    elif task.kind == "shard":
        assert task.recipe is not None and task.span is not None
        sharding.encode_shard(task.recipe, task.dataset, store, *task.span, task.model_map, settings.device())
    elif task.kind == "merge":
        assert task.recipe is not None
        sharding.merge_shards(task.recipe, task.dataset, store, task.ranges)
    elif task.kind == "cell":
        assert task.retriever is not None
        cell = cell_mod.run_cell(task.retriever, task.dataset, task.dataset.topics(), store, task.model_map,
                             task.latency_sample)
        log.info("%s on %s: %s", task.retriever.name, task.dataset.name, "cached" if cell.cached else "computed")
    else:
        raise ExecutorError(f"unknown job kind {task.kind!r}")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# -------------------------------------------------------------------------------------------------------------
# the grid state (written by the submitting process; read by `irgrid status`)


def spec_hash(spec: ExperimentSpec) -> str:
    return config_hash(spec.config())


class GridState:
    def __init__(self, out: Path, spec: ExperimentSpec, config: ExecutorConfig, jobs: list[Job],
                 cells: list[dict[str, Any]], previous: dict[str, Any] | None):
        self.out, self.path = out, out / STATE
        self.jobs_by_id = {j.id: j for j in jobs}
        self.data: dict[str, Any] = {
            "format": STATE_FORMAT, "experiment": spec.name, "source": spec.source, "experiment_hash": spec_hash(spec),
            "executor": config.executor, "submissions": (previous or {}).get("submissions", 0) + 1,
            "driver": {"host": socket.gethostname(), "pid": os.getpid(), "started": round(time.time(), 3),
                       "finished": None},
            "jobs": {j.id: {"kind": j.kind, "label": j.label, "deps": j.deps, "status": "pending", "engine_id": None,
                            "log": str(out / "logs" / f"{j.id}.log"), "error": None, "cells": [list(c) for c in j.cells],
                            "accelerator": j.accelerator}
                     for j in jobs},
            "cells": [],
        }
        for c in cells:
            status = "cached" if c.get("cached") else "pending"
            self.data["cells"].append({**{k: v for k, v in c.items() if k != "cached"}, "status": status})

    def job(self, job_id: str) -> dict[str, Any]:
        return self.data["jobs"][job_id]

    def submitted(self, job_id: str, engine_id: str | None, extra_log: str | None = None) -> None:
        rec = self.job(job_id)
        rec["engine_id"] = engine_id
        rec["status"] = "submitted" if rec["status"] == "pending" else rec["status"]
        if extra_log:
            rec["engine_log"] = extra_log

    def finished(self, job_id: str, ok: bool, error: str | None = None) -> None:
        rec = self.job(job_id)
        rec["status"] = "done" if ok else "failed"
        if error:
            rec["error"] = error
        self._sync_job_file(job_id)

    def refresh(self) -> None:
        """Running jobs, attempts and errors from the jobs' own status files; cells from the jobs; then write."""
        for job_id, rec in self.data["jobs"].items():
            if rec["status"] in ("done", "failed", "blocked"):
                continue
            self._sync_job_file(job_id)
        self._cells()
        self.write()

    def _sync_job_file(self, job_id: str) -> None:
        rec = self.job(job_id)
        status = _read_json(self.out / "jobs" / f"{job_id}.json")
        if status is None:
            return
        rec["attempt"] = status.get("attempt")
        rec["host"], rec["pid"] = status.get("host"), status.get("pid")
        if rec["status"] in ("pending", "submitted") and status.get("status") == "running":
            rec["status"] = "running"
        if status.get("status") == "failed" and not rec.get("error"):
            rec["error"] = status.get("error")

    def close(self) -> None:
        """Jobs that never started because a job they needed failed are 'blocked', with that job named."""
        for job_id, rec in self.data["jobs"].items():
            if rec["status"] != "failed" or (self.out / "jobs" / f"{job_id}.json").exists():
                continue
            bad = [d for d in rec["deps"] if self.data["jobs"].get(d, {}).get("status") in ("failed", "blocked")]
            if bad:
                rec["status"], rec["error"] = "blocked", f"not run: needed job {bad[0]} failed"
        # a blocked job blocks what depends on it (the graph is in dependency order)
        for rec in self.data["jobs"].values():
            if rec["status"] in ("pending", "submitted"):
                bad = [d for d in rec["deps"] if self.data["jobs"].get(d, {}).get("status") in ("failed", "blocked")]
                if bad:
                    rec["status"], rec["error"] = "blocked", f"not run: needed job {bad[0]} failed"
        self.data["driver"]["finished"] = round(time.time(), 3)
        self._cells()
        self.write()

    def _cells(self) -> None:
        for cell in self.data["cells"]:
            if cell["status"] == "cached":
                continue
            rec = self.data["jobs"].get(cell["job"])
            if rec is None:
                continue
            cell["status"] = {"submitted": "pending"}.get(rec["status"], rec["status"])
            cell["error"] = rec.get("error")
            cell["log"] = rec["log"]

    def write(self) -> None:
        write_text_atomic(self.path, json.dumps(self.data, indent=2))

    def failures(self) -> dict[tuple[str, str], Failure]:
        from irgrid.runner.cell import Failure

        out: dict[tuple[str, str], Failure] = {}
        for cell in self.data["cells"]:
            if cell["status"] in ("failed", "blocked"):
                rec = self.data["jobs"][cell["job"]]
                status = _read_json(self.out / "jobs" / f"{cell['job']}.json") or {}
                detail = f"log: {rec['log']}" + (f"\nengine log: {rec['engine_log']}" if rec.get("engine_log") else "")
                out[(cell["dataset"], cell["retriever"])] = Failure(
                    cell["dataset"], cell["retriever"], rec.get("error") or "job failed",
                    detail + ("\n" + status["traceback"] if status.get("traceback") else ""))
        return out


def load_state(out: str | Path) -> dict[str, Any] | None:
    return _read_json(Path(out) / STATE)


# -------------------------------------------------------------------------------------------------------------
# executors


class Executor(ABC):
    name: ClassVar[str]
    in_process: ClassVar[bool] = False

    def __init__(self, config: ExecutorConfig | None = None):
        self.config = config or ExecutorConfig(executor=self.name)

    @abstractmethod
    def run_graph(self, jobs: list[Job], state: GridState, previous: dict[str, Any] | None) -> None:
        """Run every job (after the jobs it depends on), keeping `state` current, until all have finished."""


class LocalExecutor(Executor):
    """Today's behaviour: the grid runner computes each cell in this process (`irgrid.grid.run`)."""

    name = "local"
    in_process = True

    def run_graph(self, jobs: list[Job], state: GridState, previous: dict[str, Any] | None) -> None:
        for job in jobs:  # in dependency order already
            failed = [d for d in job.deps if state.job(d)["status"] in ("failed", "blocked")]
            if failed:
                state.job(job.id).update(status="blocked", error=f"not run: needed job {failed[0]} failed")
                continue
            state.submitted(job.id, f"pid:{os.getpid()}")
            state.refresh()
            try:
                execute(job.task)
            except Exception as e:  # recorded; the other jobs still run
                state.finished(job.id, False, f"{type(e).__name__}: {e}")
            else:
                state.finished(job.id, True)
            state.refresh()


class RayExecutor(Executor):
    """Jobs as Ray tasks: on an existing cluster (`address`) or on a local one started for this grid."""

    name = "ray"

    def run_graph(self, jobs: list[Job], state: GridState, previous: dict[str, Any] | None) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("the ray executor needs Ray: pip install 'ray[default]'") from None
        cfg = self.config
        started_here = not ray.is_initialized()
        if started_here:
            kwargs: dict[str, Any] = {"runtime_env": {"env_vars": jobs[0].task.env} if jobs else {},
                                      "include_dashboard": False, "log_to_driver": False}
            if cfg.address:
                kwargs["address"] = cfg.address
            elif cfg.num_cpus:
                kwargs["num_cpus"] = cfg.num_cpus
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError) as e:
                raise ExecutorError(f"could not connect to the Ray cluster at {cfg.address or '(local)'}: {e}") from None
        try:
            remote = ray.remote(execute)
            refs: dict[str, Any] = {}
            pending: dict[Any, str] = {}
            for job in jobs:
                options: dict[str, Any] = {"num_cpus": cfg.cpus_per_job, "max_retries": cfg.max_retries,
                                           "retry_exceptions": False, "name": job.id,
                                           "num_gpus": cfg.gpus_per_job if job.accelerator else 0}
                if cfg.mem_gb:
                    options["memory"] = int(cfg.mem_gb * 2**30)
                ref = remote.options(**options).remote(job.task, *[refs[d] for d in job.deps if d in refs])
                refs[job.id], pending[ref] = ref, job.id
                state.submitted(job.id, f"ray:{ref.hex()}")
            state.refresh()
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=cfg.poll_seconds)
                for ref in ready:
                    job_id = pending.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        state.finished(job_id, False, _ray_cause(e))
                    except ray.exceptions.RayError as e:  # the worker died on every attempt
                        state.finished(job_id, False, f"{type(e).__name__}: the job's process died "
                                                      f"{cfg.max_retries + 1} time(s): {str(e).splitlines()[0]}")
                    else:
                        state.finished(job_id, True)
                state.refresh()
        finally:
            if started_here:
                ray.shutdown()


def _ray_cause(error: Any) -> str:
    cause = getattr(error, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"
    return str(error).splitlines()[0]


class SlurmExecutor(Executor):
    """Jobs as Slurm jobs through submitit (or submitit's local cluster where there is no Slurm)."""

    name = "slurm"

    def _executor(self, out: Path, gpus: int) -> Any:
        try:
            import submitit
        except ImportError:
            raise ExecutorError("the slurm executor needs submitit: pip install submitit") from None
        cfg = self.config
        folder = Path(cfg.folder) if cfg.folder else out / "slurm"
        ex = submitit.AutoExecutor(folder=str(folder), cluster=cfg.cluster)
        if ex.cluster == "slurm":
            params: dict[str, Any] = {"slurm_partition": cfg.partition, "slurm_account": cfg.account,
                                      "slurm_qos": cfg.qos, "slurm_setup": list(cfg.setup)}
            ex.update_parameters(**{k: v for k, v in params.items() if v})
        ex.update_parameters(timeout_min=cfg.time_min, cpus_per_task=cfg.cpus_per_job, tasks_per_node=1, nodes=1)
        if cfg.mem_gb:
            ex.update_parameters(mem_gb=cfg.mem_gb)
        if gpus:
            ex.update_parameters(gpus_per_node=gpus)
        return ex

    def run_graph(self, jobs: list[Job], state: GridState, previous: dict[str, Any] | None) -> None:
        import submitit

        cfg = self.config
        executors = {g: self._executor(state.out, g) for g in {0, int(cfg.gpus_per_job)}}  # jobs without / with GPUs
        real = executors[0].cluster == "slurm"
        by_id = {j.id: j for j in jobs}
        handles: dict[str, Any] = {}
        attempts: dict[str, int] = {}
        adopted = _live_slurm_jobs(previous, state.out, cfg) if real else {}
        gone: dict[str, int] = {}
        waiting = [j.id for j in jobs]

        def submit(job: Job) -> None:
            ex = executors[int(cfg.gpus_per_job) if job.accelerator else 0]
            extra: dict[str, Any] = dict(cfg.additional)
            if real:
                upstream = [handles[d].job_id for d in job.deps if d in handles]
                if upstream:
                    extra["dependency"] = "afterok:" + ":".join(upstream)
                    extra["kill-on-invalid-dep"] = "yes"
                ex.update_parameters(slurm_additional_parameters=extra, name=f"irgrid-{job.kind}")
            handle = ex.submit(execute, job.task)
            handles[job.id] = handle
            attempts[job.id] = attempts.get(job.id, 0) + 1
            state.submitted(job.id, f"{ex.cluster}:{handle.job_id}", str(handle.paths.stderr))

        while waiting or any(state.job(j)["status"] not in FINAL for j in handles):
            ready = []
            for job_id in list(waiting):
                deps = by_id[job_id].deps
                if any(state.job(d)["status"] in ("failed", "blocked") for d in deps):
                    waiting.remove(job_id)
                    state.job(job_id).update(status="blocked", error="not run: a job it needs failed")
                    continue
                if job_id in adopted:  # still queued or running from an earlier submission: wait for it
                    waiting.remove(job_id)
                    handles[job_id] = adopted[job_id]
                    state.submitted(job_id, f"slurm:{adopted[job_id].job_id}", str(adopted[job_id].paths.stderr))
                    continue
                # Slurm holds a job until its dependencies succeeded; local clusters need them finished first
                if real or all(state.job(d)["status"] == "done" for d in deps):
                    ready.append(job_id)
            running = sum(state.job(j)["status"] not in FINAL for j in handles)
            for job_id in ready:
                if not real and cfg.max_parallel and running >= cfg.max_parallel:
                    break
                waiting.remove(job_id)
                submit(by_id[job_id])
                running += 1
            unfinished = {j: h for j, h in handles.items() if state.job(j)["status"] not in FINAL}
            queued = _squeue([h.job_id for h in unfinished.values()]) if real and unfinished else {}
            for job_id, handle in unfinished.items():
                died = None
                if real and handle.job_id not in queued and not handle.done():
                    # out of the queue without a result file: killed, preempted, node failure. (Not sacct, which
                    # needs slurmdbd; seen twice, so a result file on a slow shared filesystem has time to appear.)
                    gone[job_id] = gone.get(job_id, 0) + 1
                    if gone[job_id] < 2:
                        continue
                    died = f"Slurm job {handle.job_id} left the queue without a result"
                elif not handle.done():
                    continue
                else:
                    try:
                        handle.result()
                    except submitit.core.utils.FailedJobError:  # the job raised: reported below, not retried
                        pass
                    except submitit.core.utils.UncompletedJobError as e:  # no result: killed, preempted
                        died = str(e).splitlines()[0]
                if died is not None:
                    gone.pop(job_id, None)
                    if attempts.get(job_id, 1) <= cfg.max_retries:
                        log.warning("job %s died without a result (%s); resubmitting", job_id, died)
                        submit(by_id[job_id])
                        continue
                    state.finished(job_id, False, f"the job died without a result {attempts.get(job_id, 1)} time(s): "
                                                  f"{died}")
                    continue
                try:
                    handle.result()
                except submitit.core.utils.FailedJobError as e:
                    status = _read_json(state.out / "jobs" / f"{job_id}.json") or {}
                    state.finished(job_id, False, status.get("error") or str(e).strip().splitlines()[-1])
                except Exception as e:  # an exception the job raised, re-raised by submitit
                    state.finished(job_id, False, f"{type(e).__name__}: {e}")
                else:
                    state.finished(job_id, True)
            state.refresh()
            if waiting or any(state.job(j)["status"] not in FINAL for j in handles):
                time.sleep(cfg.poll_seconds)


def _live_slurm_jobs(previous: dict[str, Any] | None, out: Path, cfg: ExecutorConfig) -> dict[str, Any]:
    """Slurm jobs of an earlier submission that are still queued or running (a resubmission waits for them)."""
    import submitit

    folder = Path(cfg.folder) if cfg.folder else out / "slurm"
    candidates = {job_id: str(rec.get("engine_id"))[len("slurm:"):]
                  for job_id, rec in ((previous or {}).get("jobs") or {}).items()
                  if str(rec.get("engine_id") or "").startswith("slurm:") and rec.get("status") not in FINAL}
    queued = _squeue(list(candidates.values())) if candidates else {}
    return {job_id: submitit.SlurmJob(folder=str(folder), job_id=slurm_id)
            for job_id, slurm_id in candidates.items() if slurm_id in queued}


def _squeue(slurm_ids: list[str]) -> dict[str, str]:
    """Slurm job id -> state for those of `slurm_ids` still in the queue (pending, running, completing)."""
    import subprocess

    proc = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(slurm_ids)], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise ExecutorError(f"squeue failed: {proc.stderr.strip()}")
    states = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line.strip())
    return {k: v.strip() for k, v in states.items() if v.strip() not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")}


def make(config: ExecutorConfig | str | None) -> Executor:
    if config is None:
        config = ExecutorConfig()
    if isinstance(config, str):
        config = ExecutorConfig.load(None, config)
    classes: dict[str, type[Executor]] = {"local": LocalExecutor, "ray": RayExecutor, "slurm": SlurmExecutor}
    if config.executor not in classes:
        raise ExecutorError(f"executor {config.executor!r} is not one of {EXECUTORS}")
    return classes[config.executor](config)


# -------------------------------------------------------------------------------------------------------------
# the submitting side


def dispatch(spec: ExperimentSpec, store: Store, out: Path, executor: Executor, resume: bool = False,
             ) -> dict[tuple[str, str], Failure]:
    """Submit every missing job of the grid to the executor and wait for all; returns the failed cells."""
    out.mkdir(parents=True, exist_ok=True)
    previous = load_state(out)
    if resume:
        if previous is None:
            raise ExecutorError(f"--resume: {out} holds no {STATE}; start the grid without --resume")
        if previous.get("experiment_hash") != spec_hash(spec):
            raise ExecutorError(f"--resume: the experiment changed since {out} was submitted "
                                f"({previous.get('source')}); use another --out or run without --resume")
    jobs, cells = build_graph(spec, store, executor.config, out)
    state = GridState(out, spec, executor.config, jobs, cells, previous)
    cached = sum(c["status"] == "cached" for c in state.data["cells"])
    log.info("%s executor: %d cells (%d cached), %d jobs to run (%s)", executor.name, len(cells), cached, len(jobs),
             ", ".join(f"{n} {k}" for k, n in _count(j.kind for j in jobs).items()) or "nothing")
    state.refresh()
    try:
        if jobs:
            executor.run_graph(jobs, state, previous)
    finally:
        state.close()
    failures = state.failures()
    for (dataset, retriever), f in failures.items():
        log.error("%s on %s FAILED: %s (%s)", retriever, dataset, f.error, f.traceback.splitlines()[0])
    return failures


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


# -------------------------------------------------------------------------------------------------------------
# `irgrid status OUT`


def status(out: str | Path) -> dict[str, Any]:
    """The grid state with what the cache and the jobs say now (a cell whose run is stored is done whatever the
    submitting process last wrote; a job that says running while its driver is gone is 'stale')."""
    out = Path(out)
    data = load_state(out)
    if data is None:
        raise ExecutorError(f"{out} holds no {STATE}: not a grid submitted with --executor ray|slurm")
    driver = data["driver"]
    alive = driver.get("finished") is None and _alive(driver.get("host"), driver.get("pid"))
    data["driver"]["alive"] = alive
    for job_id, rec in data["jobs"].items():
        status = _read_json(out / "jobs" / f"{job_id}.json") or {}
        rec["attempt"] = status.get("attempt", rec.get("attempt"))
        if rec["status"] in ("pending", "submitted") and status.get("status") == "running":
            rec["status"] = "running"
        if rec["status"] not in FINAL and status.get("status") in ("done", "failed"):
            rec["status"] = status["status"]
            rec["error"] = status.get("error")
        if rec["status"] in ("pending", "submitted", "running") and not alive and driver.get("finished") is None:
            engine = str(rec.get("engine_id") or "")
            if not engine.startswith("slurm:"):  # Ray and local jobs end with their driver
                rec["status"] = "stale"
    for cell in data["cells"]:
        if cell["status"] == "cached":
            continue
        if Path(cell["run"]).exists() and Path(cell["meta"]).exists():
            cell["status"] = "done"
            continue
        rec = data["jobs"].get(cell["job"], {})
        cell["status"] = {"submitted": "pending"}.get(rec.get("status", "pending"), rec.get("status", "pending"))
        cell["error"], cell["log"] = rec.get("error"), rec.get("log")
    return data


def _alive(host: str | None, pid: int | None) -> bool:
    if not pid:
        return False
    if host != socket.gethostname():
        return True  # cannot tell from here: assume it is
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def format_status(data: Mapping[str, Any]) -> str:
    cells = data["cells"]
    counts = _count(c["status"] for c in cells)
    driver = data["driver"]
    when = "finished" if driver.get("finished") else ("running" if driver.get("alive") else "gone (killed?)")
    lines = [f"experiment {data['experiment']} ({data['source']}), executor {data['executor']}, "
             f"submission {data['submissions']}; submitting process on {driver['host']} pid {driver['pid']}: {when}",
             "cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" (of {len(cells)})", ""]
    width = max((len(c["retriever"]) for c in cells), default=9)
    dwidth = max((len(c["dataset"]) for c in cells), default=7)
    for c in cells:
        lines.append(f"{c['dataset'].ljust(dwidth)}  {c['retriever'].ljust(width)}  {c['status']}")
    jobs = [(i, r) for i, r in data["jobs"].items() if r["kind"] != "cell"]
    if jobs:
        lines += ["", "index jobs:"]
        for _job_id, rec in jobs:
            attempt = f" (attempt {rec['attempt']})" if rec.get("attempt") and rec["attempt"] > 1 else ""
            lines.append(f"  {rec['status']:<9} {rec['label']}{attempt}")
    bad = [(i, r) for i, r in data["jobs"].items() if r["status"] in ("failed", "blocked", "stale")]
    if bad:
        lines += ["", "failed:"]
        for _job_id, rec in bad:
            lines.append(f"  {rec['label']}: {rec['status']}: {rec.get('error') or 'no result'}")
            lines.append(f"    log: {rec['log']}" + (f"  engine log: {rec['engine_log']}" if rec.get("engine_log") else ""))
        lines += ["", "resubmit what is missing: irgrid run EXPERIMENT --out OUT --executor ... --resume"]
    return "\n".join(lines) + "\n"


__all__ = ["EXECUTORS", "Executor", "ExecutorConfig", "ExecutorError", "GridState", "Job", "LocalExecutor",
           "RayExecutor", "SlurmExecutor", "Task", "build_graph", "dispatch", "execute", "format_status", "make",
           "status"]
