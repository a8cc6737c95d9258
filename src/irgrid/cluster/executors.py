"""Where a grid's jobs run: in this process (the default), or as jobs of an existing cluster engine. Every
executor runs the same job graph (`irgrid.cluster.graph`) of what is not cached; the grid then evaluates the
stored runs in one step (`irgrid.grid`), whichever executor computed them.

- `local`: the jobs run in this process, one retriever at a time over every dataset (its models load once and
  are released before the next retriever's, `irgrid.models.cache`), each cell after the index jobs it needs,
  with a progress line per cell. A failed job fails the cells that need it (or the grid, with `fail_fast`).
- `ray`: every job is a Ray task (`ray.init(address=...)`: an existing cluster, or a local one when no address
  is given); dependencies are object references passed as arguments, so Ray starts a job only after the jobs
  it needs; a task whose worker dies is retried by Ray (`max_retries`).
- `slurm`: every job is a Slurm job submitted through submitit, with `--dependency=afterok:...`; submitit's
  `local` cluster runs the same jobs as local processes (for machines without Slurm), submitted in dependency
  order. A job that dies without a result (killed, preempted, node failure) is resubmitted up to
  `max_retries` times.

Ray and Slurm submit the graph and wait for it, keeping the grid state (`irgrid.cluster.state`) in the output
folder; each job runs `irgrid.cluster.tasks.execute` and writes only to the shared cache, under its locks
(`irgrid.util.locks`). `irgrid run --resume` submits only what is missing.
"""

from __future__ import annotations

import collections
import logging
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from irgrid.cluster.config import EXECUTORS, ExecutorConfig, ExecutorError
from irgrid.cluster.graph import Job, build_graph, spec_hash
from irgrid.cluster.state import FINAL, STATE, GridState, load_state, read_json
from irgrid.cluster.tasks import execute

if TYPE_CHECKING:
    import pandas as pd

    from irgrid.runner.cell import Failure
    from irgrid.runner.experiment import ExperimentSpec
    from irgrid.store import Store

log = logging.getLogger("irgrid")


class Progress(Protocol):
    """Told about each cell as the local executor finishes it (the grid logs it with an ETA)."""

    def cell_done(self, dataset: str, retriever: str, cached: bool, seconds: float) -> None: ...

    def cell_failed(self, dataset: str, retriever: str, error: str) -> None: ...


class _Quiet:
    def cell_done(self, dataset: str, retriever: str, cached: bool, seconds: float) -> None:
        pass

    def cell_failed(self, dataset: str, retriever: str, error: str) -> None:
        pass


@dataclass
class GridRun:
    """One grid as its executor sees it. `topics`: the queries of every dataset whose queries and qrels were read
    (the cells of the others are not run: the grid records them failed)."""

    spec: ExperimentSpec
    store: Store
    out: Path | None
    topics: Mapping[str, pd.DataFrame]
    fail_fast: bool = False
    resume: bool = False
    progress: Progress = _Quiet()


@dataclass
class Ran:
    """What an executor did: the cells whose job failed (or could not run), by (dataset, retriever), with their
    error, and the cells it computed (the others were in the cache already)."""

    failures: dict[tuple[str, str], Failure] = field(default_factory=dict)
    computed: set[tuple[str, str]] = field(default_factory=set)


class Executor(ABC):
    name: ClassVar[str]

    def __init__(self, config: ExecutorConfig | None = None):
        self.config = config or ExecutorConfig(executor=self.name)

    def check(self, out: Path | None) -> None:
        """Refuse, before any work, a grid this executor cannot run (the local one runs any)."""
        return None

    @abstractmethod
    def run_grid(self, grid: GridRun) -> Ran:
        """Run every job of the grid's graph (the grid evaluates the stored runs afterwards)."""


class LocalExecutor(Executor):
    """The job graph in this process: retriever after retriever (its models released before the next one's load),
    each cell after the index jobs it needs. A failed job is raised at once with `fail_fast`, else recorded: every
    cell that needs it fails with its error, the other cells still run."""

    name = "local"

    def run_grid(self, grid: GridRun) -> Ran:
        from irgrid.models.cache import release_all as release_models
        from irgrid.runner.cell import Failure

        jobs, cells = build_graph(grid.spec, grid.store, self.config, grid.out, datasets=grid.topics)
        by_id = {j.id: j for j in jobs}
        errors: dict[str, tuple[str, str, str]] = {}  # failed job id -> (error, traceback, message)
        outcomes: dict[str, Any] = {}
        ran = Ran()
        retrievers = {name: i for i, name in enumerate(dict.fromkeys(c["retriever"] for c in cells))}
        datasets = {name: i for i, name in enumerate(dict.fromkeys(c["dataset"] for c in cells))}
        current = None
        for cell in sorted(cells, key=lambda c: (retrievers[c["retriever"]], datasets[c["dataset"]])):
            if current is not None and cell["retriever"] != current:
                release_models()  # the previous retriever's models, before this one's load
            current = cell["retriever"]
            if cell.get("cached"):
                grid.progress.cell_done(cell["dataset"], cell["retriever"], True, 0.0)
                continue
            started = time.perf_counter()
            self._run_job(by_id[cell["job"]], by_id, grid, outcomes, errors)
            if cell["job"] in errors:
                error, tb, message = errors[cell["job"]]
                grid.progress.cell_failed(cell["dataset"], cell["retriever"], message)
                ran.failures[(cell["dataset"], cell["retriever"])] = Failure(cell["dataset"], cell["retriever"], error,
                                                                             tb)
            else:
                cached = bool(getattr(outcomes[cell["job"]], "cached", False))
                if not cached:
                    ran.computed.add((cell["dataset"], cell["retriever"]))
                grid.progress.cell_done(cell["dataset"], cell["retriever"], cached, time.perf_counter() - started)
        if current is not None:
            release_models()
        return ran

    def _run_job(self, job: Job, by_id: dict[str, Job], grid: GridRun, outcomes: dict[str, Any],
                 errors: dict[str, tuple[str, str, str]]) -> None:
        """Run `job` after the jobs it needs (each at most once); a job that needs a failed one fails with its error."""
        if job.id in outcomes or job.id in errors:
            return
        for dep in job.deps:
            self._run_job(by_id[dep], by_id, grid, outcomes, errors)
            if dep in errors:
                errors[job.id] = errors[dep]
                return
        try:
            outcomes[job.id] = job.task.run(grid.store, grid.topics)
        except Exception as e:  # recorded and reported; the other cells still run
            if grid.fail_fast:
                raise
            errors[job.id] = (f"{type(e).__name__}: {e}", traceback.format_exc(), str(e))


class ClusterExecutor(Executor):
    """An engine that runs the job graph out of this process, keeping the grid state in the output folder."""

    def check(self, out: Path | None) -> None:
        if out is None:
            raise ExecutorError(f"the {self.name} executor needs an output folder (out=...): the grid's "
                                f"state and job logs are kept there")

    def run_grid(self, grid: GridRun) -> Ran:
        self.check(grid.out)
        return dispatch(grid, self)

    @abstractmethod
    def run_graph(self, jobs: list[Job], state: GridState, previous: dict[str, Any] | None) -> None:
        """Run every job (after the jobs it depends on), keeping `state` current, until all have finished."""


class RayExecutor(ClusterExecutor):
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
            kwargs: dict[str, Any] = {"runtime_env": {"env_vars": jobs[0].task.settings.environment()} if jobs else {},
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


class SlurmExecutor(ClusterExecutor):
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
                if state.block_if_needed(job_id):
                    waiting.remove(job_id)
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
                    status = read_json(state.out / "jobs" / f"{job_id}.json") or {}
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


def dispatch(grid: GridRun, executor: ClusterExecutor) -> Ran:
    """Submit every missing job of the grid to the executor and wait for all."""
    spec, out = grid.spec, Path(grid.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    previous = load_state(out)
    if grid.resume:
        if previous is None:
            raise ExecutorError(f"--resume: {out} holds no {STATE}; start the grid without --resume")
        if previous.get("experiment_hash") != spec_hash(spec):
            raise ExecutorError(f"--resume: the experiment changed since {out} was submitted "
                                f"({previous.get('source')}); use another --out or run without --resume")
    jobs, cells = build_graph(spec, grid.store, executor.config, out, datasets=grid.topics)
    state = GridState(out, spec, executor.config, jobs, cells, previous)
    cached = sum(c["status"] == "cached" for c in state.data["cells"])
    log.info("%s executor: %d cells (%d cached), %d jobs to run (%s)", executor.name, len(cells), cached, len(jobs),
             ", ".join(f"{n} {k}" for k, n in collections.Counter(j.kind for j in jobs).items()) or "nothing")
    state.refresh()
    try:
        if jobs:
            executor.run_graph(jobs, state, previous)
    finally:
        state.close()
    failures = state.failures()
    for (dataset, retriever), f in failures.items():
        log.error("%s on %s FAILED: %s (%s)", retriever, dataset, f.error, f.traceback.splitlines()[0])
    computed = {(c["dataset"], c["retriever"]) for c in state.data["cells"] if c["status"] == "done"}
    return Ran(failures, computed)


__all__ = ["ClusterExecutor", "Executor", "GridRun", "LocalExecutor", "Progress", "Ran", "RayExecutor", "SlurmExecutor", "dispatch", "make"]
